//! The Syncer's latest drain or resume of each Slurm node, believed until a listing asked for after
//! it was answered shows Slurm's own word. Without it, a cordon that follows an uncordon within a
//! poll is decided on a view that still shows the drain the uncordon lifted ("already drained"), and
//! nothing is done until the next listing shows the resume: 3-5 s with 5,000 nodes and 10,000 jobs
//! (docs/benchmarks.md, scale-bench).

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::SystemTime;

use crate::slurm;

#[derive(Default)]
pub struct OwnWrites(Mutex<HashMap<String, Written>>);

struct Written {
    /// The reason drained for, or None for a resume.
    drain: Option<String>,
    answered_at: SystemTime,
}

impl OwnWrites {
    /// Slurm has answered a drain of `node` for `reason`.
    pub fn drained(&self, node: &str, reason: &str) {
        self.note(node, Some(reason.to_owned()));
    }

    /// Slurm has answered a resume of `node`.
    pub fn resumed(&self, node: &str) {
        self.note(node, None);
    }

    fn note(&self, node: &str, drain: Option<String>) {
        let written = Written { drain, answered_at: SystemTime::now() };
        self.0.lock().expect("never poisoned").insert(node.to_owned(), written);
    }

    /// `listed` as the Syncer believes it is: as listed, unless the listing was asked for
    /// (`asked_at`) before the Syncer's last write to it was answered; then with that write's drain
    /// flag and reason.
    pub fn believed<'a>(&self, listed: &'a slurm::Node, asked_at: SystemTime) -> Cow<'a, slurm::Node> {
        let mut writes = self.0.lock().expect("never poisoned");
        let Some(written) = writes.get(&listed.name) else {
            return Cow::Borrowed(listed);
        };
        if asked_at > written.answered_at {
            writes.remove(&listed.name);
            return Cow::Borrowed(listed);
        }
        let mut believed = listed.clone();
        believed.state.retain(|state| !state.eq_ignore_ascii_case("DRAIN") && !state.eq_ignore_ascii_case("UNDRAIN"));
        match &written.drain {
            Some(reason) => {
                believed.state.push("DRAIN".into());
                believed.reason = reason.clone();
            }
            None => believed.reason.clear(),
        }
        Cow::Owned(believed)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn node(state: &[&str], reason: &str) -> slurm::Node {
        slurm::Node {
            name: "n1".into(),
            state: state.iter().map(|s| (*s).to_owned()).collect(),
            reason: reason.into(),
            ..Default::default()
        }
    }

    #[test]
    fn a_write_stands_for_the_listings_asked_for_before_it_was_answered() {
        let writes = OwnWrites::default();
        let before = SystemTime::now() - Duration::from_secs(1);
        let drained = node(&["IDLE", "DRAIN"], "sunk: cordoned");
        assert_eq!(writes.believed(&drained, before).as_ref(), &drained, "no write: the listing");

        writes.resumed("n1");
        assert_eq!(writes.believed(&drained, before).as_ref(), &node(&["IDLE"], ""), "the resume, not the older view");

        writes.drained("n1", "sunk: cordoned again");
        let idle = node(&["IDLE"], "");
        assert_eq!(writes.believed(&idle, before).as_ref(), &node(&["IDLE", "DRAIN"], "sunk: cordoned again"));

        let after = SystemTime::now() + Duration::from_secs(1);
        assert_eq!(
            writes.believed(&idle, after).as_ref(),
            &idle,
            "a newer listing is Slurm's word, even against the write"
        );
        assert_eq!(writes.believed(&idle, before).as_ref(), &idle, "and the write is forgotten");
    }
}
