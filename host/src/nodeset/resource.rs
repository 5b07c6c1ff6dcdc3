//! The `NodeSet` custom resource: which Kubernetes Nodes run a slurmd pod, and how that pod looks.

use std::borrow::Cow;
use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{NodeSelector, PodTemplateSpec, Toleration};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::CustomResource;
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};

/// One slurmd pod, a Slurm dynamic node, on every Kubernetes Node it selects (like a DaemonSet).
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, Default, JsonSchema)]
#[kube(
    group = "sunk.dev",
    version = "v1alpha1",
    kind = "NodeSet",
    namespaced,
    status = "NodeSetStatus",
    shortname = "nss",
    printcolumn = r#"{"name":"Desired","type":"integer","jsonPath":".status.desired","description":"Nodes that should run a slurmd pod"}"#,
    printcolumn = r#"{"name":"Current","type":"integer","jsonPath":".status.current","description":"Nodes that run one"}"#,
    printcolumn = r#"{"name":"Ready","type":"integer","jsonPath":".status.ready","description":"Nodes whose pod is ready"}"#,
    printcolumn = r#"{"name":"Updated","type":"integer","jsonPath":".status.updated","description":"Nodes whose pod is at the latest revision"}"#,
    printcolumn = r#"{"name":"Idle","type":"integer","jsonPath":".status.idle","description":"Slurm nodes IDLE"}"#,
    printcolumn = r#"{"name":"Allocated","type":"integer","jsonPath":".status.allocated","description":"Slurm nodes ALLOCATED"}"#,
    printcolumn = r#"{"name":"Mixed","type":"integer","jsonPath":".status.mixed","description":"Slurm nodes MIXED"}"#,
    printcolumn = r#"{"name":"Drained","type":"integer","jsonPath":".status.drained","description":"Slurm nodes with the DRAIN flag"}"#,
    printcolumn = r#"{"name":"Down","type":"integer","jsonPath":".status.down","description":"Slurm nodes DOWN"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct NodeSetSpec {
    /// Labels a Node must have (ANDed with the template's own `nodeSelector`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_selector: BTreeMap<String, String>,
    /// Required node affinity (`requiredDuringSchedulingIgnoredDuringExecution`): a Node must match one
    /// of the terms. ANDed with the template's own required node affinity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_affinity: Option<NodeSelector>,
    /// Taints these tolerate (with the template's and a DaemonSet's default tolerations); a Node with a
    /// NoSchedule or NoExecute taint tolerated by none gets no slurmd pod.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tolerations: Vec<Toleration>,
    /// The slurmd pod. The container named `slurmd` (else the first) gets the slurmd arguments, the
    /// `POD_IP` variable and the Slurm key; the host owns the pod's name, `nodeName` and labels below
    /// `sunk.dev/`, and its `hostname` when the template sets a `subdomain`: the Slurm node's name, so
    /// that `<node>.<subdomain>` resolves through a headless Service of that name.
    pub template: PodTemplate,
    /// Slurm features of the nodes; the NodeSet's name is always one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub features: Vec<String>,
    /// Partitions the nodes join. Dynamic nodes join partitions through features: each name here is
    /// also a feature, and slurm.conf maps it (`NodeSet=<p> Feature=<p>`, `PartitionName=<p> Nodes=<p>`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub partitions: Vec<String>,
    /// More `Key=Value` node parameters for `slurmd --conf`. A key the host sets (CPUs, RealMemory,
    /// Gres, NodeAddr, Topology) is replaced by this one; features go in `features`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extra_conf: Option<String>,
    /// Where in the network topology each node sits, from a Node label (Slurm 25.05+ `Topology=`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology: Option<TopologySpec>,
    #[serde(default)]
    pub update_strategy: UpdateStrategy,
    /// How long a drain may wait for running jobs before the NodeSet reports `UpdateBlocked` (e.g.
    /// `30m`, `1h30m`, `90s`; default `1h`). Nothing is forced unless `force` is true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^([0-9]+[smhd])+$"))]
    pub drain_timeout: Option<String>,
    /// Delete a pod whose Slurm node is still busy once `drainTimeout` has passed (kills its jobs).
    #[serde(default)]
    pub force: bool,
    /// Secret (in the NodeSet's namespace) whose key `slurm.key` is the cluster's auth key, mounted at
    /// `/etc/slurm/slurm.key`. Default: the host's `--slurm-key-secret`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slurm_key_secret: Option<String>,
}

/// A pod template, kept as the API server received it: checked by the host when it builds pods (a
/// mistake shows in the NodeSet's status), and schema-free so the CRD stays small enough for a
/// client-side `kubectl apply`.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq)]
#[serde(transparent)]
pub struct PodTemplate(pub serde_json::Value);

impl PodTemplate {
    /// The template as a `PodTemplateSpec`, or what is wrong with it.
    pub fn parse(&self) -> Result<PodTemplateSpec, String> {
        serde_json::from_value(self.0.clone()).map_err(|error| error.to_string())
    }
}

impl From<PodTemplateSpec> for PodTemplate {
    fn from(template: PodTemplateSpec) -> Self {
        Self(serde_json::to_value(template).unwrap_or_default())
    }
}

impl JsonSchema for PodTemplate {
    fn schema_name() -> Cow<'static, str> {
        "PodTemplate".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "A PodTemplateSpec, as in a DaemonSet.",
            "type": "object",
            "x-kubernetes-preserve-unknown-fields": true,
        })
    }
}

/// `Topology=<name>:<value of label>` on each node whose Node has the label.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TopologySpec {
    /// The Node label whose value is the node's topology unit (e.g. its leaf switch or block).
    pub label: String,
    /// The Slurm topology the unit belongs to (`topology.yaml`); default `default`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpdateStrategy {
    #[serde(default, rename = "type")]
    pub type_: UpdateStrategyType,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rolling_update: Option<RollingUpdate>,
}

#[derive(Deserialize, Serialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum UpdateStrategyType {
    /// Replace outdated pods, each only once its Slurm node is drained and idle.
    #[default]
    RollingUpdate,
    /// Replace a pod only when someone deletes it.
    OnDelete,
}

#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RollingUpdate {
    /// How many selected Nodes may be without an available slurmd at once during an update: a count,
    /// or a percentage of the desired Nodes rounded up (at least 1). Default 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_unavailable: Option<IntOrString>,
    /// Canary: only Nodes whose ordinal (their place when sorted by name, from 0) is at least this are
    /// updated. Default 0 (all).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub partition: Option<i32>,
}

/// What the host made of the NodeSet.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeSetStatus {
    /// Nodes that should run a slurmd pod of this NodeSet.
    #[serde(default)]
    pub desired: i32,
    /// Of those, Nodes running one (not being deleted).
    #[serde(default)]
    pub current: i32,
    /// Of those, Nodes whose pod is ready.
    #[serde(default)]
    pub ready: i32,
    /// Of those, Nodes whose pod is at the update revision.
    #[serde(default)]
    pub updated: i32,
    /// Slurm nodes of this NodeSet by base state (IDLE / ALLOCATED / MIXED / DOWN), and with the DRAIN
    /// flag; kept from the last time Slurm could be read.
    #[serde(default)]
    pub idle: i32,
    #[serde(default)]
    pub allocated: i32,
    #[serde(default)]
    pub mixed: i32,
    #[serde(default)]
    pub drained: i32,
    #[serde(default)]
    pub down: i32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// The revision most current pods run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_revision: Option<String>,
    /// The revision pods are updated to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update_revision: Option<String>,
    /// `Available`, `Progressing` (reason `InvalidSpec` names a bad field), `UpdateBlocked` (naming the
    /// jobs), `NodeConflict`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

#[cfg(test)]
mod tests {
    use kube::CustomResourceExt;

    use super::*;

    #[test]
    fn the_crd_is_small_enough_for_a_client_side_apply() {
        let yaml = serde_saphyr::to_string(&NodeSet::crd()).unwrap();
        // kubectl's last-applied annotation is limited to 256 KiB.
        assert!(yaml.len() < 200 * 1024, "{} bytes", yaml.len());
        assert!(yaml.contains("x-kubernetes-preserve-unknown-fields: true"));
    }

    #[test]
    fn reads_a_nodeset_as_users_write_it() {
        let yaml = r#"
apiVersion: sunk.dev/v1alpha1
kind: NodeSet
metadata: {name: gpu, namespace: slurm}
spec:
  nodeSelector: {pool: gpu}
  tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
  features: [h100]
  partitions: [batch]
  updateStrategy: {type: RollingUpdate, rollingUpdate: {maxUnavailable: 25%, partition: 1}}
  drainTimeout: 30m
  template:
    spec:
      containers: [{name: slurmd, image: localhost/sunk/slurmd:26.05}]
"#;
        let nodeset: NodeSet = serde_saphyr::from_str(yaml).unwrap();
        assert_eq!(nodeset.spec.node_selector["pool"], "gpu");
        let rolling = nodeset.spec.update_strategy.rolling_update.unwrap();
        assert_eq!(rolling.max_unavailable, Some(IntOrString::String("25%".into())));
        assert_eq!(rolling.partition, Some(1));
        assert_eq!(nodeset.spec.template.parse().unwrap().spec.unwrap().containers[0].name, "slurmd");
    }
}
