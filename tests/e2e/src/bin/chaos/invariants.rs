//! What must hold however the faults fall, checked on every sample and at the end:
//! - never two live jobs for one pod;
//! - no live placeholder without its pod for longer than [`JOB_OUTLIVES_POD`] (and none after settling);
//! - no pod Pending longer than [`PENDING_WITH_ROOM`] while a Node of the pool is idle in Slurm, away
//!   from faults (a fault, and [`PENDING_WITH_ROOM`] after its recovery, excuse a wait);
//! - no Slurm batch job cancelled but by a preemption the host marked on it (sunk never cancels what
//!   it did not submit otherwise), and no pod of the workload gone without an Event saying why;
//! - no slurmd pod deleted, but by the run itself, while its Slurm node held a job;
//! - no pod refused by its kubelet (`OutOfcpu`, `OutOfmemory`, `Outof<extended resource>`): the pool
//!   is held once, so whatever Slurm gave a pod's placeholder the kubelet has too;
//! - on every Node of the pool, what Slurm's jobs hold beside the pods outside Slurm (less what hold
//!   jobs keep for those) fits the Node's allocatable, for more than [`POOL_COLLIDES_FOR`] samples
//!   never: a pod outside Slurm waits for its hold job at most a poll and a scheduling pass.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use kube::ResourceExt;
use kube::api::ListParams;
use sunk::slurm::{Job, JobState, JobsPage, NodesPage};
use sunk_e2e::node_name;

use crate::workload::{WORKLOAD, Workload};
use crate::world::{POOL, World};

const JOB_OUTLIVES_POD: Duration = Duration::from_secs(30);
const PENDING_WITH_ROOM: Duration = Duration::from_secs(30);
const SETTLE: Duration = Duration::from_secs(60);
/// Samples in a row a Node's pool may collide before it is a violation.
const POOL_COLLIDES_FOR: u32 = 3;
/// The reasons of the host's Events that explain a pod it deleted.
const DELETION_EVENTS: [&str; 4] = ["SlurmJobEnded", "SlurmJobPreempted", "SlurmJobRequeued", "Preempted"];
/// What the host writes into a Slurm job's admin comment when it preempts the job for a pod.
const PREEMPTED_MARK: &str = "preempted by pod";

/// A node with room for a pod: idle, and neither drained, planned for a waiting job, nor unhealthy
/// (a dynamic node's own flag aside).
fn free(node: &sunk::slurm::Node) -> bool {
    let Some((state, flags)) = node.state.split_first() else { return false };
    state == "IDLE" && flags.iter().all(|flag| flag == "DYNAMIC_NORM")
}

/// A node that takes jobs: up, and neither drained nor unresponsive.
fn usable(node: &sunk::slurm::Node) -> bool {
    let Some((state, flags)) = node.state.split_first() else { return false };
    let unusable = ["DRAIN", "NOT_RESPONDING", "POWERED_DOWN", "POWERING_UP", "FAIL", "MAINTENANCE"];
    matches!(state.as_str(), "IDLE" | "ALLOCATED" | "MIXED")
        && !flags.iter().any(|flag| unusable.contains(&flag.as_str()))
}

/// What one sample saw that a fault's recovery is judged by.
pub struct Sample {
    /// Pods of the workload waiting while a Node of the pool is idle in Slurm.
    pub pending_with_room: usize,
    /// Slurm nodes of the pool registered and taking jobs (not down, drained or unresponsive).
    pub pool_nodes_usable: usize,
    /// The pool's Slurm nodes and their states, to say why a recovery waits.
    pub pool_states: String,
    /// Every job slurmrestd lists (any state, anyone's).
    pub slurm_jobs: u64,
    /// The job arrays standing for the run's pods (one entry per task; the workload counts them once).
    pub arrays: Vec<u64>,
}

pub struct Invariants {
    violations: Vec<String>,
    /// Since when each pod has waited while Slurm had room (by pod UID).
    waiting_with_room: HashMap<String, Instant>,
    /// Since when each live placeholder's pod has been missing (by job id).
    orphaned: HashMap<u32, Instant>,
    /// When the last fault was recovered from (none while one lasts).
    quiet_since: Option<Instant>,
    /// Pods already found gone, and slurmd pods the run deleted itself (by UID).
    gone: HashSet<String>,
    pub deleted_slurmd: HashSet<String>,
    /// Slurm nodes of the pool holding a job at the last sample, and the slurmd pods seen then.
    busy_nodes: HashSet<String>,
    slurmd_pods: HashMap<String, String>,
    reported: HashSet<String>,
    /// Victims of the preemptors: the workload's pods (by UID) and batch jobs (by id).
    preempted_pods: HashSet<String>,
    preempted_jobs: HashSet<u32>,
    /// Pods a kubelet refused to admit (by UID).
    refused_by_kubelet: HashSet<String>,
    /// Samples in a row each pool Node's pool collided.
    pool_collisions: HashMap<String, u32>,
}

impl Invariants {
    pub fn new() -> Self {
        Self {
            violations: Vec::new(),
            waiting_with_room: HashMap::new(),
            orphaned: HashMap::new(),
            quiet_since: Some(Instant::now()),
            gone: HashSet::new(),
            deleted_slurmd: HashSet::new(),
            busy_nodes: HashSet::new(),
            slurmd_pods: HashMap::new(),
            reported: HashSet::new(),
            preempted_pods: HashSet::new(),
            preempted_jobs: HashSet::new(),
            refused_by_kubelet: HashSet::new(),
            pool_collisions: HashMap::new(),
        }
    }

    pub fn violation(&mut self, what: String) {
        // One broken invariant is reported once, however many samples see it.
        if self.reported.insert(what.clone()) {
            eprintln!("VIOLATION: {what}");
            self.violations.push(what);
        }
    }

    pub fn fault_began(&mut self) {
        self.quiet_since = None;
    }

    pub fn quiet_since(&mut self, at: Instant) {
        self.quiet_since = Some(at);
    }

    /// How many pods a kubelet refused to admit.
    pub fn kubelet_refusals(&self) -> usize {
        self.refused_by_kubelet.len()
    }

    /// How many of the workload's pods and batch jobs the preemptors made go.
    pub fn preempted(&self) -> (usize, usize) {
        (self.preempted_pods.len(), self.preempted_jobs.len())
    }

    pub fn into_violations(self) -> Vec<String> {
        self.violations
    }

    /// Samples the cluster and checks every invariant; `None` when it could not be read (a fault).
    pub async fn sample(&mut self, world: &World, workload: &Workload) -> Option<Sample> {
        let cluster = &world.cluster;
        let pods = cluster.pods().list(&ListParams::default()).await.ok()?.items;
        let JobsPage::All { jobs, .. } = cluster.slurm.jobs(None).await.ok()? else { return None };
        let NodesPage::All { nodes, .. } = cluster.slurm.nodes(None).await.ok()? else { return None };
        let placeholders: Vec<(sunk::scheduler::PodKey, Job)> = jobs
            .iter()
            .flat_map(sunk::scheduler::linked)
            .filter(|(pod, job)| pod.namespace == cluster.namespace && !sunk::scheduler::is_failed_attempt(job))
            .collect();
        self.one_live_job_per_pod(&placeholders);
        self.no_job_without_its_pod(&placeholders, &pods);
        self.no_batch_job_cancelled(&jobs, workload);
        self.no_pod_lost(world, workload, &pods).await;
        let idle: Vec<&str> = nodes
            .iter()
            .filter(|node| POOL.contains(&node.name.as_str()) && free(node))
            .map(|node| node.name.as_str())
            .collect();
        self.slurmd_pods_kept(&pods, &nodes);
        self.no_pod_refused_by_its_kubelet(&pods);
        self.pool_held_once(world, &nodes, &jobs).await;
        let pending_with_room = self.no_wait_with_room(&pods, workload, !idle.is_empty());
        let pool_nodes_usable = nodes.iter().filter(|node| POOL.contains(&node.name.as_str()) && usable(node)).count();
        let pool_states = nodes
            .iter()
            .filter(|node| POOL.contains(&node.name.as_str()))
            .map(|node| format!("{} {}", node.name, node.state.join("+")))
            .collect::<Vec<_>>()
            .join(", ");
        let slurm_jobs = jobs.len() as u64;
        let arrays = placeholders.iter().filter_map(|(_, job)| job.array_job_id.get()).filter(|id| *id > 0).collect();
        Some(Sample { pending_with_room, pool_nodes_usable, pool_states, slurm_jobs, arrays })
    }

    fn one_live_job_per_pod(&mut self, placeholders: &[(sunk::scheduler::PodKey, Job)]) {
        let mut live: HashMap<&str, Vec<u32>> = HashMap::new();
        for (pod, job) in placeholders {
            if matches!(job.state(), JobState::Pending | JobState::Running) {
                live.entry(pod.name.as_str()).or_default().push(job.job_id);
            }
        }
        for (pod, jobs) in live.into_iter().filter(|(_, jobs)| jobs.len() > 1) {
            self.violation(format!("pod {pod} has {} live jobs: {jobs:?}", jobs.len()));
        }
    }

    fn no_job_without_its_pod(&mut self, placeholders: &[(sunk::scheduler::PodKey, Job)], pods: &[Pod]) {
        let uids: HashSet<String> = pods.iter().filter_map(|pod| pod.uid()).collect();
        let mut still = HashSet::new();
        for (pod, job) in placeholders.iter().filter(|(_, job)| job.state() != JobState::Ended) {
            if uids.contains(&pod.uid) {
                continue;
            }
            still.insert(job.job_id);
            let since = *self.orphaned.entry(job.job_id).or_insert_with(Instant::now);
            if since.elapsed() > JOB_OUTLIVES_POD {
                self.violation(format!(
                    "job {} outlived its pod {} by over {JOB_OUTLIVES_POD:?}",
                    job.job_id, pod.name
                ));
            }
        }
        self.orphaned.retain(|job, _| still.contains(job));
    }

    fn no_batch_job_cancelled(&mut self, jobs: &[Job], workload: &Workload) {
        for batch in &workload.batch {
            let Some(job) = jobs.iter().find(|job| job.job_id.to_string() == batch.0) else { continue };
            if job.admin_comment.contains(PREEMPTED_MARK) {
                self.preempted_jobs.insert(job.job_id);
                continue;
            }
            if job.job_state.first().is_some_and(|state| state == "CANCELLED") {
                self.violation(format!("Slurm batch job {} was cancelled ({:?})", job.job_id, job.job_state));
            }
        }
    }

    /// A pod of the workload that the workload did not delete and that is gone or going must have
    /// an Event of the host's saying why.
    async fn no_pod_lost(&mut self, world: &World, workload: &Workload, pods: &[Pod]) {
        let present: HashMap<String, &Pod> = pods.iter().map(|pod| (pod.uid().unwrap_or_default(), pod)).collect();
        for (name, tracked) in &workload.pods {
            if tracked.deleted || self.gone.contains(&tracked.uid) {
                continue;
            }
            let going = present.get(&tracked.uid).is_none_or(|pod| pod.metadata.deletion_timestamp.is_some());
            if !going {
                continue;
            }
            let Ok(events) = world.cluster.events_of(name).await else { continue };
            self.gone.insert(tracked.uid.clone());
            if events.iter().any(|(reason, _)| reason == "Preempted") {
                self.preempted_pods.insert(tracked.uid.clone());
            }
            if !events.iter().any(|(reason, _)| DELETION_EVENTS.contains(&reason.as_str())) {
                self.violation(format!("pod {name} was deleted without an Event saying why: {events:?}"));
            }
        }
    }

    /// The NodeSet's slurmd pods (by UID, on which Node): one that disappeared while its Slurm node
    /// held a job must have been deleted by the run.
    fn slurmd_pods_kept(&mut self, pods: &[Pod], nodes: &[sunk::slurm::Node]) {
        let label = sunk::scheduler::SLURM_NODE_LABEL;
        let slurmd: HashMap<String, String> = pods
            .iter()
            .filter(|pod| pod.labels().contains_key(label) && pod.metadata.deletion_timestamp.is_none())
            .filter_map(|pod| Some((pod.uid()?, node_name(pod)?.to_string())))
            .collect();
        let vanished: Vec<(String, String)> = self
            .slurmd_pods
            .iter()
            .filter(|(uid, _)| !slurmd.contains_key(*uid) && !self.deleted_slurmd.contains(*uid))
            .map(|(uid, node)| (uid.clone(), node.clone()))
            .collect();
        for (uid, node) in vanished {
            if self.busy_nodes.contains(&node) {
                self.violation(format!("the slurmd pod {uid} on {node} was deleted while its node held a job"));
            }
        }
        self.slurmd_pods = slurmd;
        self.busy_nodes = nodes
            .iter()
            .filter(|node| matches!(node.state.first().map(String::as_str), Some("ALLOCATED" | "MIXED")))
            .map(|node| node.name.clone())
            .collect();
    }

    /// A kubelet refuses a pod whose requests its Node cannot hold (`OutOfcpu`, `OutOfmemory`,
    /// `Outofnvidia.com/gpu`): the pod failed where Slurm said there was room.
    fn no_pod_refused_by_its_kubelet(&mut self, pods: &[Pod]) {
        for pod in pods {
            let Some(status) = pod.status.as_ref() else { continue };
            let reason = status.reason.as_deref().unwrap_or_default();
            if status.phase.as_deref() != Some("Failed") || !reason.to_ascii_lowercase().starts_with("outof") {
                continue;
            }
            if self.refused_by_kubelet.insert(pod.uid().unwrap_or_default()) {
                let message = status.message.as_deref().unwrap_or_default();
                self.violation(format!("pod {} was refused by its kubelet: {reason}: {message}", pod.name_any()));
            }
        }
    }

    /// Draws each pool Node's ledger from every pod bound to it, its Slurm node and the hold jobs
    /// there, and reports a Node where Slurm's jobs and the pods outside Slurm collide for longer
    /// than a hold job takes to start.
    async fn pool_held_once(&mut self, world: &World, slurm_nodes: &[sunk::slurm::Node], jobs: &[Job]) {
        let kube = &world.cluster.kube;
        let (Ok(nodes), Ok(every_pod)) = (
            Api::<Node>::all(kube.clone()).list(&ListParams::default()).await,
            Api::<Pod>::all(kube.clone()).list(&ListParams::default()).await,
        ) else {
            return;
        };
        let every_pod: Vec<sunk::scheduler::WatchedPod> = every_pod
            .items
            .iter()
            .filter_map(|pod| serde_json::to_value(pod).ok().and_then(|value| serde_json::from_value(value).ok()))
            .collect();
        let pods: Vec<&sunk::scheduler::WatchedPod> = every_pod.iter().collect();
        let through_slurm = |pod: &sunk::scheduler::WatchedPod| {
            pod.spec.as_ref().and_then(|spec| spec.scheduler_name.as_deref()) == Some(sunk_e2e::SCHEDULER)
        };
        let hold_jobs = sunk::pool::hold_jobs_by_node(jobs);
        for node in nodes.items.iter().filter(|node| POOL.contains(&node.name_any().as_str())) {
            let name = node.name_any();
            let Some(slurm_node) = slurm_nodes.iter().find(|slurm_node| slurm_node.name == name) else { continue };
            let Some(ledger) = sunk::pool::NodeLedger::of(node, slurm_node, &pods, through_slurm) else { continue };
            let held = hold_jobs.get(name.as_str()).map(Vec::as_slice).unwrap_or_default();
            let ledger = ledger.with_holds(sunk::pool::held_by_running_holds(held));
            let finding = ledger.finding();
            let colliding = matches!(finding, sunk::pool::Finding::Overcommitted { colliding: true, .. });
            let samples = self.pool_collisions.entry(name.clone()).or_default();
            *samples = if colliding { *samples + 1 } else { 0 };
            if *samples == POOL_COLLIDES_FOR {
                self.violation(format!("the pool of Node {name} is not held once: {}", ledger.describe(&finding)));
            }
        }
    }

    /// Counts single pods waiting while Slurm has room, and reports those that waited too long away
    /// from any fault.
    fn no_wait_with_room(&mut self, pods: &[Pod], workload: &Workload, room: bool) -> usize {
        let waiting: Vec<&Pod> = pods
            .iter()
            .filter(|pod| pod.labels().contains_key(WORKLOAD) && pod.metadata.deletion_timestamp.is_none())
            .filter(|pod| node_name(pod).is_none())
            .filter(|pod| workload.pods.get(&pod.name_any()).is_some_and(|tracked| !tracked.gang))
            .collect();
        if !room {
            self.waiting_with_room.clear();
            return 0;
        }
        let uids: HashSet<String> = waiting.iter().filter_map(|pod| pod.uid()).collect();
        self.waiting_with_room.retain(|uid, _| uids.contains(uid));
        let now = Instant::now();
        for pod in &waiting {
            let since = *self.waiting_with_room.entry(pod.uid().unwrap_or_default()).or_insert(now);
            // The host has PENDING_WITH_ROOM from the later of the wait's start and the last recovery.
            let Some(quiet) = self.quiet_since else { continue };
            if since.max(quiet).elapsed() > PENDING_WITH_ROOM {
                self.violation(format!(
                    "pod {} waited over {PENDING_WITH_ROOM:?} while a Node of the pool was idle in Slurm",
                    pod.name_any()
                ));
            }
        }
        waiting.len()
    }

    /// After the workload is gone: within [`SETTLE`], no live placeholder of the run is left.
    pub async fn at_end(&mut self, world: &World, workload: &Workload) {
        let settled = sunk_e2e::wait_for("no live placeholder left", SETTLE, || async {
            let jobs = world.cluster.jobs_in_namespace().await.ok()?;
            let live: Vec<u32> =
                jobs.iter().filter(|(_, job)| job.state() != JobState::Ended).map(|(_, job)| job.job_id).collect();
            live.is_empty().then_some(())
        })
        .await;
        if settled.is_err() {
            let jobs = world.cluster.jobs_in_namespace().await.unwrap_or_default();
            let live: Vec<String> = jobs
                .iter()
                .filter(|(_, job)| job.state() != JobState::Ended)
                .map(|(pod, job)| format!("{} ({})", job.job_id, pod.name))
                .collect();
            self.violation(format!("live placeholders without pods {SETTLE:?} after the end: {live:?}"));
        }
        if let Ok(JobsPage::All { jobs, .. }) = world.cluster.slurm.jobs(None).await {
            self.no_batch_job_cancelled(&jobs, workload);
        }
    }
}
