use k8s_openapi::api::core::v1::{NodeSpec, NodeStatus, PodSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ManagedFieldsEntry, ObjectMeta, Time};

use super::*;

fn kube_node(unschedulable: bool, conditions: &[(&str, &str, &str)], labels: &[(&str, &str)]) -> Node {
    Node {
        metadata: ObjectMeta {
            name: Some("w1".into()),
            labels: Some(labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()),
            managed_fields: Some(vec![ManagedFieldsEntry {
                manager: Some("kubectl-cordon".into()),
                fields_v1: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::FieldsV1(
                    serde_json::json!({"f:spec": {"f:unschedulable": {}}}),
                )),
                ..Default::default()
            }]),
            ..Default::default()
        },
        spec: Some(NodeSpec { unschedulable: Some(unschedulable), ..Default::default() }),
        status: Some(NodeStatus {
            conditions: Some(
                conditions
                    .iter()
                    .map(|(t, s, m)| NodeCondition {
                        type_: t.to_string(),
                        status: s.to_string(),
                        message: Some(m.to_string()),
                        ..Default::default()
                    })
                    .collect(),
            ),
            ..Default::default()
        }),
    }
}

fn pod(deleting: bool) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some("gpu-w1".into()),
            namespace: Some("slurm".into()),
            deletion_timestamp: deleting.then(|| Time(k8s_openapi::jiff::Timestamp::now())),
            ..Default::default()
        },
        spec: Some(PodSpec::default()),
        ..Default::default()
    }
}

fn keys(causes: &[Cause]) -> Vec<&str> {
    causes.iter().map(|c| c.key.as_str()).collect()
}

#[test]
fn reads_every_kind_of_cause_in_order() {
    let node = kube_node(
        true,
        &[("Ready", "False", "kubelet down"), ("GpuUnhealthy", "True", "xid 79"), ("MemoryPressure", "False", "")],
        &[(DRAIN_LABEL, "bad-dimm")],
    );
    let causes = present(&node, &pod(true), &["GpuUnhealthy".into()]);
    assert_eq!(
        keys(&causes),
        ["pod/terminating", "condition/Ready", "condition/GpuUnhealthy", "label/sunk.dev/drain", "cordon"]
    );
    let NodeEvent::Cordoned(cordon) = &causes[4].event else { panic!("a cordon") };
    assert_eq!(cordon.by.as_deref(), Some("kubectl-cordon"));
}

#[test]
fn unwatched_conditions_and_a_healthy_node_are_no_cause_but_ready() {
    let node = kube_node(false, &[("Ready", "True", ""), ("GpuUnhealthy", "True", "xid")], &[]);
    assert_eq!(keys(&present(&node, &pod(false), &[])), ["condition/Ready"]);
}

#[test]
fn the_clearing_event_reads_the_node_as_it_is_now() {
    let node = kube_node(false, &[("Ready", "True", "")], &[]);
    assert_eq!(cleared("cordon", &node), Some(NodeEvent::Uncordoned));
    let Some(NodeEvent::ConditionChanged(change)) = cleared("condition/GpuUnhealthy", &node) else { panic!() };
    assert_eq!((change.after.type_.as_str(), change.after.status.as_str()), ("GpuUnhealthy", "False"));
    let Some(NodeEvent::LabelChanged(change)) = cleared("label/sunk.dev/drain", &node) else { panic!() };
    assert_eq!(change.after, None);
    assert_eq!(cleared("something/else", &node), None);
}
