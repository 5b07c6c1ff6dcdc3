//! The NodeSet controller: one slurmd pod, a Slurm dynamic node, on every Kubernetes Node a
//! `NodeSet` selects; updates and scale-down that never kill a running job.
//!
//! The planner (`planner`) is pure and decides everything from one observation; the reconciler
//! gathers that observation (`targets`, `observed`, Slurm's node cache), carries the steps out
//! (`executor`) and reports (`status`). Drain reasons come from the `drain` policy.

mod blocking_jobs;
mod claims;
mod context;
mod controller;
mod drain_reason;
mod executor;
#[cfg(test)]
mod middle_tier;
mod naming;
mod observed;
mod owner;
mod plan;
mod planner;
mod reconcile;
mod reported_blocks;
mod resource;
mod rollout;
mod selection;
mod settings;
#[cfg(test)]
mod settings_properties;
mod slurmd_conf;
mod slurmd_pod;
mod status;
mod targets;

pub use claims::NodeSetKey;
pub use controller::{Config, run};
pub use drain_reason::node_context;
pub use naming::{
    CONF_ANNOTATION, DRAIN_REASON_ANNOTATION, DRAIN_SINCE_ANNOTATION, NODESET_FINALIZER, NODESET_LABEL, REVISION_LABEL,
    SLURM_NODE_LABEL, pod_name, slurm_node_name,
};
pub use owner::{SlurmNodeOwner, controlling_nodeset};
pub use resource::{
    NodeSet, NodeSetSpec, NodeSetStatus, PodTemplate, RollingUpdate, TopologySpec, UpdateStrategy, UpdateStrategyType,
};
pub use settings::{SpecErrors, settings};
pub use slurmd_pod::{ClusterSettings, SLURMD_CONTAINER};
