//! Which jobs hold the Slurm nodes of blocked drains, for the `UpdateBlocked` condition.
//!
//! Asked only while a drain is blocked, and answered from one job listing shared by every NodeSet
//! and kept for [`MAX_AGE`]: never a request per node.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::Mutex;

use crate::slurm::{Job, JobsPage, Slurm, expand_hostlist};

const MAX_AGE: Duration = Duration::from_secs(30);

pub struct BlockingJobs {
    slurm: Arc<dyn Slurm>,
    listed: Mutex<Option<(Instant, Arc<Vec<Job>>)>>,
}

impl BlockingJobs {
    pub fn new(slurm: Arc<dyn Slurm>) -> Self {
        Self { slurm, listed: Mutex::new(None) }
    }

    /// The running jobs on each of `slurm_nodes`; empty when Slurm cannot say.
    pub async fn on(&self, slurm_nodes: &[String]) -> BTreeMap<String, Vec<u32>> {
        if slurm_nodes.is_empty() {
            return BTreeMap::new();
        }
        match self.jobs().await {
            Some(jobs) => jobs_on(&jobs, slurm_nodes),
            None => BTreeMap::new(),
        }
    }

    async fn jobs(&self) -> Option<Arc<Vec<Job>>> {
        let mut listed = self.listed.lock().await;
        if let Some((at, jobs)) = listed.as_ref()
            && at.elapsed() < MAX_AGE
        {
            return Some(jobs.clone());
        }
        match self.slurm.jobs(None).await {
            Ok(JobsPage::All { jobs, .. }) => {
                let jobs = Arc::new(jobs);
                *listed = Some((Instant::now(), jobs.clone()));
                Some(jobs)
            }
            Ok(JobsPage::Unchanged) => listed.as_ref().map(|(_, jobs)| jobs.clone()),
            Err(error) => {
                tracing::warn!(%error, "listing Slurm jobs to name what blocks a drain failed");
                None
            }
        }
    }
}

/// Jobs that still hold nodes (running, or cleaning up), by the nodes of `wanted` they hold.
pub fn jobs_on(jobs: &[Job], wanted: &[String]) -> BTreeMap<String, Vec<u32>> {
    let mut on: BTreeMap<String, Vec<u32>> = BTreeMap::new();
    for job in jobs.iter().filter(|job| job.holds_nodes()) {
        let Ok(nodes) = expand_hostlist(&job.nodes) else { continue };
        for node in nodes.into_iter().filter(|node| wanted.contains(node)) {
            on.entry(node).or_default().push(job.job_id);
        }
    }
    for ids in on.values_mut() {
        ids.sort_unstable();
    }
    on
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(id: u32, state: &str, nodes: &str) -> Job {
        Job { job_id: id, job_state: vec![state.into()], nodes: nodes.into(), ..Default::default() }
    }

    #[test]
    fn names_running_jobs_by_node() {
        let jobs = [
            job(12, "RUNNING", "w-[1-2]"),
            job(13, "RUNNING", "w-1"),
            job(14, "COMPLETED", "w-1"),
            job(15, "PENDING", ""),
            job(16, "RUNNING", "bad[list"),
        ];
        let on = jobs_on(&jobs, &["w-1".to_string(), "w-3".to_string()]);
        assert_eq!(on, BTreeMap::from([("w-1".to_string(), vec![12, 13])]));
    }
}
