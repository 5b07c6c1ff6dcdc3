//! Delivers policy modules to the decision points: from `PolicyModule` resources and from a directory.
//!
//! This is the Kubernetes side of policies; the runtime itself (`crate::policy`) knows nothing of it.
//! A PolicyModule beats a file: the directory is only applied to a decision point whose live module
//! did not come from a PolicyModule.

mod controller;
mod directory;
mod fetch;
mod resource;
mod status;

pub use controller::run;
pub use directory::watch as watch_directory;
pub use resource::{Decision, KeyRef, ModuleSource, PolicyModule, PolicyModuleSpec, PolicyModuleStatus};

use std::sync::Arc;

use crate::policy::{Policies, Source};

/// Loads, dry-runs and swaps in a module for `decision` on a blocking thread (compiling takes tens of
/// milliseconds of CPU). The error is the whole chain on one line.
async fn offer(
    policies: Arc<Policies>,
    decision: Decision,
    bytes: Vec<u8>,
    config: Option<String>,
    source: Source,
) -> Result<(), String> {
    let offered = tokio::task::spawn_blocking(move || match policies.point(decision.as_str()) {
        Some(point) => point.offer(&bytes, config, source).map_err(|error| format!("{error:#}")),
        None => Err(format!("no decision point {}", decision.as_str())),
    });
    offered.await.unwrap_or_else(|error| Err(format!("loading the module failed: {error}")))
}
