//! What every NodeSet reconcile shares.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::runtime::reflector::Store;
use kube::{Client, Resource};

use super::blocking_jobs::BlockingJobs;
use super::reported_blocks::ReportedBlocks;
use super::resource::NodeSet;
use super::slurmd_pod::ClusterSettings;
use crate::kube::{EventRecorder, ReconcileMetrics};
use crate::policy::Policies;
use crate::slurm::{NodeCache, Slurm};

pub struct Context {
    pub client: Client,
    pub slurm: Arc<dyn Slurm>,
    /// Slurm's nodes, shared with the other controllers.
    pub slurm_nodes: NodeCache,
    pub policies: Arc<Policies>,
    pub cluster: ClusterSettings,
    pub kube_nodes: Store<Node>,
    /// Every NodeSet's slurmd pods.
    pub pods: Store<Pod>,
    pub nodesets: Store<NodeSet>,
    pub recorder: EventRecorder,
    pub blocking_jobs: BlockingJobs,
    pub reported_blocks: ReportedBlocks,
    pub metrics: ReconcileMetrics,
}

impl Context {
    /// Records an Event on the NodeSet; failing to is logged, never fatal.
    pub async fn publish(&self, nodeset: &NodeSet, warning: bool, reason: &str, action: &str, note: String) {
        self.recorder.publish(&nodeset.object_ref(&()), warning, reason, action, note).await;
    }
}
