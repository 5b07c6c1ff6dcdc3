//! What the scheduler is told at start-up ([`Config`]) and what every pass over a pod shares
//! ([`Context`]): the clients, the caches the passes read, and the memories they keep between passes.
//! Built once by `run` (or a test's world); a pass only reads it, or writes through it.

use std::sync::Arc;
use std::time::Duration;

use kube::Client;
use kube::runtime::reflector::{self, ObjectRef};

use super::batch;
use super::gang::locks::GroupLocks;
use super::grants::Grants;
use super::job_cache::JobCache;
use super::link::Installation;
use super::metrics::SchedulerMetrics;
use super::placeholder::{PlaceholderKind, Placeholders};
use super::placement::Placement;
use super::placement::{assumed, placement_checks, pod_rules, shared_neighbourhood, volume_stores};
use super::preemption::by_slurm::FirstSeen;
use super::preemption::in_flight::InFlight;
use super::preemption::known_rules::{KnownRules, Stated as StatedRules};
use super::scope::Scope;
use super::slurmd_pods::SlurmdPods;
use super::watched_pod::WatchedPod;
use crate::kube::PodWriter;
use crate::policy::{self, Policies};
use crate::slurm::Slurm;
use crate::tenancy::Tenancy;

/// What the scheduler is told at start-up.
pub struct Config {
    /// Pods whose `spec.schedulerName` equals this are ours.
    pub scheduler_name: String,
    /// How often Slurm's job list is polled.
    pub poll_interval: Duration,
    /// What policies are told about the Slurm cluster.
    pub cluster: policy::Cluster,
    /// Where attempts, latencies and pending pods are counted (registered on /metrics by the caller).
    pub metrics: SchedulerMetrics,
    /// The namespaces whose pods are scheduled.
    pub scope: Scope,
    /// Try an immediate allocation before queueing a placeholder (see `fast_path`).
    pub fast_path: bool,
    /// Which placeholder jobs may be submitted.
    pub placeholders: Placeholders,
    /// The most pods one job array may carry (see `batch`); 1 submits every pod alone.
    pub max_array_tasks: usize,
    /// Let waiting pods preempt lower-priority work, as the preemption policy decides.
    pub preemption: bool,
    /// slurm.conf's preemption lines, as the operator states them for a slurmrestd that cannot say them.
    pub slurm_rules: StatedRules,
    /// The client preemption evicts pods with: one that takes a 429 (a disruption budget's refusal)
    /// for an answer.
    pub evictions: Client,
    pub tenancy: Arc<Tenancy>,
    /// The namespace of the NodeSets whose slurmd pods host Slurm nodes (all when unset).
    pub slurmd_namespace: Option<String>,
    /// Every pod bound to a Node, when the host reads them (the pool audit does): what pod
    /// (anti-)affinity and topology spread are about.
    pub bound_pods: Option<reflector::Store<WatchedPod>>,
    /// Whose placeholders are this scheduler's ([`installation`](super::installation)).
    pub installation: Installation,
    /// The view of Slurm's jobs this scheduler polls, which the pool's hold jobs are read from too.
    pub jobs: JobCache,
    /// Read PersistentVolumeClaims, PersistentVolumes and StorageClasses: where a pod's claimed
    /// volumes can be mounted (`volume_topology`).
    pub volume_topology: bool,
}

/// Everything a reconcile needs.
pub struct Context {
    pub client: Client,
    /// This scheduler's pods (the controller's store).
    pub pods: reflector::Store<WatchedPod>,
    pub gang_locks: GroupLocks,
    pub writer: PodWriter,
    pub slurm: Arc<dyn Slurm>,
    pub jobs: JobCache,
    /// Whose placeholders this scheduler's are: it signs their links and leaves others' alone.
    pub installation: Installation,
    pub policies: Arc<Policies>,
    /// What each namespace's pods may get in Slurm.
    pub grants: Grants,
    pub slurmd: SlurmdPods,
    pub placement: Placement,
    /// Waiting jobs found in line with their pods' placement rules, and on what grounds.
    pub placement_checks: placement_checks::PlacementChecks,
    pub cluster: policy::Cluster,
    pub metrics: SchedulerMetrics,
    pub fast_path: bool,
    pub placeholders: Placeholders,
    /// How long a pod whose job was just queued says nothing of it, and after which its pass reads the
    /// job alone if no listing showed it ([`SUBMITTED_RECHECK`](super::timing::SUBMITTED_RECHECK));
    /// none in the middle tier, whose time is compressed.
    pub quiet_after_queueing: Duration,
    /// Pods waiting to be submitted together.
    pub batches: batch::Batches,
    pub preemption: bool,
    /// Preemptions under way.
    pub preemptions: InFlight,
    /// Placeholders of bound pods seen requeued, waiting to learn who preempted them.
    pub requeued_seen: FirstSeen,
    /// Slurm's own preemption rules, as last read: the host preempts nothing they protect.
    pub slurm_rules: KnownRules,
    /// Pods to reconcile now (e.g. the other members of a group whose wait changed).
    pub decide_again: futures::channel::mpsc::UnboundedSender<ObjectRef<WatchedPod>>,
    /// Every pod bound to a Node (see [`Config::bound_pods`]), indexed once per poll in `refusers`.
    pub bound_pods: Option<reflector::Store<WatchedPod>>,
    pub refusers: shared_neighbourhood::SharedNeighbourhood,
    /// The pods this host bound, until the pod watch shows them bound.
    pub assumed: assumed::Assumed,
    /// The claims, volumes and classes, when the host reads them (see [`Config::volume_topology`]).
    pub volumes: Option<volume_stores::VolumeStores>,
}

impl Context {
    /// What the pod-level placement rules read besides the pod.
    pub fn pod_rules(&self) -> pod_rules::Views<'_> {
        pod_rules::Views {
            nodes: &self.placement.nodes,
            slurmd: &self.slurmd,
            pods: &self.pods,
            jobs: &self.jobs,
            grants: &self.grants,
            bound_pods: self.bound_pods.as_ref(),
            refusers: &self.refusers,
            assumed: &self.assumed,
            volumes: self.volumes.as_ref(),
        }
    }

    /// The placeholder to submit now (the Slurm behind slurmrestd may have changed since the last).
    pub fn placeholder_kind(&self) -> PlaceholderKind {
        self.placeholders.kind(self.slurm.api())
    }
}
