//! GPU model requirements of a pod (required node affinity and nodeSelector) as a Slurm feature
//! expression. Slurm nodes are expected to carry their GPU model as a node feature named like the label
//! value.

use crate::sunk::policy::job_types::{NodeSelectorRequirement, Pod, Rejection, SelectorOperator};

/// Node labels that name a node's GPU model (`gpu.nvidia.com/class` is what NodeSets also read).
pub const GPU_MODEL_LABELS: [&str; 4] =
    ["nvidia.com/gpu.product", "gpu.nvidia.com/class", "gpu.nvidia.com/model", "node.kubernetes.io/gpu-model"];

const AFFINITY_FIELD: &str = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution";

/// What one node-affinity term asks of the GPU model: per label key, the accepted values. Empty when
/// the term says nothing about GPU models (any model will do).
type Term = Vec<(String, Vec<String>)>;

/// The feature expression that keeps the job on nodes with a GPU model the pod accepts, or `None`
/// when it accepts any model.
///
/// Only `in` requirements are translated (other operators cannot be expressed as node features). The
/// pod fits a node matching any term, and a term matches when all its requirements do, so terms become
/// `|` alternatives and several GPU labels in one term are joined with `&`. The nodeSelector applies to
/// every term.
pub fn gpu_constraint(pod: &Pod) -> Result<Option<String>, Rejection> {
    let mut terms: Vec<Term> = if pod.required_node_affinity.is_empty() {
        vec![Term::new()]
    } else {
        pod.required_node_affinity.iter().map(|t| gpu_term(t)).collect()
    };
    for selector in pod.node_selector.iter().filter(|kv| is_gpu_label(&kv.key)) {
        for term in &mut terms {
            restrict(term, &selector.key, std::slice::from_ref(&selector.value));
        }
    }
    if terms.iter().any(Vec::is_empty) {
        return Ok(None);
    }
    terms.retain(|term| term.iter().all(|(_, values)| !values.is_empty()));
    if terms.is_empty() {
        return Err(Rejection {
            field: AFFINITY_FIELD.to_owned(),
            message: "no GPU model satisfies the pod's required node affinity (with its nodeSelector): \
                      every term asks for GPU models that exclude each other"
                .to_owned(),
        });
    }
    let mut alternatives: Vec<String> = Vec::new();
    for term in &terms {
        let text = render_term(term, terms.len() > 1);
        if !alternatives.contains(&text) {
            alternatives.push(text);
        }
    }
    Ok(Some(alternatives.join("|")))
}

/// `a&b` for two feature expressions, wrapping either in parentheses when it has a top-level `|`.
pub fn conjoin(a: &str, b: &str) -> String {
    format!("{}&{}", grouped(a), grouped(b))
}

fn gpu_term(requirements: &[NodeSelectorRequirement]) -> Term {
    let mut term = Term::new();
    for r in requirements {
        if r.operator == SelectorOperator::In && is_gpu_label(&r.key) {
            restrict(&mut term, &r.key, &r.values);
        }
    }
    term
}

fn is_gpu_label(key: &str) -> bool {
    GPU_MODEL_LABELS.contains(&key)
}

/// Narrows what `term` accepts for `key` to `values` (intersecting with what it already accepts).
fn restrict(term: &mut Term, key: &str, values: &[String]) {
    match term.iter_mut().find(|(k, _)| k == key) {
        Some((_, accepted)) => accepted.retain(|v| values.contains(v)),
        None => {
            let mut unique: Vec<String> = Vec::new();
            for v in values {
                if !unique.contains(v) {
                    unique.push(v.clone());
                }
            }
            term.push((key.to_owned(), unique));
        }
    }
}

/// A term's groups joined by `&`; in parentheses when it is one of several alternatives and has `&`.
fn render_term(term: &Term, among_alternatives: bool) -> String {
    let groups: Vec<String> = term.iter().map(|(_, values)| values.join("|")).collect();
    match groups.as_slice() {
        [one] => one.clone(),
        _ => {
            let and = groups.iter().map(|g| grouped(g)).collect::<Vec<_>>().join("&");
            if among_alternatives { format!("({and})") } else { and }
        }
    }
}

/// `expr` in parentheses when it has a `|` outside any brackets or parentheses.
fn grouped(expr: &str) -> String {
    if has_top_level_or(expr) { format!("({expr})") } else { expr.to_owned() }
}

fn has_top_level_or(expr: &str) -> bool {
    let mut depth = 0i32;
    for c in expr.chars() {
        match c {
            '[' | '(' => depth += 1,
            ']' | ')' => depth -= 1,
            '|' if depth == 0 => return true,
            _ => {}
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mapping::tests::pod;
    use crate::sunk::policy::job_types::KeyValue;

    fn req(key: &str, operator: SelectorOperator, values: &[&str]) -> NodeSelectorRequirement {
        NodeSelectorRequirement {
            key: key.to_owned(),
            operator,
            values: values.iter().map(|v| (*v).to_owned()).collect(),
        }
    }

    fn with_affinity(terms: Vec<Vec<NodeSelectorRequirement>>) -> Pod {
        Pod { required_node_affinity: terms, ..pod() }
    }

    #[test]
    fn no_affinity_no_constraint() {
        assert_eq!(gpu_constraint(&pod()).unwrap(), None);
    }

    #[test]
    fn in_on_each_gpu_label_is_an_or() {
        for label in GPU_MODEL_LABELS {
            let p = with_affinity(vec![vec![req(label, SelectorOperator::In, &["H100", "A100", "H100"])]]);
            assert_eq!(gpu_constraint(&p).unwrap().as_deref(), Some("H100|A100"));
        }
    }

    #[test]
    fn other_labels_and_operators_are_ignored() {
        let p = with_affinity(vec![vec![
            req("kubernetes.io/arch", SelectorOperator::In, &["amd64"]),
            req("nvidia.com/gpu.product", SelectorOperator::NotIn, &["T4"]),
            req("nvidia.com/gpu.product", SelectorOperator::Exists, &[]),
        ]]);
        assert_eq!(gpu_constraint(&p).unwrap(), None);
    }

    #[test]
    fn terms_are_alternatives() {
        let p = with_affinity(vec![
            vec![req("nvidia.com/gpu.product", SelectorOperator::In, &["H100"])],
            vec![req("gpu.nvidia.com/model", SelectorOperator::In, &["A100", "L40"])],
        ]);
        assert_eq!(gpu_constraint(&p).unwrap().as_deref(), Some("H100|A100|L40"));
    }

    #[test]
    fn a_term_without_gpu_requirement_accepts_any_model() {
        let p = with_affinity(vec![
            vec![req("nvidia.com/gpu.product", SelectorOperator::In, &["H100"])],
            vec![req("kubernetes.io/arch", SelectorOperator::In, &["amd64"])],
        ]);
        assert_eq!(gpu_constraint(&p).unwrap(), None);
    }

    #[test]
    fn several_gpu_labels_in_one_term_are_anded() {
        let term = vec![
            req("nvidia.com/gpu.product", SelectorOperator::In, &["H100-SXM", "H100-PCIe"]),
            req("gpu.nvidia.com/model", SelectorOperator::In, &["H100"]),
        ];
        let p = with_affinity(vec![term.clone()]);
        assert_eq!(gpu_constraint(&p).unwrap().as_deref(), Some("(H100-SXM|H100-PCIe)&H100"));
        let p = with_affinity(vec![term, vec![req("nvidia.com/gpu.product", SelectorOperator::In, &["A100"])]]);
        assert_eq!(gpu_constraint(&p).unwrap().as_deref(), Some("((H100-SXM|H100-PCIe)&H100)|A100"));
    }

    #[test]
    fn node_selector_narrows_every_term() {
        let mut p = with_affinity(vec![
            vec![req("nvidia.com/gpu.product", SelectorOperator::In, &["H100", "A100"])],
            vec![req("kubernetes.io/arch", SelectorOperator::In, &["amd64"])],
        ]);
        p.node_selector = vec![KeyValue { key: "nvidia.com/gpu.product".into(), value: "A100".into() }];
        assert_eq!(gpu_constraint(&p).unwrap().as_deref(), Some("A100"));
        p.required_node_affinity.clear();
        assert_eq!(gpu_constraint(&p).unwrap().as_deref(), Some("A100"));
    }

    #[test]
    fn impossible_requirements_reject() {
        let p = with_affinity(vec![vec![
            req("nvidia.com/gpu.product", SelectorOperator::In, &["H100"]),
            req("nvidia.com/gpu.product", SelectorOperator::In, &["A100"]),
        ]]);
        let err = gpu_constraint(&p).unwrap_err();
        assert_eq!(err.field, AFFINITY_FIELD);
    }

    #[test]
    fn conjoin_groups_top_level_ors() {
        assert_eq!(conjoin("ib", "H100"), "ib&H100");
        assert_eq!(conjoin("ib|eth", "H100|A100"), "(ib|eth)&(H100|A100)");
        assert_eq!(conjoin("[rack1|rack2]", "H100"), "[rack1|rack2]&H100");
    }
}
