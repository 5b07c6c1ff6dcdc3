//! Cancels placeholders whose pod is gone: deleted while the host was down, deleted before its
//! job was listed, or replaced by a pod of the same name.

use std::sync::Arc;
use std::time::Duration;

use crate::scheduler::watched_pod::WatchedPod;
use kube::runtime::reflector::Store;
use kube::{Api, Client};

use super::timing::STORE_READY_RECHECK;
use super::{JobCache, Placeholder, SchedulerMetrics, Scope, pod_lookup};
use crate::slurm::{Slurm, SlurmError};

/// Jobs that hold nodes terminating at once, at most. Slurm terminates each cancelled job on its
/// nodes: its agent sends every slurmd a request per job and takes each one's completion back, and
/// hundreds at once left slurmctld and slurmd 24.11.5 deaf for good (docs/benchmarks.md). So
/// a sweep cancels running placeholders only while fewer than this many jobs are still completing;
/// the rest wait for a later sweep. Pending placeholders, which no slurmd holds, go at once.
const TERMINATING_AT_ONCE: usize = 50;

/// What the sweep looks at. Placeholders of pods outside the scheduler's scope are not its business:
/// their pods are not in its store, and must never be taken for gone.
pub struct Sweep {
    pub jobs: JobCache,
    pub pods: Store<WatchedPod>,
    pub slurm: Arc<dyn Slurm>,
    pub scope: Scope,
    /// For the live read that confirms a pod is gone before its job is cancelled.
    pub client: Client,
    pub metrics: SchedulerMetrics,
}

impl Sweep {
    pub async fn run(self, interval: Duration) {
        sweep(self, interval).await
    }
}

async fn sweep(Sweep { jobs, pods, slurm, scope, client, metrics }: Sweep, interval: Duration) {
    // Readiness wakes only the most recent waiter, and the controller waits on the same store:
    // look again every second rather than wait once.
    loop {
        match tokio::time::timeout(STORE_READY_RECHECK, pods.wait_until_ready()).await {
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
        let mut orphans =
            jobs.live_where(|p| scope.contains(&p.pod.namespace) && pod_lookup::find(&pods, &p.pod).is_none());
        // A gang's job is listed under each member: cancelled once.
        orphans.sort_unstable_by_key(|p| p.job.target());
        orphans.dedup_by_key(|p| p.job.target());
        let completing = jobs.holding().iter().filter(|job| job.job_state.iter().any(|s| s == "COMPLETING")).count();
        keep_within_room(&mut orphans, TERMINATING_AT_ONCE.saturating_sub(completing));
        let orphans = confirmed_gone(&client, orphans).await;
        if orphans.is_empty() {
            metrics.swept(0);
            continue;
        }
        let mut batch = Vec::new();
        for placeholder in &orphans {
            let key = &placeholder.pod;
            tracing::info!(job = %placeholder.job.target(), pod = %format!("{}/{}", key.namespace, key.name), "cancelling orphan placeholder: its pod is gone");
            super::executor::keep_members_waiting(slurm.as_ref(), placeholder).await;
            batch.push(placeholder.job.target());
        }
        // One request per sweep: a deleted Deployment's hundreds of jobs go in a few requests.
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
        metrics.swept(batch.len());
    }
}

/// The orphans whose pod a live read from the API server confirms gone: the store may lag behind
/// (a pod just created, a watch restarting), and a job cancelled in error costs its pod. A pod that
/// cannot be read now keeps its job until a later sweep.
async fn confirmed_gone(client: &Client, orphans: Vec<Placeholder>) -> Vec<Placeholder> {
    let mut gone = Vec::with_capacity(orphans.len());
    for placeholder in orphans {
        let key = &placeholder.pod;
        match Api::<WatchedPod>::namespaced(client.clone(), &key.namespace).get_opt(&key.name).await {
            Ok(Some(pod)) if pod.metadata.uid.as_deref() == Some(key.uid.as_str()) => {
                tracing::debug!(pod = %format!("{}/{}", key.namespace, key.name), "the pod is there after all; its job stays");
            }
            Ok(_) => gone.push(placeholder),
            Err(error) => {
                tracing::debug!(pod = %key.name, %error, "cannot confirm the pod is gone; its job stays for now")
            }
        }
    }
    gone
}

/// Keeps every pending placeholder and at most `room` that hold nodes (each of those a termination on
/// its nodes).
fn keep_within_room(orphans: &mut Vec<Placeholder>, mut room: usize) {
    orphans.retain(|p| {
        let holds_nodes = p.job.holds_nodes();
        let keep = !holds_nodes || room > 0;
        room -= usize::from(holds_nodes && keep);
        keep
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduler::PodKey;
    use crate::slurm::Job;

    fn placeholder(id: u32, state: &str, nodes: &str) -> Placeholder {
        let pod = PodKey { namespace: "ns".into(), name: format!("p{id}"), uid: format!("u{id}") };
        Placeholder {
            pod,
            job: Job { job_id: id, job_state: vec![state.into()], nodes: nodes.into(), ..Default::default() },
        }
    }

    #[test]
    fn pending_orphans_always_go_and_running_ones_only_while_few_terminate() {
        let all = vec![
            placeholder(1, "RUNNING", "n1"),
            placeholder(2, "PENDING", ""),
            placeholder(3, "RUNNING", "n2"),
            placeholder(4, "RUNNING", "n1"),
        ];
        let kept = |room| {
            let mut orphans = all.clone();
            keep_within_room(&mut orphans, room);
            orphans.iter().map(|p| p.job.job_id).collect::<Vec<_>>()
        };
        assert_eq!(kept(0), [2]);
        assert_eq!(kept(2), [1, 2, 3]);
        assert_eq!(kept(50), [1, 2, 3, 4]);
    }
}
