//! A slurmd pod reduced to what the planner decides on.

use std::time::SystemTime;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;

use super::naming::{
    CONF_ANNOTATION, DRAIN_REASON_ANNOTATION, DRAIN_SINCE_ANNOTATION, REVISION_LABEL, SLURM_NODE_LABEL,
};
use super::slurmd_pod::slurmd_container;

/// One of the NodeSet's pods, as last seen.
#[derive(Debug, Clone, PartialEq)]
pub struct ObservedPod {
    pub name: String,
    pub uid: String,
    pub kube_node: Option<String>,
    pub slurm_node: String,
    pub revision: String,
    pub conf: String,
    pub ready: bool,
    /// Being deleted.
    pub terminating: bool,
    /// Succeeded or Failed (e.g. refused by the kubelet): its slurmd is not running and never will
    /// again. Says how it ended.
    pub finished: Option<String>,
    pub created: Option<SystemTime>,
    /// The pod's IP: its slurmd registers with it as the Slurm node's address.
    pub ip: Option<String>,
    /// When the slurmd container started running, if it runs.
    pub slurmd_started: Option<SystemTime>,
    /// The NodeSet asked for its Slurm node to be drained.
    pub drain: Option<DrainMark>,
}

/// When the NodeSet started draining the pod's Slurm node, and the reason it gave Slurm (none when
/// the node was already drained by someone else, whose drain is then never undone).
#[derive(Debug, Clone, PartialEq)]
pub struct DrainMark {
    pub since: SystemTime,
    pub reason: Option<String>,
}

impl ObservedPod {
    pub fn of(pod: &Pod) -> Self {
        let labels = pod.labels();
        let annotations = pod.annotations();
        let status = pod.status.as_ref();
        let ready = status
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|conditions| conditions.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
        let phase = status.and_then(|s| s.phase.as_deref());
        let slurmd_name = pod.spec.as_ref().and_then(slurmd_container).map(|c| c.name.clone());
        let slurmd_started = status
            .and_then(|s| s.container_statuses.as_ref())
            .and_then(|statuses| statuses.iter().find(|c| Some(&c.name) == slurmd_name.as_ref()))
            .and_then(|c| c.state.as_ref()?.running.as_ref()?.started_at.as_ref())
            .map(|time| SystemTime::from(time.0));
        let drain = annotations.get(DRAIN_SINCE_ANNOTATION).map(|since| DrainMark {
            // An unreadable time restarts the clock rather than forcing anything early.
            since: since.parse::<Timestamp>().map(SystemTime::from).unwrap_or_else(|_| SystemTime::now()),
            reason: annotations.get(DRAIN_REASON_ANNOTATION).filter(|r| !r.is_empty()).cloned(),
        });
        Self {
            name: pod.name_any(),
            uid: pod.uid().unwrap_or_default(),
            kube_node: pod.spec.as_ref().and_then(|s| s.node_name.clone()),
            slurm_node: labels.get(SLURM_NODE_LABEL).cloned().unwrap_or_default(),
            revision: labels.get(REVISION_LABEL).cloned().unwrap_or_default(),
            conf: annotations.get(CONF_ANNOTATION).cloned().unwrap_or_default(),
            ready,
            terminating: pod.metadata.deletion_timestamp.is_some(),
            finished: matches!(phase, Some("Succeeded" | "Failed")).then(|| how_it_ended(status)),
            ip: status.and_then(|s| s.pod_ip.clone()),
            created: pod.metadata.creation_timestamp.as_ref().map(|time| SystemTime::from(time.0)),
            slurmd_started,
            drain,
        }
    }
}

/// `Failed: OutOfcpu: Node didn't have enough resource: cpu, ...`.
fn how_it_ended(status: Option<&k8s_openapi::api::core::v1::PodStatus>) -> String {
    let parts = [
        status.and_then(|s| s.phase.as_deref()),
        status.and_then(|s| s.reason.as_deref()),
        status.and_then(|s| s.message.as_deref()),
    ];
    parts.into_iter().flatten().collect::<Vec<_>>().join(": ")
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{
        Container, ContainerState, ContainerStateRunning, ContainerStatus, PodCondition, PodSpec, PodStatus,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

    use super::*;

    #[test]
    fn reads_labels_readiness_slurmd_start_and_the_drain_mark() {
        let started = Timestamp::from_second(1_700_000_000).unwrap();
        let pod = Pod {
            metadata: ObjectMeta {
                name: Some("gpu-w1".into()),
                uid: Some("u".into()),
                labels: Some([(SLURM_NODE_LABEL.into(), "w1".into()), (REVISION_LABEL.into(), "r1".into())].into()),
                annotations: Some(
                    [
                        (CONF_ANNOTATION.into(), "CPUs=1".into()),
                        (DRAIN_SINCE_ANNOTATION.into(), "2023-11-14T22:13:20Z".into()),
                        (DRAIN_REASON_ANNOTATION.into(), "k8s: x".into()),
                    ]
                    .into(),
                ),
                ..Default::default()
            },
            spec: Some(PodSpec {
                node_name: Some("w1".into()),
                containers: vec![Container { name: "slurmd".into(), ..Default::default() }],
                ..Default::default()
            }),
            status: Some(PodStatus {
                phase: Some("Running".into()),
                conditions: Some(vec![PodCondition {
                    type_: "Ready".into(),
                    status: "True".into(),
                    ..Default::default()
                }]),
                container_statuses: Some(vec![ContainerStatus {
                    name: "slurmd".into(),
                    state: Some(ContainerState {
                        running: Some(ContainerStateRunning { started_at: Some(Time(started)) }),
                        ..Default::default()
                    }),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
        };
        let observed = ObservedPod::of(&pod);
        assert_eq!(observed.slurm_node, "w1");
        assert_eq!(observed.revision, "r1");
        assert_eq!(observed.conf, "CPUs=1");
        assert!(observed.ready && !observed.terminating && observed.finished.is_none());
        assert_eq!(observed.slurmd_started, Some(SystemTime::from(started)));
        let mark = observed.drain.unwrap();
        assert_eq!(mark.since, SystemTime::from(started));
        assert_eq!(mark.reason.as_deref(), Some("k8s: x"));
    }
}
