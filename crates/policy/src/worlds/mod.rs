//! The decision points, one WIT world each.

mod drain;
mod job_mapper;
mod preemption;

pub use drain::{DrainWorld, NodeEventInput};
pub use job_mapper::{JobMapperWorld, MapPodInput};
pub use preemption::{ChooseVictimsInput, PreemptionWorld};
