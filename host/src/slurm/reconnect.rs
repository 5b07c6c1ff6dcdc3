//! The Slurm behind slurmrestd's URL may change while the host runs (an upgrade restarts it), so
//! the API version is chosen again whenever Slurm comes back after it could not be read.

use std::time::Duration;

use super::{NodeCache, SlurmClient, SlurmError, SlurmInfoMetric};

/// How often a Slurm that cannot be read is asked again which versions it serves.
const RETRY: Duration = Duration::from_secs(5);

/// Watches the node cache, forever: while Slurm cannot be read, and once more when it can again,
/// asks slurmrestd which API versions it serves and speaks the newest the host knows.
pub async fn rediscover_after_reconnects(slurm: SlurmClient, nodes: NodeCache, metric: SlurmInfoMetric) {
    let mut was_readable = true;
    let mut ticker = tokio::time::interval(RETRY);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        let readable = nodes.snapshot().is_ok();
        if !readable || !was_readable {
            match slurm.discover().await {
                Ok(info) => {
                    if !was_readable && readable {
                        tracing::info!(%info, "Slurm can be read again");
                    }
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
