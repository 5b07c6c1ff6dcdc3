//! Which Kubernetes Node hosts a given Slurm node: the node of the slurmd pod labelled with it.

use k8s_openapi::api::core::v1::Pod;
use kube::runtime::reflector::Store;

/// Label on a slurmd pod whose value is the name of the Slurm node it runs.
pub const SLURM_NODE_LABEL: &str = "sunk.dev/slurm-node";

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
        self.store.state().iter().find_map(|pod| {
            let labelled = pod.metadata.labels.as_ref()?.get(SLURM_NODE_LABEL)? == slurm_node;
            let leaving = pod.metadata.deletion_timestamp.is_some();
            (labelled && !leaving).then(|| pod.spec.as_ref()?.node_name.clone())?
        })
    }
}
