//! Slurm's own preemption (`PreemptType`, e.g. a job of a partition with a higher `PriorityTier`)
//! taking a pod's placeholder: which job did it, so that the pod's Event can name it.
//!
//! Slurm does not record who preempted a job. With `PreemptMode=CANCEL` the victim ends PREEMPTED and
//! keeps `preempt_time`; with `REQUEUE` it is pending again with `preempt_time` cleared. Either way the
//! preemptor is the job that started on the victim's nodes since (since the preemption, or since the pod
//! was bound). It may start a moment after the victim is gone, so callers look again for a few seconds.

use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::scheduler::timing::PREEMPTOR_PATIENCE;
use crate::slurm::{Job, JobState, expand_hostlist};

/// What is known of Slurm's own preemption of a bound pod's placeholder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TakenBySlurm {
    /// The Event's note, naming the job that did it (or saying Slurm does not name one).
    Named(String),
    /// The preemptor has not shown yet: look again after this long.
    AwaitPreemptor(Duration),
}

/// The job that started on `nodes` at or after `since` (UNIX seconds), the earliest if several.
pub fn preemptor<'a>(victim: u32, nodes: &BTreeSet<String>, since: u64, holding: &'a [Job]) -> Option<&'a Job> {
    holding
        .iter()
        .filter(|job| job.job_id != victim && job.state() == JobState::Running)
        // Clocks are seconds: a job started in the same second may be listed a second early.
        .filter(|job| job.start_time.get().is_some_and(|start| start + 1 >= since))
        .filter(|job| expand_hostlist(&job.nodes).unwrap_or_default().iter().any(|node| nodes.contains(node)))
        .min_by_key(|job| (job.start_time.get(), job.job_id))
}

/// When each requeued placeholder was first seen pending again, to give its preemptor time to start.
#[derive(Default)]
pub struct FirstSeen(Mutex<HashMap<u32, Instant>>);

impl FirstSeen {
    /// Whether `job_id`, first seen now or earlier, has been seen for longer than [`PREEMPTOR_PATIENCE`].
    pub fn patience_over(&self, job_id: u32) -> bool {
        let mut seen = self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        seen.retain(|_, at| at.elapsed() < PREEMPTOR_PATIENCE * 10);
        seen.entry(job_id).or_insert_with(Instant::now).elapsed() >= PREEMPTOR_PATIENCE
    }
}

/// `Slurm job 42 (urgent-fix, user alice, partition urgent)`.
pub fn describe(job: &Job) -> String {
    let mut details = Vec::new();
    if !job.name.is_empty() {
        details.push(job.name.clone());
    }
    if !job.user_name.is_empty() {
        details.push(format!("user {}", job.user_name));
    }
    if !job.partition.is_empty() {
        details.push(format!("partition {}", job.partition));
    }
    match details.is_empty() {
        true => format!("Slurm job {}", job.job_id),
        false => format!("Slurm job {} ({})", job.job_id, details.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::slurm::NoValue;

    fn job(job_id: u32, state: &str, nodes: &str, start: u64) -> Job {
        Job {
            job_id,
            name: "fix".into(),
            user_name: "alice".into(),
            partition: "urgent".into(),
            job_state: vec![state.into()],
            nodes: nodes.into(),
            start_time: NoValue::of(start),
            ..Default::default()
        }
    }

    #[test]
    fn names_the_earliest_job_that_started_on_the_node_since() {
        let nodes = BTreeSet::from(["n1".to_string()]);
        let holding = [
            job(7, "RUNNING", "n1", 50),
            job(8, "RUNNING", "n2", 100),
            job(9, "RUNNING", "n[1-2]", 101),
            job(10, "RUNNING", "n1", 103),
            job(1, "RUNNING", "n1", 104),
        ];
        let found = preemptor(1, &nodes, 100, &holding).unwrap();
        assert_eq!(describe(found), "Slurm job 9 (fix, user alice, partition urgent)");
        assert!(preemptor(1, &nodes, 105, &holding).is_none());
    }

    #[test]
    fn patience_runs_from_the_first_sighting() {
        let seen = FirstSeen::default();
        assert!(!seen.patience_over(4));
        seen.0.lock().unwrap().insert(4, Instant::now() - PREEMPTOR_PATIENCE);
        assert!(seen.patience_over(4));
    }
}
