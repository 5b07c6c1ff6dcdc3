//! Reduces a Kubernetes pod to the record the job-mapper policy reads.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::NodeSelectorRequirement as KubeRequirement;
use kube::ResourceExt;

use super::watched_pod::{ContainerNeeds, WatchedPod};
use crate::kube::quantity;
use crate::policy::{self, KeyValue, NodeSelectorRequirement, SelectorOperator, Toleration};

pub const GPU_RESOURCE: &str = "nvidia.com/gpu";

/// Requests and limits summed the way Kubernetes sizes a pod: the containers' sum, or the
/// largest init container if that is bigger, plus the pod overhead.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Resources {
    cpu_request_millis: u64,
    memory_request_bytes: u64,
    cpu_limit_millis: u64,
    memory_limit_bytes: u64,
    gpus: u64,
}

impl Resources {
    fn of(container: &ContainerNeeds) -> Self {
        let resources = container.resources.as_ref();
        let requests = resources.and_then(|r| r.requests.as_ref());
        let limits = resources.and_then(|r| r.limits.as_ref());
        let get = |map: Option<&BTreeMap<_, _>>, key: &str, parse: fn(&_) -> Option<u64>| {
            map.and_then(|map| map.get(key)).and_then(parse).unwrap_or(0)
        };
        let cpu_limit = get(limits, "cpu", quantity::millicores);
        let memory_limit = get(limits, "memory", quantity::units);
        // As in Kubernetes, a limit without a request is also the request.
        let or_limit = |request: u64, limit: u64| if request == 0 { limit } else { request };
        Self {
            cpu_request_millis: or_limit(get(requests, "cpu", quantity::millicores), cpu_limit),
            memory_request_bytes: or_limit(get(requests, "memory", quantity::units), memory_limit),
            cpu_limit_millis: cpu_limit,
            memory_limit_bytes: memory_limit,
            gpus: get(limits, GPU_RESOURCE, quantity::units).max(get(requests, GPU_RESOURCE, quantity::units)),
        }
    }

    fn combine(self, other: Self, op: fn(u64, u64) -> u64) -> Self {
        Self {
            cpu_request_millis: op(self.cpu_request_millis, other.cpu_request_millis),
            memory_request_bytes: op(self.memory_request_bytes, other.memory_request_bytes),
            cpu_limit_millis: op(self.cpu_limit_millis, other.cpu_limit_millis),
            memory_limit_bytes: op(self.memory_limit_bytes, other.memory_limit_bytes),
            gpus: op(self.gpus, other.gpus),
        }
    }

    fn of_pod(pod: &WatchedPod) -> Self {
        let Some(spec) = pod.spec.as_ref() else { return Self::default() };
        let sum = spec.containers.iter().map(Self::of).fold(Self::default(), |a, b| a.combine(b, u64::saturating_add));
        let init =
            spec.init_containers.iter().flatten().map(Self::of).fold(Self::default(), |a, b| a.combine(b, u64::max));
        let overhead = spec.overhead.as_ref().map(|overhead| Self {
            cpu_request_millis: overhead.get("cpu").and_then(quantity::millicores).unwrap_or(0),
            memory_request_bytes: overhead.get("memory").and_then(quantity::units).unwrap_or(0),
            ..Self::default()
        });
        sum.combine(init, u64::max).combine(overhead.unwrap_or_default(), u64::saturating_add)
    }
}

/// What a pod asks its Node for as the kubelet admits it, (CPU millicores, memory bytes): the
/// requests sized as above.
pub fn requests(pod: &WatchedPod) -> (u64, u64) {
    let resources = Resources::of_pod(pod);
    (resources.cpu_request_millis, resources.memory_request_bytes)
}

fn pairs(map: &BTreeMap<String, String>) -> Vec<KeyValue> {
    map.iter().map(|(key, value)| KeyValue { key: key.clone(), value: value.clone() }).collect()
}

fn requirement(kube: &KubeRequirement) -> NodeSelectorRequirement {
    let operator = match kube.operator.as_str() {
        "NotIn" => SelectorOperator::NotIn,
        "Exists" => SelectorOperator::Exists,
        "DoesNotExist" => SelectorOperator::DoesNotExist,
        "Gt" => SelectorOperator::Gt,
        "Lt" => SelectorOperator::Lt,
        _ => SelectorOperator::In,
    };
    NodeSelectorRequirement { key: kube.key.clone(), operator, values: kube.values.clone().unwrap_or_default() }
}

/// The policy's view of a pod.
pub fn pod_record(pod: &WatchedPod) -> policy::Pod {
    let resources = Resources::of_pod(pod);
    let spec = pod.spec.as_ref();
    let required_terms = spec
        .and_then(|spec| spec.affinity.as_ref())
        .and_then(|affinity| affinity.node_affinity.as_ref())
        .and_then(|node| node.required_during_scheduling_ignored_during_execution.as_ref())
        .map(|selector| selector.node_selector_terms.as_slice())
        .unwrap_or_default();
    policy::Pod {
        namespace: pod.namespace().unwrap_or_default(),
        name: pod.name_any(),
        uid: pod.uid().unwrap_or_default(),
        labels: pairs(pod.labels()),
        annotations: pairs(pod.annotations()),
        cpu_request_millis: resources.cpu_request_millis,
        memory_request_bytes: resources.memory_request_bytes,
        cpu_limit_millis: resources.cpu_limit_millis,
        memory_limit_bytes: resources.memory_limit_bytes,
        gpus: u32::try_from(resources.gpus).unwrap_or(u32::MAX),
        node_selector: spec.and_then(|spec| spec.node_selector.as_ref()).map(pairs).unwrap_or_default(),
        required_node_affinity: required_terms
            .iter()
            .map(|term| term.match_expressions.iter().flatten().map(requirement).collect())
            .collect(),
        tolerations: spec
            .and_then(|spec| spec.tolerations.as_ref())
            .into_iter()
            .flatten()
            .map(|t| Toleration {
                key: t.key.clone().unwrap_or_default(),
                operator: t.operator.clone().unwrap_or_else(|| "Equal".into()),
                value: t.value.clone().unwrap_or_default(),
                effect: t.effect.clone().unwrap_or_default(),
            })
            .collect(),
        priority: spec.and_then(|spec| spec.priority),
        termination_grace_seconds: spec
            .and_then(|spec| spec.termination_grace_period_seconds)
            .map_or(30, |seconds| u64::try_from(seconds).unwrap_or(0)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(json: serde_json::Value) -> WatchedPod {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn sums_containers_and_takes_the_largest_init_container() {
        let pod = pod(serde_json::json!({
            "metadata": {"name": "p", "namespace": "ns", "uid": "u1", "annotations": {"sunk.dev/qos": "high"}},
            "spec": {
                "initContainers": [{"name": "i", "resources": {"requests": {"cpu": "3", "memory": "1Gi"}}}],
                "containers": [
                    {"name": "a", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"nvidia.com/gpu": "2"}}},
                    {"name": "b", "resources": {"limits": {"cpu": "1", "memory": "512Mi"}}}
                ],
                "terminationGracePeriodSeconds": 10
            }
        }));
        let record = pod_record(&pod);
        assert_eq!(record.cpu_request_millis, 3000);
        assert_eq!(record.memory_request_bytes, (1024 + 512) * 1024 * 1024);
        assert_eq!(record.cpu_limit_millis, 1000);
        assert_eq!(record.gpus, 2);
        assert_eq!(record.termination_grace_seconds, 10);
        assert_eq!(record.annotations[0].key, "sunk.dev/qos");
    }

    #[test]
    fn a_pod_without_requests_has_zero_requests() {
        let pod = pod(serde_json::json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "a"}]}}));
        let record = pod_record(&pod);
        assert_eq!((record.cpu_request_millis, record.memory_request_bytes), (0, 0));
        assert_eq!(record.termination_grace_seconds, 30);
    }
}
