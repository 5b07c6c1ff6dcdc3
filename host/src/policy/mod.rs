//! The WebAssembly policy runtime: runs judgement calls in sandboxed components.
//!
//! It knows nothing of Kubernetes or Slurm: it loads components of the `sunk:policy` WIT package
//! (`wit/policy.wit`), checks what they import, and runs each decision in a fresh store with a memory
//! and a time limit. The record types below are generated from the WIT.

mod bundled;
mod engine;
mod error;
mod host;
mod imports;
mod job_mapper;

pub use engine::Limits;
pub use error::PolicyError;
pub use job_mapper::{
    Cluster, Exclusive, JobMapper, JobRequest, KeyValue, Mapping, NodeSelectorRequirement, Pod, Rejection,
    SelectorOperator, Toleration,
};
