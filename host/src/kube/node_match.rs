//! Kubernetes' own rules for whether a pod may go to a Node: tolerations against taints, and node
//! selector terms (required node affinity) against a Node's labels and name. One copy, shared by the
//! NodeSet controller (which Nodes get a slurmd) and the scheduler (which Nodes a pod may use).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, Taint, Toleration};

/// One of the terms matches (no terms: nothing matches, as in Kubernetes).
pub fn selector_matches(selector: &NodeSelector, labels: &BTreeMap<String, String>, name: &str) -> bool {
    selector.node_selector_terms.iter().any(|term| term_matches(term, labels, name))
}

/// Every requirement of the term holds; an empty term matches nothing.
pub fn term_matches(term: &NodeSelectorTerm, labels: &BTreeMap<String, String>, name: &str) -> bool {
    let expressions = term.match_expressions.as_deref().unwrap_or_default();
    let fields = term.match_fields.as_deref().unwrap_or_default();
    if expressions.is_empty() && fields.is_empty() {
        return false;
    }
    expressions.iter().all(|requirement| requirement_holds(requirement, labels.get(&requirement.key)))
        && fields.iter().all(|requirement| field_holds(requirement, name))
}

fn requirement_holds(requirement: &NodeSelectorRequirement, value: Option<&String>) -> bool {
    let values = requirement.values.as_deref().unwrap_or_default();
    match requirement.operator.as_str() {
        "In" => value.is_some_and(|value| values.contains(value)),
        "NotIn" => value.is_none_or(|value| !values.contains(value)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        operator @ ("Gt" | "Lt") => {
            let [bound] = values else { return false };
            let (Some(Ok(value)), Ok(bound)) = (value.map(|v| v.parse::<i64>()), bound.parse::<i64>()) else {
                return false;
            };
            if operator == "Gt" { value > bound } else { value < bound }
        }
        _ => false,
    }
}

/// `matchFields` supports only `metadata.name` with In and NotIn.
fn field_holds(requirement: &NodeSelectorRequirement, name: &str) -> bool {
    if requirement.key != "metadata.name" {
        return false;
    }
    let values = requirement.values.as_deref().unwrap_or_default();
    match requirement.operator.as_str() {
        "In" => values.iter().any(|value| value == name),
        "NotIn" => values.iter().all(|value| value != name),
        _ => false,
    }
}

/// Kubernetes' toleration rule: same effect (or any), same key (or any, with `Exists`), and for
/// `Equal` (the default operator) the same value.
pub fn tolerates(toleration: &Toleration, taint: &Taint) -> bool {
    let effect_matches = toleration.effect.as_deref().is_none_or(|effect| effect.is_empty() || effect == taint.effect);
    let key = toleration.key.as_deref().unwrap_or_default();
    let operator = toleration.operator.as_deref().unwrap_or("Equal");
    let key_matches = (key.is_empty() && operator == "Exists") || key == taint.key;
    let value_matches = match operator {
        "Exists" => true,
        "Equal" | "" => toleration.value.as_deref().unwrap_or_default() == taint.value.as_deref().unwrap_or_default(),
        _ => false,
    };
    effect_matches && key_matches && value_matches
}
