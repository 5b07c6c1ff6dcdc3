//! The reason a slurmd pod's Slurm node is drained with: judgement, so the `drain` policy decides
//! it (its `pod-terminating` event). The host only makes sure the reason is one sunk owns (`k8s:`).

use k8s_openapi::api::core::v1::Node;

use crate::policy::worlds::NodeEventInput;
use crate::policy::{
    Condition, DrainDecision, KeyValue, NodeAction, NodeContext, NodeEvent, PodTermination, PolicyError,
};
use crate::slurm;
use crate::vocabulary::owned_drain;

/// What the policy is told about the node: the Kubernetes Node (if it still exists) and Slurm's view.
pub fn node_context(slurm_node: &str, kube_node: Option<&Node>, slurm: Option<&slurm::Node>) -> NodeContext {
    let labels = kube_node.and_then(|node| node.metadata.labels.clone()).unwrap_or_default();
    let conditions = kube_node
        .and_then(|node| node.status.as_ref()?.conditions.clone())
        .unwrap_or_default()
        .into_iter()
        .map(|c| Condition {
            type_: c.type_,
            status: c.status,
            reason: c.reason.unwrap_or_default(),
            message: c.message.unwrap_or_default(),
        })
        .collect();
    NodeContext {
        kube_node: kube_node.and_then(|node| node.metadata.name.clone()).unwrap_or_default(),
        slurm_node: slurm_node.to_owned(),
        labels: labels.into_iter().map(|(key, value)| KeyValue { key, value }).collect(),
        conditions,
        unschedulable: kube_node.and_then(|node| node.spec.as_ref()?.unschedulable).unwrap_or(false),
        slurm_state: slurm.map(|node| node.state.clone()).unwrap_or_default(),
        slurm_reason: slurm.map(|node| node.reason.clone()).filter(|reason| !reason.is_empty()),
    }
}

/// The policy's input for a slurmd pod the NodeSet removes.
pub fn termination_event(namespace: &str, pod: &str, why: &str, node: NodeContext) -> NodeEventInput {
    let termination =
        PodTermination { namespace: namespace.to_owned(), name: pod.to_owned(), reason: Some(why.to_owned()) };
    NodeEventInput { event: NodeEvent::PodTerminating(termination), node }
}

/// The reason to drain with, from the policy's decision. A policy that declines to drain does not
/// stop the removal (draining first is mechanics, not judgement): the host's own reason is used.
pub fn reason(decision: Result<DrainDecision, PolicyError>, input: &NodeEventInput) -> Result<String, PolicyError> {
    let fallback = || match &input.event {
        NodeEvent::PodTerminating(pod) => format!("slurmd pod {}/{} terminating", pod.namespace, pod.name),
        _ => "slurmd pod terminating".to_string(),
    };
    Ok(owned_drain(match decision?.action {
        NodeAction::Drain(reason) => reason,
        NodeAction::Keep | NodeAction::Resume => fallback(),
    }))
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{NodeCondition, NodeSpec, NodeStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;
    use crate::policy::{DrainWorld, Module};

    fn kube_node() -> Node {
        Node {
            metadata: ObjectMeta {
                name: Some("worker-1".into()),
                labels: Some([("pool".to_string(), "gpu".to_string())].into()),
                ..Default::default()
            },
            spec: Some(NodeSpec { unschedulable: Some(true), ..Default::default() }),
            status: Some(NodeStatus {
                conditions: Some(vec![NodeCondition {
                    type_: "Ready".into(),
                    status: "True".into(),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
        }
    }

    #[test]
    fn describes_both_sides_of_the_node() {
        let slurm = slurm::Node { name: "worker-1".into(), state: vec!["IDLE".into()], ..Default::default() };
        let context = node_context("worker-1", Some(&kube_node()), Some(&slurm));
        assert_eq!(context.kube_node, "worker-1");
        assert!(context.unschedulable);
        assert_eq!(context.labels[0].key, "pool");
        assert_eq!(context.conditions[0].type_, "Ready");
        assert_eq!(context.slurm_state, ["IDLE"]);
        assert_eq!(context.slurm_reason, None);
        let gone = node_context("worker-1", None, None);
        assert_eq!(gone.kube_node, "");
    }

    #[test]
    fn the_bundled_policy_names_the_pod_and_why() {
        let drain = Module::<DrainWorld>::bundled().unwrap();
        let input = termination_event("slurm", "cpu-worker-1", "rolling update", node_context("worker-1", None, None));
        let reason = reason(drain.decide(&input), &input).unwrap();
        assert_eq!(reason, "k8s: slurmd pod slurm/cpu-worker-1 terminating: rolling update");
    }

    #[test]
    fn reasons_are_always_owned() {
        let input = termination_event("slurm", "p", "x", node_context("n", None, None));
        let drain = |reason: &str| Ok(DrainDecision { action: NodeAction::Drain(reason.into()), annotations: vec![] });
        assert_eq!(reason(drain("maintenance"), &input).unwrap(), "k8s: maintenance");
        assert_eq!(reason(drain("k8s: mine"), &input).unwrap(), "k8s: mine");
        let keep = Ok(DrainDecision { action: NodeAction::Keep, annotations: vec![] });
        assert_eq!(reason(keep, &input).unwrap(), "k8s: slurmd pod slurm/p terminating");
        assert!(reason(Err(PolicyError::Timeout), &input).is_err());
    }
}
