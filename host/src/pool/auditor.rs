//! The auditor: on every poll, each Node running a Slurm node has its ledger drawn; a Node whose pool
//! is not held once says so in `sunk_pool_overcommitted`, in its `SlurmPoolOvercommitted` condition
//! and in an Event naming the pods outside Slurm. It writes only when what it finds changes.
//!
//! Where Slurm offers what pods outside it hold, it has hold jobs hold that ([`super::holds`]), when
//! it runs beside the scheduler, whose job listing shows them. Otherwise it only reports. While
//! Slurm's nodes or jobs cannot be read it says and does nothing new, and it never drains, evicts or
//! cancels anything but its own hold jobs.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Patch, PatchParams};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource};
use serde_json::json;

use super::holds::{self, HoldJob, HoldStep};
use super::ledger::{Amounts, Finding, NodeLedger};
use super::metrics::PoolMetrics;
use super::node_list::NodeList;
use super::taints::{self, TaintStep, taint_steps};
use crate::kube::EventRecorder;
use crate::scheduler::{
    Installation, JobCache, Placeholders, SLURM_NODE_LABEL, SlurmdPods, WatchedPod, forget_managed_fields,
};
use crate::slurm::{self, NodeCache, Slurm};
use crate::vocabulary::SLURM_NODE_TAINT;

/// The Node condition the auditor keeps.
pub const CONDITION: &str = "SlurmPoolOvercommitted";

pub struct Config {
    /// Every pod bound to a Node ([`watch_bound_pods`]).
    pub bound_pods: Store<WatchedPod>,
    /// Pods this scheduler binds are held by their placeholders.
    pub scheduler_name: String,
    /// Where the NodeSets' slurmd pods are (every namespace when unset).
    pub nodeset_namespace: Option<String>,
    /// Taint the Nodes that run Slurm nodes ([`super::taints`]).
    pub taint_nodes: bool,
    pub interval: Duration,
    pub metrics: PoolMetrics,
    /// Hold what Slurm offers beyond the outside pods' room, with the scheduler's view of jobs.
    pub holds: Option<HoldKeeping>,
    /// Name the Nodes that run slurmd for the admission policy ([`super::node_list`]).
    pub node_list: Option<NodeList>,
}

/// What keeping hold jobs takes: the scheduler's job listing, which shows them, and what it submits
/// with.
pub struct HoldKeeping {
    pub jobs: JobCache,
    pub slurm: Arc<dyn Slurm>,
    pub installation: Installation,
    pub placeholders: Placeholders,
}

/// How long a Node whose hold job could not be submitted or cancelled waits to try again.
const HOLD_RETRY: Duration = Duration::from_secs(30);

/// How long the job listing may go unanswered before hold jobs are left as they are.
const JOBS_PATIENCE: Duration = Duration::from_secs(10);

/// What the auditor remembers between passes.
#[derive(Default)]
struct Memory {
    /// What each Node was last told.
    said: HashMap<String, (Finding, String)>,
    /// When the host last submitted or cancelled a hold job on each Node: until a listing begun
    /// after that shows the result, the Node's hold jobs are not known.
    acted: HashMap<String, Instant>,
    /// The Nodes last written to the admission policy's list.
    listed: Option<BTreeSet<String>>,
}

/// Every pod bound to a Node, in any namespace, watched from now on: the one cache of them the host's
/// controllers share. The audit counts what pods hold where they run, and pod (anti-)affinity and
/// topology spread are about pods where they run, so a pod waiting for a Node is left out: 10,000 of
/// them took 26 MB here, a second copy of the scheduler's own store (docs/benchmarks.md, scale-bench).
pub fn watch_bound_pods(client: &Client) -> Store<WatchedPod> {
    let (pods, writer) = reflector::store::<WatchedPod>();
    let bound = watcher::Config::default().fields("spec.nodeName!=");
    let watch = watcher(Api::<WatchedPod>::all(client.clone()), bound);
    tokio::spawn(watch.default_backoff().modify(forget_managed_fields).reflect(writer).for_each(|_| async {}));
    pods
}

/// Audits until the watches end.
pub async fn run(client: Client, slurm_nodes: NodeCache, config: Config) -> anyhow::Result<()> {
    let pods = config.bound_pods.clone();
    let (slurmd_store, slurmd_writer) = reflector::store::<Pod>();
    let slurmd_api = match &config.nodeset_namespace {
        Some(namespace) => Api::<Pod>::namespaced(client.clone(), namespace),
        None => Api::<Pod>::all(client.clone()),
    };
    let slurmd_watch = watcher(slurmd_api, watcher::Config::default().labels(SLURM_NODE_LABEL));
    tokio::spawn(slurmd_watch.default_backoff().reflect(slurmd_writer).for_each(|_| async {}));
    let (nodes, nodes_writer) = reflector::store::<Node>();
    let nodes_watch = watcher(Api::<Node>::all(client.clone()), watcher::Config::default());
    tokio::spawn(nodes_watch.default_backoff().reflect(nodes_writer).for_each(|_| async {}));
    for (what, ready) in [("pods", pods.wait_until_ready().await), ("Nodes", nodes.wait_until_ready().await)] {
        ready.map_err(|_| anyhow::anyhow!("the pool auditor's watch of {what} ended"))?;
    }
    slurmd_store.wait_until_ready().await.map_err(|_| anyhow::anyhow!("the watch of slurmd pods ended"))?;

    let auditor = Auditor {
        slurmd: SlurmdPods::new(slurmd_store.clone(), slurm_nodes.clone()),
        slurmd_pods: slurmd_store,
        recorder: EventRecorder::new(client.clone(), "sunk-pool"),
        client,
        slurm_nodes,
        pods,
        nodes,
        config,
    };
    tracing::info!("pool auditor running");
    let mut memory = Memory::default();
    let mut ticker = tokio::time::interval(auditor.config.interval);
    loop {
        ticker.tick().await;
        auditor.pass(&mut memory).await;
    }
}

struct Auditor {
    client: Client,
    slurm_nodes: NodeCache,
    slurmd: SlurmdPods,
    slurmd_pods: Store<Pod>,
    pods: Store<WatchedPod>,
    nodes: Store<Node>,
    recorder: EventRecorder,
    config: Config,
}

impl Auditor {
    /// One look at every Node running a Slurm node.
    async fn pass(&self, memory: &mut Memory) {
        let Ok(snapshot) = self.slurm_nodes.snapshot() else { return };
        let hold_listing = self.hold_listing();
        let holds_by_node = hold_listing.as_ref().map(|(_, jobs)| holds::by_node(jobs));
        let hosts = self.slurmd.kube_nodes();
        let hosting: BTreeSet<String> = hosts.values().cloned().collect();
        let slurmd_on: BTreeSet<String> =
            self.slurmd_pods.state().iter().filter_map(|pod| pod.spec.as_ref()?.node_name.clone()).collect();
        if self.config.taint_nodes {
            self.keep_taints(&hosting, &slurmd_on).await;
        }
        if let Some(list) = &self.config.node_list {
            // A Node gets its slurmd pod before Slurm believes it: admission names it from then.
            let nodes: BTreeSet<String> = hosting.union(&slurmd_on).cloned().collect();
            self.keep_node_list(list, nodes, &mut memory.listed).await;
        }
        let all_pods = self.pods.state();
        let mut by_node: HashMap<&str, Vec<&WatchedPod>> = HashMap::new();
        for pod in &all_pods {
            if let Some(node) = pod.spec.as_ref().and_then(|spec| spec.node_name.as_deref()) {
                by_node.entry(node).or_default().push(pod);
            }
        }
        let held_by_slurm = |pod: &WatchedPod| {
            pod.spec.as_ref().and_then(|spec| spec.scheduler_name.as_deref()) == Some(&self.config.scheduler_name)
        };
        for (slurm_name, kube_name) in &hosts {
            let (Some(node), Some(slurm_node)) = (self.nodes.get(&ObjectRef::new(kube_name)), snapshot.get(slurm_name))
            else {
                continue;
            };
            let pods = by_node.get(kube_name.as_str()).map(Vec::as_slice).unwrap_or_default();
            let Some(ledger) = NodeLedger::of(&node, slurm_node, pods, held_by_slurm) else { continue };
            let hold_jobs = holds_by_node.as_ref().map(|by_node| by_node.get(slurm_name.as_str()));
            let hold_jobs: &[HoldJob] = hold_jobs.flatten().map(Vec::as_slice).unwrap_or_default();
            let ledger = ledger.with_holds(holds::running(hold_jobs));
            if let Some((listed, _)) = &hold_listing
                && memory.acted.get(kube_name).is_none_or(|acted| acted < listed)
            {
                let step = holds::plan(holds::needed(&ledger), slurm_node.flags().is_draining(), hold_jobs);
                if let Some(step) = step {
                    let done = self.keep_holds(&node, slurm_node, step).await;
                    let wait = if done { Duration::ZERO } else { HOLD_RETRY };
                    memory.acted.insert(kube_name.clone(), Instant::now() + wait);
                }
            }
            let finding = ledger.finding();
            self.config.metrics.set(kube_name, &finding);
            let message = ledger.describe(&finding);
            let before = memory.said.get(kube_name);
            if before.is_some_and(|(found, told)| *found == finding && *told == message) {
                continue;
            }
            let was_overcommitted = before.is_some_and(|(found, _)| *found != Finding::HeldOnce);
            if self.tell(&node, &finding, &message, was_overcommitted).await {
                memory.said.insert(kube_name.clone(), (finding, message));
            }
        }
        // A set, not a scan of `hosts` per Node: thousands of Nodes, every poll.
        memory.said.retain(|node, _| {
            let kept = hosting.contains(node);
            if !kept {
                self.config.metrics.forget(node);
            }
            kept
        });
        memory.acted.retain(|node, _| hosting.contains(node));
    }

    /// The hold jobs as the scheduler's last listing showed them, and when it began; none when
    /// hold jobs are not kept, or the listing is not complete or current.
    fn hold_listing(&self) -> Option<(Instant, Arc<Vec<slurm::Job>>)> {
        let keeping = self.config.holds.as_ref()?;
        if keeping.jobs.unreachable(JOBS_PATIENCE).is_some() {
            return None;
        }
        keeping.jobs.hold_jobs()
    }

    /// Submits or cancels one hold job on the Node, and says so; whether Slurm took it.
    async fn keep_holds(&self, node: &Node, slurm_node: &slurm::Node, step: HoldStep) -> bool {
        let Some(keeping) = &self.config.holds else { return false };
        let kube_node = node.metadata.name.clone().unwrap_or_default();
        let (done, message) = match step {
            HoldStep::Submit { more } => {
                let Some(partition) = slurm_node.partitions.first() else { return false };
                let kind = keeping.placeholders.kind(keeping.slurm.api());
                let sign = |link| keeping.installation.sign(link);
                let job = holds::job_description(&slurm_node.name, &kube_node, partition, more, kind, sign);
                let held = Amounts::of_slurm(more);
                match keeping.slurm.submit(&job).await {
                    Ok(job_id) => (true, format!("hold job {job_id} holds {held} for pods outside Slurm")),
                    Err(error) => (false, format!("could not submit a hold job for {held}: {error}")),
                }
            }
            HoldStep::Cancel { job_id } => match keeping.slurm.cancel(&job_id).await {
                Ok(()) => (true, format!("hold job {job_id} ended: the pods outside Slurm need less")),
                Err(error) => (false, format!("could not cancel hold job {job_id}: {error}")),
            },
        };
        let reference = node.object_ref(&());
        if done {
            tracing::info!(node = %kube_node, "{message}");
            self.recorder.publish(&reference, false, "HoldJob", "Hold", message).await;
        } else {
            tracing::warn!(node = %kube_node, "{message}");
            self.recorder.publish(&reference, true, "HoldJobFailed", "Hold", message).await;
        }
        done
    }

    /// Names `nodes` in the admission policy's list, unless it names them already.
    async fn keep_node_list(&self, list: &NodeList, nodes: BTreeSet<String>, listed: &mut Option<BTreeSet<String>>) {
        if listed.as_ref() == Some(&nodes) {
            return;
        }
        match list.write(&self.client, &nodes).await {
            Ok(()) => {
                tracing::info!(configmap = %list.name, nodes = nodes.len(), "Slurm Nodes named for admission");
                *listed = Some(nodes);
            }
            Err(error) => {
                tracing::warn!(configmap = %list.name, %error, "could not name the Slurm Nodes for admission")
            }
        }
    }

    /// Taints the Nodes that run Slurm nodes, and untaints those no slurmd pod is left on.
    /// `hosting` are the Nodes running a believed Slurm node, `slurmd_on` those with any slurmd pod.
    async fn keep_taints(&self, hosting: &BTreeSet<String>, slurmd_on: &BTreeSet<String>) {
        let nodes = self.nodes.state();
        let nodes: Vec<&Node> = nodes.iter().map(AsRef::as_ref).collect();
        for step in taint_steps(&nodes, hosting, slurmd_on) {
            let (TaintStep::Add(name) | TaintStep::Remove(name)) = &step;
            let Some(node) = nodes.iter().find(|node| node.metadata.name.as_deref() == Some(name)) else { continue };
            match taints::apply(&self.client, node, &step).await {
                Ok(()) => tracing::info!(node = %name, ?step, "Slurm Node taint {SLURM_NODE_TAINT} kept"),
                Err(error) => tracing::warn!(node = %name, %error, "could not change the Node's taints"),
            }
        }
    }

    /// The Node's condition and, on a change of finding, an Event; true once the condition is written.
    async fn tell(&self, node: &Node, finding: &Finding, message: &str, was_overcommitted: bool) -> bool {
        let name = node.metadata.name.clone().unwrap_or_default();
        let overcommitted = *finding != Finding::HeldOnce;
        let now = k8s_openapi::jiff::Timestamp::now().to_string();
        let (status, reason) = if overcommitted { ("True", "Overcommitted") } else { ("False", "HeldOnce") };
        let patch = json!({"status": {"conditions": [{
            "type": CONDITION, "status": status, "reason": reason, "message": crate::kube::one_line(message),
            "lastTransitionTime": now, "lastHeartbeatTime": now,
        }]}});
        let nodes: Api<Node> = Api::all(self.client.clone());
        if let Err(error) = nodes.patch_status(&name, &PatchParams::default(), &Patch::Strategic(patch)).await {
            tracing::warn!(node = %name, %error, "could not write the Node's {CONDITION} condition");
            return false;
        }
        if overcommitted {
            tracing::warn!(node = %name, "{message}");
            self.recorder.publish(&node.object_ref(&()), true, "PoolOvercommitted", "Audit", message.to_owned()).await;
        } else if was_overcommitted {
            self.recorder.publish(&node.object_ref(&()), false, "PoolHeldOnce", "Audit", message.to_owned()).await;
        }
        true
    }
}
