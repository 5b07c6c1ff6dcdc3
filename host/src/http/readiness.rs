//! What `/readyz` waits for: named checks that the host's parts register as they start.
//!
//! A host is ready when it could do its job at once: as the leader, or, as a follower, by taking
//! over. So a follower is ready too (a rolling update waits for the new replica to be ready before
//! it stops the old leader), and a check is a cache being warm, never leadership.

use std::sync::{Arc, Mutex, PoisonError};

type Check = Box<dyn Fn() -> bool + Send + Sync>;

#[derive(Clone, Default)]
pub struct Readiness {
    checks: Arc<Mutex<Vec<(&'static str, Check)>>>,
}

impl Readiness {
    /// Adds a check; `/readyz` fails, naming it, while `ready` returns false.
    pub fn check(&self, name: &'static str, ready: impl Fn() -> bool + Send + Sync + 'static) {
        self.checks.lock().unwrap_or_else(PoisonError::into_inner).push((name, Box::new(ready)));
    }

    /// The names of the checks that do not pass now.
    pub fn pending(&self) -> Vec<&'static str> {
        let checks = self.checks.lock().unwrap_or_else(PoisonError::into_inner);
        checks.iter().filter(|(_, ready)| !ready()).map(|(name, _)| *name).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};

    #[test]
    fn readiness_names_the_checks_that_fail_until_they_pass() {
        let readiness = Readiness::default();
        assert!(readiness.pending().is_empty(), "no checks: ready");
        let lease = Arc::new(AtomicBool::new(false));
        let seen = lease.clone();
        readiness.check("leader-lease", move || seen.load(Ordering::Relaxed));
        readiness.check("slurm-nodes", || true);
        assert_eq!(readiness.pending(), ["leader-lease"]);
        lease.store(true, Ordering::Relaxed);
        assert!(readiness.pending().is_empty());
    }
}
