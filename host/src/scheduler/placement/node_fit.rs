//! Whether a pod may run on a Kubernetes Node by the rules kube-scheduler applies: the Node's
//! NoSchedule / NoExecute taints must be tolerated, its labels must satisfy the pod's nodeSelector and
//! required node affinity. (PreferNoSchedule and preferred affinity only rank Nodes; they never
//! exclude one.) The taints that stand for the Node's state are Slurm's to act on, through the drain
//! ([`NODE_STATE_TAINTS`]).

use std::fmt;

use k8s_openapi::api::core::v1::{Node, Taint};
use kube::ResourceExt;

use crate::kube::node_match::{selector_matches, tolerates};
use crate::scheduler::watched_pod::PodNeeds;
use crate::vocabulary::SLURM_NODE_TAINT;

/// Why a pod may not run on a Node, in the words kube-scheduler uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Misfit {
    /// A taint the pod does not tolerate.
    Taint(String),
    /// A `spec.nodeSelector` entry the Node's labels do not have.
    NodeSelector(String),
    /// No term of the required node affinity matches the Node.
    Affinity,
}

impl fmt::Display for Misfit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Misfit::Taint(taint) => write!(f, "untolerated taint {{{taint}}}"),
            Misfit::NodeSelector(pair) => write!(f, "does not match nodeSelector {pair}"),
            Misfit::Affinity => write!(f, "does not match the pod's required node affinity"),
        }
    }
}

/// Taints Kubernetes puts on a Node for its state: cordoned, not ready, unreachable. They are not
/// counted: the syncer shows the same state to the drain policy, which drains the Slurm node, so
/// Slurm places nothing new there. Were they counted, cordoning one Node would rewrite the excluded
/// nodes of every waiting job (10,000 updates, at scale) and uncordoning it would rewrite them back;
/// and a placeholder Slurm gave the Node just before its drain would be replaced, where a job already
/// running there keeps running.
const NODE_STATE_TAINTS: [&str; 3] =
    ["node.kubernetes.io/unschedulable", "node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"];

/// Whether the taint stands for the Node's state (see [`NODE_STATE_TAINTS`]).
pub fn is_node_state(taint: &Taint) -> bool {
    NODE_STATE_TAINTS.contains(&taint.key.as_str())
}

/// The first reason the pod cannot run on `node`, or `None` when it may.
pub fn misfit(spec: &PodNeeds, node: &Node) -> Option<Misfit> {
    let taints = node.spec.as_ref().and_then(|spec| spec.taints.as_deref()).unwrap_or_default();
    let tolerations = spec.tolerations.as_deref().unwrap_or_default();
    // The Slurm Node taint keeps other schedulers' pods off; sunk's pods are what the Node is for.
    let untolerated = |taint: &&Taint| {
        excludes(taint)
            && !is_node_state(taint)
            && taint.key != SLURM_NODE_TAINT
            && !tolerations.iter().any(|t| tolerates(t, taint))
    };
    if let Some(taint) = taints.iter().find(untolerated) {
        return Some(Misfit::Taint(describe_taint(taint)));
    }
    let labels = node.labels();
    if let Some((key, value)) =
        spec.node_selector.iter().flatten().find(|(key, value)| labels.get(*key) != Some(*value))
    {
        return Some(Misfit::NodeSelector(format!("{key}={value}")));
    }
    let required = spec
        .affinity
        .as_ref()
        .and_then(|affinity| affinity.node_affinity.as_ref())
        .and_then(|node| node.required_during_scheduling_ignored_during_execution.as_ref());
    // Kubernetes: the terms are ORed, and an empty list of terms matches nothing.
    if let Some(selector) = required
        && !selector_matches(selector, labels, &node.name_any())
    {
        return Some(Misfit::Affinity);
    }
    None
}

/// Only these effects keep a pod off a Node.
fn excludes(taint: &Taint) -> bool {
    matches!(taint.effect.as_str(), "NoSchedule" | "NoExecute")
}

fn describe_taint(taint: &Taint) -> String {
    match taint.value.as_deref() {
        Some(value) if !value.is_empty() => format!("{}={}:{}", taint.key, value, taint.effect),
        _ => format!("{}:{}", taint.key, taint.effect),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(json: serde_json::Value) -> Node {
        serde_json::from_value(json).unwrap()
    }

    fn spec(json: serde_json::Value) -> PodNeeds {
        let mut json = json;
        json["containers"] = serde_json::json!([{"name": "a"}]);
        serde_json::from_value(json).unwrap()
    }

    fn tainted(effect: &str) -> Node {
        node(serde_json::json!({
            "metadata": {"name": "n1", "labels": {"zone": "a"}},
            "spec": {"taints": [{"key": "gpu", "value": "h100", "effect": effect}]}
        }))
    }

    #[test]
    fn a_no_schedule_or_no_execute_taint_needs_a_toleration() {
        for effect in ["NoSchedule", "NoExecute"] {
            let found = misfit(&spec(serde_json::json!({})), &tainted(effect));
            assert_eq!(found, Some(Misfit::Taint(format!("gpu=h100:{effect}"))));
        }
        assert_eq!(misfit(&spec(serde_json::json!({})), &tainted("PreferNoSchedule")), None);
    }

    #[test]
    fn the_nodes_state_is_left_to_its_drain_and_the_slurm_node_taint_to_sunks_pods() {
        for key in NODE_STATE_TAINTS.into_iter().chain([SLURM_NODE_TAINT]) {
            let in_that_state = node(serde_json::json!({
                "metadata": {"name": "n1"},
                "spec": {"unschedulable": true, "taints": [{"key": key, "effect": "NoSchedule"}]}
            }));
            assert_eq!(misfit(&spec(serde_json::json!({})), &in_that_state), None, "{key}");
        }
    }

    #[test]
    fn tolerations_match_as_in_kubernetes() {
        let node = tainted("NoSchedule");
        let fits = |tolerations: serde_json::Value| {
            misfit(&spec(serde_json::json!({"tolerations": tolerations})), &node).is_none()
        };
        assert!(fits(serde_json::json!([{"key": "gpu", "value": "h100", "effect": "NoSchedule"}])));
        assert!(fits(serde_json::json!([{"key": "gpu", "operator": "Exists"}])));
        assert!(fits(serde_json::json!([{"operator": "Exists"}])));
        assert!(!fits(serde_json::json!([{"key": "gpu", "value": "a100"}])));
        assert!(!fits(serde_json::json!([{"key": "gpu", "operator": "Exists", "effect": "NoExecute"}])));
        assert!(!fits(serde_json::json!([{"value": "h100"}])));
    }

    #[test]
    fn node_selector_needs_every_label() {
        let node = node(
            serde_json::json!({"metadata": {"name": "n1", "labels": {"zone": "a", "gpu.nvidia.com/class": "H100"}}}),
        );
        let with = |selector: serde_json::Value| misfit(&spec(serde_json::json!({"nodeSelector": selector})), &node);
        assert_eq!(with(serde_json::json!({"gpu.nvidia.com/class": "H100", "zone": "a"})), None);
        assert_eq!(with(serde_json::json!({"zone": "b"})), Some(Misfit::NodeSelector("zone=b".into())));
    }

    #[test]
    fn required_affinity_terms_are_ored_and_requirements_anded() {
        let node = node(serde_json::json!({"metadata": {"name": "n1", "labels": {"zone": "a", "cpus": "64"}}}));
        let with = |terms: serde_json::Value| {
            let affinity = serde_json::json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}});
            misfit(&spec(serde_json::json!({"affinity": affinity})), &node).is_none()
        };
        let req = |key: &str, operator: &str, values: &[&str]| serde_json::json!({"key": key, "operator": operator, "values": values});
        assert!(with(serde_json::json!([{"matchExpressions": [req("zone", "In", &["a", "b"])]}])));
        assert!(!with(
            serde_json::json!([{"matchExpressions": [req("zone", "In", &["a"]), req("cpus", "Lt", &["8"])]}])
        ));
        assert!(with(serde_json::json!([
            {"matchExpressions": [req("zone", "In", &["b"])]},
            {"matchExpressions": [req("cpus", "Gt", &["8"])]}
        ])));
        assert!(with(
            serde_json::json!([{"matchExpressions": [req("zone", "NotIn", &["b"]), req("rack", "DoesNotExist", &[])]}])
        ));
        assert!(!with(serde_json::json!([{"matchExpressions": [req("rack", "Exists", &[])]}])));
        assert!(with(serde_json::json!([{"matchFields": [req("metadata.name", "In", &["n1"])]}])));
        assert!(!with(serde_json::json!([{"matchFields": [req("metadata.name", "NotIn", &["n1"])]}])));
        assert!(!with(serde_json::json!([{}])), "an empty term matches nothing");
        assert!(!with(serde_json::json!([])), "no terms match nothing");
    }
}
