//! sunk: one pool of compute for Slurm and Kubernetes.
//!
//! Each module has one job; the policy runtime knows nothing of Kubernetes and the Slurm client
//! knows nothing of policies. Controllers (`scheduler`, `nodeset`) talk to both through narrow types.

pub mod cli;
pub mod delivery;
mod failpoint;
pub mod http;
pub mod kube;
pub mod latency;
pub mod leader;
pub mod nodeset;
pub mod policy;
pub mod scheduler;
pub mod slurm;
pub mod syncer;
pub mod tls;
