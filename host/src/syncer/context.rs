//! What every Syncer pass shares.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::runtime::reflector::Store;

use super::metrics::SyncerMetrics;
use super::own_writes::OwnWrites;
use crate::kube::EventRecorder;
use crate::policy::Policies;
use crate::slurm::{NodeCache, Slurm};

pub struct Context {
    pub client: Client,
    pub slurm: Arc<dyn Slurm>,
    /// Slurm's nodes, shared with the other controllers.
    pub slurm_nodes: NodeCache,
    pub policies: Arc<Policies>,
    /// Every pod labelled with a Slurm node, in every namespace (or `--nodeset-namespace`'s): a
    /// claim until a NodeSet's control and the Slurm node's record back it.
    pub pods: Store<Pod>,
    pub recorder: EventRecorder,
    /// Node condition types (besides `Ready`) whose state is shown to the drain policy.
    pub watched_conditions: Vec<String>,
    pub metrics: SyncerMetrics,
    /// What the Syncer last wrote to each Slurm node, until a listing shows it.
    pub own_writes: OwnWrites,
}
