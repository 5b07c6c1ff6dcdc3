//! Slurm's view of a node, as Kubernetes shows it: conditions and annotations on the slurmd pod,
//! conditions on the Node. Pure: builds what should be there and the patches that get it there.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::ResourceExt;
use serde_json::{Value, json};

use crate::kube::one_line;
use crate::slurm;

use crate::vocabulary::{DRAIN_ANNOTATION, LEGACY_DRAIN_ANNOTATION, STATE_ANNOTATION};
use crate::vocabulary::{NODE_CONDITIONS, POD_CONDITION_PREFIX};
/// Slurm state flags shown as pod conditions (`SlurmNodeDrain`, ...); the rest are bookkeeping.
const FLAG_CONDITIONS: &[&str] =
    &["COMPLETING", "DRAIN", "FAIL", "INVALID", "INVALID_REG", "MAINTENANCE", "NOT_RESPONDING", "UNDRAIN"];

/// `NOT_RESPONDING` -> `NotResponding`.
fn camel(flag: &str) -> String {
    flag.split('_')
        .map(|word| {
            let lower = word.to_ascii_lowercase();
            let mut chars = lower.chars();
            chars.next().map(|first| first.to_ascii_uppercase().to_string() + chars.as_str()).unwrap_or_default()
        })
        .collect()
}

/// The `SlurmNode*` pod conditions the node's state calls for: its base state, then its flags, each
/// True, with Slurm's reason (on one line) as the message.
pub fn pod_conditions(node: &slurm::Node) -> BTreeMap<String, String> {
    let flags = node.flags();
    let reason = one_line(&node.reason);
    let mut wanted = BTreeMap::new();
    wanted.insert(format!("{POD_CONDITION_PREFIX}{}", camel(flags.base())), reason.clone());
    for flag in FLAG_CONDITIONS.iter().filter(|flag| flags.has(flag)) {
        wanted.insert(format!("{POD_CONDITION_PREFIX}{}", camel(flag)), reason.clone());
    }
    wanted
}

/// A strategic-merge patch of `pods/status` that sets the wanted `SlurmNode*` conditions and deletes
/// stale ones; None when the pod already shows exactly them.
pub fn pod_status_patch(pod: &Pod, wanted: &BTreeMap<String, String>, now: &str) -> Option<Value> {
    let current: BTreeMap<String, String> = pod
        .status
        .as_ref()
        .and_then(|status| status.conditions.as_ref())
        .into_iter()
        .flatten()
        .filter(|c| c.type_.starts_with(POD_CONDITION_PREFIX) && c.status == "True")
        .map(|c| (c.type_.clone(), c.message.clone().unwrap_or_default()))
        .collect();
    if current == *wanted {
        return None;
    }
    let mut conditions: Vec<Value> = wanted
        .iter()
        .filter(|(type_, message)| current.get(*type_) != Some(*message))
        .map(|(type_, message)| {
            json!({"type": type_, "status": "True", "reason": "Slurm", "message": message, "lastTransitionTime": now})
        })
        .collect();
    conditions.extend(
        current
            .keys()
            .filter(|type_| !wanted.contains_key(*type_))
            .map(|type_| json!({"type": type_, "$patch": "delete"})),
    );
    Some(json!({"status": {"conditions": conditions}}))
}

/// The pod's mirror annotations for the node's state (None removes one).
pub fn pod_annotations(node: &slurm::Node) -> BTreeMap<&'static str, Option<String>> {
    let drain = node.flags().has("DRAIN").then(|| node.reason.clone());
    BTreeMap::from([
        (STATE_ANNOTATION, Some(node.state.join("+"))),
        (DRAIN_ANNOTATION, drain.clone()),
        (LEGACY_DRAIN_ANNOTATION, drain),
    ])
}

/// Only the annotations that differ from the pod's, as a merge patch body; None when all match.
pub fn annotation_patch(pod: &Pod, wanted: &BTreeMap<String, Option<String>>) -> Option<Value> {
    let current = pod.annotations();
    let changes: serde_json::Map<String, Value> = wanted
        .iter()
        .filter(|(key, value)| current.get(*key) != value.as_ref())
        .map(|(key, value)| (key.clone(), value.clone().map_or(Value::Null, Value::String)))
        .collect();
    (!changes.is_empty()).then(|| json!({"metadata": {"annotations": changes}}))
}

/// A strategic-merge patch of `nodes/status` for `SlurmDrain` and `SlurmNotResponding`; None when
/// the Node already says so.
pub fn node_status_patch(kube_node: &Node, slurm_node: &slurm::Node, now: &str) -> Option<Value> {
    let current = kube_node.status.as_ref().and_then(|status| status.conditions.as_ref());
    let conditions: Vec<Value> = NODE_CONDITIONS
        .iter()
        .filter_map(|(type_, flag)| {
            let on = slurm_node.flags().has(flag);
            let status = if on { "True" } else { "False" };
            let message = if on { one_line(&slurm_node.reason) } else { String::new() };
            let existing = current.into_iter().flatten().find(|c| c.type_ == *type_);
            let same = existing.is_some_and(|c| c.status == status && c.message.as_deref().unwrap_or("") == message);
            let reason = if on { format!("Slurm{}", camel(flag)) } else { "SlurmOk".to_owned() };
            (!same).then(|| {
                json!({"type": type_, "status": status, "reason": reason, "message": message,
                       "lastTransitionTime": now, "lastHeartbeatTime": now})
            })
        })
        .collect();
    (!conditions.is_empty()).then(|| json!({"status": {"conditions": conditions}}))
}

#[cfg(test)]
#[path = "mirror_tests.rs"]
mod tests;
