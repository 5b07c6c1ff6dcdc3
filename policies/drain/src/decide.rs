//! The default drain decisions.
//!
//! Every drain reason starts with `k8s: ` and names its cause, so that a resume only ever undoes a drain
//! sunk set for that same cause: an administrator's drain (any other reason) is never resumed, and a node
//! drained for a GPU fault is not resumed because someone uncordoned it.

use crate::sunk::policy::common::KeyValue;
use crate::sunk::policy::drain_types::{
    ConditionChange, Cordon, DrainDecision, LabelChange, NodeAction, NodeContext, NodeEvent, PodTermination,
    SlurmStateChange,
};

/// Slurm keeps reasons as free text; long ones are cut here so they stay readable in `sinfo -R`.
const MAX_REASON_BYTES: usize = 255;
const PREFIX: &str = "k8s: ";

/// Conditions whose `True` is healthy; their `False`/`Unknown` is the problem. Every other condition is
/// problem-style (node-problem-detector, MemoryPressure, ...): `True` is the problem.
const HEALTHY_WHEN_TRUE: &[&str] = &["Ready"];
/// Conditions that say nothing about whether Slurm jobs can run there: a CNI route being set up does not
/// stop slurmd, which uses the host network.
const IGNORED: &[&str] = &["NetworkUnavailable"];
/// The Node label an operator sets to drain the Slurm node; its value says why.
const DRAIN_LABEL: &str = "sunk.dev/drain";

pub fn on_node_event(event: &NodeEvent, node: &NodeContext) -> DrainDecision {
    match event {
        NodeEvent::Cordoned(cordon) => drain(cordon_reason(cordon)),
        NodeEvent::Uncordoned => resume_if_reason_starts(node, &format!("{PREFIX}cordoned")),
        NodeEvent::ConditionChanged(change) => on_condition(change, node),
        NodeEvent::PodTerminating(pod) => drain(termination_reason(pod)),
        NodeEvent::LabelChanged(change) => on_label(change, node),
        NodeEvent::SlurmStateChanged(change) => mirror_slurm_state(change),
    }
}

fn cordon_reason(cordon: &Cordon) -> String {
    match &cordon.by {
        Some(who) if !who.is_empty() => format!("{PREFIX}cordoned by {who}"),
        _ => format!("{PREFIX}cordoned"),
    }
}

fn termination_reason(pod: &PodTermination) -> String {
    let mut reason = format!("{PREFIX}slurmd pod {}/{} terminating", pod.namespace, pod.name);
    if let Some(why) = pod.reason.as_deref().filter(|why| !why.is_empty()) {
        reason.push_str(": ");
        reason.push_str(why);
    }
    reason
}

/// `sunk.dev/drain=<why>` drains, its removal resumes; other labels mean nothing here.
fn on_label(change: &LabelChange, node: &NodeContext) -> DrainDecision {
    if change.key != DRAIN_LABEL {
        return keep();
    }
    match &change.after {
        Some(why) => drain(format!("{PREFIX}drain requested ({DRAIN_LABEL}={why})")),
        None => resume_if_reason_starts(node, &format!("{PREFIX}drain requested")),
    }
}

fn on_condition(change: &ConditionChange, node: &NodeContext) -> DrainDecision {
    let condition = &change.after;
    if IGNORED.contains(&condition.type_.as_str()) {
        return keep();
    }
    let healthy = if HEALTHY_WHEN_TRUE.contains(&condition.type_.as_str()) {
        condition.status == "True"
    } else {
        condition.status != "True"
    };
    if healthy {
        return resume_if_reason_starts(node, &format!("{PREFIX}{}=", condition.type_));
    }
    let mut reason = format!("{PREFIX}{}={}", condition.type_, condition.status);
    if !condition.message.is_empty() {
        reason.push_str(": ");
        reason.push_str(&condition.message);
    }
    drain(reason)
}

/// Slurm's view of the node on the slurmd pod: `sunk.dev/slurm-state` (flags joined by `+`) and
/// `sunk.dev/slurm-reason` (empty removes it).
fn mirror_slurm_state(change: &SlurmStateChange) -> DrainDecision {
    let annotations = vec![
        KeyValue { key: "sunk.dev/slurm-state".into(), value: change.after.join("+") },
        KeyValue { key: "sunk.dev/slurm-reason".into(), value: change.reason.clone().unwrap_or_default() },
    ];
    DrainDecision { action: NodeAction::Keep, annotations }
}

/// Resumes the node only when its current reason is one of sunk's and starts with `prefix`.
fn resume_if_reason_starts(node: &NodeContext, prefix: &str) -> DrainDecision {
    match node.slurm_reason.as_deref() {
        Some(reason) if reason.starts_with(prefix) => DrainDecision { action: NodeAction::Resume, annotations: vec![] },
        _ => keep(),
    }
}

fn drain(reason: String) -> DrainDecision {
    DrainDecision { action: NodeAction::Drain(truncate(reason)), annotations: vec![] }
}

fn keep() -> DrainDecision {
    DrainDecision { action: NodeAction::Keep, annotations: vec![] }
}

/// Cuts `text` to [`MAX_REASON_BYTES`] on a character boundary.
fn truncate(mut text: String) -> String {
    if text.len() > MAX_REASON_BYTES {
        let mut cut = MAX_REASON_BYTES;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sunk::policy::drain_types::Condition;

    fn node(reason: Option<&str>) -> NodeContext {
        NodeContext {
            kube_node: "kube-node-1".into(),
            slurm_node: "slurm-1".into(),
            labels: vec![],
            conditions: vec![],
            unschedulable: false,
            slurm_state: vec!["IDLE".into()],
            slurm_reason: reason.map(str::to_owned),
        }
    }

    fn condition(type_: &str, status: &str, message: &str) -> NodeEvent {
        let after =
            Condition { type_: type_.into(), status: status.into(), reason: String::new(), message: message.into() };
        NodeEvent::ConditionChanged(ConditionChange { before: None, after })
    }

    fn action(event: NodeEvent, reason: Option<&str>) -> NodeAction {
        on_node_event(&event, &node(reason)).action
    }

    fn drained(reason: &str) -> NodeAction {
        NodeAction::Drain(reason.into())
    }

    #[test]
    fn a_cordon_drains_naming_who() {
        assert_eq!(
            action(NodeEvent::Cordoned(Cordon { by: Some("kubectl".into()) }), None),
            drained("k8s: cordoned by kubectl")
        );
        assert_eq!(action(NodeEvent::Cordoned(Cordon { by: None }), None), drained("k8s: cordoned"));
    }

    #[test]
    fn an_uncordon_resumes_only_a_cordon_drain() {
        assert_eq!(action(NodeEvent::Uncordoned, Some("k8s: cordoned by kubectl")), NodeAction::Resume);
        assert_eq!(action(NodeEvent::Uncordoned, Some("k8s: GpuXidError=True: XID 79")), NodeAction::Keep);
        assert_eq!(action(NodeEvent::Uncordoned, Some("cordoned by admin")), NodeAction::Keep);
        assert_eq!(action(NodeEvent::Uncordoned, None), NodeAction::Keep);
    }

    #[test]
    fn ready_false_or_unknown_drains_and_ready_true_resumes() {
        assert_eq!(
            action(condition("Ready", "False", "kubelet stopped"), None),
            drained("k8s: Ready=False: kubelet stopped")
        );
        assert_eq!(action(condition("Ready", "Unknown", ""), None), drained("k8s: Ready=Unknown"));
        assert_eq!(action(condition("Ready", "True", ""), Some("k8s: Ready=False: x")), NodeAction::Resume);
        assert_eq!(action(condition("Ready", "True", ""), Some("k8s: cordoned")), NodeAction::Keep);
        assert_eq!(action(condition("Ready", "True", ""), Some("maintenance")), NodeAction::Keep);
    }

    #[test]
    fn a_problem_condition_drains_and_its_recovery_resumes() {
        assert_eq!(action(condition("GpuXidError", "True", "XID 79"), None), drained("k8s: GpuXidError=True: XID 79"));
        assert_eq!(action(condition("KernelDeadlock", "True", ""), None), drained("k8s: KernelDeadlock=True"));
        assert_eq!(
            action(condition("GpuXidError", "False", ""), Some("k8s: GpuXidError=True: XID 79")),
            NodeAction::Resume
        );
        assert_eq!(action(condition("GpuXidError", "False", ""), Some("k8s: KernelDeadlock=True")), NodeAction::Keep);
        assert_eq!(action(condition("NetworkUnavailable", "True", ""), None), NodeAction::Keep);
    }

    #[test]
    fn a_terminating_slurmd_pod_drains() {
        let pod = |reason: Option<&str>| {
            NodeEvent::PodTerminating(PodTermination {
                namespace: "slurm".into(),
                name: "slurm-1".into(),
                reason: reason.map(str::to_owned),
            })
        };
        assert_eq!(action(pod(None), None), drained("k8s: slurmd pod slurm/slurm-1 terminating"));
        assert_eq!(
            action(pod(Some("rolling update")), None),
            drained("k8s: slurmd pod slurm/slurm-1 terminating: rolling update")
        );
    }

    #[test]
    fn the_drain_label_drains_and_its_removal_resumes() {
        let label = |after: Option<&str>| {
            NodeEvent::LabelChanged(LabelChange { key: DRAIN_LABEL.into(), before: None, after: after.map(Into::into) })
        };
        assert_eq!(action(label(Some("bad-dimm")), None), drained("k8s: drain requested (sunk.dev/drain=bad-dimm)"));
        let ours = "k8s: drain requested (sunk.dev/drain=bad-dimm)";
        assert_eq!(action(label(None), Some(ours)), NodeAction::Resume);
        assert_eq!(action(label(None), Some("k8s: cordoned")), NodeAction::Keep);
    }

    #[test]
    fn other_labels_are_ignored_and_slurm_state_is_mirrored() {
        let label = NodeEvent::LabelChanged(LabelChange { key: "x".into(), before: None, after: Some("y".into()) });
        assert_eq!(on_node_event(&label, &node(None)), keep());
        let change = SlurmStateChange {
            before: vec!["IDLE".into()],
            after: vec!["IDLE".into(), "DRAIN".into()],
            reason: Some("maintenance".into()),
            reason_user: Some("root".into()),
        };
        let decision = on_node_event(&NodeEvent::SlurmStateChanged(change), &node(None));
        assert_eq!(decision.action, NodeAction::Keep);
        assert_eq!(decision.annotations[0].value, "IDLE+DRAIN");
        assert_eq!(decision.annotations[1].value, "maintenance");
    }

    #[test]
    fn long_reasons_are_cut_on_a_character_boundary() {
        let message = "é".repeat(300);
        let NodeAction::Drain(reason) = action(condition("GpuXidError", "True", &message), None) else { panic!() };
        assert!(reason.len() <= MAX_REASON_BYTES);
        assert!(reason.starts_with("k8s: GpuXidError=True: é"));
    }
}
