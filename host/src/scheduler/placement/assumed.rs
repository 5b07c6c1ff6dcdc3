//! The pods this host has bound, by Node, until the pod watch shows them bound (kube-scheduler's
//! assumed pods). The pod-level rules count them at once: a replica bound a moment ago must refuse
//! the next one its Node even before the watch brings the binding, whatever the two jobs' ids.
//! Judging a pod and assuming it bound is one step for pods that pod-level rules concern, so two
//! passes binding at once see each other.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};
use std::time::Instant;

use crate::scheduler::timing::ASSUMED_FOR;

#[derive(Default)]
pub struct Assumed {
    judging: Mutex<()>,
    /// Pod UID -> (Kubernetes Node, when it was assumed bound there).
    nodes: Mutex<HashMap<String, (String, Instant)>>,
}

impl Assumed {
    /// Runs `refusal` and, if it refuses nothing, assumes pod `uid` bound to `node`, as one step:
    /// why the Node is refused, if it is.
    pub fn judge_then_assume(&self, uid: &str, node: &str, refusal: impl FnOnce() -> Option<String>) -> Option<String> {
        let _judging = lock(&self.judging);
        let refused = refusal();
        if refused.is_none() {
            self.assume(uid, node);
        }
        refused
    }

    /// Pod `uid` is being bound to `node`.
    pub fn assume(&self, uid: &str, node: &str) {
        let mut nodes = lock(&self.nodes);
        nodes.retain(|_, (_, at)| at.elapsed() < ASSUMED_FOR);
        nodes.insert(uid.to_owned(), (node.to_owned(), Instant::now()));
    }

    /// The binding of pod `uid` failed.
    pub fn forget(&self, uid: &str) {
        lock(&self.nodes).remove(uid);
    }

    /// The Node pod `uid` was assumed bound to, lately.
    pub fn node_of(&self, uid: &str) -> Option<String> {
        let nodes = lock(&self.nodes);
        nodes.get(uid).filter(|(_, at)| at.elapsed() < ASSUMED_FOR).map(|(node, _)| node.clone())
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pod_is_assumed_bound_only_where_nothing_refused_it() {
        let assumed = Assumed::default();
        assert_eq!(assumed.judge_then_assume("a", "n1", || None), None);
        assert_eq!(assumed.node_of("a").as_deref(), Some("n1"));
        let refused = assumed.judge_then_assume("b", "n1", || assumed.node_of("a").map(|_| "a runs there".into()));
        assert_eq!(refused.as_deref(), Some("a runs there"), "the judgement reads what was assumed before it");
        assert_eq!(assumed.node_of("b"), None);
        assumed.forget("a");
        assert_eq!(assumed.node_of("a"), None);
    }
}
