//! Whether a Node has room for a pod as its kubelet counts it. Slurm frees a node when the
//! placeholder ends; the kubelet counts a pod's requests until the pod is gone from it. A pod bound
//! in between, beside a pod still leaving the Node (deleted, its containers stopping or its sandbox
//! being torn down), is refused by the kubelet (`OutOfcpu`, `OutOfmemory`) and fails for good: the
//! chaos run saw 6 of 139 pods lost (docs/chaos.md). So the bind waits while such a pod holds the room.

use k8s_openapi::api::core::v1::{Container, Node, Pod, ResourceRequirements};
use kube::ResourceExt;

use crate::kube::quantity;

/// What a pod asks its Node for, as the kubelet admits it: the sum of its containers' requests, or
/// its largest init container's when that is more.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Demand {
    pub cpu_millis: u64,
    pub memory_bytes: u64,
}

impl Demand {
    pub fn of(pod: &Pod) -> Self {
        let Some(spec) = pod.spec.as_ref() else { return Self::default() };
        let sum = spec.containers.iter().map(Self::of_container).fold(Self::default(), Self::plus);
        let init = spec.init_containers.iter().flatten().map(Self::of_container).fold(Self::default(), Self::max);
        sum.max(init)
    }

    fn of_container(container: &Container) -> Self {
        let requests = container.resources.as_ref().and_then(|r: &ResourceRequirements| r.requests.as_ref());
        let read = |name: &str, scale: fn(&_) -> Option<u64>| requests.and_then(|r| r.get(name)).and_then(scale);
        Self {
            cpu_millis: read("cpu", quantity::millicores).unwrap_or_default(),
            memory_bytes: read("memory", quantity::units).unwrap_or_default(),
        }
    }

    fn plus(self, other: Self) -> Self {
        Self {
            cpu_millis: self.cpu_millis.saturating_add(other.cpu_millis),
            memory_bytes: self.memory_bytes.saturating_add(other.memory_bytes),
        }
    }

    fn max(self, other: Self) -> Self {
        Self {
            cpu_millis: self.cpu_millis.max(other.cpu_millis),
            memory_bytes: self.memory_bytes.max(other.memory_bytes),
        }
    }

    /// What the Node offers pods (its allocatable CPU and memory).
    fn allocatable(node: &Node) -> Option<Self> {
        let allocatable = node.status.as_ref()?.allocatable.as_ref()?;
        Some(Self {
            cpu_millis: allocatable.get("cpu").and_then(quantity::millicores)?,
            memory_bytes: allocatable.get("memory").and_then(quantity::units)?,
        })
    }
}

/// Succeeded or Failed: the kubelet no longer counts it.
fn is_terminal(pod: &Pod) -> bool {
    let phase = pod.status.as_ref().and_then(|status| status.phase.as_deref());
    matches!(phase, Some("Succeeded" | "Failed"))
}

fn bound_to(pod: &Pod, node: &str) -> bool {
    pod.spec.as_ref().and_then(|spec| spec.node_name.as_deref()) == Some(node)
}

/// A pod other than `pod` that is bound to `node` and leaving it (deleted, not yet terminal), if any.
pub fn leaving<'a>(pod: &Pod, node: &str, others: impl IntoIterator<Item = &'a Pod>) -> Option<String> {
    let uid = pod.uid();
    others
        .into_iter()
        .find(|other| {
            other.uid() != uid
                && bound_to(other, node)
                && other.metadata.deletion_timestamp.is_some()
                && !is_terminal(other)
        })
        .map(ResourceExt::name_any)
}

/// Whether `pod` would not fit on `node` beside `neighbours` (every pod bound to it), as the kubelet
/// counts: the requests of the ones not terminal, `pod` itself aside. A Node whose allocatable is
/// unknown fits: the kubelet decides.
pub fn overcommitted(pod: &Pod, node: &Node, neighbours: &[Pod]) -> bool {
    let Some(offered) = Demand::allocatable(node) else { return false };
    let node_name = node.name_any();
    let uid = pod.uid();
    let asked = neighbours
        .iter()
        .filter(|other| other.uid() != uid && bound_to(other, &node_name) && !is_terminal(other))
        .map(Demand::of)
        .fold(Demand::of(pod), Demand::plus);
    asked.cpu_millis > offered.cpu_millis || asked.memory_bytes > offered.memory_bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, node: Option<&str>, cpu: &str, leaving: bool, phase: &str) -> Pod {
        let mut pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "uid": format!("uid-{name}")},
            "spec": {"nodeName": node, "containers": [{"name": "main", "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}}}]},
            "status": {"phase": phase}
        }))
        .unwrap();
        if leaving {
            pod.metadata.deletion_timestamp =
                Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(k8s_openapi::jiff::Timestamp::now()));
        }
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
        let elsewhere = pod("elsewhere", Some("n2"), "1", true, "Running");
        assert_eq!(leaving(&new, "n1", [&staying, &done, &elsewhere]), None, "nobody leaving n1");
        assert_eq!(leaving(&new, "n1", [&staying, &going]), Some("going".into()));
        // (node CPUs, neighbours, overcommitted)
        let cases: [(&str, Vec<&Pod>, bool); 5] = [
            ("2", vec![&going, &staying], true),
            ("2", vec![&going], false),
            ("3", vec![&going, &staying], false),
            ("2", vec![&done, &staying], false),
            ("1", vec![&elsewhere], false),
        ];
        for (cpus, neighbours, expected) in cases {
            let neighbours: Vec<Pod> = neighbours.into_iter().cloned().collect();
            assert_eq!(overcommitted(&new, &node(cpus), &neighbours), expected, "{cpus} CPUs, {neighbours:?}");
        }
    }

    #[test]
    fn demand_is_the_containers_sum_or_the_largest_init_container() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p"},
            "spec": {
                "initContainers": [{"name": "i", "resources": {"requests": {"cpu": "3", "memory": "1Gi"}}}],
                "containers": [{"name": "a", "resources": {"requests": {"cpu": "500m"}}},
                               {"name": "b", "resources": {"requests": {"cpu": "1", "memory": "2Gi"}}}]
            }
        }))
        .unwrap();
        assert_eq!(Demand::of(&pod), Demand { cpu_millis: 3000, memory_bytes: 2 << 30 });
    }
}
