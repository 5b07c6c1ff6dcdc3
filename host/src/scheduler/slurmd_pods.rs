//! Which Kubernetes Node hosts a given Slurm node: the node of the slurmd pod labelled with it, when
//! that pod is what it claims to be.
//!
//! Anyone who may create a pod may label it `sunk.dev/slurm-node`, so the label alone is a claim, not
//! authority. A slurmd pod is believed only when a NodeSet controls it and the Slurm node it names
//! records that pod (namespace and UID) in its comment: the comment is written by the NodeSet
//! controller through slurmrestd, and only Slurm's administrators can change it.

use std::collections::HashMap;

use k8s_openapi::api::core::v1::Pod;
use kube::runtime::reflector::Store;

use crate::nodeset::SlurmNodeOwner;
use crate::slurm::{NodeCache, NodeSnapshot};
pub use crate::vocabulary::SLURM_NODE_LABEL;

/// A cached view of the slurmd pods, checked against the Slurm nodes that record them.
#[derive(Clone)]
pub struct SlurmdPods {
    store: Store<Pod>,
    slurm_nodes: NodeCache,
}

impl SlurmdPods {
    pub fn new(store: Store<Pod>, slurm_nodes: NodeCache) -> Self {
        Self { store, slurm_nodes }
    }

    /// The Kubernetes Node running the slurmd of `slurm_node`, unless that pod is unbound, leaving,
    /// or not the one the Slurm node records (or Slurm's nodes cannot be read now).
    pub fn kube_node_of(&self, slurm_node: &str) -> Option<String> {
        let snapshot = self.slurm_nodes.snapshot().ok()?;
        self.store
            .state()
            .iter()
            .find_map(|pod| host_of(pod, &snapshot).filter(|(slurm, _)| slurm == slurm_node))
            .map(|(_, kube)| kube)
    }

    /// Every Slurm node with a believed slurmd pod, and the Kubernetes Node it runs on (none while
    /// Slurm's nodes cannot be read).
    pub fn kube_nodes(&self) -> HashMap<String, String> {
        let Ok(snapshot) = self.slurm_nodes.snapshot() else {
            return HashMap::new();
        };
        self.store.state().iter().filter_map(|pod| host_of(pod, &snapshot)).collect()
    }
}

/// (Slurm node, Kubernetes Node) of a bound slurmd pod that is not being deleted and is believed.
fn host_of(pod: &Pod, slurm_nodes: &NodeSnapshot) -> Option<(String, String)> {
    if pod.metadata.deletion_timestamp.is_some() {
        return None;
    }
    let slurm_node = pod.metadata.labels.as_ref()?.get(SLURM_NODE_LABEL)?;
    let recorded = SlurmNodeOwner::from_comment(&slurm_nodes.get(slurm_node)?.comment)?;
    believed(pod, &recorded).then(|| Some((slurm_node.clone(), pod.spec.as_ref()?.node_name.clone()?)))?
}

/// Whether `pod` is the slurmd pod `recorded` names, controlled by a NodeSet.
fn believed(pod: &Pod, recorded: &SlurmNodeOwner) -> bool {
    recorded.names(pod)
}

#[cfg(test)]
mod tests {
    use std::time::SystemTime;

    use serde_json::json;

    use super::*;

    fn recorded() -> SlurmNodeOwner {
        SlurmNodeOwner {
            namespace: "slurm".into(),
            pod: "gpu-kube-node-1".into(),
            node: "kube-node-1".into(),
            nodeset: "gpu".into(),
            uid: "pod-uid".into(),
            nodeset_uid: "nodeset-uid".into(),
        }
    }

    fn pod(namespace: &str, uid: &str, owner: serde_json::Value) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "gpu-kube-node-1", "namespace": namespace, "uid": uid,
                         "labels": {SLURM_NODE_LABEL: "slurm-1"}, "ownerReferences": [owner]},
            "spec": {"nodeName": "kube-node-1", "containers": []},
        }))
        .expect("a pod")
    }

    fn nodeset(name: &str, controller: bool) -> serde_json::Value {
        json!({"apiVersion": "sunk.dev/v1alpha1", "kind": "NodeSet", "name": name, "uid": "nodeset-uid", "controller": controller})
    }

    #[test]
    fn only_the_nodeset_pod_the_slurm_node_records_is_believed() {
        let genuine = pod("slurm", "pod-uid", nodeset("gpu", true));
        assert!(believed(&genuine, &recorded()));
        let impostors = [
            (
                "a user's pod with the label",
                pod("ml", "other-uid", json!({"apiVersion": "v1", "kind": "ConfigMap", "name": "x", "uid": "x"})),
            ),
            ("another namespace, the same uid", pod("ml", "pod-uid", nodeset("gpu", true))),
            ("a NodeSet pod the node does not record", pod("slurm", "other-uid", nodeset("gpu", true))),
            ("owned, not controlled", pod("slurm", "pod-uid", nodeset("gpu", false))),
            ("another NodeSet's", pod("slurm", "pod-uid", nodeset("cpu", true))),
        ];
        for (what, impostor) in impostors {
            assert!(!believed(&impostor, &recorded()), "{what}");
        }
    }

    #[test]
    fn a_slurm_node_without_a_recorded_owner_has_no_believed_pod() {
        let genuine = pod("slurm", "pod-uid", nodeset("gpu", true));
        let node = |comment: &str| crate::slurm::Node {
            name: "slurm-1".into(),
            comment: comment.into(),
            ..Default::default()
        };
        let with = |comment: &str| NodeSnapshot::new([node(comment)], SystemTime::now());
        assert_eq!(host_of(&genuine, &with(&recorded().to_comment())), Some(("slurm-1".into(), "kube-node-1".into())));
        assert_eq!(host_of(&genuine, &with("")), None, "not yet recorded by the NodeSet controller");
        assert_eq!(host_of(&genuine, &with("rack 4")), None);
        assert_eq!(host_of(&genuine, &NodeSnapshot::new([], SystemTime::now())), None, "unknown to Slurm");
    }
}
