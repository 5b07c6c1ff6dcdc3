//! Wiring: a kube-runtime `Controller` on Kubernetes Nodes, woken by their slurmd pods and by
//! changes in the shared Slurm node cache.

use std::sync::Arc;

use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{Controller, WatchStreamExt, reflector, watcher};
use kube::{Api, Client, ResourceExt};

use super::context::Context;
use super::metrics::SyncerMetrics;
use super::reconcile::{error_policy, reconcile};
use crate::kube::{EventRecorder, ReconcileMetrics};
use crate::nodeset::{SLURM_NODE_LABEL, controlling_nodeset};
use crate::policy::Policies;
use crate::slurm::{NodeCache, NodeChange, Slurm};

pub struct Config {
    /// Only the slurmd pods of this namespace (the NodeSets' of `--nodeset-namespace`): another
    /// namespace's may belong to another Slurm. All namespaces when None. Either way a pod is
    /// believed only when a NodeSet controls it and its Slurm node records it.
    pub namespace: Option<String>,
    /// Node condition types (besides `Ready`) shown to the drain policy, e.g. `GpuUnhealthy`.
    pub watched_conditions: Vec<String>,
    pub metrics: SyncerMetrics,
    pub passes: ReconcileMetrics,
}

/// Runs the Syncer until a termination signal arrives. `slurm_nodes` must be polled by someone.
pub async fn run(
    client: Client,
    slurm: Arc<dyn Slurm>,
    slurm_nodes: NodeCache,
    policies: Arc<Policies>,
    config: Config,
) -> anyhow::Result<()> {
    let (pod_store, pod_writer) = reflector::store();
    let slurmd_pods = watcher::Config::default().labels(SLURM_NODE_LABEL);
    let pods = match &config.namespace {
        Some(namespace) => Api::<Pod>::namespaced(client.clone(), namespace),
        None => Api::<Pod>::all(client.clone()),
    };
    let pod_events = reflector(pod_writer, watcher(pods, slurmd_pods));
    let controller = Controller::new(Api::<Node>::all(client.clone()), watcher::Config::default());
    let changed = slurm_changes(slurm_nodes.subscribe(), pod_store.clone());
    let everything =
        slurm_nodes.subscribe().filter_map(|change| async move { matches!(change, NodeChange::All).then_some(()) });
    let passes = config.passes;
    let ctx = Arc::new(Context {
        recorder: EventRecorder::new(client.clone(), "sunk-syncer"),
        client,
        slurm,
        slurm_nodes,
        policies,
        pods: pod_store,
        watched_conditions: config.watched_conditions,
        metrics: config.metrics,
        own_writes: Default::default(),
    });
    tracing::info!("Syncer running");
    controller
        .watches_stream(pod_events.default_backoff().touched_objects(), |pod: Pod| {
            let node = pod.spec.as_ref()?.node_name.clone()?;
            Some(ObjectRef::new(&node))
        })
        .reconcile_on(changed)
        .reconcile_all_on(everything)
        .shutdown_on_signal()
        .run(
            move |node, ctx| {
                let passes = passes.clone();
                async move { passes.pass("syncer", reconcile(node, ctx)).await }
            },
            error_policy,
            ctx,
        )
        .for_each(|result| async move {
            if let Err(error) = result {
                tracing::debug!(%error, "syncer");
            }
        })
        .await;
    Ok(())
}

/// The Kubernetes Nodes whose Slurm nodes changed: through the slurmd pod labelled with the node.
fn slurm_changes(
    changes: impl Stream<Item = NodeChange> + Send + 'static,
    pods: Store<Pod>,
) -> impl Stream<Item = ObjectRef<Node>> + Send + 'static {
    changes.flat_map(move |change| {
        let mut nodes: Vec<ObjectRef<Node>> = Vec::new();
        if let NodeChange::Nodes(changed) = change {
            let pods = pods.state();
            for slurm_node in changed.iter() {
                let kube_node = pods
                    .iter()
                    .filter(|pod| pod.labels().get(SLURM_NODE_LABEL) == Some(&slurm_node.name))
                    .filter(|pod| controlling_nodeset(pod).is_some())
                    .find_map(|pod| pod.spec.as_ref()?.node_name.clone());
                if let Some(reference) = kube_node.map(|name| ObjectRef::new(&name))
                    && !nodes.contains(&reference)
                {
                    nodes.push(reference);
                }
            }
        }
        futures::stream::iter(nodes)
    })
}
