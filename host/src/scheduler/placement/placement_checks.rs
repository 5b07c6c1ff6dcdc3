//! Which waiting placeholders were last found in line with their pod's placement rules, and on what
//! grounds. A pending pod is passed over every minute, and every time Nodes or Slurm's nodes change;
//! asking the job-mapper again and judging every Slurm node (thousands, at scale) on each of those
//! passes is what slowed 10,000 waiting pods to a crawl. A check is made again only when something it
//! depends on changed since: the placement fingerprint, the live job-mapper, the pod, or the job's
//! excluded nodes as Slurm lists them.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::scheduler::watched_pod::WatchedPod;

use crate::slurm::Job;

/// How long a pod's check is remembered after it was last looked at: a pod that waits is looked at
/// every minute, so only pods that were bound, deleted or replaced stay this long.
const FORGET_AFTER: Duration = Duration::from_secs(300);

/// Everything a check of one pod's job depends on.
#[derive(Hash)]
pub struct Grounds<'a> {
    /// The placement fingerprint published when the pass began.
    pub placement: u64,
    /// The job-mapper's revision (an operator's module may exclude nodes too).
    pub job_mapper: u64,
    /// The pod's resource version: its annotations, labels and placement rules.
    pub pod: &'a str,
    pub job: String,
    pub excluded: &'a str,
}

impl<'a> Grounds<'a> {
    pub fn of(pod: &'a WatchedPod, job: &'a Job, placement: u64, job_mapper: u64) -> Self {
        Grounds {
            placement,
            job_mapper,
            pod: pod.metadata.resource_version.as_deref().unwrap_or_default(),
            job: job.target(),
            excluded: &job.excluded_nodes,
        }
    }

    pub fn digest(&self) -> GroundsDigest {
        let mut hasher = DefaultHasher::new();
        self.hash(&mut hasher);
        GroundsDigest(hasher.finish())
    }
}

/// [`Grounds`] as a hash: 10,000 waiting pods keep 10,000 of these.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroundsDigest(u64);

#[derive(Default)]
struct Checks {
    /// By pod UID: the grounds of the last check that found the job in line, and when it was last
    /// asked about.
    by_pod: HashMap<String, (GroundsDigest, Instant)>,
    last_forgotten: Option<Instant>,
}

/// Shared, cheaply cloned.
#[derive(Clone, Default)]
pub struct PlacementChecks {
    checks: Arc<Mutex<Checks>>,
}

impl PlacementChecks {
    /// Whether the pod's job was found in line on these very grounds.
    pub fn is_current(&self, uid: &str, grounds: GroundsDigest) -> bool {
        let mut checks = self.checks.lock().unwrap_or_else(PoisonError::into_inner);
        match checks.by_pod.get_mut(uid) {
            Some((digest, seen)) if *digest == grounds => {
                *seen = Instant::now();
                true
            }
            _ => false,
        }
    }

    /// The pod's job is in line on these grounds (or was just updated to be).
    pub fn record(&self, uid: &str, grounds: GroundsDigest) {
        let now = Instant::now();
        let mut checks = self.checks.lock().unwrap_or_else(PoisonError::into_inner);
        checks.by_pod.insert(uid.to_owned(), (grounds, now));
        if checks.last_forgotten.is_none_or(|at| now.duration_since(at) > FORGET_AFTER) {
            checks.by_pod.retain(|_, (_, seen)| now.duration_since(*seen) <= FORGET_AFTER);
            checks.last_forgotten = Some(now);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(version: &str) -> WatchedPod {
        serde_json::from_value(serde_json::json!({"metadata": {"name": "p", "resourceVersion": version}})).unwrap()
    }

    #[test]
    fn a_check_stands_until_anything_it_rests_on_changes() {
        let checks = PlacementChecks::default();
        let (pod_now, job) = (pod("7"), Job { job_id: 12, excluded_nodes: "n1".into(), ..Default::default() });
        let grounds = Grounds::of(&pod_now, &job, 1, 0).digest();
        assert!(!checks.is_current("uid", grounds), "never checked");
        checks.record("uid", grounds);
        assert!(checks.is_current("uid", Grounds::of(&pod_now, &job, 1, 0).digest()));
        assert!(!checks.is_current("other", grounds));

        let pod_changed = pod("8");
        let job_changed = Job { excluded_nodes: "n[1-2]".into(), ..job.clone() };
        let replaced = Job { job_id: 13, ..job.clone() };
        for (what, changed) in [
            ("placement", Grounds::of(&pod_now, &job, 2, 0)),
            ("job-mapper", Grounds::of(&pod_now, &job, 1, 1)),
            ("pod", Grounds::of(&pod_changed, &job, 1, 0)),
            ("excluded nodes", Grounds::of(&pod_now, &job_changed, 1, 0)),
            ("job", Grounds::of(&pod_now, &replaced, 1, 0)),
        ] {
            assert!(!checks.is_current("uid", changed.digest()), "{what} changed");
        }
    }
}
