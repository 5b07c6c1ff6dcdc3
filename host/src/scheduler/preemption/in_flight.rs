//! Preemptions under way: a waiting job whose victims were told to go is not offered to the policy
//! again until they are gone and Slurm had a moment to start it, or every pass of a pod that waits a
//! few seconds longer would claim more victims.
//!
//! This is memory, not truth: after a restart it is empty, and what protects running jobs then is
//! that what a leaving job still holds counts as free in the next offer (see `offer`).

use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::super::timing::PREEMPTION_SETTLE;
use crate::slurm::Job;

/// A round no pass asked about for this long is forgotten (its job started, or its pod went).
const FORGET: Duration = Duration::from_secs(600);

struct Round {
    victims: BTreeSet<u32>,
    started: Instant,
    gone_since: Option<Instant>,
}

/// The rounds under way, by the waiting job's id.
#[derive(Default)]
pub struct InFlight(Mutex<HashMap<u32, Round>>);

impl InFlight {
    /// Remembers that `victims` were told to go for `job_id`.
    pub fn record(&self, job_id: u32, victims: impl IntoIterator<Item = u32>) {
        let round = Round { victims: victims.into_iter().collect(), started: Instant::now(), gone_since: None };
        self.lock().insert(job_id, round);
    }

    /// Why `job_id` must not preempt now, if it must not: its victims still hold nodes (`holding` is
    /// every job that does), or they went moments ago.
    pub fn busy(&self, job_id: u32, holding: &[Job]) -> Option<String> {
        let mut rounds = self.lock();
        rounds.retain(|_, round| round.started.elapsed() < FORGET);
        let round = rounds.get_mut(&job_id)?;
        let left: Vec<String> = holding
            .iter()
            .filter(|job| round.victims.contains(&job.job_id))
            .map(|job| job.job_id.to_string())
            .collect();
        if !left.is_empty() {
            round.gone_since = None;
            return Some(format!("preempted job(s) {} still hold their nodes", left.join(", ")));
        }
        let gone_since = *round.gone_since.get_or_insert_with(Instant::now);
        if gone_since.elapsed() < PREEMPTION_SETTLE {
            return Some("the preempted jobs are gone; Slurm starts the pod's job next".into());
        }
        rounds.remove(&job_id);
        None
    }

    /// Every victim of a round under way.
    pub fn victims(&self) -> BTreeSet<u32> {
        self.lock().values().flat_map(|round| round.victims.iter().copied()).collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u32, Round>> {
        self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn holding(ids: &[u32]) -> Vec<Job> {
        ids.iter().map(|&job_id| Job { job_id, ..Default::default() }).collect()
    }

    #[test]
    fn a_round_blocks_until_its_victims_are_gone_and_settled() {
        let in_flight = InFlight::default();
        assert_eq!(in_flight.busy(9, &holding(&[1, 2])), None, "no round: free to decide");
        in_flight.record(9, [1, 2]);
        assert_eq!(in_flight.victims(), BTreeSet::from([1, 2]));
        let why = in_flight.busy(9, &holding(&[2, 3])).unwrap();
        assert!(why.contains("job(s) 2 still hold"), "{why}");
        let why = in_flight.busy(9, &holding(&[3])).unwrap();
        assert!(why.contains("gone"), "{why}");
        in_flight.0.lock().unwrap().get_mut(&9).unwrap().gone_since = Some(Instant::now() - PREEMPTION_SETTLE);
        assert_eq!(in_flight.busy(9, &holding(&[3])), None);
        assert!(in_flight.victims().is_empty(), "the round is over");
    }
}
