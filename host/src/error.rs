//! How a controller's pass over one object fails.

use std::sync::Arc;

use crate::policy::PolicyError;
use crate::slurm::SlurmError;

/// Why a pass of the scheduler, the Syncer or the NodeSet controller failed. One type for all three:
/// each fails on the same things, and each error policy only logs the error and tries the object
/// again.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Kube(#[from] kube::Error),
    #[error(transparent)]
    Slurm(#[from] SlurmError),
    /// A failure several pods share (one job array's submission).
    #[error(transparent)]
    SharedSlurm(Arc<SlurmError>),
    #[error("the policy decided nothing: {0}")]
    Policy(#[from] PolicyError),
    /// A NodeSet's slurmd pod is due on a Node that is no longer there.
    #[error("the Node {0} of a pod to create is gone")]
    NodeGone(String),
}
