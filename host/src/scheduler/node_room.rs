//! Whether a Node has room for a pod as its kubelet counts it. Slurm frees a node when the
//! placeholder ends; the kubelet counts a pod's requests until it has torn the pod down: a deleted
//! pod until its containers have stopped, and a pod that finished (Succeeded, Failed) until its
//! sandbox is gone too (the kubelet counts terminal pods it is still terminating). A pod bound in
//! between is refused by the kubelet (`OutOfcpu`, `OutOfmemory`) and fails for good, so the bind
//! waits while such a pod holds the room.

use k8s_openapi::api::core::v1::Node;

use crate::scheduler::watched_pod::WatchedPod;
use kube::ResourceExt;

use super::pod_record;
use crate::kube::quantity;

/// What the Node offers pods, (CPU millicores, memory bytes): its allocatable.
fn allocatable(node: &Node) -> Option<(u64, u64)> {
    let allocatable = node.status.as_ref()?.allocatable.as_ref()?;
    Some((allocatable.get("cpu").and_then(quantity::millicores)?, allocatable.get("memory").and_then(quantity::units)?))
}

/// Succeeded or Failed: its containers will not run again.
fn is_terminal(pod: &WatchedPod) -> bool {
    let phase = pod.status.as_ref().and_then(|status| status.phase.as_deref());
    matches!(phase, Some("Succeeded" | "Failed"))
}

/// Whether the kubelet still counts the pod's requests: it is not terminal, or it is but its
/// sandbox still stands (`PodReadyToStartContainers` True: the kubelet has not yet torn it down). A
/// kubelet that does not report the condition counts a terminal pod as gone.
pub fn is_counted(pod: &WatchedPod) -> bool {
    let sandbox_up = || pod.condition("PodReadyToStartContainers").is_some_and(|c| c.status == "True");
    !is_terminal(pod) || sandbox_up()
}

fn bound_to(pod: &WatchedPod, node: &str) -> bool {
    pod.spec.as_ref().and_then(|spec| spec.node_name.as_deref()) == Some(node)
}

/// Whether `other`, a pod other than `pod`, is bound to `node` and leaving it, and still counted by
/// the kubelet: deleted, finished, or without a live job (`has_live_job` says, by uid). A pod whose
/// job ended is deleted next, but Slurm has freed its node already: a gang member still running when
/// another member's end cancelled their job, say.
pub fn is_leaving(other: &WatchedPod, pod: &WatchedPod, node: &str, has_live_job: impl Fn(&str) -> bool) -> bool {
    other.uid() != pod.uid()
        && bound_to(other, node)
        && is_counted(other)
        && (other.metadata.deletion_timestamp.is_some()
            || is_terminal(other)
            || !has_live_job(other.metadata.uid.as_deref().unwrap_or_default()))
}

/// Whether `pod` would not fit on `node` beside `neighbours` (every pod bound to it), as the kubelet
/// counts: the requests of the ones it counts, `pod` itself aside. A Node whose allocatable is
/// unknown fits: the kubelet decides.
pub fn overcommitted(pod: &WatchedPod, node: &Node, neighbours: &[WatchedPod]) -> bool {
    let Some((cpu_offered, memory_offered)) = allocatable(node) else { return false };
    let node_name = node.name_any();
    let uid = pod.uid();
    let (cpu, memory) = neighbours
        .iter()
        .filter(|other| other.uid() != uid && bound_to(other, &node_name) && is_counted(other))
        .map(pod_record::requests)
        .fold(pod_record::requests(pod), |(cpu, memory), (more_cpu, more_memory)| {
            (cpu.saturating_add(more_cpu), memory.saturating_add(more_memory))
        });
    cpu > cpu_offered || memory > memory_offered
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, node: Option<&str>, cpu: &str, leaving: bool, phase: &str) -> WatchedPod {
        // A finished pod's sandbox is gone unless said otherwise (`with_sandbox`).
        let sandbox = if phase == "Running" || phase == "Pending" { "True" } else { "False" };
        let mut pod: WatchedPod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "uid": format!("uid-{name}")},
            "spec": {"nodeName": node, "containers": [{"name": "main", "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}}}]},
            "status": {"phase": phase, "conditions": [{"type": "PodReadyToStartContainers", "status": sandbox}]}
        }))
        .unwrap();
        if leaving {
            pod.metadata.deletion_timestamp =
                Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(k8s_openapi::jiff::Timestamp::now()));
        }
        pod
    }

    /// The pod, finished, its sandbox not yet torn down.
    fn with_sandbox(mut pod: WatchedPod) -> WatchedPod {
        let conditions = pod.status.as_mut().and_then(|status| status.conditions.as_mut()).unwrap();
        conditions[0].status = "True".into();
        pod
    }

    fn node(cpu: &str) -> Node {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "n1"},
            "status": {"allocatable": {"cpu": cpu, "memory": "8Gi"}}
        }))
        .unwrap()
    }

    #[test]
    fn a_pod_waits_only_for_a_leaving_neighbour_that_holds_the_room_it_needs() {
        let new = pod("new", None, "1", false, "Pending");
        let going = pod("going", Some("n1"), "1", true, "Running");
        let staying = pod("staying", Some("n1"), "200m", false, "Running");
        let done = pod("done", Some("n1"), "1", true, "Succeeded");
        let finishing = with_sandbox(pod("finishing", Some("n1"), "1", false, "Succeeded"));
        let failed = pod("failed", Some("n1"), "1", false, "Failed");
        let elsewhere = pod("elsewhere", Some("n2"), "1", true, "Running");
        let job_ended = pod("job-ended", Some("n1"), "1", false, "Running");
        let live_job = |uid: &str| uid != "uid-job-ended";
        let leaving = |others: &[&WatchedPod]| {
            others.iter().find(|other| is_leaving(other, &new, "n1", live_job)).map(|p| p.name_any())
        };
        assert_eq!(leaving(&[&staying, &done, &failed, &elsewhere]), None, "nobody leaving n1");
        assert_eq!(leaving(&[&staying, &going]), Some("going".into()));
        assert_eq!(leaving(&[&staying, &finishing]), Some("finishing".into()), "finished, not yet torn down");
        assert_eq!(leaving(&[&staying, &job_ended]), Some("job-ended".into()), "running, its job gone");
        // (node CPUs, neighbours, overcommitted)
        let cases: [(&str, Vec<&WatchedPod>, bool); 8] = [
            ("2", vec![&going, &staying], true),
            ("2", vec![&job_ended, &staying], true),
            ("2", vec![&going], false),
            ("3", vec![&going, &staying], false),
            ("2", vec![&done, &staying], false),
            ("2", vec![&finishing, &staying], true),
            ("2", vec![&failed, &staying], false),
            ("1", vec![&elsewhere], false),
        ];
        for (cpus, neighbours, expected) in cases {
            let neighbours: Vec<WatchedPod> = neighbours.into_iter().cloned().collect();
            assert_eq!(overcommitted(&new, &node(cpus), &neighbours), expected, "{cpus} CPUs, {neighbours:?}");
        }
    }

    #[test]
    fn requests_are_the_containers_sum_or_the_largest_init_container() {
        let pod: WatchedPod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p"},
            "spec": {
                "initContainers": [{"name": "i", "resources": {"requests": {"cpu": "3", "memory": "1Gi"}}}],
                "containers": [{"name": "a", "resources": {"requests": {"cpu": "500m"}}},
                               {"name": "b", "resources": {"requests": {"cpu": "1", "memory": "2Gi"}}}]
            }
        }))
        .unwrap();
        assert_eq!(pod_record::requests(&pod), (3000, 2 << 30));
    }
}
