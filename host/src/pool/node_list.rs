//! The Slurm Nodes, named for admission: a ConfigMap of the host's whose keys are the Nodes that run
//! a slurmd pod, which the chart's ValidatingAdmissionPolicy reads as its parameter to refuse pods
//! created on such a Node by name (`spec.nodeName`), past any scheduler and any taint. Admission
//! cannot look at Nodes or pods itself; this is the one object it may read.
//!
//! The list is written whole, only when it changes, by server-side apply: Nodes that no longer run
//! slurmd leave it. Like the taints, it is not touched while Slurm's nodes cannot be read.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client};
use serde_json::json;

/// Where the list is kept.
#[derive(Debug, Clone)]
pub struct NodeList {
    pub namespace: String,
    pub name: String,
}

impl NodeList {
    /// Writes `nodes` as the list's keys (each with an empty value).
    pub async fn write(&self, client: &Client, nodes: &BTreeSet<String>) -> kube::Result<()> {
        let data: serde_json::Map<String, serde_json::Value> =
            nodes.iter().map(|node| (node.clone(), json!(""))).collect();
        let list = json!({"apiVersion": "v1", "kind": "ConfigMap", "data": data});
        let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), &self.namespace);
        let apply = PatchParams::apply("sunk-pool").force();
        config_maps.patch(&self.name, &apply, &Patch::Apply(list)).await.map(drop)
    }
}
