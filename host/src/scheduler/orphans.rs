//! Cancels placeholders whose pod is gone: deleted while the host was down, deleted before its
//! job was listed, or replaced by a pod of the same name.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::runtime::reflector::{ObjectRef, Store};

use super::{JobCache, Scope};
use crate::slurm::SlurmClient;

/// Jobs cancelled per request.
const CANCEL_BATCH: usize = 200;

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
        let mut orphans = Vec::new();
        for placeholder in live.into_iter().filter(|p| scope.contains(&p.pod.namespace)) {
            let key = &placeholder.pod;
            let pod = pods.get(&ObjectRef::new(&key.name).within(&key.namespace));
            if pod.is_some_and(|pod| pod.metadata.uid.as_deref() == Some(key.uid.as_str())) {
                continue;
            }
            tracing::info!(job = %placeholder.job.target(), pod = %format!("{}/{}", key.namespace, key.name), "cancelling orphan placeholder: its pod is gone");
            super::gang::keep_members_waiting(&slurm, &placeholder).await;
            orphans.push(placeholder.job.target());
        }
        // A gang's job is listed under each member: cancelled once.
        orphans.sort_unstable();
        orphans.dedup();
        // One request per batch: a deleted Deployment's hundreds of jobs go in seconds, not minutes.
        for batch in orphans.chunks(CANCEL_BATCH) {
            match slurm.cancel_jobs(batch).await {
                Ok(refused) => {
                    for (job, why) in &refused {
                        tracing::warn!(%job, why, "Slurm did not cancel an orphan placeholder");
                    }
                    // Over until the next listing says otherwise: the next sweep does not cancel them again.
                    for job in batch.iter().filter(|job| !refused.iter().any(|(id, _)| id == *job)) {
                        jobs.record_cancelled(job, None);
                    }
                }
                Err(error) => tracing::warn!(jobs = batch.len(), %error, "could not cancel orphan placeholders"),
            }
        }
    }
}
