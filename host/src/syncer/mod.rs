//! The Syncer: two-way state between Slurm nodes and the Kubernetes Nodes (and slurmd pods) that run
//! them.
//!
//! Kubernetes -> Slurm: causes on the Node (cordon, NotReady, watched problem conditions, the
//! `sunk.dev/drain` label) and a slurmd pod being deleted are shown to the `drain` policy, which
//! decides drain, resume or keep and the reason (`causes`, `decide`). Slurm -> Kubernetes: Slurm's
//! state as pod conditions, pod annotations and Node conditions (`mirror`). Both run in one pass per
//! Node (`reconcile`), on the Slurm node cache shared with the NodeSet controller.

mod causes;
mod context;
mod controller;
mod decide;
mod metrics;
#[cfg(test)]
mod middle_tier;
mod mirror;
mod own_writes;
mod reconcile;

pub use controller::{Config, run};
pub use metrics::SyncerMetrics;
