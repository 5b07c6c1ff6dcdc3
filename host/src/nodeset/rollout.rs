//! Which outdated pods a rolling update replaces now.
//!
//! Ordinals: the NodeSet's target Nodes sorted by name, from 0. Only pods at an ordinal at least the
//! `partition` are updated (the canary). A Node counts as unavailable when it has no pod, its pod is
//! not ready, its Slurm node is not registered and responding (or cannot be read), or its pod is
//! being replaced; so a new pod that never becomes ready holds the update. At most `maxUnavailable`
//! Nodes are unavailable at once: replacements in progress and outdated pods that are unavailable
//! anyway go on (as a DaemonSet replaces unhealthy old pods at once), then available ones start,
//! idle Slurm nodes first, then from the highest ordinal down.

use super::settings::Strategy;

/// An outdated pod on a target Node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Candidate {
    pub ordinal: usize,
    pub available: bool,
    /// Its Slurm node is IDLE with nothing completing.
    pub idle: bool,
    /// Its replacement already started (the NodeSet drained it).
    pub started: bool,
}

/// The candidates (by index) to replace now; `unavailable` counts target Nodes unavailable now,
/// started replacements included.
pub fn choose(strategy: Strategy, desired: usize, unavailable: usize, candidates: &[Candidate]) -> Vec<usize> {
    let Strategy::RollingUpdate { max_unavailable, partition } = strategy else {
        return Vec::new();
    };
    let eligible = |c: &Candidate| c.ordinal >= partition as usize;
    let mut chosen: Vec<usize> = candidates
        .iter()
        .enumerate()
        .filter(|(_, c)| eligible(c) && (c.started || !c.available))
        .map(|(index, _)| index)
        .collect();
    let budget = max_unavailable.of(desired).saturating_sub(unavailable);
    let mut fresh: Vec<usize> = candidates
        .iter()
        .enumerate()
        .filter(|(_, c)| eligible(c) && c.available && !c.started)
        .map(|(index, _)| index)
        .collect();
    fresh.sort_by_key(|&index| (!candidates[index].idle, std::cmp::Reverse(candidates[index].ordinal)));
    chosen.extend(fresh.into_iter().take(budget));
    chosen
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nodeset::settings::MaxUnavailable;

    fn rolling(max: u32, partition: u32) -> Strategy {
        Strategy::RollingUpdate { max_unavailable: MaxUnavailable::Count(max), partition }
    }

    fn candidate(ordinal: usize, idle: bool) -> Candidate {
        Candidate { ordinal, available: true, idle, started: false }
    }

    #[test]
    fn replaces_within_max_unavailable_idle_first() {
        let candidates = [candidate(0, false), candidate(1, true), candidate(2, false), candidate(3, true)];
        assert_eq!(choose(rolling(1, 0), 4, 0, &candidates), [3]);
        assert_eq!(choose(rolling(2, 0), 4, 0, &candidates), [3, 1]);
        assert_eq!(choose(rolling(3, 0), 4, 0, &candidates), [3, 1, 2]);
        assert_eq!(choose(rolling(2, 0), 4, 1, &candidates), [3]);
        assert!(choose(rolling(1, 0), 4, 1, &candidates).is_empty());
    }

    #[test]
    fn started_and_unavailable_outdated_pods_go_on_without_budget() {
        let mut started = candidate(0, false);
        started.started = true;
        let mut broken = candidate(1, false);
        broken.available = false;
        let candidates = [started, broken, candidate(2, true)];
        assert_eq!(choose(rolling(1, 0), 3, 2, &candidates), [0, 1]);
    }

    #[test]
    fn the_partition_keeps_lower_ordinals() {
        let candidates = [candidate(0, true), candidate(1, true), candidate(2, true)];
        assert_eq!(choose(rolling(3, 2), 3, 0, &candidates), [2]);
        assert!(choose(rolling(3, 5), 3, 0, &candidates).is_empty());
        let mut started_below = candidate(0, true);
        started_below.started = true;
        assert!(choose(rolling(3, 1), 3, 1, &[started_below]).is_empty());
    }

    #[test]
    fn on_delete_replaces_nothing() {
        assert!(choose(Strategy::OnDelete, 2, 0, &[candidate(0, true)]).is_empty());
    }

    #[test]
    fn percentages_round_up() {
        let strategy = Strategy::RollingUpdate { max_unavailable: MaxUnavailable::Percent(30), partition: 0 };
        let candidates: Vec<_> = (0..5).map(|ordinal| candidate(ordinal, true)).collect();
        assert_eq!(choose(strategy, 5, 0, &candidates).len(), 2);
    }
}
