//! The pod scheduler: pods that name sunk as their scheduler become placeholder Slurm jobs, and are
//! bound to the Kubernetes Node that hosts the slurmd of the Slurm node the job was given.

mod batch;
mod bind;
mod conditions;
mod context;
mod decide;
mod executor;
mod fast_path;
mod gang;
mod grants;
mod held;
mod job_cache;
mod job_poll;
mod link;
mod mapping;
mod metrics;
#[cfg(test)]
mod middle_tier;
mod node_room;
mod orphans;
mod placeholder;
mod placement;
mod pod_lookup;
mod pod_phase;
mod pod_record;
pub mod preemption;
mod reconcile;
mod replace;
mod scope;
mod slurmd_pods;
mod step;
mod submit;
mod timing;
mod waiting;
mod watched_pod;

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use kube::core::PartialObjectMeta;
use kube::runtime::{Controller, WatchStreamExt, reflector, watcher};
use kube::{Api, Client};

pub use job_cache::JobCache;
/// How a hold job of the pool is known, and what it is made of.
pub use link::held_node;
pub(crate) use link::hold_link;
pub use link::{Installation, PodKey, is_failed_attempt, linked, linked_pods};
pub use metrics::SchedulerMetrics;
/// How the kubelet counts a pod, for the pool's ledger.
pub(crate) use node_room::is_counted;
pub(crate) use placeholder::holder;
pub use placeholder::{Placeholder, PlaceholderKind, Placeholders};
/// What the placement-rules benchmark builds on.
#[doc(hidden)]
pub use placement::bench as placement_bench;
pub(crate) use pod_record::kubelet_counts;
pub use pod_record::pod_record;
pub use scope::Scope;
pub use slurmd_pods::{SLURM_NODE_LABEL, SlurmdPods};
pub use watched_pod::WatchedPod;
pub(crate) use watched_pod::forget_managed_fields;

use crate::kube::PodWriter;
use crate::policy::Policies;
use crate::slurm::{NodeCache, Slurm};
use crate::tenancy::Tenancy;
pub use context::Config;
use context::Context;
use grants::Grants;
use placement::Placement;

/// Passes over pods under way at once, at most. Enough for a burst to fill a few job arrays in one
/// turn (see `batch`), while 10,000 pods arriving together do not hold 10,000 passes in memory (each
/// about 15 KB, and whatever it has gathered) waiting for their turns; the rest wait as names.
const MOST_PASSES_AT_ONCE: u16 = 256;

/// The installation a scheduler named `scheduler_name` is in this cluster.
pub async fn installation(client: &Client, scheduler_name: &str) -> anyhow::Result<Installation> {
    Ok(Installation::new(scheduler_name, &cluster_uid(client).await?))
}

/// The UID of the cluster's `kube-system` namespace: what tells one cluster's installations from
/// another's on a shared Slurm.
async fn cluster_uid(client: &Client) -> anyhow::Result<String> {
    let namespace = Api::<Namespace>::all(client.clone()).get("kube-system").await;
    let namespace = namespace
        .map_err(|error| anyhow::anyhow!("reading namespace kube-system (who this installation is): {error}"))?;
    namespace.metadata.uid.ok_or_else(|| anyhow::anyhow!("namespace kube-system has no UID"))
}

/// Runs the scheduler until a termination signal arrives. `slurm_nodes` is the host's one cache of
/// Slurm's nodes, polled by whoever runs it (`NodeCache::run`).
pub async fn run(
    client: Client,
    slurm: Arc<dyn Slurm>,
    slurm_nodes: NodeCache,
    policies: Arc<Policies>,
    config: Config,
) -> anyhow::Result<()> {
    let (slurmd_store, slurmd_writer) = reflector::store();
    let (nodes_store, nodes_writer) = reflector::store();
    let slurmd = SlurmdPods::new(slurmd_store.clone(), slurm_nodes.clone());
    let placement = Placement::new(nodes_store.clone(), slurmd.clone(), slurm_nodes);
    // Only the NodeSet namespace's slurmd pods, when there is one: a pod elsewhere is never believed.
    let slurmd_pods = match &config.slurmd_namespace {
        Some(namespace) => Api::<Pod>::namespaced(client.clone(), namespace),
        None => Api::<Pod>::all(client.clone()),
    };
    let slurmd_watch = watcher(slurmd_pods, watcher::Config::default().labels(SLURM_NODE_LABEL));
    tokio::spawn(reflector(slurmd_writer, slurmd_watch).default_backoff().for_each(saw_change(&placement)));
    let nodes_watch = watcher(Api::<Node>::all(client.clone()), watcher::Config::default());
    tokio::spawn(reflector(nodes_writer, nodes_watch).default_backoff().for_each(saw_change(&placement)));
    // Fail closed: until the Nodes and slurmd pods are listed, a taint cannot be seen, and a job on a
    // tainted node would be bound.
    slurmd_store.wait_until_ready().await.map_err(|_| anyhow::anyhow!("the watch of slurmd pods ended"))?;
    nodes_store.wait_until_ready().await.map_err(|_| anyhow::anyhow!("the watch of Nodes ended"))?;

    let (installation, jobs) = (config.installation, config.jobs);
    let (changed_tx, changed_rx) = futures::channel::mpsc::unbounded();
    tokio::spawn(job_cache::poll(jobs.clone(), slurm.clone(), config.poll_interval, changed_tx.clone()));

    let ours = watcher::Config::default().fields(&format!("spec.schedulerName={}", config.scheduler_name));
    let (pods, pods_writer) = reflector::store();
    let in_scope = config
        .scope
        .watch_pods(client.clone(), ours)
        .modify(watched_pod::forget_managed_fields)
        .reflect(pods_writer)
        .applied_objects();
    // A Node tainted or labelled, a slurmd pod or Slurm node come or gone: pending pods look again.
    let controller = Controller::for_stream(in_scope, pods)
        .with_config(kube::runtime::controller::Config::default().concurrency(MOST_PASSES_AT_ONCE))
        .reconcile_on(changed_rx)
        .reconcile_all_on(placement.clone().changes(config.poll_interval))
        .shutdown_on_signal();
    let sweep = orphans::Sweep {
        jobs: jobs.clone(),
        pods: controller.store(),
        slurm: slurm.clone(),
        scope: config.scope.clone(),
        client: client.clone(),
        metrics: config.metrics.clone(),
    };
    tokio::spawn(sweep.run(config.poll_interval * 4));
    tokio::spawn(count_pending(controller.store(), config.metrics.clone(), config.poll_interval));

    let slurm_rules = preemption::KnownRules::default();
    if config.preemption {
        tokio::spawn(preemption::read_rules(slurm_rules.clone(), slurm.clone(), config.slurm_rules.clone()));
    }
    let grants = Grants::new(config.tenancy.clone(), namespace_labels(&client, &config.tenancy));
    let refusers = placement::shared_neighbourhood::SharedNeighbourhood::new(config.poll_interval);
    if let Some(bound_pods) = &config.bound_pods {
        tokio::spawn(refusers.clone().watch(bound_pods.clone(), controller.store()));
    }
    let volumes = config.volume_topology.then(|| {
        placement::volume_stores::VolumeStores::watch(&client, &config.scope, controller.store(), changed_tx.clone())
    });
    let ctx = Arc::new(Context {
        writer: PodWriter::new(client.clone(), &config.scheduler_name).evicting_with(config.evictions),
        client,
        pods: controller.store(),
        gang_locks: gang::locks::GroupLocks::default(),
        slurm,
        jobs,
        policies,
        grants,
        slurmd,
        placement,
        placement_checks: Default::default(),
        cluster: config.cluster,
        metrics: config.metrics,
        fast_path: config.fast_path,
        placeholders: config.placeholders,
        quiet_after_queueing: timing::SUBMITTED_RECHECK,
        batches: batch::Batches::new(config.max_array_tasks, installation.clone()),
        installation,
        preemption: config.preemption,
        preemptions: preemption::InFlight::default(),
        requeued_seen: preemption::by_slurm::FirstSeen::default(),
        slurm_rules,
        decide_again: changed_tx,
        refusers: refusers.clone(),
        assumed: Default::default(),
        bound_pods: config.bound_pods.clone(),
        volumes: volumes.clone(),
    });
    // Fail closed, as for Nodes: a claim not listed yet would read as missing.
    if let Some(volumes) = &volumes {
        volumes.wait_until_ready().await?;
    }
    tracing::info!(scheduler = %config.scheduler_name, namespaces = %config.scope.describe(), "pod scheduler running");
    controller
        .run(reconcile::reconcile, reconcile::error_policy, ctx)
        .for_each(|result| async move {
            if let Err(error) = result {
                tracing::debug!(%error, "controller");
            }
        })
        .await;
    Ok(())
}

/// Tells `placement` of every event of a watch it draws from, relists included (a Node gone while the
/// watch was down leaves at its relist).
fn saw_change<T>(placement: &Placement) -> impl FnMut(T) -> std::future::Ready<()> + use<T> {
    let placement = placement.clone();
    move |_| {
        placement.saw_change();
        std::future::ready(())
    }
}

/// The namespaces' labels, watched (metadata only) when a grant selects namespaces by them.
fn namespace_labels(client: &Client, tenancy: &Tenancy) -> Option<grants::NamespaceLabels> {
    if !tenancy.selects_by_label() {
        return None;
    }
    let (store, writer) = reflector::store();
    let namespaces = Api::<PartialObjectMeta<Namespace>>::all(client.clone());
    let watch = watcher(namespaces, watcher::Config::default());
    tokio::spawn(reflector(writer, watch).default_backoff().touched_objects().for_each(|_| async {}));
    Some(store)
}

/// Keeps the pending-pods gauge at the number of this scheduler's pods not yet bound.
async fn count_pending(pods: reflector::Store<WatchedPod>, metrics: SchedulerMetrics, interval: Duration) {
    let mut ticker = tokio::time::interval(interval);
    loop {
        ticker.tick().await;
        let pending = pods
            .state()
            .iter()
            .filter(|pod| pod.spec.as_ref().is_none_or(|spec| spec.node_name.is_none()))
            .filter(|pod| pod_phase::leaving(pod).is_none())
            .count();
        metrics.set_pending(pending);
    }
}
