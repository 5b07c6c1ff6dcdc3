//! Wiring: a kube-runtime `Controller` on NodeSets, woken by their slurmd pods, by Node changes that
//! could change what they select, and by Slurm node changes from the shared cache.

use std::collections::HashMap;
use std::sync::Arc;

use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::runtime::controller::Action;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{Controller, WatchStreamExt, reflector, watcher};
use kube::{Api, Client, ResourceExt};

use super::blocking_jobs::BlockingJobs;
use super::context::Context;
use super::naming::{NODESET_LABEL, SLURM_NODE_LABEL, short_hash};
use super::owner::SlurmNodeOwner;
use super::reconcile::{error_policy, reconcile};
use super::resource::NodeSet;
use super::slurmd_pod::ClusterSettings;
use super::targets::pod_owner;
use crate::error::Error;
use crate::kube::{EventRecorder, ReconcileMetrics};
use crate::policy::Policies;
use crate::slurm::{NodeCache, NodeChange, Slurm};

/// What the NodeSet controller is told at start-up.
pub struct Config {
    pub cluster: ClusterSettings,
    /// Only the NodeSets of this namespace (e.g. one end-to-end test's); all when None. Nodes and
    /// other NodeSets' slurmd pods are always seen cluster-wide, so a Node is never doubly used.
    pub namespace: Option<String>,
    pub metrics: ReconcileMetrics,
}

/// Runs the NodeSet controller until a termination signal arrives. `slurm_nodes` must be polled by
/// someone (`NodeCache::run`); the controller only reads it.
pub async fn run(
    client: Client,
    slurm: Arc<dyn Slurm>,
    slurm_nodes: NodeCache,
    policies: Arc<Policies>,
    config: Config,
) -> anyhow::Result<()> {
    let nodesets = match &config.namespace {
        Some(namespace) => Api::<NodeSet>::namespaced(client.clone(), namespace),
        None => Api::<NodeSet>::all(client.clone()),
    };
    let hint = "the NodeSet CRD is not installed (the Helm chart installs it; or `sunk crds | kubectl apply -f -`)";
    crate::kube::wait_until_served(&nodesets, hint).await;

    let (node_store, node_writer) = reflector::store();
    let node_events = reflector(node_writer, watcher(Api::<Node>::all(client.clone()), watcher::Config::default()));
    let node_changes = selection_changes(node_events.default_backoff());
    let (pod_store, pod_writer) = reflector::store();
    let slurmd_pods = watcher::Config::default().labels(NODESET_LABEL);
    // The NodeSets' own namespace only, when there is one: the chart grants pods there and no further.
    let pods = match &config.namespace {
        Some(namespace) => Api::<Pod>::namespaced(client.clone(), namespace),
        None => Api::<Pod>::all(client.clone()),
    };
    let pod_events = reflector(pod_writer, watcher(pods, slurmd_pods));

    let controller = Controller::new(nodesets, watcher::Config::default());
    let nodeset_store = controller.store();
    let every_nodeset = {
        let store = nodeset_store.clone();
        move |_: Node| store.state().iter().map(|nodeset| ObjectRef::from_obj(&**nodeset)).collect::<Vec<_>>()
    };
    let changed = slurm_changes(slurm_nodes.subscribe(), pod_store.clone());
    let everything =
        slurm_nodes.subscribe().filter_map(|change| async move { matches!(change, NodeChange::All).then_some(()) });
    let ctx = Arc::new(Context {
        recorder: EventRecorder::new(client.clone(), "sunk-nodeset"),
        blocking_jobs: BlockingJobs::new(slurm.clone()),
        reported_blocks: Default::default(),
        client,
        slurm,
        slurm_nodes,
        policies,
        cluster: config.cluster,
        kube_nodes: node_store,
        pods: pod_store,
        nodesets: nodeset_store,
        metrics: config.metrics,
    });
    tracing::info!("NodeSet controller running");
    controller
        .owns_stream(pod_events.default_backoff().touched_objects())
        .watches_stream(node_changes, every_nodeset)
        .reconcile_on(changed)
        .reconcile_all_on(everything)
        .shutdown_on_signal()
        .run(counted_reconcile, error_policy, ctx)
        .for_each(|result| async move {
            if let Err(error) = result {
                tracing::debug!(%error, "nodeset controller");
            }
        })
        .await;
    Ok(())
}

async fn counted_reconcile(nodeset: Arc<NodeSet>, ctx: Arc<Context>) -> Result<Action, Error> {
    ctx.metrics.pass("nodeset", reconcile(nodeset, ctx.clone())).await
}

/// Node events that can change what a NodeSet selects or builds: labels, taints, resources, or the
/// Node appearing or going. Status heartbeats are dropped.
fn selection_changes(
    events: impl Stream<Item = Result<watcher::Event<Node>, watcher::Error>> + Send + 'static,
) -> impl Stream<Item = Result<Node, watcher::Error>> + Send + 'static {
    let mut seen: HashMap<String, String> = HashMap::new();
    events.filter_map(move |event| {
        let relevant = match event {
            Ok(watcher::Event::Apply(node)) => {
                let shape = shape(&node);
                (seen.insert(node.name_any(), shape.clone()).as_ref() != Some(&shape)).then_some(Ok(node))
            }
            Ok(watcher::Event::Delete(node)) => {
                seen.remove(&node.name_any());
                Some(Ok(node))
            }
            Ok(watcher::Event::InitApply(node)) => {
                seen.insert(node.name_any(), shape(&node));
                None
            }
            Ok(watcher::Event::Init | watcher::Event::InitDone) => None,
            Err(error) => Some(Err(error)),
        };
        std::future::ready(relevant)
    })
}

/// What of a Node matters to NodeSets, hashed.
fn shape(node: &Node) -> String {
    let spec = node.spec.as_ref();
    let status = node.status.as_ref();
    let parts = serde_json::json!([
        node.metadata.labels,
        node.metadata.deletion_timestamp,
        spec.and_then(|s| s.taints.as_ref()),
        status.and_then(|s| s.allocatable.as_ref()),
        status.and_then(|s| s.capacity.as_ref()),
    ]);
    short_hash(parts.to_string().as_bytes())
}

/// The NodeSets whose Slurm nodes changed: by the owner in the node's comment, else by the slurmd
/// pod labelled with the node.
fn slurm_changes(
    changes: impl Stream<Item = NodeChange> + Send + 'static,
    pods: Store<Pod>,
) -> impl Stream<Item = ObjectRef<NodeSet>> + Send + 'static {
    changes.flat_map(move |change| {
        let mut owners: Vec<ObjectRef<NodeSet>> = Vec::new();
        if let NodeChange::Nodes(nodes) = change {
            for node in nodes.iter() {
                let owner =
                    SlurmNodeOwner::from_comment(node.comment()).map(|owner| owner.nodeset_key()).or_else(|| {
                        let pods = pods.state();
                        let pod = pods.iter().find(|pod| pod.labels().get(SLURM_NODE_LABEL) == Some(&node.name))?;
                        pod_owner(pod)
                    });
                if let Some(owner) = owner {
                    let reference = ObjectRef::new(&owner.name).within(&owner.namespace);
                    if !owners.contains(&reference) {
                        owners.push(reference);
                    }
                }
            }
        }
        futures::stream::iter(owners)
    })
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;
    use crate::slurm::ChangedNode;

    fn node(name: &str, pool: &str, heartbeat: &str) -> Node {
        Node {
            metadata: ObjectMeta {
                name: Some(name.into()),
                labels: Some([("pool".to_string(), pool.to_string())].into()),
                annotations: Some([("heartbeat".to_string(), heartbeat.to_string())].into()),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn only_node_changes_that_matter_get_through() {
        let events = [
            watcher::Event::Init,
            watcher::Event::InitApply(node("a", "cpu", "1")),
            watcher::Event::InitDone,
            watcher::Event::Apply(node("a", "cpu", "2")),
            watcher::Event::Apply(node("a", "gpu", "3")),
            watcher::Event::Apply(node("b", "cpu", "1")),
            watcher::Event::Delete(node("a", "gpu", "3")),
        ];
        let passed: Vec<String> = selection_changes(futures::stream::iter(events.map(Ok)))
            .map(|node| {
                let node = node.unwrap();
                format!("{}:{}", node.name_any(), node.labels()["pool"])
            })
            .collect()
            .await;
        assert_eq!(passed, ["a:gpu", "b:cpu", "a:gpu"]);
    }

    #[tokio::test]
    async fn slurm_changes_reach_the_nodeset_that_owns_the_node() {
        let (store, mut writer) = reflector::store::<Pod>();
        let pod = Pod {
            metadata: ObjectMeta {
                name: Some("cpu-w2".into()),
                namespace: Some("slurm".into()),
                labels: Some(
                    [(NODESET_LABEL.to_string(), "cpu".to_string()), (SLURM_NODE_LABEL.to_string(), "w2".to_string())]
                        .into(),
                ),
                ..Default::default()
            },
            ..Default::default()
        };
        writer.apply_watcher_event(&watcher::Event::Apply(pod));
        let owner = SlurmNodeOwner {
            namespace: "other".into(),
            pod: "gpu-w1".into(),
            node: "w1".into(),
            nodeset: "gpu".into(),
            uid: "u".into(),
            nodeset_uid: "n".into(),
        };
        let changed = |name: &str, comment: String| {
            let after = crate::slurm::Node { name: name.into(), comment, ..Default::default() };
            ChangedNode { name: name.into(), before: None, after: Some(after) }
        };
        let changes = [
            NodeChange::Nodes(Arc::new(vec![
                changed("w1", owner.to_comment()),
                changed("w2", String::new()),
                changed("w3", "admin note".into()),
                changed("w4", owner.to_comment()),
            ])),
            NodeChange::All,
        ];
        let reached: Vec<String> = slurm_changes(futures::stream::iter(changes), store)
            .map(|reference| format!("{}/{}", reference.namespace.unwrap_or_default(), reference.name))
            .collect()
            .await;
        assert_eq!(reached, ["other/gpu", "slurm/cpu"]);
    }
}
