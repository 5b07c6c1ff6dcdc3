use std::collections::VecDeque;
use std::sync::Mutex;

use futures::StreamExt;

use super::*;
use crate::ApiMessage;

/// What the fake slurmrestd answers next.
enum Answer {
    Page(NodesPage),
    PartitionsQuirk,
    Down,
}

#[derive(Default)]
struct FakeSlurm {
    answers: Mutex<VecDeque<Answer>>,
    asked: Mutex<Vec<Option<u64>>>,
}

impl FakeSlurm {
    fn answering(answers: impl IntoIterator<Item = Answer>) -> Self {
        Self { answers: Mutex::new(answers.into_iter().collect()), asked: Mutex::default() }
    }

    fn asked(&self) -> Vec<Option<u64>> {
        self.asked.lock().unwrap().clone()
    }
}

impl NodeSource for FakeSlurm {
    fn list_nodes(&self, since: Option<u64>) -> impl Future<Output = Result<NodesPage, SlurmError>> + Send {
        self.asked.lock().unwrap().push(since);
        let answer = self.answers.lock().unwrap().pop_front().unwrap_or(Answer::Down);
        let result = match answer {
            Answer::Page(page) => Ok(page),
            Answer::PartitionsQuirk => Err(SlurmError::Api {
                what: "nodes",
                status: 500,
                errors: vec![ApiMessage { error: "Unable to query partitions".into(), ..Default::default() }],
            }),
            Answer::Down => Err(SlurmError::Unauthorized(511)),
        };
        std::future::ready(result)
    }
}

fn node(name: &str, state: &str) -> Node {
    Node { name: name.into(), state: vec![state.into()], comment: format!("of {name}"), ..Default::default() }
}

impl NodeSource for Arc<FakeSlurm> {
    fn list_nodes(&self, since: Option<u64>) -> impl Future<Output = Result<NodesPage, SlurmError>> + Send {
        self.as_ref().list_nodes(since)
    }
}

fn all(nodes: &[Node], last_update: u64) -> Answer {
    Answer::Page(NodesPage::All { nodes: nodes.to_vec(), last_update: Some(last_update).filter(|t| *t > 0) })
}

fn cache() -> NodeCache {
    NodeCache::new(NodeCacheConfig {
        interval: Duration::from_millis(10),
        standby_interval: STANDBY_INTERVAL,
        stale_after: Duration::from_secs(60),
        full_listing_every: 1000,
    })
}

#[tokio::test]
async fn unknown_until_listed_then_absent_or_known() {
    let cache = cache();
    assert_eq!(cache.view("a"), SlurmView::Unknown);
    assert_eq!(cache.snapshot().unwrap_err(), Unreadable::NeverListed);
    let slurm = FakeSlurm::answering([all(&[node("a", "IDLE")], 100)]);
    cache.poll_once(&slurm).await.unwrap();
    assert_eq!(cache.view("a"), SlurmView::Known(Box::new(node("a", "IDLE"))));
    assert_eq!(cache.view("b"), SlurmView::Absent);
}

#[tokio::test]
async fn polls_incrementally_and_keeps_the_listing_on_304() {
    let cache = cache();
    let answers = [all(&[node("a", "IDLE")], 100), Answer::Page(NodesPage::Unchanged), all(&[node("a", "MIXED")], 101)];
    let slurm = FakeSlurm::answering(answers);
    cache.poll_once(&slurm).await.unwrap();
    let first = cache.snapshot().unwrap();
    cache.poll_once(&slurm).await.unwrap();
    assert_eq!(slurm.asked(), [None, Some(100)]);
    assert_eq!(cache.view("a"), SlurmView::Known(Box::new(node("a", "IDLE"))));
    assert!(cache.snapshot().unwrap().same_listing(&first), "a 304 confirms the listing it had");
    cache.poll_once(&slurm).await.unwrap();
    assert!(!cache.snapshot().unwrap().same_listing(&first));
}

#[tokio::test]
async fn falls_back_to_a_full_listing_on_the_partitions_quirk() {
    let cache = cache();
    let slurm = FakeSlurm::answering([
        all(&[node("a", "IDLE")], 100),
        Answer::PartitionsQuirk,
        all(&[node("a", "ALLOCATED")], 105),
        Answer::Page(NodesPage::Unchanged),
    ]);
    for _ in 0..3 {
        cache.poll_once(&slurm).await.unwrap();
    }
    assert_eq!(slurm.asked(), [None, Some(100), None, Some(105)]);
    assert_eq!(cache.view("a"), SlurmView::Known(Box::new(node("a", "ALLOCATED"))));
}

#[tokio::test]
async fn never_stores_a_zero_last_update() {
    let cache = cache();
    let slurm = FakeSlurm::answering([all(&[node("a", "IDLE")], 100), all(&[node("a", "MIXED")], 0), all(&[], 0)]);
    for _ in 0..3 {
        cache.poll_once(&slurm).await.unwrap();
    }
    assert_eq!(slurm.asked(), [None, Some(100), Some(100)]);
}

#[tokio::test]
async fn a_failed_poll_makes_every_node_unknown_until_one_succeeds() {
    let cache = cache();
    let slurm = FakeSlurm::answering([all(&[node("a", "IDLE")], 100), Answer::Down, all(&[node("a", "IDLE")], 101)]);
    cache.poll_once(&slurm).await.unwrap();
    assert!(cache.poll_once(&slurm).await.is_err());
    assert_eq!(cache.view("a"), SlurmView::Unknown);
    assert_eq!(cache.view("gone"), SlurmView::Unknown);
    assert!(matches!(cache.snapshot(), Err(Unreadable::Failed(_))));
    cache.poll_once(&slurm).await.unwrap();
    assert_eq!(cache.view("gone"), SlurmView::Absent);
}

#[tokio::test]
async fn a_304_before_any_listing_is_not_a_listing() {
    let cache = cache();
    let slurm = FakeSlurm::answering([Answer::Page(NodesPage::Unchanged)]);
    cache.poll_once(&slurm).await.unwrap();
    assert_eq!(cache.view("a"), SlurmView::Unknown);
}

#[test]
fn a_stale_listing_is_unknown() {
    let now = Instant::now();
    let state = State {
        listing: Some(Arc::new(HashMap::new())),
        confirmed: Some((now, SystemTime::now())),
        ..Default::default()
    };
    assert!(readable_snapshot(&state, Duration::from_secs(5), now + Duration::from_secs(4)).is_ok());
    let stale = readable_snapshot(&state, Duration::from_secs(5), now + Duration::from_secs(6));
    assert!(matches!(stale, Err(Unreadable::Stale(_))));
}

#[tokio::test]
async fn a_stale_listing_is_still_given_for_a_longer_bound_but_never_after_a_failed_poll() {
    let cache = NodeCache::new(NodeCacheConfig {
        stale_after: Duration::ZERO,
        ..NodeCacheConfig::every(Duration::from_millis(10))
    });
    let slurm = FakeSlurm::answering([all(&[node("a", "IDLE")], 100), Answer::Down]);
    cache.poll_once(&slurm).await.unwrap();
    assert!(matches!(cache.snapshot(), Err(Unreadable::Stale(_))), "older than its bound at once");
    let slow = cache.snapshot_no_older_than(Duration::from_secs(30)).expect("the last listing, slow to be followed");
    assert!(slow.get("a").is_some());
    assert!(cache.poll_once(&slurm).await.is_err());
    let failed = cache.snapshot_no_older_than(Duration::from_secs(30));
    assert!(matches!(failed, Err(Unreadable::Failed(_))), "{failed:?}");
}

#[tokio::test]
async fn takes_a_full_listing_every_so_often() {
    let cache = NodeCache::new(NodeCacheConfig {
        interval: Duration::from_millis(10),
        standby_interval: STANDBY_INTERVAL,
        stale_after: Duration::from_secs(60),
        full_listing_every: 3,
    });
    let unchanged = || Answer::Page(NodesPage::Unchanged);
    let slurm = FakeSlurm::answering([all(&[], 100), unchanged(), unchanged(), all(&[], 100), unchanged()]);
    for _ in 0..5 {
        cache.poll_once(&slurm).await.unwrap();
    }
    assert_eq!(slurm.asked(), [None, Some(100), Some(100), None, Some(100)]);
}

#[tokio::test]
async fn tells_subscribers_what_changed_and_when_readability_flips() {
    let cache = cache();
    let mut changes = Box::pin(cache.subscribe());
    let slurm = FakeSlurm::answering([
        all(&[node("a", "IDLE"), node("b", "IDLE")], 100),
        all(&[node("a", "ALLOCATED")], 101),
        Answer::Page(NodesPage::Unchanged),
        Answer::Down,
    ]);
    for _ in 0..4 {
        let _ = cache.poll_once(&slurm).await;
    }
    let names = |change: NodeChange| match change {
        NodeChange::Nodes(nodes) => nodes.iter().map(|n| format!("{}={}", n.name, n.comment())).collect::<Vec<_>>(),
        NodeChange::All => vec!["*".to_owned()],
    };
    assert_eq!(names(changes.next().await.unwrap()), ["a=of a", "b=of b"]);
    assert_eq!(names(changes.next().await.unwrap()), ["*"]);
    // b is gone: its last comment tells whose it was; a says what it was before.
    let change = changes.next().await.unwrap();
    if let NodeChange::Nodes(nodes) = &change {
        assert_eq!(nodes[0].before.as_ref().map(|n| n.state.clone()), Some(vec!["IDLE".to_string()]));
        assert_eq!(nodes[1].after, None);
    }
    assert_eq!(names(change), ["a=of a", "b=of b"]);
    assert_eq!(names(changes.next().await.unwrap()), ["*"]);
}

/// Lets a spawned poll loop run until it waits for its next poll (time is paused: it never passes).
async fn settle() {
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
}

#[tokio::test(start_paused = true)]
async fn standing_by_it_polls_seldom_and_a_takeover_polls_at_once() {
    let cache = NodeCache::new(NodeCacheConfig::every(Duration::from_millis(500)));
    cache.set_pace(Pace::StandingBy);
    let unchanged = || Answer::Page(NodesPage::Unchanged);
    let answers = [all(&[node("a", "IDLE")], 100), unchanged(), unchanged(), unchanged()];
    let slurm = Arc::new(FakeSlurm::answering(answers));
    tokio::spawn(cache.clone().run(slurm.clone()));
    settle().await;
    assert_eq!(slurm.asked().len(), 1);
    tokio::time::advance(STANDBY_INTERVAL - Duration::from_millis(1)).await;
    settle().await;
    assert_eq!(slurm.asked().len(), 1, "no second poll within the standby interval");

    cache.set_pace(Pace::Leading);
    settle().await;
    assert_eq!(slurm.asked().len(), 2, "a takeover polls at once");
    tokio::time::advance(Duration::from_millis(500)).await;
    settle().await;
    assert_eq!(slurm.asked().len(), 3, "then at the leader's interval");
}

#[test]
fn standing_by_a_listing_is_trusted_until_two_polls_are_overdue() {
    let config = NodeCacheConfig::every(Duration::from_millis(500));
    assert_eq!(config.stale_after_at(Pace::Leading), Duration::from_secs(7));
    assert_eq!(config.stale_after_at(Pace::StandingBy), STANDBY_INTERVAL * 2);
    assert_eq!(config.interval_at(Pace::StandingBy), STANDBY_INTERVAL);
}
