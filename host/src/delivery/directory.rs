//! Delivers modules from a directory: `<decision>.wasm` (e.g. `job-mapper.wasm`), with the module's
//! configuration in `<decision>.config` when present. Polled, because a mounted ConfigMap updates by
//! swapping a symlink, which file watchers miss.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use super::resource::Decision;
use crate::policy::{Policies, Source, sha256_hex};

/// How often the directory is read.
const POLL: Duration = Duration::from_secs(2);

/// Applies the directory's modules now and whenever they change, until the process ends.
pub async fn watch(dir: PathBuf, policies: Arc<Policies>) {
    let mut applied = HashMap::new();
    loop {
        for decision in Decision::ALL {
            apply(&dir, decision, &policies, &mut applied).await;
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Offers `<decision>.wasm` when its bytes or config changed since last offered, or when the decision
/// point fell back to the bundled default (the PolicyModule that beat the file was deleted).
///
/// `applied` remembers, per decision point, the version last offered and whether it went live, so that
/// refused bytes are not offered again every poll.
async fn apply(
    dir: &Path,
    decision: Decision,
    policies: &Arc<Policies>,
    applied: &mut HashMap<Decision, (String, bool)>,
) {
    let Some(point) = policies.point(decision.as_str()) else {
        return;
    };
    let file = dir.join(format!("{}.wasm", decision.as_str()));
    let Ok(bytes) = tokio::fs::read(&file).await else {
        return;
    };
    let config = tokio::fs::read_to_string(dir.join(format!("{}.config", decision.as_str()))).await.ok();
    let version = format!("{}/{}", sha256_hex(&bytes), sha256_hex(config.as_deref().unwrap_or_default().as_bytes()));
    let (live_source, _) = point.live_version();
    let source = Source::File(file.display().to_string());
    let last = applied.get(&decision);
    let changed = last.is_none_or(|(last, _)| *last != version);
    let lost = live_source == Source::Bundled && last.is_some_and(|(_, live)| *live);
    if matches!(live_source, Source::Resource(_)) || !(changed || lost) {
        return;
    }
    let offered = super::offer(policies.clone(), decision, bytes, config, source).await;
    match &offered {
        Ok(()) => tracing::info!(file = %file.display(), "policy module from the directory is live"),
        Err(error) => tracing::warn!(file = %file.display(), %error, "policy module from the directory refused"),
    }
    applied.insert(decision, (version, offered.is_ok()));
}
