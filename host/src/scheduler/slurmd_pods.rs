//! Which Kubernetes Node hosts a given Slurm node: the node of the slurmd pod labelled with it.

use std::collections::HashMap;

use k8s_openapi::api::core::v1::Pod;
use kube::runtime::reflector::Store;

pub use crate::vocabulary::SLURM_NODE_LABEL;

/// A cached view of the slurmd pods.
#[derive(Clone)]
pub struct SlurmdPods {
    store: Store<Pod>,
}

impl SlurmdPods {
    pub fn new(store: Store<Pod>) -> Self {
        Self { store }
    }

    /// The Kubernetes Node running the slurmd of `slurm_node`, unless that pod is unbound or leaving.
    pub fn kube_node_of(&self, slurm_node: &str) -> Option<String> {
        self.store
            .state()
            .iter()
            .find_map(|pod| host_of(pod).filter(|(slurm, _)| slurm == slurm_node).map(|(_, kube)| kube))
    }

    /// Every Slurm node with a bound slurmd pod that is not leaving, and the Kubernetes Node it runs on.
    pub fn kube_nodes(&self) -> HashMap<String, String> {
        self.store.state().iter().filter_map(|pod| host_of(pod)).collect()
    }
}

/// (Slurm node, Kubernetes Node) of a bound slurmd pod that is not being deleted.
fn host_of(pod: &Pod) -> Option<(String, String)> {
    if pod.metadata.deletion_timestamp.is_some() {
        return None;
    }
    let slurm_node = pod.metadata.labels.as_ref()?.get(SLURM_NODE_LABEL)?.clone();
    Some((slurm_node, pod.spec.as_ref()?.node_name.clone()?))
}
