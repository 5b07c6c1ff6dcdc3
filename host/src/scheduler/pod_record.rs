//! Reduces a Kubernetes pod to the record the job-mapper policy reads.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::NodeSelectorRequirement as KubeRequirement;
use kube::ResourceExt;

use super::watched_pod::{Quantities, ResourceNeeds, WatchedPod};
use crate::kube::quantity;
use crate::policy::{self, KeyValue, NodeSelectorRequirement, SelectorOperator, Toleration};

pub const GPU_RESOURCE: &str = "nvidia.com/gpu";

/// Requests and limits summed the way the kubelet sizes a pod (`PodRequests` of Kubernetes's
/// resource helpers): the containers' sum, sidecars (init containers that restart `Always`) added to
/// it, or the largest init container with the sidecars started before it if that is bigger; pod-level
/// CPU and memory in place of the containers' when set; the pod overhead on top.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Resources {
    cpu_request_millis: u64,
    memory_request_bytes: u64,
    cpu_limit_millis: u64,
    memory_limit_bytes: u64,
    gpus: u64,
}

impl Resources {
    fn of(resources: Option<&ResourceNeeds>) -> Self {
        let requests = resources.and_then(|r| r.requests.as_ref());
        let limits = resources.and_then(|r| r.limits.as_ref());
        let get = |map: Option<&Quantities>, key: &str, parse: fn(&_) -> Option<u64>| {
            map.and_then(|map| map.get(key)).and_then(parse).unwrap_or(0)
        };
        let cpu_limit = get(limits, "cpu", quantity::millicores);
        let memory_limit = get(limits, "memory", quantity::units);
        // As in Kubernetes, a limit without a request is also the request; a request of zero is one.
        let request = |key: &str, parse: fn(&_) -> Option<u64>, limit: u64| {
            requests.and_then(|map| map.get(key)).map_or(limit, |amount| parse(amount).unwrap_or(0))
        };
        Self {
            cpu_request_millis: request("cpu", quantity::millicores, cpu_limit),
            memory_request_bytes: request("memory", quantity::units, memory_limit),
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

    fn plus(self, other: Self) -> Self {
        self.combine(other, u64::saturating_add)
    }

    fn of_pod(pod: &WatchedPod) -> Self {
        let Some(spec) = pod.spec.as_ref() else { return Self::default() };
        let mut total =
            spec.containers.iter().map(|c| Self::of(c.resources.as_ref())).fold(Self::default(), Self::plus);
        // Init containers start one after another; each sidecar keeps running from its start on.
        let (mut sidecars, mut init_peak) = (Self::default(), Self::default());
        for init in spec.init_containers.iter().flatten() {
            let own = Self::of(init.resources.as_ref());
            if init.restart_policy.as_deref() == Some("Always") {
                total = total.plus(own);
                sidecars = sidecars.plus(own);
                init_peak = init_peak.combine(sidecars, u64::max);
            } else {
                init_peak = init_peak.combine(own.plus(sidecars), u64::max);
            }
        }
        let mut pod = total.combine(init_peak, u64::max);
        if let Some(level) = spec.resources.as_ref() {
            pod = pod.with_pod_level(Self::of(Some(level)));
        }
        let overhead = spec.overhead.as_ref().map(|overhead| Self {
            cpu_request_millis: overhead.get("cpu").and_then(quantity::millicores).unwrap_or(0),
            memory_request_bytes: overhead.get("memory").and_then(quantity::units).unwrap_or(0),
            ..Self::default()
        });
        pod.plus(overhead.unwrap_or_default())
    }

    /// Pod-level resources (CPU and memory only) stand for the containers' where set; extended
    /// resources such as GPUs are always the containers'.
    fn with_pod_level(self, level: Self) -> Self {
        let or_own = |pod_level: u64, own: u64| if pod_level == 0 { own } else { pod_level };
        Self {
            cpu_request_millis: or_own(level.cpu_request_millis, self.cpu_request_millis),
            memory_request_bytes: or_own(level.memory_request_bytes, self.memory_request_bytes),
            cpu_limit_millis: or_own(level.cpu_limit_millis, self.cpu_limit_millis),
            memory_limit_bytes: or_own(level.memory_limit_bytes, self.memory_limit_bytes),
            gpus: self.gpus,
        }
    }
}

/// What a pod asks its Node for as the kubelet admits it, (CPU millicores, memory bytes): the
/// requests sized as above.
pub fn requests(pod: &WatchedPod) -> (u64, u64) {
    let (cpu, memory, _) = kubelet_counts(pod);
    (cpu, memory)
}

/// What the kubelet holds for the pod on its Node: (CPU millicores, memory bytes, GPUs).
pub fn kubelet_counts(pod: &WatchedPod) -> (u64, u64, u64) {
    let resources = Resources::of_pod(pod);
    (resources.cpu_request_millis, resources.memory_request_bytes, resources.gpus)
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

    /// (what, spec, (CPU millicores, memory MiB, GPUs) the kubelet counts)
    #[test]
    fn a_pod_is_sized_as_the_kubelet_sizes_it() {
        let needs = |cpu: &str, gpus: u32| serde_json::json!({"requests": {"cpu": cpu, "memory": "1Gi"}, "limits": {"nvidia.com/gpu": gpus}});
        let container =
            |name: &str, cpu: &str, gpus: u32| serde_json::json!({"name": name, "resources": needs(cpu, gpus)});
        let sidecar = |name: &str, cpu: &str, gpus: u32| serde_json::json!({"name": name, "restartPolicy": "Always", "resources": needs(cpu, gpus)});
        let cases = [
            (
                "containers summed",
                serde_json::json!({"containers": [container("a", "1", 1), container("b", "500m", 0)]}),
                (1500, 2048, 1),
            ),
            (
                "a sidecar's requests added to the containers'",
                serde_json::json!({"initContainers": [sidecar("s", "1", 1)], "containers": [container("a", "1", 1)]}),
                (2000, 2048, 2),
            ),
            (
                "an init container beside the sidecars started before it",
                serde_json::json!({
                    "initContainers": [sidecar("s", "1", 0), container("i", "2", 1)],
                    "containers": [container("a", "100m", 0)]
                }),
                (3000, 2048, 1),
            ),
            (
                "an init container before a sidecar is not counted beside it",
                serde_json::json!({
                    "initContainers": [container("i", "2", 0), sidecar("s", "1", 0)],
                    "containers": [container("a", "100m", 0)]
                }),
                (2000, 2048, 0),
            ),
            (
                "pod-level CPU and memory replace the containers'; GPUs stay theirs",
                serde_json::json!({
                    "resources": {"requests": {"cpu": "2", "memory": "3Gi"}},
                    "containers": [container("a", "100m", 1), {"name": "b"}]
                }),
                (2000, 3072, 1),
            ),
            (
                "pod-level limits alone are its requests",
                serde_json::json!({"resources": {"limits": {"cpu": "1500m"}}, "containers": [container("a", "100m", 0)]}),
                (1500, 1024, 0),
            ),
            (
                "the overhead on top",
                serde_json::json!({"overhead": {"cpu": "250m", "memory": "64Mi"}, "containers": [container("a", "1", 0)]}),
                (1250, 1088, 0),
            ),
        ];
        for (what, spec, (cpu, memory_mib, gpus)) in cases {
            let record = pod_record(&pod(serde_json::json!({"metadata": {"name": "p"}, "spec": spec})));
            let counted = (record.cpu_request_millis, record.memory_request_bytes >> 20, record.gpus);
            assert_eq!(counted, (cpu, memory_mib, gpus), "{what}");
        }
    }

    #[test]
    fn a_pod_without_requests_has_zero_requests() {
        let pod = pod(serde_json::json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "a"}]}}));
        let record = pod_record(&pod);
        assert_eq!((record.cpu_request_millis, record.memory_request_bytes), (0, 0));
        assert_eq!(record.termination_grace_seconds, 30);
    }
}
