//! What on the Kubernetes side could want a Slurm node drained, read from the Node and its slurmd
//! pod as they are now (level-triggered: a cause is present or not, whatever happened in between).
//!
//! Each cause is shown to the `drain` policy as the event that would have brought it about, and a
//! cause that went away as the event that would have cleared it.

use k8s_openapi::api::core::v1::{Node, NodeCondition, Pod};
use kube::ResourceExt;

use crate::policy::{Condition, ConditionChange, Cordon, LabelChange, NodeEvent, PodTermination};

use crate::vocabulary::DRAIN_LABEL;

/// One present cause: a stable key (recorded on the pod when it drains the node) and its event.
#[derive(Debug, Clone, PartialEq)]
pub struct Cause {
    pub key: String,
    pub event: NodeEvent,
}

/// The causes present now, in the order they are asked about (the first drain wins): the most
/// telling first, so a GPU fault on a cordoned Node is what `sinfo -R` says.
pub fn present(node: &Node, pod: &Pod, watched_conditions: &[String]) -> Vec<Cause> {
    let mut causes = Vec::new();
    if pod.metadata.deletion_timestamp.is_some() {
        let termination =
            PodTermination { namespace: pod.namespace().unwrap_or_default(), name: pod.name_any(), reason: None };
        causes.push(Cause { key: "pod/terminating".into(), event: NodeEvent::PodTerminating(termination) });
    }
    for condition in conditions(node) {
        if condition.type_ == "Ready" || watched_conditions.contains(&condition.type_) {
            let after = policy_condition(condition);
            let key = format!("condition/{}", condition.type_);
            causes.push(Cause { key, event: NodeEvent::ConditionChanged(ConditionChange { before: None, after }) });
        }
    }
    if let Some(value) = node.labels().get(DRAIN_LABEL) {
        let change = LabelChange { key: DRAIN_LABEL.into(), before: None, after: Some(value.clone()) };
        causes.push(Cause { key: format!("label/{DRAIN_LABEL}"), event: NodeEvent::LabelChanged(change) });
    }
    if node.spec.as_ref().and_then(|spec| spec.unschedulable).unwrap_or(false) {
        causes.push(Cause { key: "cordon".into(), event: NodeEvent::Cordoned(Cordon { by: cordoned_by(node) }) });
    }
    causes
}

/// The event that clears the cause recorded as `key`, as the Node is now; None for a key this host
/// does not know (written by another version).
pub fn cleared(key: &str, node: &Node) -> Option<NodeEvent> {
    if key == "cordon" {
        return Some(NodeEvent::Uncordoned);
    }
    if key == "pod/terminating" {
        return None;
    }
    if let Some(type_) = key.strip_prefix("condition/") {
        // Gone altogether reads as a healthy status of the condition's kind.
        let after = conditions(node).find(|c| c.type_ == type_).map(policy_condition).unwrap_or_else(|| Condition {
            type_: type_.to_owned(),
            status: if type_ == "Ready" { "True" } else { "False" }.into(),
            reason: String::new(),
            message: String::new(),
        });
        return Some(NodeEvent::ConditionChanged(ConditionChange { before: None, after }));
    }
    let label = key.strip_prefix("label/")?;
    let change =
        LabelChange { key: label.to_owned(), before: Some(String::new()), after: node.labels().get(label).cloned() };
    Some(NodeEvent::LabelChanged(change))
}

fn conditions(node: &Node) -> impl Iterator<Item = &NodeCondition> {
    node.status.as_ref().and_then(|status| status.conditions.as_ref()).into_iter().flatten()
}

fn policy_condition(condition: &NodeCondition) -> Condition {
    Condition {
        type_: condition.type_.clone(),
        status: condition.status.clone(),
        reason: condition.reason.clone().unwrap_or_default(),
        message: condition.message.clone().unwrap_or_default(),
    }
}

/// The field manager that set `spec.unschedulable`, when the Node's managed fields say.
fn cordoned_by(node: &Node) -> Option<String> {
    node.metadata.managed_fields.iter().flatten().find_map(|entry| {
        let fields = entry.fields_v1.as_ref()?.0.to_string();
        fields.contains("\"f:unschedulable\"").then(|| entry.manager.clone()).flatten()
    })
}

#[cfg(test)]
#[path = "causes_tests.rs"]
mod tests;
