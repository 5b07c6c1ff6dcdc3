//! sunk: one pool of compute for Slurm and Kubernetes.
//!
//! Each module has one job; the policy runtime knows nothing of Kubernetes and the Slurm client
//! knows nothing of policies. Controllers (`scheduler`, `nodeset`) talk to both through narrow types.

pub mod cli;
mod decisions;
pub mod delivery;
pub mod error;
mod failpoint;
pub mod heap;
pub mod http;
pub mod kube;
pub mod latency;
pub mod leader;
pub mod nodeset;
pub mod pool;
/// The WebAssembly policy runtime (the `sunk-policy-runtime` crate).
pub use sunk_policy_runtime as policy;
/// The Slurm client and node cache (the `sunk-slurm` crate), under the name the host's modules use.
pub use sunk_slurm as slurm;
pub mod scheduler;
pub mod syncer;
pub mod tenancy;
pub mod tls;
pub mod vocabulary;

/// The cores the host may use (2 when it cannot tell): policy decisions run one per core at a time,
/// and the allocator keeps an arena per core.
pub(crate) fn cores() -> usize {
    std::thread::available_parallelism().map_or(2, std::num::NonZeroUsize::get)
}
