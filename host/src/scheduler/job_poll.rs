//! What one job poll asks Slurm for: its full listing, or first only every job's state. With 10,000
//! pending jobs a full listing is 56 MB that slurmctld packs under its job lock and the host parses,
//! every poll: slurmctld then answered the Syncer's drains in seconds (docs/benchmarks.md,
//! scale-bench). Their states alone are under 1 MB, and while none changes the listing is not taken.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use crate::slurm::JobStates;

/// From how many jobs in the last full listing a poll looks at the states first. Below it a full
/// listing costs slurmctld little, and it is the only answer that shows a pending job's reason, on
/// which preemption waits ("Resources"): small clusters keep it every poll.
pub const STATES_FIRST_FROM_JOBS: usize = 1_000;

/// However still the states, a full listing at least this often: a pending job's reason and a
/// comment an administrator changed move no state.
pub const FULL_LISTING_AT_LEAST_EVERY: Duration = Duration::from_secs(10);

/// The last full listing the cache holds (or Slurm's word that nothing changed since the one before).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FullListing {
    pub began: Instant,
    /// Records listed (a pending array is one).
    pub jobs: usize,
    /// The jobs' states as listed just before it, if they were.
    pub states: Option<JobStates>,
}

/// What a poll asks first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobPoll {
    FullListing,
    /// The states, compared with those before this last full listing.
    StatesFirst(FullListing),
}

/// What a poll does once it has the states.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterStates {
    /// Nothing moved: the cache stands.
    Unchanged,
    FullListing,
}

/// Why a poll would need the full listing whatever the states say.
#[derive(Debug, Clone, Copy, Default)]
pub struct Pending {
    /// A submission's answer was lost: only a full listing (the links in its comments) can tell
    /// whether it made a job.
    pub doubts: bool,
    /// This host changed placeholders itself (cancelled one): their pods wait for a listing to wake.
    pub touched: bool,
}

/// With `states_first_from` jobs or more in the last full listing, the states come first (the
/// host's is [`STATES_FIRST_FROM_JOBS`]).
pub fn plan(last: Option<&FullListing>, pending: Pending, states_first_from: usize) -> JobPoll {
    match last {
        _ if pending.doubts || pending.touched => JobPoll::FullListing,
        Some(last) if last.jobs >= states_first_from => JobPoll::StatesFirst(*last),
        _ => JobPoll::FullListing,
    }
}

pub fn after_states(last: &FullListing, states: JobStates, now: Instant) -> AfterStates {
    let fresh = now.saturating_duration_since(last.began) < FULL_LISTING_AT_LEAST_EVERY;
    if fresh && last.states == Some(states) { AfterStates::Unchanged } else { AfterStates::FullListing }
}

/// The most placeholders a poll reads one by one when the states show them started: their pods are
/// bound at once instead of after the full listing (seconds at 10,000 jobs). More wait for it.
pub const READ_ALONE_AT_MOST: usize = 16;

/// Which of the pending placeholders' jobs (by id; not an array's) the states list as running.
pub fn started(pending: impl IntoIterator<Item = u32>, running: &HashSet<String>) -> Vec<u32> {
    // A plain job is listed by its id alone; an array's task (`8_0`) names no pending plain job.
    let running: HashSet<u32> = running.iter().filter_map(|name| name.parse().ok()).collect();
    let mut started: Vec<u32> = pending.into_iter().filter(|job| running.contains(job)).collect();
    started.sort_unstable();
    // A gang's one job is every member's placeholder.
    started.dedup();
    started.truncate(READ_ALONE_AT_MOST);
    started
}

/// The most a poll rests beyond its interval.
pub const LONGEST_REST: Duration = Duration::from_secs(5);

/// How long the poll rests after one that took `took` and found `jobs`: at scale, as long as it took
/// (up to [`LONGEST_REST`]) once that is past the interval, so that the job poll keeps slurmrestd
/// busy half the time at most, and leaves it to the Syncer's drains the other half. At 10,000 jobs
/// the states take slurmrestd 1-3 s to answer on the 2-core machine. Below scale, or after a failed
/// poll (which must be retried soon), no rest.
pub fn rest_after(took: Duration, interval: Duration, jobs: usize, states_first_from: usize, ok: bool) -> Duration {
    if ok && jobs >= states_first_from && took > interval { took.min(LONGEST_REST) } else { Duration::ZERO }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn states(jobs: &[(&str, &str)]) -> JobStates {
        let named: Vec<(&str, Vec<String>)> = jobs.iter().map(|(job, state)| (*job, vec![state.to_string()])).collect();
        JobStates::of(named.iter().map(|(job, state)| (*job, state.as_slice())))
    }

    #[test]
    fn a_poll_looks_at_the_states_first_only_at_scale_and_with_nothing_pending() {
        let at = |jobs| FullListing { began: Instant::now(), jobs, states: None };
        let nothing = Pending::default();
        let many = at(1_000);
        let cases = [
            ("never listed", None, nothing, JobPoll::FullListing),
            ("few jobs", Some(at(999)), nothing, JobPoll::FullListing),
            ("many jobs", Some(many), nothing, JobPoll::StatesFirst(many)),
            ("a submission in doubt", Some(at(10_000)), Pending { doubts: true, ..nothing }, JobPoll::FullListing),
            ("this host cancelled", Some(at(10_000)), Pending { touched: true, ..nothing }, JobPoll::FullListing),
        ];
        for (case, last, pending, expected) in cases {
            assert_eq!(plan(last.as_ref(), pending, STATES_FIRST_FROM_JOBS), expected, "{case}");
        }
    }

    #[test]
    fn the_listing_stands_while_no_state_moved_and_it_is_young() {
        let now = Instant::now();
        let before = states(&[("1", "PENDING"), ("2_1", "RUNNING")]);
        let listed = |ago: u64, states| FullListing { began: now - Duration::from_secs(ago), jobs: 5_000, states };
        let cases = [
            ("nothing moved", listed(1, Some(before)), before, AfterStates::Unchanged),
            (
                "a job started",
                listed(1, Some(before)),
                states(&[("1", "RUNNING"), ("2_1", "RUNNING")]),
                AfterStates::FullListing,
            ),
            (
                "a job came",
                listed(1, Some(before)),
                states(&[("1", "PENDING"), ("2_1", "RUNNING"), ("3", "PENDING")]),
                AfterStates::FullListing,
            ),
            ("a job went", listed(1, Some(before)), states(&[("1", "PENDING")]), AfterStates::FullListing),
            ("no states before", listed(1, None), before, AfterStates::FullListing),
            ("the listing is old", listed(10, Some(before)), before, AfterStates::FullListing),
        ];
        for (case, last, states, expected) in cases {
            assert_eq!(after_states(&last, states, now), expected, "{case}");
        }
    }

    #[test]
    fn a_poll_reads_alone_the_pending_placeholders_listed_running_up_to_a_bound() {
        let many: Vec<u32> = (1..=40).collect();
        let many_names: Vec<String> = many.iter().map(u32::to_string).collect();
        let many_names: Vec<&str> = many_names.iter().map(String::as_str).collect();
        let cases = [
            ("none started", vec![1, 2], vec!["7"], vec![]),
            ("one started", vec![1, 2], vec!["2", "7"], vec![2]),
            ("a gang's job under two members", vec![3, 3], vec!["3"], vec![3]),
            ("an array's task is listed by its own name, never read here", vec![5], vec!["5_0"], vec![]),
            ("many started", many, many_names, (1..=READ_ALONE_AT_MOST as u32).collect()),
        ];
        for (case, pending, running, expected) in cases {
            let running: HashSet<String> = running.into_iter().map(str::to_owned).collect();
            assert_eq!(started(pending, &running), expected, "{case}");
        }
    }

    #[test]
    fn at_scale_a_slow_poll_rests_as_long_as_it_took_up_to_a_bound() {
        let (interval, at) = (Duration::from_millis(500), STATES_FIRST_FROM_JOBS);
        let ms = Duration::from_millis;
        let cases = [
            ("quick, at scale", ms(300), at, true, Duration::ZERO),
            ("slow, at scale", ms(2_000), at, true, ms(2_000)),
            ("very slow, at scale", ms(30_000), at, true, LONGEST_REST),
            ("slow, below scale", ms(2_000), at - 1, true, Duration::ZERO),
            ("slow and failed", ms(2_000), at, false, Duration::ZERO),
        ];
        for (case, took, jobs, ok, expected) in cases {
            assert_eq!(rest_after(took, interval, jobs, STATES_FIRST_FROM_JOBS, ok), expected, "{case}");
        }
    }
}
