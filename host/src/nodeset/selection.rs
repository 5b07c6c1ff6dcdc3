//! Which Nodes a NodeSet selects, exactly as a DaemonSet would: node selector, required node
//! affinity, and NoSchedule/NoExecute taints tolerated by the pod's tolerations plus the ones a
//! DaemonSet's pods always get (so a cordoned or NotReady Node keeps its slurmd, and its jobs).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, NodeSelector, PodSpec, Taint, Toleration};

use crate::kube::node_match::{selector_matches, tolerates};

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

/// PreferNoSchedule taints never keep a pod away; the others need a toleration.
fn tolerated(taint: &Taint, tolerations: &[Toleration]) -> bool {
    if taint.effect == "PreferNoSchedule" {
        return true;
    }
    tolerations.iter().any(|toleration| tolerates(toleration, taint))
}

#[cfg(test)]
#[path = "selection_tests.rs"]
mod tests;
