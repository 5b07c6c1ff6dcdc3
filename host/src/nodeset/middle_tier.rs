//! The NodeSet controller's middle tier: its real pass over a NodeSet against an in-memory Slurm and
//! a fake API server. Three Nodes, `kube-node-1` to `-3`, the first two labelled `pool=gpu`; the test
//! plays the kubelet and slurmd (a pod the controller creates runs, and its Slurm node registers),
//! an HPC user (a job on a node), the operator (a label taken off) or an outage, and reads the pods,
//! the Slurm nodes and the NodeSet's status.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::ResourceExt;
use kube::runtime::reflector::{self, store::Writer};
use kube::runtime::watcher;
use serde_json::json;

use super::blocking_jobs::BlockingJobs;
use super::context::Context;
use super::reconcile::reconcile;
use super::{ClusterSettings, NODESET_LABEL, NodeSet, slurm_node_name};
use crate::kube::fake_api::FakeApi;
use crate::kube::{EventRecorder, ReconcileMetrics};
use crate::policy::{FailureModes, Policies};
use crate::slurm::{FakeSlurm, JobDescription, NodeCache, NodeCacheConfig, Slurm};

const NODESET: &str = "nodesets/ml/gpus";
const MOST_ROUNDS: usize = 20;

struct World {
    slurm: Arc<FakeSlurm>,
    api: FakeApi,
    ctx: Arc<Context>,
    kube_nodes: Writer<Node>,
    pods: Writer<Pod>,
    nodesets: Writer<NodeSet>,
}

impl World {
    async fn new() -> Self {
        let slurm = Arc::new(FakeSlurm::default());
        let api = FakeApi::default();
        let client = api.client();
        for n in 1..=3 {
            let labels = if n < 3 { json!({"pool": "gpu"}) } else { json!({}) };
            let node = json!({"metadata": {"name": format!("kube-node-{n}"), "labels": labels}, "spec": {},
                              "status": {"allocatable": {"cpu": "4", "memory": "8Gi"}}});
            api.put_node(serde_json::from_value(node).unwrap());
        }
        api.put_object(
            NODESET,
            json!({"apiVersion": "sunk.dev/v1alpha1", "kind": "NodeSet",
                   "metadata": {"name": "gpus", "namespace": "ml", "uid": "nodeset-gpus", "generation": 1,
                                "finalizers": [super::NODESET_FINALIZER]},
                   "spec": {"nodeSelector": {"pool": "gpu"}, "partitions": ["batch"],
                            "template": {"spec": {"containers": [{"name": "slurmd", "image": "slurmd",
                                "resources": {"limits": {"cpu": "4", "memory": "4Gi"}}}]}}}}),
        );
        let (kube_nodes_store, kube_nodes) = reflector::store();
        let (pods_store, pods) = reflector::store();
        let (nodesets_store, nodesets) = reflector::store();
        let ctx = Context {
            recorder: EventRecorder::new(client.clone(), "sunk-nodeset"),
            blocking_jobs: BlockingJobs::new(slurm.clone()),
            reported_blocks: Default::default(),
            client,
            slurm: slurm.clone(),
            slurm_nodes: NodeCache::new(NodeCacheConfig::every(std::time::Duration::from_millis(100))),
            policies: Arc::new(Policies::bundled(FailureModes::default()).expect("the bundled policies")),
            cluster: ClusterSettings { conf_server: "slurmctld:6817".into(), slurm_key_secret: "slurm-key".into() },
            kube_nodes: kube_nodes_store,
            pods: pods_store,
            nodesets: nodesets_store,
            metrics: ReconcileMetrics::default(),
        };
        Self { slurm, api, ctx: Arc::new(ctx), kube_nodes, pods, nodesets }
    }

    /// Passes over the NodeSet until a pass changes nothing in Slurm or in the API server, the
    /// kubelet's and slurmd's parts played between passes.
    async fn settle(&mut self) {
        let changes = |world: &Self| {
            let writes = world.api.writes().iter().filter(|write| !write.starts_with("event ")).count();
            (writes, world.slurm.requests().len(), world.slurm.all_nodes().len())
        };
        for _ in 0..MOST_ROUNDS {
            let before = changes(self);
            self.round().await;
            if changes(self) == before {
                return;
            }
        }
        panic!("the NodeSet did not settle in {MOST_ROUNDS} passes: {:?}", self.api.writes());
    }

    async fn round(&mut self) {
        let _ = self.ctx.slurm_nodes.poll_once(self.slurm.as_ref()).await;
        // The watches, each a fresh listing.
        relist(&mut self.kube_nodes, self.api.nodes());
        relist(&mut self.pods, self.api.pods());
        relist(&mut self.nodesets, self.api.object::<NodeSet>(NODESET).into_iter().collect());
        let nodeset = self.api.object::<NodeSet>(NODESET).expect("the NodeSet");
        if let Err(error) = reconcile(Arc::new(nodeset), self.ctx.clone()).await {
            eprintln!("NodeSet pass: {error}");
        }
        self.kubelet();
    }

    /// Each slurmd pod the controller created runs on its Node, and its slurmd registers.
    fn kubelet(&self) {
        for mut pod in self.api.pods() {
            let (Some(node), None) = (pod.spec.as_ref().and_then(|s| s.node_name.clone()), pod.status.as_ref()) else {
                continue;
            };
            pod.status = Some(
                serde_json::from_value(json!({"phase": "Running",
                "conditions": [{"type": "Ready", "status": "True"}]}))
                .unwrap(),
            );
            self.api.put_pod(pod.clone());
            if self.slurm.node(&slurm_node_name(&node)).is_none() {
                self.slurm.register(&slurm_node_name(&node), &pod.name_any(), 4, &["batch"]);
            }
        }
    }

    /// The Node the NodeSet's slurmd pod runs on, by Node.
    fn pod_on(&self, kube_node: &str) -> Option<Pod> {
        self.api.pods().into_iter().find(|pod| {
            pod.labels().contains_key(NODESET_LABEL)
                && pod.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(kube_node)
        })
    }

    fn unlabel(&self, kube_node: &str) {
        let mut node = self.api.node(kube_node).expect("the Node");
        node.labels_mut().remove("pool");
        self.api.put_node(node);
    }
}

fn relist<K>(writer: &mut Writer<K>, objects: Vec<K>)
where
    K: kube::Resource + Clone + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    writer.apply_watcher_event(&watcher::Event::Init);
    for object in objects {
        writer.apply_watcher_event(&watcher::Event::InitApply(object));
    }
    writer.apply_watcher_event(&watcher::Event::InitDone);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nodeset_runs_one_slurmd_pod_on_every_matching_node_and_none_elsewhere() {
    let mut world = World::new().await;
    world.settle().await;
    assert!(world.pod_on("kube-node-1").is_some() && world.pod_on("kube-node-2").is_some());
    assert!(world.pod_on("kube-node-3").is_none(), "kube-node-3 does not match");
    let status = world.api.object::<NodeSet>(NODESET).unwrap().status.expect("a status");
    assert_eq!((status.desired, status.current, status.idle), (2, 2, 2), "{status:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_that_stops_matching_is_drained_and_released_only_after_its_job_ends() {
    let mut world = World::new().await;
    world.settle().await;
    let slurm_node = slurm_node_name("kube-node-1");
    // An HPC user's job on the node: `sbatch -w kube-node-1`.
    let job = JobDescription { name: "hpc".into(), required_nodes: vec![slurm_node.clone()], ..Default::default() };
    let job = world.slurm.submit(&job).await.unwrap();

    world.unlabel("kube-node-1");
    world.settle().await;
    let node = world.slurm.node(&slurm_node).expect("the Slurm node stays while its job runs");
    assert!(node.flags().is_draining() && node.reason.starts_with("k8s:"), "{:?} {}", node.state, node.reason);
    let pod = world.pod_on("kube-node-1").expect("the slurmd pod stays while its job runs");
    assert!(pod.metadata.deletion_timestamp.is_none());

    world.slurm.finish(&job.to_string(), "COMPLETED");
    world.settle().await;
    assert!(world.pod_on("kube-node-1").is_none(), "released once the job ended");
    assert!(world.slurm.node(&slurm_node).is_none(), "and its Slurm record deleted");
    assert!(world.pod_on("kube-node-2").is_some(), "the other Node is untouched");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_is_removed_while_slurm_cannot_be_read() {
    let mut world = World::new().await;
    world.settle().await;
    world.slurm.set_reachable(false);
    world.unlabel("kube-node-1");
    world.settle().await;
    assert!(world.pod_on("kube-node-1").is_some(), "no deletion while Slurm cannot be read");
    assert!(world.slurm.requests().is_empty());

    world.slurm.set_reachable(true);
    world.settle().await;
    assert!(world.pod_on("kube-node-1").is_none(), "released once Slurm answers");
    assert!(world.slurm.node(&slurm_node_name("kube-node-1")).is_none());
}
