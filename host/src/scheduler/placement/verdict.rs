//! A pod's verdict: the Slurm nodes its placement rules let its placeholder use, and those they
//! exclude with why. Every rule (`Placement` for the Node's own, `pod_rules` for other pods' and
//! volumes') narrows one; `exclusions` turns it into the job's excluded nodes.

use std::collections::{BTreeMap, BTreeSet};

/// What the pod may and may not use.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Verdict {
    /// Slurm nodes the placeholder must not run on, with why, by name.
    pub excluded: BTreeMap<String, String>,
    /// Slurm nodes it may run on.
    pub eligible: BTreeSet<String>,
}

impl Verdict {
    /// Why nothing fits, in the manner of kube-scheduler's "0/3 nodes are available: ...".
    pub fn nothing_fits(&self) -> String {
        format!("0/{} Slurm nodes fit the pod's placement rules: {}", self.excluded.len(), self.why_excluded())
    }

    /// Each excluded node's reason (the first few).
    pub fn why_excluded(&self) -> String {
        const SHOWN: usize = 5;
        let mut reasons: Vec<String> =
            self.excluded.iter().take(SHOWN).map(|(node, why)| format!("{node}: {why}")).collect();
        if self.excluded.len() > SHOWN {
            reasons.push(format!("and {} more", self.excluded.len() - SHOWN));
        }
        reasons.join("; ")
    }
}
