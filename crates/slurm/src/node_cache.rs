//! One shared view of Slurm's nodes, refreshed by one incremental listing per poll, never one
//! request per node or per pod.
//!
//! It fails closed: when the last poll failed or is older than `stale_after`, there is no snapshot
//! and every node reads as [`SlurmView::Unknown`]. A node missing from a successful listing is
//! [`SlurmView::Absent`], which is not the same as drained.
//!
//! slurmrestd 24.11 quirks handled here: `GET /nodes?update_time=` answers 304 when nothing changed
//! and HTTP 500 "Unable to query partitions" when nodes changed but partitions did not (then the
//! listing is asked for again without `update_time`); a zero `last_update` is never stored. Slurm
//! compares whole seconds, so a change in the same second as the last listing can be missed by an
//! incremental poll: every `full_listing_every` polls the listing is taken in full.
//!
//! A replica that stands by for the leader Lease polls at [`Pace::StandingBy`]: each change of any
//! node makes slurmrestd list every node again (13 MB at 5,000 nodes), and a listing the follower
//! asks for is one slurmrestd serves beside the leader's writes. Its listing is kept warm, not
//! current; a takeover polls at once.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant, SystemTime};

use futures::Stream;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use tokio::sync::{broadcast, watch};

use super::{Node, NodesPage, SlurmClient, SlurmError};

/// How often a replica that stands by for the Lease polls.
pub const STANDBY_INTERVAL: Duration = Duration::from_secs(10);

/// How the cache polls.
#[derive(Debug, Clone, Copy)]
pub struct NodeCacheConfig {
    pub interval: Duration,
    /// The interval at [`Pace::StandingBy`].
    pub standby_interval: Duration,
    /// A listing older than this (no successful poll since) is not trusted.
    pub stale_after: Duration,
    /// Every this many polls the listing is taken without `update_time`.
    pub full_listing_every: u32,
}

impl NodeCacheConfig {
    pub fn every(interval: Duration) -> Self {
        Self {
            interval,
            standby_interval: STANDBY_INTERVAL.max(interval),
            stale_after: interval * 4 + Duration::from_secs(5),
            full_listing_every: 60,
        }
    }

    fn interval_at(&self, pace: Pace) -> Duration {
        match pace {
            Pace::Leading => self.interval,
            Pace::StandingBy => self.standby_interval,
        }
    }

    /// Standing by, a listing is stale once two polls are overdue: nothing decides on it then.
    fn stale_after_at(&self, pace: Pace) -> Duration {
        match pace {
            Pace::Leading => self.stale_after,
            Pace::StandingBy => self.stale_after.max(self.standby_interval * 2),
        }
    }
}

/// Whom the cache polls for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pace {
    /// The controllers that decide on the listing run here (the leader, or a host without election).
    Leading,
    /// The replica waits for the Lease: the listing only has to be warm for a takeover.
    StandingBy,
}

/// Where listings come from: slurmrestd, or a fake in tests.
pub trait NodeSource: Send + Sync {
    fn list_nodes(&self, since: Option<u64>) -> impl Future<Output = Result<NodesPage, SlurmError>> + Send;
}

impl NodeSource for SlurmClient {
    fn list_nodes(&self, since: Option<u64>) -> impl Future<Output = Result<NodesPage, SlurmError>> + Send {
        self.nodes(since)
    }
}

/// What Slurm says about one node name.
#[derive(Debug, Clone, PartialEq)]
pub enum SlurmView {
    /// Slurm cannot be read right now (or its listing is stale): decide nothing that could kill a job.
    Unknown,
    /// A successful, fresh listing does not contain the node.
    Absent,
    Known(Box<Node>),
}

/// A fresh listing.
#[derive(Debug, Clone)]
pub struct NodeSnapshot {
    nodes: Arc<HashMap<String, Node>>,
    /// When the request that last confirmed this listing (a listing or a 304) was sent, by the wall
    /// clock: Slurm's state at that time or later. A write answered before it shows in the listing.
    pub confirmed_at: SystemTime,
}

impl NodeSnapshot {
    pub fn new(nodes: impl IntoIterator<Item = Node>, confirmed_at: SystemTime) -> Self {
        let nodes = nodes.into_iter().map(|node| (node.name.clone(), node)).collect();
        Self { nodes: Arc::new(nodes), confirmed_at }
    }

    pub fn get(&self, name: &str) -> Option<&Node> {
        self.nodes.get(name)
    }

    pub fn view(&self, name: &str) -> SlurmView {
        self.get(name).map_or(SlurmView::Absent, |node| SlurmView::Known(Box::new(node.clone())))
    }

    pub fn nodes(&self) -> impl Iterator<Item = &Node> {
        self.nodes.values()
    }

    /// Whether both come from the same listing (nothing Slurm said changed in between).
    pub fn same_listing(&self, other: &NodeSnapshot) -> bool {
        Arc::ptr_eq(&self.nodes, &other.nodes)
    }
}

/// A node that appeared (no `before`), changed, or disappeared (no `after`).
#[derive(Debug, Clone, PartialEq)]
pub struct ChangedNode {
    pub name: String,
    pub before: Option<Node>,
    pub after: Option<Node>,
}

impl ChangedNode {
    /// The node's comment, the last one seen if it is gone: it tells whose the node is.
    pub fn comment(&self) -> &str {
        self.after.as_ref().or(self.before.as_ref()).map_or("", |node| node.comment.as_str())
    }
}

/// What subscribers hear after a poll.
#[derive(Debug, Clone, PartialEq)]
pub enum NodeChange {
    Nodes(Arc<Vec<ChangedNode>>),
    /// Readability flipped, or a subscriber fell behind: look at everything again.
    All,
}

#[derive(Default)]
struct State {
    listing: Option<Arc<HashMap<String, Node>>>,
    /// When the request behind the latest listing or 304 was sent.
    confirmed: Option<(Instant, SystemTime)>,
    last_update: Option<u64>,
    last_poll_failed: Option<String>,
    polls_since_full: u32,
}

/// Shared, cheaply cloned Slurm node cache.
#[derive(Clone)]
pub struct NodeCache {
    state: Arc<RwLock<State>>,
    changes: broadcast::Sender<NodeChange>,
    config: NodeCacheConfig,
    pace: Arc<watch::Sender<Pace>>,
    polls: Counter,
    requests: Counter,
    /// 1 while the last poll got an answer, else 0.
    up: Gauge,
}

impl NodeCache {
    pub fn new(config: NodeCacheConfig) -> Self {
        let (changes, _) = broadcast::channel(256);
        let (polls, requests, up) = (Counter::default(), Counter::default(), Gauge::default());
        let pace = Arc::new(watch::Sender::new(Pace::Leading));
        Self { state: Arc::default(), changes, config, pace, polls, requests, up }
    }

    /// Polls at `pace` from now on; a change polls at once.
    pub fn set_pace(&self, pace: Pace) {
        self.pace.send_replace(pace);
    }

    /// Adds the poll and request counters (their ratio: Slurm requests per poll, whatever the
    /// number of nodes) and `sunk_slurm_up` to `registry`.
    pub fn register(&self, registry: &mut Registry) {
        registry.register("sunk_slurm_up", "1 while the last poll of slurmrestd was answered, else 0", self.up.clone());
        registry.register("sunk_slurm_node_polls", "Polls of Slurm's node listing", self.polls.clone());
        registry.register(
            "sunk_slurm_node_requests",
            "Requests to slurmrestd for node listings (1 per poll, 2 when its partition quirk forces a full one)",
            self.requests.clone(),
        );
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, State> {
        self.state.read().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, State> {
        self.state.write().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The current listing, or why there is none to trust.
    pub fn snapshot(&self) -> Result<NodeSnapshot, Unreadable> {
        self.snapshot_no_older_than(self.config.stale_after_at(*self.pace.borrow()))
    }

    /// The last listing, fresh or not, unless it is older than `age` or a poll failed since: for a
    /// decision that cannot end a job when the next listing is slow to come.
    pub fn snapshot_no_older_than(&self, age: Duration) -> Result<NodeSnapshot, Unreadable> {
        readable_snapshot(&self.read(), age, Instant::now())
    }

    /// One node, failing closed.
    pub fn view(&self, name: &str) -> SlurmView {
        self.snapshot().map_or(SlurmView::Unknown, |snapshot| snapshot.view(name))
    }

    /// Change notifications from now on.
    pub fn subscribe(&self) -> impl Stream<Item = NodeChange> + Send + 'static {
        futures::stream::unfold(self.changes.subscribe(), |mut receiver| async move {
            match receiver.recv().await {
                Ok(change) => Some((change, receiver)),
                Err(broadcast::error::RecvError::Lagged(_)) => Some((NodeChange::All, receiver)),
                Err(broadcast::error::RecvError::Closed) => None,
            }
        })
    }

    /// Polls `source` every interval of its pace, forever.
    pub async fn run<S: NodeSource>(self, source: S) {
        let mut pace = self.pace.subscribe();
        loop {
            let started = tokio::time::Instant::now();
            if let Err(error) = self.poll_once(&source).await {
                tracing::warn!(%error, "listing Slurm nodes failed; nodes read as unknown until a listing succeeds");
            }
            let interval = self.config.interval_at(*pace.borrow_and_update());
            tokio::select! {
                () = tokio::time::sleep_until(started + interval) => {}
                // The sender lives as long as the cache: this never ends.
                _ = pace.changed() => {}
            }
        }
    }

    /// One poll: one request, two when slurmrestd's partition quirk forces a full listing.
    pub async fn poll_once<S: NodeSource>(&self, source: &S) -> Result<(), SlurmError> {
        let since = self.next_since();
        let asked = (Instant::now(), SystemTime::now());
        self.polls.inc();
        self.requests.inc();
        let page = match source.list_nodes(since).await {
            Err(error) if since.is_some() && error.is_partitions_unchanged() => {
                self.requests.inc();
                source.list_nodes(None).await
            }
            other => other,
        };
        let was_readable = self.snapshot().is_ok();
        let outcome = match page {
            Ok(page) => self.apply(page, since.is_none(), asked),
            Err(error) => {
                self.write().last_poll_failed = Some(error.to_string());
                Err(error)
            }
        };
        self.up.set(i64::from(outcome.is_ok()));
        let changed = outcome.as_ref().ok().cloned().unwrap_or_default();
        if !changed.is_empty() {
            let _ = self.changes.send(NodeChange::Nodes(Arc::new(changed)));
        }
        if was_readable != self.snapshot().is_ok() {
            let _ = self.changes.send(NodeChange::All);
        }
        outcome.map(drop)
    }

    fn next_since(&self) -> Option<u64> {
        let state = self.read();
        let full_due = state.polls_since_full + 1 >= self.config.full_listing_every.max(1);
        if state.listing.is_none() || full_due { None } else { state.last_update }
    }

    /// Takes in a page asked for at `asked`; returns the nodes that changed.
    fn apply(&self, page: NodesPage, full: bool, asked: (Instant, SystemTime)) -> Result<Vec<ChangedNode>, SlurmError> {
        let mut state = self.write();
        state.polls_since_full = if full { 0 } else { state.polls_since_full + 1 };
        let NodesPage::All { nodes, last_update } = page else {
            if state.listing.is_none() {
                // A 304 with nothing to confirm is no listing at all.
                let error = "slurmrestd said nothing changed before anything was listed".to_owned();
                state.last_poll_failed = Some(error);
                return Ok(Vec::new());
            }
            state.confirmed = Some(asked);
            state.last_poll_failed = None;
            return Ok(Vec::new());
        };
        let listing: HashMap<String, Node> = nodes.into_iter().map(|node| (node.name.clone(), node)).collect();
        let changed =
            state.listing.as_deref().map_or_else(|| changes(&HashMap::new(), &listing), |old| changes(old, &listing));
        state.listing = Some(Arc::new(listing));
        state.confirmed = Some(asked);
        state.last_poll_failed = None;
        if let Some(time) = last_update.filter(|time| *time > 0) {
            state.last_update = Some(time);
        }
        Ok(changed)
    }
}

/// Why the cache has no listing to trust.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unreadable {
    #[error("Slurm's nodes have not been listed yet")]
    NeverListed,
    #[error("the last listing of Slurm's nodes failed: {0}")]
    Failed(String),
    #[error("Slurm's nodes were last listed {0:?} ago")]
    Stale(Duration),
}

fn readable_snapshot(state: &State, stale_after: Duration, now: Instant) -> Result<NodeSnapshot, Unreadable> {
    if let Some(error) = &state.last_poll_failed {
        return Err(Unreadable::Failed(error.clone()));
    }
    let (Some(listing), Some((confirmed, confirmed_at))) = (&state.listing, state.confirmed) else {
        return Err(Unreadable::NeverListed);
    };
    let age = now.saturating_duration_since(confirmed);
    if age > stale_after {
        return Err(Unreadable::Stale(age));
    }
    Ok(NodeSnapshot { nodes: listing.clone(), confirmed_at })
}

fn changes(old: &HashMap<String, Node>, new: &HashMap<String, Node>) -> Vec<ChangedNode> {
    let mut changed: Vec<ChangedNode> = new
        .values()
        .filter(|node| old.get(&node.name) != Some(*node))
        .map(|node| ChangedNode {
            name: node.name.clone(),
            before: old.get(&node.name).cloned(),
            after: Some(node.clone()),
        })
        .collect();
    changed.extend(old.values().filter(|node| !new.contains_key(&node.name)).map(|node| ChangedNode {
        name: node.name.clone(),
        before: Some(node.clone()),
        after: None,
    }));
    changed.sort_by(|a, b| a.name.cmp(&b.name));
    changed
}

#[cfg(test)]
#[path = "node_cache_tests.rs"]
mod tests;
