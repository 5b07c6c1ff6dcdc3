//! What the scheduler keeps of a pod: what it and its policies read, not what a kubelet needs to run
//! the pod. The watch decodes each pod straight into these types, so nothing else is ever built.
//! Kubernetes's own types are large even when empty (a `Pod` is 2.2 KB and each `Container` 2.1 KB
//! before any of their strings), and 10,000 waiting pods kept as trimmed `Pod`s take 44 MB of the
//! leader's heap (docs/benchmarks.md, scale-bench). The fields keep Kubernetes's names and shapes,
//! so reading one reads as reading a `Pod`. Nothing is ever written back from these: writes name
//! the pod, and the API server keeps the rest.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Affinity, ContainerState, PersistentVolumeClaimVolumeSource, Pod, PodCondition, Toleration,
    TopologySpreadConstraint,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A pod as the scheduler's watch keeps it.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
pub struct WatchedPod {
    #[serde(default)]
    pub metadata: ObjectMeta,
    pub spec: Option<PodNeeds>,
    pub status: Option<PodProgress>,
}

/// What of `spec` decides where the pod may run, what it asks for and how it yields.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodNeeds {
    #[serde(default)]
    pub containers: Vec<ContainerNeeds>,
    pub init_containers: Option<Vec<ContainerNeeds>>,
    /// Pod-level requests and limits (CPU and memory), which replace the containers' sum.
    pub resources: Option<ResourceNeeds>,
    pub overhead: Option<Quantities>,
    pub node_name: Option<String>,
    /// Who binds the pod: a pod of another scheduler is not held by a placeholder.
    pub scheduler_name: Option<String>,
    pub node_selector: Option<BTreeMap<String, String>>,
    /// Boxed: most pods have none, and an empty one is 144 bytes.
    pub affinity: Option<Box<Affinity>>,
    pub tolerations: Option<Vec<Toleration>>,
    /// How the pod and its like are to be spread over Nodes, zones or any Node label.
    pub topology_spread_constraints: Option<Vec<TopologySpreadConstraint>>,
    pub priority: Option<i32>,
    pub preemption_policy: Option<String>,
    pub termination_grace_period_seconds: Option<i64>,
    /// The pod's volumes, kept for the claims among them: where a claim's volume can be mounted
    /// limits where the pod may run (`volume_topology`).
    pub volumes: Option<Vec<VolumeNeeds>>,
}

/// A volume's name and, when it is a claim, which one.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct VolumeNeeds {
    #[serde(default)]
    pub name: String,
    pub persistent_volume_claim: Option<PersistentVolumeClaimVolumeSource>,
    /// A generic ephemeral volume: its claim, `<pod>-<volume>`, is made for the pod. Only that it is
    /// one is kept, not the claim's template.
    pub ephemeral: Option<Ephemeral>,
}

/// That a volume is a generic ephemeral one (any content is dropped as it is read).
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
pub struct Ephemeral {}

/// A container's name and what it asks for.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerNeeds {
    #[serde(default)]
    pub name: String,
    pub resources: Option<ResourceNeeds>,
    /// `Always` on an init container makes it a sidecar: it runs beside the containers, and the
    /// kubelet counts its requests on top of theirs.
    pub restart_policy: Option<String>,
}

/// A container's or the pod's requests and limits, as `ResourceRequirements` has them.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
pub struct ResourceNeeds {
    pub limits: Option<Quantities>,
    pub requests: Option<Quantities>,
}

/// A resource list (`{"cpu": "500m", "memory": "1Gi"}`) as a list of exactly its entries: a
/// `BTreeMap` sets aside room for eleven in its first node, 544 bytes for a container's two.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Quantities(Box<[(String, Quantity)]>);

impl Quantities {
    /// The amount of `resource` (`cpu`, `memory`, `nvidia.com/gpu`), if the list names it.
    pub fn get(&self, resource: &str) -> Option<&Quantity> {
        self.0.iter().find_map(|(name, amount)| (name == resource).then_some(amount))
    }
}

impl<'de> Deserialize<'de> for Quantities {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        // Read as Kubernetes's own type reads it (a repeated name keeps its last amount).
        let list = BTreeMap::<String, Quantity>::deserialize(deserializer)?;
        Ok(Self(list.into_iter().collect()))
    }
}

impl Serialize for Quantities {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.0.iter().map(|(name, amount)| (name, amount)))
    }
}

/// What of `status` tells whether the pod is scheduled, running or leaving.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodProgress {
    pub phase: Option<String>,
    pub reason: Option<String>,
    pub message: Option<String>,
    pub conditions: Option<Vec<PodCondition>>,
    pub container_statuses: Option<Vec<ContainerProgress>>,
}

/// A container's name and state.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
pub struct ContainerProgress {
    #[serde(default)]
    pub name: String,
    pub state: Option<ContainerState>,
}

impl k8s_openapi::Resource for WatchedPod {
    const API_VERSION: &'static str = Pod::API_VERSION;
    const GROUP: &'static str = Pod::GROUP;
    const KIND: &'static str = Pod::KIND;
    const VERSION: &'static str = Pod::VERSION;
    const URL_PATH_SEGMENT: &'static str = Pod::URL_PATH_SEGMENT;
    type Scope = k8s_openapi::NamespaceResourceScope;
}

impl k8s_openapi::Metadata for WatchedPod {
    type Ty = ObjectMeta;

    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn metadata_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

impl WatchedPod {
    /// What the pod needs of a node (an empty spec when it has none).
    pub fn needs(&self) -> &PodNeeds {
        static EMPTY: std::sync::OnceLock<PodNeeds> = std::sync::OnceLock::new();
        self.spec.as_ref().unwrap_or_else(|| EMPTY.get_or_init(Default::default))
    }

    /// The pod's condition of `type_` (`PodScheduled`, `PodReadyToStartContainers`), if it has one.
    pub fn condition(&self, type_: &str) -> Option<&PodCondition> {
        let conditions = self.status.as_ref()?.conditions.as_ref()?;
        conditions.iter().find(|condition| condition.type_ == type_)
    }
}

/// Drops what the watch decodes but nothing reads: the managed fields, most of a pod's metadata.
pub fn forget_managed_fields(pod: &mut WatchedPod) {
    pod.metadata.managed_fields = None;
}

/// Only the tests build a `WatchedPod` from a `Pod`: the host decodes the watch's JSON straight into it.
#[cfg(test)]
impl From<&Pod> for WatchedPod {
    /// The same pod as the watch would keep it: through its JSON, as the watch reads it.
    fn from(pod: &Pod) -> Self {
        let json = serde_json::to_value(pod).expect("a Pod is always JSON");
        let mut pod: WatchedPod = serde_json::from_value(json).expect("a WatchedPod reads any Pod");
        forget_managed_fields(&mut pod);
        pod
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn full_pod() -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {
                "name": "p", "namespace": "ns", "uid": "u1", "labels": {"app": "a"},
                "annotations": {"sunk.dev/qos": "high"},
                "managedFields": [{"manager": "kubectl", "operation": "Apply"}]
            },
            "spec": {
                "schedulerName": "sunk",
                "volumes": [
                    {"name": "token", "projected": {"sources": []}},
                    {"name": "data", "persistentVolumeClaim": {"claimName": "data-0"}},
                    {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {"accessModes": ["ReadWriteOnce"]}}}}
                ],
                "nodeSelector": {"disk": "ssd"},
                "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
                "topologySpreadConstraints": [{
                    "maxSkew": 1, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "DoNotSchedule",
                    "labelSelector": {"matchLabels": {"app": "a"}}
                }],
                "priority": 100,
                "terminationGracePeriodSeconds": 5,
                "initContainers": [{"name": "init", "resources": {"requests": {"cpu": "2"}}}],
                "containers": [{
                    "name": "main", "image": "busybox", "command": ["sleep"], "args": ["60"],
                    "env": [{"name": "A", "value": "1"}],
                    "volumeMounts": [{"name": "token", "mountPath": "/var/run"}],
                    "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"nvidia.com/gpu": "1"}},
                    "readinessProbe": {"exec": {"command": ["true"]}}
                }]
            },
            "status": {
                "phase": "Pending",
                "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]
            }
        }))
        .unwrap()
    }

    #[test]
    fn a_watched_pod_is_the_same_pod_to_the_policies() {
        let full = full_pod();
        let watched = WatchedPod::from(&full);
        let record = crate::scheduler::pod_record(&watched);
        assert_eq!((record.name.as_str(), record.namespace.as_str(), record.uid.as_str()), ("p", "ns", "u1"));
        assert_eq!((record.cpu_request_millis, record.memory_request_bytes, record.gpus), (2000, 1 << 30, 1));
        assert_eq!((record.node_selector.len(), record.tolerations.len()), (1, 1));
        assert_eq!((record.priority, record.termination_grace_seconds), (Some(100), 5));
        assert_eq!(watched.status.and_then(|status| status.conditions).map(|c| c.len()), Some(1));
        assert_eq!(watched.metadata.managed_fields, None);
        let spread = watched.spec.as_ref().and_then(|spec| spec.topology_spread_constraints.as_deref());
        assert_eq!(spread.map(|constraints| constraints[0].max_skew), Some(1));
        let volumes = watched.spec.as_ref().and_then(|spec| spec.volumes.as_deref()).unwrap_or_default();
        let claim = volumes[1].persistent_volume_claim.as_ref().map(|claim| claim.claim_name.as_str());
        assert_eq!(
            (claim, volumes[2].ephemeral.is_some(), volumes[0].ephemeral.is_some()),
            (Some("data-0"), true, false)
        );
    }

    #[test]
    fn a_resource_list_reads_and_writes_as_kubernetes_has_it() {
        let json = serde_json::json!({"cpu": "500m", "memory": "1Gi", "nvidia.com/gpu": "1"});
        let list: Quantities = serde_json::from_value(json.clone()).unwrap();
        assert_eq!(list.get("memory"), Some(&Quantity("1Gi".into())));
        assert_eq!(list.get("ephemeral-storage"), None);
        assert_eq!(serde_json::to_value(&list).unwrap(), json);
    }

    #[test]
    fn a_watched_pod_holds_far_less_than_a_pod() {
        // What each pod in the store costs before its strings: the struct and one container.
        let kept = size_of::<WatchedPod>() + size_of::<ContainerNeeds>();
        let whole = size_of::<Pod>() + size_of::<k8s_openapi::api::core::v1::Container>();
        assert!(kept * 4 < whole, "{kept} bytes kept for a {whole}-byte pod");
    }
}
