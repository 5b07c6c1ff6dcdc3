//! The Syncer's middle tier: its real pass over a Node against an in-memory Slurm and a fake API
//! server. One Node, `kube-node-1`, runs the slurmd pod of Slurm node `slurm-1` (NodeSet `gpu`'s,
//! recorded on `slurm-1` as the NodeSet controller records it); a test plays the operator (a cordon),
//! Slurm's administrator (`scontrol update state=drain`), an impostor pod or an outage, passes over
//! the Node as the controller would, and reads both sides.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::runtime::reflector;
use kube::runtime::watcher;
use serde_json::json;

use super::context::Context;
use super::metrics::SyncerMetrics;
use super::reconcile::reconcile;
use crate::kube::EventRecorder;
use crate::kube::fake_api::FakeApi;
use crate::nodeset::SlurmNodeOwner;
use crate::policy::{FailureModes, Policies};
use crate::slurm::{FakeSlurm, NodeCache, NodeCacheConfig, NodeUpdate, Slurm};
use crate::vocabulary::{DRAINED_FOR_ANNOTATION, OWNED_DRAIN_PREFIX, SLURM_NODE_LABEL};

const NODE: &str = "kube-node-1";
const SLURM_NODE: &str = "slurm-1";
const POLL: std::time::Duration = std::time::Duration::from_millis(100);

struct World {
    slurm: Arc<FakeSlurm>,
    api: FakeApi,
    ctx: Arc<Context>,
    pods: reflector::store::Writer<Pod>,
    /// Requests to Slurm that set the world up, before the test's.
    set_up: usize,
}

/// A pod on kube-node-1 labelled as the slurmd pod of slurm-1, with `owner` as its ownerReference.
fn slurmd_pod(name: &str, owner: serde_json::Value) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "slurm", "uid": name,
                     "labels": {SLURM_NODE_LABEL: SLURM_NODE}, "ownerReferences": [owner]},
        "spec": {"nodeName": NODE, "containers": []},
    }))
    .unwrap()
}

/// The NodeSet `gpu` as the controller ownerReference of its pods.
fn nodeset_gpu() -> serde_json::Value {
    json!({"apiVersion": "sunk.dev/v1alpha1", "kind": "NodeSet", "name": "gpu", "uid": "gpu", "controller": true})
}

impl World {
    async fn new() -> Self {
        Self::polling(NodeCacheConfig::every(POLL)).await
    }

    /// Every listing older than its freshness bound as soon as it is in, as when each takes longer
    /// than that to come (slurmctld busy with 10,000 pending jobs).
    async fn with_slow_listings() -> Self {
        Self::polling(NodeCacheConfig { stale_after: std::time::Duration::ZERO, ..NodeCacheConfig::every(POLL) }).await
    }

    async fn polling(config: NodeCacheConfig) -> Self {
        let slurm = Arc::new(FakeSlurm::with_nodes("slurm", 1, 4));
        let api = FakeApi::default();
        let client = api.client();
        api.put_node(serde_json::from_value(json!({"metadata": {"name": NODE}, "spec": {}})).unwrap());
        api.put_pod(slurmd_pod("slurmd-1", nodeset_gpu()));
        // As the NodeSet controller records its slurmd pod on the Slurm node.
        let recorded = SlurmNodeOwner {
            namespace: "slurm".into(),
            pod: "slurmd-1".into(),
            node: NODE.into(),
            nodeset: "gpu".into(),
            uid: "slurmd-1".into(),
            nodeset_uid: "gpu".into(),
        };
        slurm.update_node(SLURM_NODE, &NodeUpdate::comment(&recorded.to_comment())).await.unwrap();
        let (pods, mut pods_writer) = reflector::store::<Pod>();
        // Listed (and so ready), empty until the first pass's watch events.
        pods_writer.apply_watcher_event(&watcher::Event::Init);
        pods_writer.apply_watcher_event(&watcher::Event::InitDone);
        let ctx = Context {
            recorder: EventRecorder::new(client.clone(), "sunk-syncer"),
            client,
            slurm: slurm.clone(),
            slurm_nodes: NodeCache::new(config),
            policies: Arc::new(Policies::bundled(FailureModes::default()).expect("the bundled policies")),
            pods,
            watched_conditions: Vec::new(),
            metrics: SyncerMetrics::default(),
            own_writes: Default::default(),
        };
        let set_up = slurm.requests().len();
        Self { slurm, api, ctx: Arc::new(ctx), pods: pods_writer, set_up }
    }

    /// Every request that changed something in Slurm since the world was set up, as `verb target`.
    fn slurm_writes(&self) -> Vec<String> {
        self.slurm.requests().split_off(self.set_up)
    }

    /// `scontrol update nodename=slurm-1 state=drain reason=...`
    async fn administrator_drains(&self, reason: &str) {
        self.slurm.update_node(SLURM_NODE, &NodeUpdate::drain(reason)).await.unwrap();
    }

    /// The slurmd pod's annotation `key`.
    fn slurmd_annotation(&self, key: &str) -> Option<String> {
        self.api.pod("slurm", "slurmd-1")?.metadata.annotations?.get(key).cloned()
    }

    /// The Events about the Node, by reason.
    fn events(&self) -> Vec<String> {
        let about = format!("/{NODE} ");
        let events =
            self.api.writes().into_iter().filter(|write| write.starts_with("event ") && write.contains(&about));
        events.filter_map(|write| write.rsplit(' ').next().map(str::to_owned)).collect()
    }

    /// The controller's pass over the Node, its caches caught up first (as the watch and the poll
    /// would); then another, which must change nothing more (a pass is idempotent).
    async fn sync(&mut self) {
        for _ in 0..2 {
            let _ = self.ctx.slurm_nodes.poll_once(self.slurm.as_ref()).await;
            self.pass_before_the_next_poll().await;
        }
    }

    /// A pass with the pod watch caught up, on the Slurm view of the last poll (as on a Node event
    /// that comes before the next poll).
    async fn pass_before_the_next_poll(&mut self) {
        for pod in self.api.pods() {
            self.pods.apply_watcher_event(&watcher::Event::Apply(pod));
        }
        let node = self.api.node(NODE).expect("the Node");
        reconcile(Arc::new(node), self.ctx.clone()).await.expect("a pass");
    }

    fn cordon(&self, cordoned: bool) {
        let mut node: Node = self.api.node(NODE).expect("the Node");
        node.spec.get_or_insert_with(Default::default).unschedulable = Some(cordoned);
        self.api.put_node(node);
    }

    fn drain_reason(&self) -> Option<String> {
        let node = self.slurm.node(SLURM_NODE).expect("the Slurm node");
        node.flags().is_draining().then_some(node.reason)
    }

    /// The Node's condition `type_`: its status and message.
    fn node_condition(&self, type_: &str) -> Option<(String, String)> {
        let conditions = self.api.node(NODE)?.status?.conditions?;
        let condition = conditions.into_iter().find(|c| c.type_ == type_)?;
        Some((condition.status, condition.message.unwrap_or_default()))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cordon_drains_the_slurm_node_and_an_uncordon_resumes_it() {
    let mut world = World::new().await;
    world.sync().await;
    assert_eq!(world.drain_reason(), None);

    world.cordon(true);
    world.sync().await;
    let reason = world.drain_reason().expect("the cordon drains the Slurm node");
    assert!(reason.starts_with(OWNED_DRAIN_PREFIX) && reason.contains("cordoned"), "{reason}");
    assert_eq!(world.node_condition("SlurmDrain").map(|(status, _)| status).as_deref(), Some("True"));
    assert_eq!(world.slurm_writes(), [format!("drain {SLURM_NODE}")], "one drain, not one per pass");

    world.cordon(false);
    world.sync().await;
    assert_eq!(world.drain_reason(), None, "the uncordon resumes it");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_administrators_drain_is_shown_on_the_node_and_survives_a_cordon_and_an_uncordon() {
    let mut world = World::new().await;
    world.administrator_drains("bad dimm").await;
    world.sync().await;
    assert_eq!(world.node_condition("SlurmDrain"), Some(("True".into(), "bad dimm".into())));

    world.cordon(true);
    world.sync().await;
    world.cordon(false);
    world.sync().await;
    assert_eq!(world.drain_reason().as_deref(), Some("bad dimm"), "the administrator's reason stands");
    assert_eq!(world.slurm_writes(), [format!("drain {SLURM_NODE}")], "the Syncer wrote nothing to Slurm");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn while_slurm_cannot_be_read_a_cordon_changes_nothing_until_it_can() {
    let mut world = World::new().await;
    world.slurm.set_reachable(false);
    world.cordon(true);
    world.sync().await;
    assert!(world.slurm_writes().is_empty(), "nothing is written on a view that cannot be trusted");

    world.slurm.set_reachable(true);
    world.sync().await;
    assert!(world.drain_reason().is_some(), "drained once Slurm answers");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cordon_right_after_an_uncordon_drains_before_a_listing_shows_the_resume() {
    let mut world = World::new().await;
    world.sync().await;
    world.cordon(true);
    world.sync().await;
    assert!(world.drain_reason().is_some());

    // Uncordoned and cordoned again within one poll: the view still shows the first drain.
    world.cordon(false);
    world.pass_before_the_next_poll().await;
    assert_eq!(world.drain_reason(), None, "the uncordon resumes it");
    world.cordon(true);
    world.pass_before_the_next_poll().await;
    assert!(world.drain_reason().is_some(), "drained again at once, not at the next listing");
    let drains = world.slurm_writes().iter().filter(|request| request.starts_with("drain")).count();
    assert_eq!(drains, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn while_listings_are_slow_a_cordon_drains_and_an_uncordon_resumes_on_the_node_read_alone() {
    let mut world = World::with_slow_listings().await;
    world.sync().await;
    world.cordon(true);
    world.sync().await;
    assert!(world.drain_reason().is_some(), "a drain ends no job: it goes ahead on the last listing");
    assert_eq!(world.node_condition("SlurmDrain"), None, "nothing is mirrored from a stale listing");

    world.cordon(false);
    world.sync().await;
    assert_eq!(world.drain_reason(), None, "decided again on the node as Slurm has it: resumed");
    assert_eq!(world.slurm_writes(), [format!("drain {SLURM_NODE}"), format!("undrain {SLURM_NODE}")]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn while_listings_are_slow_an_uncordon_resumes_a_drain_no_listing_shows_yet() {
    let mut world = World::with_slow_listings().await;
    world.sync().await;
    world.cordon(true);
    world.pass_before_the_next_poll().await;
    assert!(world.drain_reason().is_some());
    world.cordon(false);
    world.pass_before_the_next_poll().await;
    assert_eq!(world.drain_reason(), None, "its own drain believed over the listing, and resumed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn while_listings_are_slow_an_uncordon_keeps_an_administrators_drain_the_listing_does_not_show() {
    let mut world = World::with_slow_listings().await;
    world.sync().await;
    world.cordon(true);
    world.sync().await;
    world.administrator_drains("admin: bad dimm").await;
    world.cordon(false);
    world.sync().await;
    assert_eq!(world.drain_reason().as_deref(), Some("admin: bad dimm"), "not resumed");
    assert_eq!(world.slurm_writes(), [format!("drain {SLURM_NODE}"), format!("drain {SLURM_NODE}")]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cordon_decided_on_a_listing_that_predates_an_administrators_drain_writes_nothing() {
    let mut world = World::new().await;
    world.sync().await;
    // Drained 0.4 s before the cordon, after the last listing: the pass still sees the node idle.
    world.administrator_drains("admin: bad dimm").await;
    world.cordon(true);
    world.pass_before_the_next_poll().await;
    assert_eq!(world.drain_reason().as_deref(), Some("admin: bad dimm"), "not drained over");
    assert_eq!(world.slurm_writes(), [format!("drain {SLURM_NODE}")], "only the administrator's drain");
    assert!(world.events().contains(&"SlurmDrainWithheld".to_owned()), "{:?}", world.events());
    assert_eq!(world.slurmd_annotation(DRAINED_FOR_ANNOTATION), None, "sunk drained nothing");

    world.cordon(false);
    world.pass_before_the_next_poll().await;
    world.sync().await;
    assert_eq!(world.drain_reason().as_deref(), Some("admin: bad dimm"), "the uncordon resumes nothing");
    assert_eq!(world.slurm_writes(), [format!("drain {SLURM_NODE}")]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_uncordon_keeps_an_administrators_drain_that_replaced_sunks() {
    let mut world = World::new().await;
    world.cordon(true);
    world.sync().await;
    assert_eq!(world.slurmd_annotation(DRAINED_FOR_ANNOTATION).as_deref(), Some("cordon"));
    // The administrator re-words the drain after the last listing, which still shows sunk's.
    world.administrator_drains("admin: bad dimm").await;
    world.cordon(false);
    world.pass_before_the_next_poll().await;
    assert_eq!(world.drain_reason().as_deref(), Some("admin: bad dimm"), "not resumed");
    assert_eq!(world.slurm_writes(), [format!("drain {SLURM_NODE}"), format!("drain {SLURM_NODE}")]);
    assert!(!world.events().contains(&"SlurmResumed".to_owned()), "{:?}", world.events());

    world.sync().await;
    assert_eq!(world.drain_reason().as_deref(), Some("admin: bad dimm"));
    assert_eq!(world.slurm_writes().len(), 2, "nor once a listing shows it");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_a_slurmd_pod_its_nodeset_controls_and_its_slurm_node_records_is_believed() {
    let mut world = World::new().await;
    let genuine = world.api.pod("slurm", "slurmd-1").expect("the slurmd pod");
    world.pods.apply_watcher_event(&watcher::Event::Delete(genuine.clone()));
    world.api.remove_pod("slurm", "slurmd-1");
    world.cordon(true);
    let impostors = [
        (
            "a pod labelled as a slurmd pod",
            slurmd_pod(
                "labelled",
                json!({"apiVersion": "v1", "kind": "ConfigMap",
            "name": "mine", "uid": "mine", "controller": true}),
            ),
        ),
        ("one naming the NodeSet as its controller", slurmd_pod("forged", nodeset_gpu())),
    ];
    for (impostor, pod) in impostors {
        world.api.put_pod(pod);
        world.sync().await;
        assert_eq!(world.drain_reason(), None, "{impostor} drains nothing");
    }
    assert!(world.slurm_writes().is_empty());

    // Beside them, the NodeSet's own pod is the one believed.
    world.api.put_pod(genuine);
    world.sync().await;
    assert!(world.drain_reason().is_some_and(|reason| reason.contains("cordoned")));
}
