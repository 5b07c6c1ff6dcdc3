//! The Slurm behind slurmrestd's URL may change while the host runs (an upgrade restarts it), so
//! the API version is chosen again when Slurm comes back after it could not be read.

use std::time::Duration;

use super::{NodeCache, SlurmClient, SlurmError, SlurmInfoMetric};

/// How often a Slurm that cannot be read is looked at again.
const RETRY: Duration = Duration::from_secs(5);

/// Watches the node cache, forever, and chooses the API version again when Slurm can be read again
/// after it could not, or while it cannot because the version spoken is no longer served (404).
/// Choosing reads slurmrestd's OpenAPI document (close to 1 MB on 26.05), so an outage is probed
/// with a ping, not with the document.
pub async fn rediscover_after_reconnects(slurm: SlurmClient, nodes: NodeCache, metric: SlurmInfoMetric) {
    let mut was_readable = true;
    let mut ticker = tokio::time::interval(RETRY);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        let readable = nodes.snapshot().is_ok();
        let came_back = readable && !was_readable;
        let version_gone = !readable && matches!(slurm.ping().await, Err(SlurmError::Api { status: 404, .. }));
        if came_back || version_gone {
            match slurm.discover().await {
                Ok(info) => {
                    tracing::info!(%info, "Slurm can be read again, or serves other API versions");
                    metric.set(&info);
                }
                Err(error @ SlurmError::NoCommonApi(_)) => {
                    tracing::error!(%error, "slurmrestd serves no API version sunk speaks; nothing is written to Slurm")
                }
                Err(error) => tracing::debug!(%error, "slurmrestd still does not answer"),
            }
        }
        was_readable = readable;
    }
}
