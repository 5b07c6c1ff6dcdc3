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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::FailureModes;

    /// A PolicyModule whose ConfigMap holds a web page, not a component: its condition and Event say
    /// so in words, on one line, not as wasmtime's dump of the bytes it expected.
    #[tokio::test]
    async fn a_refused_module_says_what_is_wrong_in_words_on_one_line() {
        let policies = Arc::new(Policies::bundled(FailureModes::default()).expect("the bundled policies"));
        let page = b"<!DOCTYPE html>\n<html><body>Not Found</body></html>\n".to_vec();
        let refusal = offer(policies, Decision::Drain, page, None, Source::Resource("drain".into())).await.unwrap_err();
        assert!(refusal.starts_with("not a WebAssembly component: its first bytes are 3c 21 44 4f"), "{refusal}");
        assert!(!refusal.contains("expected=") && !refusal.contains('\n'), "{refusal}");
        assert_eq!(crate::kube::one_line(&refusal), refusal, "one line already, and short");
    }
}
