//! sunk's bundled job-mapper policy: turns a pod that names sunk as its scheduler into the Slurm job
//! that holds its place, or into a rejection that tells the pod's owner what to fix.
//!
//! The mapping itself lives in plain functions over the generated WIT records ([`mapping::map_pod`]),
//! so it is unit-tested natively; this file is only the glue to the `job-mapper` world.

mod affinity;
mod annotations;
pub mod mapping;

wit_bindgen::generate!({
    world: "job-mapper",
    path: "../../wit",
    // Serde lets the native benchmark feed it the host's records.
    additional_derives: [serde::Serialize, serde::Deserialize],
});

// The world's `use job-types.{pod, cluster, mapping}` puts `Pod`, `Cluster` and `Mapping` here.
use sunk::policy::host::{self, LogLevel};

struct Policy;

impl Guest for Policy {
    fn map_pod(pod: Pod, cluster: Cluster) -> Mapping {
        report_panics_to_host();
        // The host logs every decision with a summary of its input and output.
        mapping::map_pod(&pod, &cluster)
    }
}

export!(Policy);

/// Policies are built with `panic = "abort"`: the host only sees a trap, so hand it the panic message
/// through the log first.
fn report_panics_to_host() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        std::panic::set_hook(Box::new(|info| {
            host::log(LogLevel::Error, &format!("job-mapper panicked: {info}"));
        }));
    });
}
