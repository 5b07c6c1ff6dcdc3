//! Kubernetes plumbing shared by the controllers: connecting, resource quantities, and the few
//! writes a scheduler makes to a pod (binding, the PodScheduled condition, events, deletion).

mod connect;
mod pod_writer;
pub mod quantity;

pub use connect::connect;
pub use pod_writer::PodWriter;
