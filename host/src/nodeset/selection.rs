//! Which Nodes a NodeSet selects, exactly as a DaemonSet would: node selector, required node
//! affinity, and NoSchedule/NoExecute taints tolerated by the pod's tolerations plus the ones a
//! DaemonSet's pods always get (so a cordoned or NotReady Node keeps its slurmd, and its jobs).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Node, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, PodSpec, Taint, Toleration,
};

/// What a NodeSet asks of a Node.
#[derive(Debug, Clone, Default)]
pub struct Selection {
    labels: BTreeMap<String, String>,
    /// Each must be met (the NodeSet's and the template's).
    affinities: Vec<NodeSelector>,
    tolerations: Vec<Toleration>,
}

impl Selection {
    /// The NodeSet's own terms ANDed with those of its pod template.
    pub fn new(
        node_selector: &BTreeMap<String, String>,
        node_affinity: Option<&NodeSelector>,
        tolerations: &[Toleration],
        template: Option<&PodSpec>,
    ) -> Self {
        let mut labels = node_selector.clone();
        let mut affinities: Vec<NodeSelector> = node_affinity.into_iter().cloned().collect();
        let mut all_tolerations = tolerations.to_vec();
        if let Some(spec) = template {
            labels.extend(spec.node_selector.clone().unwrap_or_default());
            let required = spec.affinity.as_ref().and_then(|a| a.node_affinity.as_ref());
            affinities.extend(required.and_then(|n| n.required_during_scheduling_ignored_during_execution.clone()));
            all_tolerations.extend(spec.tolerations.clone().unwrap_or_default());
        }
        let host_network = template.and_then(|spec| spec.host_network).unwrap_or(false);
        for toleration in daemonset_tolerations(host_network) {
            if !all_tolerations.contains(&toleration) {
                all_tolerations.push(toleration);
            }
        }
        Self { labels, affinities, tolerations: all_tolerations }
    }

    /// The tolerations the slurmd pod carries.
    pub fn tolerations(&self) -> &[Toleration] {
        &self.tolerations
    }

    /// Whether a new slurmd pod may go to the Node.
    pub fn admits(&self, node: &Node) -> bool {
        self.matches(node, &["NoSchedule", "NoExecute"])
    }

    /// Whether a slurmd pod already there may stay: as for a DaemonSet, only NoExecute taints evict,
    /// so a Node tainted `not-ready:NoSchedule` (NotReady) or with a new NoSchedule taint keeps it.
    pub fn keeps(&self, node: &Node) -> bool {
        self.matches(node, &["NoExecute"])
    }

    fn matches(&self, node: &Node, effects: &[&str]) -> bool {
        let labels = node.metadata.labels.clone().unwrap_or_default();
        let name = node.metadata.name.as_deref().unwrap_or_default();
        let taints = node.spec.as_ref().and_then(|spec| spec.taints.as_deref()).unwrap_or_default();
        self.labels.iter().all(|(key, value)| labels.get(key) == Some(value))
            && self.affinities.iter().all(|affinity| selector_matches(affinity, &labels, name))
            && taints
                .iter()
                .filter(|taint| effects.contains(&taint.effect.as_str()))
                .all(|taint| tolerated(taint, &self.tolerations))
    }
}

/// The tolerations the DaemonSet controller adds to its pods.
fn daemonset_tolerations(host_network: bool) -> Vec<Toleration> {
    let exists = |key: &str, effect: &str| Toleration {
        key: Some(key.into()),
        operator: Some("Exists".into()),
        effect: Some(effect.into()),
        ..Default::default()
    };
    let mut tolerations = vec![
        exists("node.kubernetes.io/not-ready", "NoExecute"),
        exists("node.kubernetes.io/unreachable", "NoExecute"),
        exists("node.kubernetes.io/disk-pressure", "NoSchedule"),
        exists("node.kubernetes.io/memory-pressure", "NoSchedule"),
        exists("node.kubernetes.io/pid-pressure", "NoSchedule"),
        exists("node.kubernetes.io/unschedulable", "NoSchedule"),
    ];
    if host_network {
        tolerations.push(exists("node.kubernetes.io/network-unavailable", "NoSchedule"));
    }
    tolerations
}

/// One of the terms matches (no terms: nothing matches, as in Kubernetes).
fn selector_matches(selector: &NodeSelector, labels: &BTreeMap<String, String>, name: &str) -> bool {
    selector.node_selector_terms.iter().any(|term| term_matches(term, labels, name))
}

/// Every requirement of the term holds; an empty term matches nothing.
fn term_matches(term: &NodeSelectorTerm, labels: &BTreeMap<String, String>, name: &str) -> bool {
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

/// PreferNoSchedule taints never keep a pod away; the others need a toleration.
fn tolerated(taint: &Taint, tolerations: &[Toleration]) -> bool {
    if taint.effect == "PreferNoSchedule" {
        return true;
    }
    tolerations.iter().any(|toleration| tolerates(toleration, taint))
}

fn tolerates(toleration: &Toleration, taint: &Taint) -> bool {
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

#[cfg(test)]
#[path = "selection_tests.rs"]
mod tests;
