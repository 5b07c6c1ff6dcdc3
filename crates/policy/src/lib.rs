//! The WebAssembly policy runtime: runs judgement calls in sandboxed components.
//!
//! It knows nothing of Kubernetes or Slurm (Cargo enforces it: this crate depends on neither): it loads
//! components of the `sunk:policy` WIT package (`wit/policy.wit`), checks what they import, runs each
//! decision in a fresh store with a memory limit and a fuel budget (a wall-clock backstop behind it),
//! and swaps modules atomically. The record types below are generated from the WIT.

mod bindings;
mod bundled;
mod decision_point;
mod engine;
mod error;
mod host;
mod imports;
mod metrics;
mod module;
mod preamble;
mod world;
pub mod worlds;

use anyhow::Result;

pub use bindings::common::KeyValue;
pub use bindings::drain_types::{
    Condition, ConditionChange, Cordon, DrainDecision, LabelChange, NodeAction, NodeContext, NodeEvent, PodTermination,
    SlurmStateChange,
};
pub use bindings::job_types::{
    Cluster, Exclusive, JobRequest, Mapping, NodeSelectorRequirement, Pod, Rejection, SelectorOperator, Toleration,
};
pub use bindings::preemption_types::{
    Candidate, Node, PreemptMode, PreemptionDecision, Preemptor, Victim, WorkloadKind,
};
pub use decision_point::{AnyDecisionPoint, DecisionPoint, Live, OnFailure, Source};
pub use engine::Limits;
/// The state of a decision's store; opaque, named only by [`World`]'s wasm-facing methods.
#[doc(hidden)]
pub use engine::StoreState;
pub use error::PolicyError;
pub use metrics::{Outcome, PolicyMetrics};
pub use module::{Compiled, Module, sha256_hex};
pub use world::World;
pub use worlds::{DrainWorld, JobMapperWorld, PreemptionWorld};

#[cfg(test)]
mod abuse_tests;
#[cfg(test)]
mod budget_tests;
#[cfg(test)]
mod job_mapper_properties;

/// A loaded job-mapper module.
pub type JobMapper = Module<JobMapperWorld>;

/// The three decision points of a host.
pub struct Policies {
    pub job_mapper: DecisionPoint<JobMapperWorld>,
    pub preemption: DecisionPoint<PreemptionWorld>,
    pub drain: DecisionPoint<DrainWorld>,
    pub metrics: PolicyMetrics,
}

/// What each decision point does when its live module fails.
#[derive(Debug, Clone, Copy, Default)]
pub struct FailureModes {
    pub job_mapper: OnFailure,
    pub preemption: OnFailure,
    pub drain: OnFailure,
}

impl Policies {
    /// Every decision point running its bundled default.
    pub fn bundled(on_failure: FailureModes) -> Result<Policies> {
        let metrics = PolicyMetrics::default();
        Ok(Policies {
            job_mapper: DecisionPoint::bundled(on_failure.job_mapper, metrics.clone())?,
            preemption: DecisionPoint::bundled(on_failure.preemption, metrics.clone())?,
            drain: DecisionPoint::bundled(on_failure.drain, metrics.clone())?,
            metrics,
        })
    }

    /// The decision point named like its WIT world (`job-mapper`, `preemption`, `drain`).
    pub fn point(&self, decision: &str) -> Option<&dyn AnyDecisionPoint> {
        let points: [&dyn AnyDecisionPoint; 3] = [&self.job_mapper, &self.preemption, &self.drain];
        points.into_iter().find(|point| point.decision() == decision)
    }
}
