//! `drain`: a node event seen on either side -> drain, resume or annotate the Slurm node.

use serde::{Deserialize, Serialize};
use wasmtime::Store;
use wasmtime::component::InstancePre;

use crate::bindings::drain::DrainPre;
use crate::bindings::drain_types::{
    Condition, ConditionChange, Cordon, DrainDecision, NodeAction, NodeContext, NodeEvent,
};
use crate::bundled;
use crate::engine::StoreState;
use crate::world::{World, check_text_size};

/// Longest drain reason Slurm is given.
const MAX_REASON_BYTES: usize = 1024;

/// The `drain` world.
pub enum DrainWorld {}

/// The arguments of `on-node-event`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeEventInput {
    pub event: NodeEvent,
    pub node: NodeContext,
}

impl World for DrainWorld {
    const NAME: &'static str = "drain";
    const EXPORT: &'static str = "on-node-event";
    type Input = NodeEventInput;
    type Output = DrainDecision;
    type Pre = DrainPre<StoreState>;

    fn bundled() -> &'static [u8] {
        bundled::DRAIN
    }

    fn pre(instance: InstancePre<StoreState>) -> wasmtime::Result<Self::Pre> {
        DrainPre::new(instance)
    }

    fn call(pre: &Self::Pre, store: &mut Store<StoreState>, input: &Self::Input) -> wasmtime::Result<Self::Output> {
        pre.instantiate(&mut *store)?.call_on_node_event(store, &input.event, &input.node)
    }

    fn check(_input: &NodeEventInput, output: &DrainDecision) -> Result<(), String> {
        if let NodeAction::Drain(reason) = &output.action {
            if reason.trim().is_empty() {
                return Err("a drain without a reason".into());
            }
            if reason.len() > MAX_REASON_BYTES {
                return Err(format!("a drain reason of {} bytes (at most {MAX_REASON_BYTES})", reason.len()));
            }
        }
        let annotations = output.annotations.iter().flat_map(|kv| [kv.key.as_str(), kv.value.as_str()]);
        check_text_size(annotations)
    }

    fn is_rejection(_output: &DrainDecision) -> bool {
        false
    }

    fn samples() -> Vec<NodeEventInput> {
        let ready = Condition {
            type_: "Ready".into(),
            status: "True".into(),
            reason: "KubeletReady".into(),
            message: String::new(),
        };
        let node = NodeContext {
            kube_node: "kube-node-1".into(),
            slurm_node: "slurm-1".into(),
            labels: vec![],
            conditions: vec![ready.clone()],
            unschedulable: false,
            slurm_state: vec!["IDLE".into()],
            slurm_reason: None,
        };
        let not_ready =
            Condition { status: "False".into(), message: "kubelet stopped posting".into(), ..ready.clone() };
        let events = [
            NodeEvent::Cordoned(Cordon { by: Some("kubectl".into()) }),
            NodeEvent::Uncordoned,
            NodeEvent::ConditionChanged(ConditionChange { before: Some(ready), after: not_ready }),
        ];
        events.into_iter().map(|event| NodeEventInput { event, node: node.clone() }).collect()
    }

    fn summarize_input(input: &NodeEventInput) -> String {
        let event = match &input.event {
            NodeEvent::Cordoned(_) => "cordoned".to_owned(),
            NodeEvent::Uncordoned => "uncordoned".to_owned(),
            NodeEvent::ConditionChanged(change) => format!("{}={}", change.after.type_, change.after.status),
            NodeEvent::PodTerminating(pod) => format!("pod {}/{} terminating", pod.namespace, pod.name),
            NodeEvent::LabelChanged(label) => format!("label {}", label.key),
            NodeEvent::SlurmStateChanged(change) => format!("slurm state {}", change.after.join("+")),
        };
        format!("{} on {}/{}", event, input.node.kube_node, input.node.slurm_node)
    }

    fn summarize_output(output: &DrainDecision) -> String {
        let action = match &output.action {
            NodeAction::Keep => "keep".to_owned(),
            NodeAction::Drain(reason) => format!("drain {reason:?}"),
            NodeAction::Resume => "resume".to_owned(),
        };
        format!("{action} annotations={}", output.annotations.len())
    }
}
