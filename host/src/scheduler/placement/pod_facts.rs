//! What the pod-level rules read of a pod itself: its labels, namespace and name, whether it has
//! finished, and whether it carries a required pod anti-affinity (one that may refuse other pods).

use std::collections::BTreeMap;

use crate::scheduler::watched_pod::WatchedPod;

/// Whether the pod has finished: the scheduler's informer leaves such pods out, their kubelet runs
/// them no more.
pub(super) fn finished(pod: &WatchedPod) -> bool {
    let phase = pod.status.as_ref().and_then(|status| status.phase.as_deref());
    matches!(phase, Some("Succeeded" | "Failed"))
}

/// Whether the pod carries a required pod anti-affinity (one that may refuse other pods).
pub(super) fn refuses_others(pod: &WatchedPod) -> bool {
    let anti = pod.spec.as_ref().and_then(|spec| spec.affinity.as_ref()?.pod_anti_affinity.as_ref());
    anti.is_some_and(|anti| anti.required_during_scheduling_ignored_during_execution.is_some())
}

static NO_LABELS: BTreeMap<String, String> = BTreeMap::new();

pub(super) fn labels(labels: Option<&BTreeMap<String, String>>) -> &BTreeMap<String, String> {
    labels.unwrap_or(&NO_LABELS)
}

pub(super) fn pod_labels(pod: &WatchedPod) -> &BTreeMap<String, String> {
    labels(pod.metadata.labels.as_ref())
}

pub(super) fn namespace_of(pod: &WatchedPod) -> &str {
    pod.metadata.namespace.as_deref().unwrap_or_default()
}

pub(super) fn name_of(pod: &WatchedPod) -> String {
    format!("{}/{}", namespace_of(pod), pod.metadata.name.as_deref().unwrap_or_default())
}
