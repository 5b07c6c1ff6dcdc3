//! What `/readyz` waits for: named checks that the host's parts register as they start.
//!
//! A host is ready when it could do its job at once: as the leader, or, as a follower, by taking
//! over. So a follower is ready too (a rolling update waits for the new replica to be ready before
//! it stops the old leader), and a check is a cache being warm or a first answer, never leadership.

use std::sync::{Arc, Mutex, PoisonError};

/// `None` when the check passes, else why not (empty when it has nothing to say).
type Check = Box<dyn Fn() -> Option<String> + Send + Sync>;

#[derive(Clone, Default)]
pub struct Readiness {
    checks: Arc<Mutex<Vec<(&'static str, Check)>>>,
}

impl Readiness {
    /// Adds a check; `/readyz` fails, naming it, while `ready` returns false.
    pub fn check(&self, name: &'static str, ready: impl Fn() -> bool + Send + Sync + 'static) {
        self.add(name, Box::new(move || (!ready()).then(String::new)));
    }

    /// Adds a check that is told, rather than asks: it fails, saying `why`, until the gate returned
    /// is opened (and again whenever it is held).
    pub fn gate(&self, name: &'static str, why: impl Into<String>) -> Gate {
        let gate = Gate(Arc::new(Mutex::new(Some(why.into()))));
        let held = gate.clone();
        self.add(name, Box::new(move || held.why_held()));
        gate
    }

    fn add(&self, name: &'static str, check: Check) {
        self.checks.lock().unwrap_or_else(PoisonError::into_inner).push((name, check));
    }

    /// The names of the checks that do not pass now.
    pub fn pending(&self) -> Vec<&'static str> {
        self.failing().into_iter().map(|(name, _)| name).collect()
    }

    /// Why the host is not ready, on one line (`slurm: waiting for Slurm: ...; leader-lease`); `None`
    /// once every check passes.
    pub fn why_not(&self) -> Option<String> {
        let failing = self.failing();
        let said: Vec<String> = failing
            .into_iter()
            .map(|(name, why)| if why.is_empty() { name.to_owned() } else { format!("{name}: {why}") })
            .collect();
        (!said.is_empty()).then(|| said.join("; "))
    }

    fn failing(&self) -> Vec<(&'static str, String)> {
        let checks = self.checks.lock().unwrap_or_else(PoisonError::into_inner);
        checks.iter().filter_map(|(name, check)| Some((*name, check()?))).collect()
    }
}

/// A readiness check that another part of the host sets (see [`Readiness::gate`]).
#[derive(Clone)]
pub struct Gate(Arc<Mutex<Option<String>>>);

impl Gate {
    /// Not ready, because of `why`.
    pub fn hold(&self, why: impl Into<String>) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = Some(why.into());
    }

    /// Ready, as far as this check goes.
    pub fn open(&self) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = None;
    }

    fn why_held(&self) -> Option<String> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).clone()
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
        assert_eq!(readiness.why_not().as_deref(), Some("leader-lease"));
        lease.store(true, Ordering::Relaxed);
        assert!(readiness.pending().is_empty());
        assert_eq!(readiness.why_not(), None);
    }

    #[test]
    fn a_gate_says_why_it_is_held_until_it_is_opened() {
        let readiness = Readiness::default();
        let slurm = readiness.gate("slurm", "not asked yet");
        readiness.check("leader-lease", || false);
        assert_eq!(readiness.why_not().as_deref(), Some("slurm: not asked yet; leader-lease"));
        slurm.hold("waiting for Slurm: no slurmctld responded");
        assert_eq!(readiness.pending(), ["slurm", "leader-lease"]);
        assert_eq!(
            readiness.why_not().as_deref(),
            Some("slurm: waiting for Slurm: no slurmctld responded; leader-lease")
        );
        slurm.open();
        assert_eq!(readiness.why_not().as_deref(), Some("leader-lease"));
    }
}
