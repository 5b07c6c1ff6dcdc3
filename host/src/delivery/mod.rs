//! Delivers policy modules to the decision points: from `PolicyModule` resources and from a directory.
//!
//! This is the Kubernetes side of policies; the runtime itself (`crate::policy`) knows nothing of it.
//! A PolicyModule beats a file: the directory is only applied to a decision point whose live module
//! did not come from a PolicyModule. Every replica loads PolicyModules ([`load`]); the leader reports
//! on them ([`report`]).

mod directory;
mod fetch;
mod loader;
mod loads;
mod reporter;
mod resource;
mod status;

pub use directory::watch as watch_directory;
pub use loader::run as load;
pub use loads::Loads;
pub use reporter::run as report;
pub use resource::{Decision, KeyRef, ModuleSource, PolicyModule, PolicyModuleSpec, PolicyModuleStatus};

use std::sync::Arc;

use crate::policy::{Policies, Source};

/// The largest module offered: the bundled and example ones are under 1 MiB, and compiling bytes
/// costs the host's CPU on every replica.
const MAX_MODULE_BYTES: usize = 16 << 20;

/// Loads, dry-runs and swaps in a module for `decision` on a blocking thread (compiling takes tens of
/// milliseconds of CPU). The error is the whole chain on one line.
async fn offer(
    policies: Arc<Policies>,
    decision: Decision,
    bytes: Vec<u8>,
    config: Option<String>,
    source: Source,
) -> Result<(), String> {
    if bytes.len() > MAX_MODULE_BYTES {
        return Err(format!("a module of {} bytes; at most {MAX_MODULE_BYTES} are compiled", bytes.len()));
    }
    let offered = tokio::task::spawn_blocking(move || match policies.point(decision.as_str()) {
        Some(point) => point.offer(&bytes, config, source).map_err(|error| format!("{error:#}")),
        None => Err(format!("no decision point {}", decision.as_str())),
    });
    offered.await.unwrap_or_else(|error| Err(format!("loading the module failed: {error}")))
}
