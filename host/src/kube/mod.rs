//! Kubernetes plumbing shared by the controllers: connecting, resource quantities, and the few
//! writes a scheduler makes to a pod (binding, the PodScheduled condition, events, deletion).

mod connect;
mod deadline;
mod events;
#[cfg(test)]
pub(crate) mod fake_api;
mod gone;
#[cfg(test)]
pub(crate) mod mock_api;
mod namespaces_watch;
pub mod node_match;
mod one_line;
mod pod_writer;
pub mod quantity;
mod reconcile_metrics;
mod served;

pub use connect::{connect, connect_fenced, connect_without_retries};
pub use events::EventRecorder;
pub use gone::{gone_is_done, gone_or_replaced_is_done, is_gone, is_gone_or_replaced};
pub use namespaces_watch::watch_namespaces;
pub use one_line::{MESSAGE_LIMIT, one_line, one_line_within};
pub use pod_writer::PodWriter;
pub use reconcile_metrics::ReconcileMetrics;
pub use served::wait_until_served;
