//! Cancels placeholders whose pod is gone: deleted while the host was down, deleted before its
//! job was listed, or replaced by a pod of the same name.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::runtime::reflector::{ObjectRef, Store};

use super::{JobCache, Scope};
use crate::slurm::{SlurmClient, SlurmError};

/// Jobs cancelled per sweep, in one request. Slurm then terminates each on its nodes: its agent sends
/// every slurmd a request per job and takes each one's completion back, and hundreds at once swamped
/// slurmctld 24.11.5 (it stopped accepting connections for minutes; see the README's benchmark). The
/// rest wait for the next sweep, seconds later.
const CANCELS_PER_SWEEP: usize = 50;

/// What the sweep looks at. Placeholders of pods outside the scheduler's scope are not its business:
/// their pods are not in its store, and must never be taken for gone.
pub struct Sweep {
    pub jobs: JobCache,
    pub pods: Store<Pod>,
    pub slurm: SlurmClient,
    pub scope: Scope,
}

impl Sweep {
    pub async fn run(self, interval: Duration) {
        let Self { jobs, pods, slurm, scope } = self;
        sweep(jobs, pods, slurm, scope, interval).await
    }
}

async fn sweep(jobs: JobCache, pods: Store<Pod>, slurm: SlurmClient, scope: Scope, interval: Duration) {
    // Readiness wakes only the most recent waiter, and the controller waits on the same store:
    // look again every second rather than wait once.
    loop {
        match tokio::time::timeout(Duration::from_secs(1), pods.wait_until_ready()).await {
            Ok(Ok(())) => break,
            Ok(Err(_dropped)) => return,
            Err(_still_waiting) => continue,
        }
    }
    let mut ticker = tokio::time::interval(interval);
    loop {
        ticker.tick().await;
        if !jobs.is_listed() {
            continue;
        }
        let live = jobs.live();
        tracing::debug!(placeholders = live.len(), pods = pods.state().len(), "sweeping for orphan placeholders");
        let mut orphans: Vec<_> = live
            .into_iter()
            .filter(|p| scope.contains(&p.pod.namespace))
            .filter(|p| {
                let pod = pods.get(&ObjectRef::new(&p.pod.name).within(&p.pod.namespace));
                pod.is_none_or(|pod| pod.metadata.uid.as_deref() != Some(p.pod.uid.as_str()))
            })
            .collect();
        // A gang's job is listed under each member: cancelled once.
        orphans.sort_unstable_by_key(|p| p.job.target());
        orphans.dedup_by_key(|p| p.job.target());
        orphans.truncate(CANCELS_PER_SWEEP);
        if orphans.is_empty() {
            continue;
        }
        let mut batch = Vec::new();
        for placeholder in &orphans {
            let key = &placeholder.pod;
            tracing::info!(job = %placeholder.job.target(), pod = %format!("{}/{}", key.namespace, key.name), "cancelling orphan placeholder: its pod is gone");
            super::gang::keep_members_waiting(&slurm, placeholder).await;
            batch.push(placeholder.job.target());
        }
        // One request per sweep: a deleted Deployment's hundreds of jobs go in seconds, not minutes.
        match slurm.cancel_jobs(&batch).await {
            Ok(refused) => {
                for (job, why) in &refused {
                    tracing::warn!(%job, why, "Slurm did not cancel an orphan placeholder");
                }
                // Over until the next listing says otherwise: the next sweep does not cancel them again.
                for job in batch.iter().filter(|job| !refused.iter().any(|(id, _)| id == *job)) {
                    jobs.record_cancelled(job, None);
                }
            }
            // Slurm fails the whole request for one job it will not signal: one by one, so that one
            // job cannot keep the others alive for ever.
            Err(error @ SlurmError::Api { .. }) => {
                tracing::info!(jobs = batch.len(), %error, "cancelling orphan placeholders one by one");
                for job in &batch {
                    match slurm.cancel(job).await {
                        Ok(()) => jobs.record_cancelled(job, None),
                        Err(error) => tracing::warn!(%job, %error, "could not cancel an orphan placeholder"),
                    }
                }
            }
            Err(error) => tracing::warn!(jobs = batch.len(), %error, "could not cancel orphan placeholders"),
        }
    }
}
