//! Every bound pod of the cluster indexed by where it runs ([`BoundPods`]), built at most once per
//! poll and shared by every pass, as [`super::shared_verdicts`] shares verdicts: the pod-level
//! placement rules (`pod_rules`) read it instead of indexing every pod of the cluster for each
//! pending pod (10,000 pods and a burst of 500 pending ones were 5 million pod visits a burst).
//!
//! How fresh it is: the poll ([`SharedNeighbourhood::watch`]) looks at the bound-pod store every
//! poll interval and builds the view again when the store changed (any pod's event gives a new
//! object, so a pointer comparison tells). A pass reads the view as it is, so a pod another scheduler
//! bound since is seen up to one poll interval late, on top of the watch's own lag. This scheduler's
//! pods are never late: each pass adds its own pods that the view does not hold bound, from the
//! controller's store as it is then — those bound since the view (in the same poll, by this host) and
//! those Slurm has placed and not yet bound (`pod_rules`), and those this host bound that its store
//! does not show bound yet (`assumed`). So two pods of one burst are never put together against
//! their rules; the bind-time check (`pod_rules::refusal`) reads the same view and
//! the same live own pods, and still replaces a job Slurm put where a rule now refuses it. The Nodes
//! are read live by each pass; only the pods are shared.
//!
//! Another scheduler's pods can always slip in: kube-scheduler does not see this host's bindings
//! before its own informer does either, and nothing locks the two. The view widens that window by one
//! poll interval at most, as the `Refusers` flag it replaces did for pods without rules.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hash, Hasher};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arc_swap::ArcSwapOption;
use kube::runtime::reflector::Store;

use super::pod_facts::{finished, namespace_of, refuses_others};
use crate::scheduler::watched_pod::WatchedPod;

/// The pods bound to a Node when the view was built, not finished, indexed as
/// [`super::neighbourhood::Neighbourhood::sharing`] reads them. Holds the store's objects, not copies.
pub struct BoundPods {
    /// Every Node name a pod is bound to, once; pods name their Node by its index here.
    pub(super) node_names: Vec<String>,
    pub(super) by_namespace: HashMap<String, Vec<(Arc<WatchedPod>, usize)>>,
    /// The bound pods with a required pod anti-affinity.
    pub(super) refusing: Vec<(Arc<WatchedPod>, usize)>,
    /// The UIDs of the bound pods, as [`uid_key`]s: whether a pod is among them, without reading it.
    uids: HashSet<u128, BuildHasherDefault<KeyHasher>>,
    /// Whether any of the pods not finished, bound or not, carries a required pod anti-affinity.
    any_refuser: bool,
    /// The store's objects the view was built from, to tell whether the store changed since.
    from: Vec<Arc<WatchedPod>>,
}

impl BoundPods {
    /// Indexes `pods`, a store's state: O(pods).
    pub fn new(pods: Vec<Arc<WatchedPod>>) -> Self {
        let mut node_at: HashMap<&str, usize> = HashMap::new();
        let mut node_names = Vec::new();
        let mut by_namespace: HashMap<String, Vec<(Arc<WatchedPod>, usize)>> = HashMap::new();
        let (mut refusing, mut uids, mut any_refuser) = (Vec::new(), HashSet::default(), false);
        for pod in pods.iter().filter(|pod| !finished(pod)) {
            let refuses = refuses_others(pod);
            any_refuser |= refuses;
            let Some(node) = pod.spec.as_ref().and_then(|spec| spec.node_name.as_deref()) else { continue };
            let node = *node_at.entry(node).or_insert_with(|| {
                node_names.push(node.to_owned());
                node_names.len() - 1
            });
            match by_namespace.get_mut(namespace_of(pod)) {
                Some(placed) => placed.push((pod.clone(), node)),
                None => drop(by_namespace.insert(namespace_of(pod).to_owned(), vec![(pod.clone(), node)])),
            }
            if refuses {
                refusing.push((pod.clone(), node));
            }
            if let Some(uid) = pod.metadata.uid.as_deref() {
                uids.insert(uid_key(uid));
            }
        }
        drop(node_at);
        Self { node_names, by_namespace, refusing, uids, any_refuser, from: pods }
    }

    /// Whether the pod with `uid` is among the bound pods (then it counts where it is bound).
    pub fn holds(&self, uid: &str) -> bool {
        self.uids.contains(&uid_key(uid))
    }

    /// Whether any pod not finished, bound or not, carries a required pod anti-affinity, which may
    /// refuse any other pod: without one, a pod without pod-level rules need not be judged (and may
    /// be allocated at once).
    pub fn any_refuser(&self) -> bool {
        self.any_refuser
    }
}

/// A UID as two independent 64-bit hashes of it (FNV-1a and SipHash): a pass asks whether each of
/// its scheduler's bound pods is in the view, and this needs no read of the view's pods (a sorted list
/// of them cost a pass 9 ms at 10,000 pods, in cache misses). Two UIDs agreeing on 128 bits are out of
/// reach; were they not, a pod bound since the view would count one poll late.
fn uid_key(uid: &str) -> u128 {
    let fnv = uid
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3));
    let mut sip = std::collections::hash_map::DefaultHasher::new();
    uid.hash(&mut sip);
    (u128::from(fnv) << 64) | u128::from(sip.finish())
}

/// Hashes a [`uid_key`], which is a hash already, to its low 64 bits.
#[derive(Default)]
struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for byte in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(*byte);
        }
    }

    fn write_u128(&mut self, key: u128) {
        self.0 = key as u64;
    }
}

/// The shared view, and when it was last found current.
struct Checked {
    pods: Arc<BoundPods>,
    at: Instant,
}

/// The [`BoundPods`] every pass shares, swapped in whole at most once per poll
/// ([`Self::watch`]). A default one has no poll: every read builds its own view.
#[derive(Clone, Default)]
pub struct SharedNeighbourhood {
    view: Arc<ArcSwapOption<Checked>>,
    /// Held while a reader builds a view, so that passes arriving together build one.
    building: Arc<Mutex<()>>,
    /// Whether one of this scheduler's pods not finished carries a required pod anti-affinity: the
    /// bound-pod store holds none still waiting, and Slurm may have placed one that is not bound yet.
    own_refuser: Arc<AtomicBool>,
    interval: Duration,
}

impl SharedNeighbourhood {
    /// A view kept current by [`Self::watch`] every `interval`.
    pub fn new(interval: Duration) -> Self {
        Self { interval, ..Self::default() }
    }

    /// Looks at the bound `pods` every poll interval, building the view again when they changed, and
    /// at this scheduler's `own` pods for one that refuses others.
    pub async fn watch(self, pods: Store<WatchedPod>, own: Store<WatchedPod>) {
        let mut ticker = tokio::time::interval(self.interval.max(Duration::from_millis(1)));
        loop {
            ticker.tick().await;
            let own_refuser = own.state().iter().any(|pod| !finished(pod) && refuses_others(pod));
            self.own_refuser.store(own_refuser, Ordering::Relaxed);
            let current = self.view.load_full();
            let age = current.as_ref().map(|checked| checked.at.elapsed());
            let mut state = None;
            let refresh = at_tick(age, self.interval, || {
                let now = state.insert(pods.state());
                current.as_ref().is_none_or(|checked| !same_pods(&checked.pods.from, now))
            });
            let pods = match (refresh, current) {
                (Refresh::Use, _) => continue,
                (Refresh::Renew, Some(current)) => current.pods.clone(),
                _ => Arc::new(BoundPods::new(state.unwrap_or_else(|| pods.state()))),
            };
            self.view.store(Some(Arc::new(Checked { pods, at: Instant::now() })));
        }
    }

    /// Whether any pod carries a required pod anti-affinity, as the poll last found (no poll yet:
    /// none known).
    pub fn any(&self) -> bool {
        self.own_refuser.load(Ordering::Relaxed)
            || self.view.load().as_ref().is_some_and(|checked| checked.pods.any_refuser())
    }

    /// The view for a pass: the shared one, or one built now from `pods` when there is none yet or
    /// the poll has fallen behind.
    pub fn read(&self, pods: &Store<WatchedPod>) -> Arc<BoundPods> {
        let age = |view: &Option<Arc<Checked>>| view.as_ref().map(|checked| checked.at.elapsed());
        let current = self.view.load_full();
        if at_read(age(&current), self.interval) == Refresh::Use
            && let Some(current) = current
        {
            return current.pods.clone();
        }
        let _building = self.building.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        // Another reader may have built it meanwhile.
        let current = self.view.load_full();
        if at_read(age(&current), self.interval) == Refresh::Use
            && let Some(current) = current
        {
            return current.pods.clone();
        }
        let built = Arc::new(BoundPods::new(pods.state()));
        self.view.store(Some(Arc::new(Checked { pods: built.clone(), at: Instant::now() })));
        built
    }
}

/// What to do with the shared view.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Refresh {
    /// Use it as it is.
    Use,
    /// Keep its pods (the store has not changed) and count it current from now.
    Renew,
    /// Build it again from the store.
    Build,
}

/// How far behind the poll may fall, in poll intervals, before a pass builds the view itself.
const BEHIND: u32 = 3;

/// At the poll, `age` after the view was last found current (`None`: never built): build it when
/// there is none or the store `changed`, but not twice within half an interval (a reader just built
/// it). `changed` is asked only when the answer depends on it.
fn at_tick(age: Option<Duration>, interval: Duration, changed: impl FnOnce() -> bool) -> Refresh {
    match age {
        None => Refresh::Build,
        Some(age) if age < interval / 2 => Refresh::Use,
        Some(_) if changed() => Refresh::Build,
        Some(_) => Refresh::Renew,
    }
}

/// At a pass: use the view unless there is none, or the poll has not found it current for
/// [`BEHIND`] intervals (without a poll, `interval` is zero and every pass builds its own).
fn at_read(age: Option<Duration>, interval: Duration) -> Refresh {
    match age {
        Some(age) if age < interval * BEHIND => Refresh::Use,
        _ => Refresh::Build,
    }
}

/// Whether a store's state is the very one read before: a store replaces an object on every event,
/// and an object of `before` cannot be replaced by one at the same address while `before` holds it.
fn same_pods<T>(before: &[Arc<T>], now: &[Arc<T>]) -> bool {
    before.len() == now.len() && before.iter().zip(now).all(|(before, now)| Arc::ptr_eq(before, now))
}

#[cfg(test)]
mod tests {
    use super::*;

    const POLL: Duration = Duration::from_millis(500);

    fn ms(ms: u64) -> Option<Duration> {
        Some(Duration::from_millis(ms))
    }

    #[test]
    fn the_poll_builds_the_view_at_most_once_an_interval_and_only_when_the_pods_changed() {
        let cases = [
            // (age, pods changed, what the poll does)
            (None, false, Refresh::Build),
            (None, true, Refresh::Build),
            (ms(0), true, Refresh::Use),
            (ms(249), true, Refresh::Use),
            (ms(250), false, Refresh::Renew),
            (ms(250), true, Refresh::Build),
            (ms(500), false, Refresh::Renew),
            (ms(500), true, Refresh::Build),
            (ms(5_000), true, Refresh::Build),
        ];
        for (age, changed, expected) in cases {
            assert_eq!(at_tick(age, POLL, || changed), expected, "{age:?}, changed: {changed}");
        }
    }

    #[test]
    fn the_poll_reads_the_store_only_when_the_answer_depends_on_it() {
        let asked = std::cell::Cell::new(false);
        let ask = || {
            asked.set(true);
            true
        };
        at_tick(None, POLL, ask);
        at_tick(ms(10), POLL, ask);
        assert!(!asked.get());
        at_tick(ms(500), POLL, ask);
        assert!(asked.get());
    }

    #[test]
    fn a_pass_uses_the_shared_view_unless_there_is_none_or_the_poll_fell_behind() {
        let cases = [
            // (age, interval, what a pass does)
            (None, POLL, Refresh::Build),
            (ms(0), POLL, Refresh::Use),
            (ms(1_499), POLL, Refresh::Use),
            (ms(1_500), POLL, Refresh::Build),
            // No poll: every pass builds its own, as before the view was shared.
            (ms(0), Duration::ZERO, Refresh::Build),
            (None, Duration::ZERO, Refresh::Build),
        ];
        for (age, interval, expected) in cases {
            assert_eq!(at_read(age, interval), expected, "{age:?} of {interval:?}");
        }
    }

    #[test]
    fn the_store_changed_when_any_object_is_another() {
        let (a, b, c) = (Arc::new(1), Arc::new(2), Arc::new(3));
        let b_again = Arc::new(2);
        type Case = (Vec<Arc<i32>>, Vec<Arc<i32>>, bool);
        let cases: [Case; 6] = [
            (vec![], vec![], true),
            (vec![a.clone(), b.clone()], vec![a.clone(), b.clone()], true),
            // An event replaces the object, even with equal content.
            (vec![a.clone(), b.clone()], vec![a.clone(), b_again], false),
            (vec![a.clone(), b.clone()], vec![a.clone()], false),
            (vec![a.clone()], vec![a.clone(), c], false),
            (vec![a.clone(), b.clone()], vec![b, a], false),
        ];
        for (before, now, same) in cases {
            assert_eq!(same_pods(&before, &now), same, "{before:?} -> {now:?}");
        }
    }

    #[test]
    fn the_view_holds_the_pods_bound_and_not_finished_by_uid() {
        let pod = |uid: &str, node: Option<&str>, phase: &str| -> Arc<WatchedPod> {
            let pod = serde_json::json!({
                "metadata": {"name": uid, "uid": uid},
                "spec": {"nodeName": node, "containers": []},
                "status": {"phase": phase}
            });
            Arc::new(serde_json::from_value(pod).unwrap())
        };
        let uid = "3f2b8c1e-9a4d-4e6f-8b7a-1c2d3e4f5a6b";
        let view = BoundPods::new(vec![
            pod(uid, Some("n1"), "Running"),
            pod("pending", None, "Pending"),
            pod("done", Some("n1"), "Succeeded"),
        ]);
        let cases = [(uid, true), ("3f2b8c1e-9a4d-4e6f-8b7a-1c2d3e4f5a6c", false), ("pending", false), ("done", false)];
        for (uid, held) in cases {
            assert_eq!(view.holds(uid), held, "{uid}");
        }
        assert_ne!(uid_key("a"), uid_key("b"));
        assert!(!view.any_refuser());
    }

    /// A pod in `phase` with a required pod anti-affinity, bound to n1 or waiting.
    fn refuser(phase: &str, node: Option<&str>) -> WatchedPod {
        let pod = serde_json::json!({
            "metadata": {"name": phase, "namespace": "ml", "uid": phase},
            "spec": {"nodeName": node, "containers": [], "affinity": {"podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": "kubernetes.io/hostname"}]
            }}},
            "status": {"phase": phase}
        });
        serde_json::from_value(pod).unwrap()
    }

    #[test]
    fn only_a_refuser_not_finished_may_refuse() {
        let refuser = |phase: &str| Arc::new(refuser(phase, Some("n1")));
        assert!(BoundPods::new(vec![refuser("Running")]).any_refuser());
        assert!(BoundPods::new(vec![refuser("Pending")]).any_refuser());
        assert!(!BoundPods::new(vec![refuser("Succeeded"), refuser("Failed")]).any_refuser());
    }

    #[tokio::test(start_paused = true)]
    async fn a_waiting_refuser_of_this_scheduler_counts_though_only_bound_pods_are_watched() {
        use kube::runtime::{reflector, watcher::Event};
        let (bound, _bound_writer) = reflector::store::<WatchedPod>();
        let (own, mut own_writer) = reflector::store::<WatchedPod>();
        let interval = Duration::from_millis(500);
        let shared = SharedNeighbourhood::new(interval);
        tokio::spawn(shared.clone().watch(bound, own));
        tokio::time::sleep(interval).await;
        assert!(!shared.any(), "no pod refuses yet");

        let waiting = refuser("Pending", None);
        own_writer.apply_watcher_event(&Event::Apply(waiting.clone()));
        tokio::time::sleep(interval).await;
        assert!(shared.any(), "this scheduler's waiting pod refuses others");

        own_writer.apply_watcher_event(&Event::Delete(waiting));
        own_writer.apply_watcher_event(&Event::Apply(refuser("Succeeded", None)));
        tokio::time::sleep(interval).await;
        assert!(!shared.any(), "a finished pod refuses nobody");
    }
}
