//! Verdicts shared by every pod with the same placement rules, for as long as what they are drawn
//! from stays the same. Judging a pod means judging every Slurm node (thousands, at scale); 10,000
//! pods arriving together, or passed over again after one Node was cordoned, mostly share a handful
//! of rule sets, so each set is judged once per change instead of once per pod.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::{Arc, Mutex, PoisonError};

use super::verdict::Verdict;
use crate::scheduler::watched_pod::PodNeeds;
use crate::slurm::NodeSnapshot;

/// Rule sets kept at most: pods whose rules are all different (a hostname each) share nothing, and
/// must not grow this without bound.
const MOST_RULE_SETS: usize = 64;

/// What verdicts were drawn from: the Nodes and slurmd pods as the watches had them (a count of the
/// changes they saw) and one listing of Slurm's nodes.
struct DrawnFrom {
    watched: u64,
    listing: NodeSnapshot,
}

#[derive(Default)]
struct Verdicts {
    drawn_from: Option<DrawnFrom>,
    by_rules: HashMap<u64, Arc<Verdict>>,
}

impl Verdicts {
    /// Whether the verdicts held were drawn from these views.
    fn drawn_from(&self, watched: u64, listing: &NodeSnapshot) -> bool {
        self.drawn_from.as_ref().is_some_and(|from| from.watched == watched && from.listing.same_listing(listing))
    }
}

#[derive(Clone, Default)]
pub struct SharedVerdicts {
    verdicts: Arc<Mutex<Verdicts>>,
}

impl SharedVerdicts {
    /// The verdict for `spec`'s rules drawn from these views, judged now only if no pod with the same
    /// rules was judged on them before.
    pub fn get_or_judge(
        &self,
        spec: &PodNeeds,
        watched: u64,
        listing: &NodeSnapshot,
        judge: impl FnOnce() -> Verdict,
    ) -> Arc<Verdict> {
        let rules = rules_of(spec);
        {
            let mut verdicts = self.verdicts.lock().unwrap_or_else(PoisonError::into_inner);
            if !verdicts.drawn_from(watched, listing) {
                verdicts.by_rules.clear();
                verdicts.drawn_from = Some(DrawnFrom { watched, listing: listing.clone() });
            }
            if let Some(verdict) = verdicts.by_rules.get(&rules) {
                return verdict.clone();
            }
        }
        // Judged unlocked: two pods with new rules are judged side by side (the same rules, maybe twice).
        let verdict = Arc::new(judge());
        let mut verdicts = self.verdicts.lock().unwrap_or_else(PoisonError::into_inner);
        if verdicts.drawn_from(watched, listing) {
            if verdicts.by_rules.len() >= MOST_RULE_SETS {
                verdicts.by_rules.clear();
            }
            verdicts.by_rules.insert(rules, verdict.clone());
        }
        verdict
    }
}

/// The part of a pod's spec a verdict depends on: its tolerations, node selector and affinity.
fn rules_of(spec: &PodNeeds) -> u64 {
    let mut hasher = DefaultHasher::new();
    // The k8s-openapi types are not `Hash`; their JSON is exact and small.
    let rules = (&spec.tolerations, &spec.node_selector, &spec.affinity);
    serde_json::to_vec(&rules).unwrap_or_default().hash(&mut hasher);
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;
    use std::time::SystemTime;

    use super::*;

    fn spec(json: serde_json::Value) -> PodNeeds {
        serde_json::from_value(json).unwrap()
    }

    fn listing() -> NodeSnapshot {
        NodeSnapshot::new([], SystemTime::now())
    }

    #[test]
    fn one_judgement_per_rule_set_until_the_views_change() {
        let shared = SharedVerdicts::default();
        let judged = Cell::new(0);
        let judge = || {
            judged.set(judged.get() + 1);
            Verdict::default()
        };
        let (plain, tolerant) =
            (spec(serde_json::json!({})), spec(serde_json::json!({"tolerations": [{"operator": "Exists"}]})));
        let (first, second) = (listing(), listing());
        shared.get_or_judge(&plain, 1, &first, judge);
        shared.get_or_judge(&plain, 1, &first, judge);
        assert_eq!(judged.get(), 1, "the same rules on the same views");
        shared.get_or_judge(&tolerant, 1, &first, judge);
        assert_eq!(judged.get(), 2, "other rules");
        shared.get_or_judge(&plain, 2, &first, judge);
        assert_eq!(judged.get(), 3, "a Node or slurmd pod changed");
        shared.get_or_judge(&plain, 2, &second, judge);
        assert_eq!(judged.get(), 4, "another listing of Slurm's nodes");
        shared.get_or_judge(&tolerant, 2, &second, judge);
        assert_eq!(judged.get(), 5, "verdicts on older views are forgotten");
    }
}
