//! The vocabulary of a NodeSet reconcile: what the planner is shown, and the named steps it asks for.

use std::collections::BTreeMap;
use std::fmt;
use std::time::{Duration, SystemTime};

use super::claims::NodeSetKey;
use super::observed::ObservedPod;
use super::settings::Strategy;
use crate::slurm::{NodeSnapshot, SlurmView};

/// A Node that should run one of the NodeSet's pods, and what that pod registers as.
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    pub kube_node: String,
    pub slurm_node: String,
    /// The `--conf` a pod built now would register with.
    pub conf: String,
}

/// Why a Node that exists is not a target.
#[derive(Debug, Clone, PartialEq)]
pub enum Departure {
    Unmatched,
    ClaimedBy(NodeSetKey),
}

/// Everything one planning pass looks at. Nothing else: the plan is re-derived every time.
pub struct PlanInput<'a> {
    pub owner: &'a NodeSetKey,
    pub owner_uid: &'a str,
    pub revision: &'a str,
    /// The NodeSet is being deleted: every pod goes.
    pub deleting: bool,
    pub strategy: Strategy,
    pub drain_timeout: Duration,
    pub force: bool,
    pub targets: &'a [Target],
    /// Nodes that exist but are not targets; a pod's Node in neither is gone.
    pub departures: &'a BTreeMap<String, Departure>,
    /// Nodes running another NodeSet's slurmd pod (not being deleted), with that NodeSet.
    pub occupied: &'a BTreeMap<String, NodeSetKey>,
    pub pods: &'a [ObservedPod],
    /// None when Slurm cannot be read: fail closed.
    pub slurm: Option<&'a NodeSnapshot>,
    pub now: SystemTime,
}

impl PlanInput<'_> {
    pub fn view(&self, slurm_node: &str) -> SlurmView {
        self.slurm.map_or(SlurmView::Unknown, |snapshot| snapshot.view(slurm_node))
    }
}

/// Why a pod is being removed; the drain policy hears it as the termination reason.
#[derive(Debug, Clone, PartialEq)]
pub enum Cause {
    NodeGone,
    NodeUnmatched,
    NodeClaimed(NodeSetKey),
    NodeSetDeleted,
    /// Built from an older revision (rolling update).
    Outdated,
    /// A second pod of the NodeSet on the same Node.
    Duplicate,
    /// Succeeded or Failed: slurmd no longer runs. How it ended.
    PodFinished(String),
}

impl fmt::Display for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Cause::NodeGone => f.write_str("NodeSet scale-down: its Node is gone"),
            Cause::NodeUnmatched => f.write_str("NodeSet scale-down: its Node no longer matches"),
            Cause::NodeClaimed(by) => write!(f, "NodeSet scale-down: its Node belongs to NodeSet {by}"),
            Cause::NodeSetDeleted => f.write_str("NodeSet deleted"),
            Cause::Outdated => f.write_str("rolling update"),
            Cause::Duplicate => f.write_str("duplicate slurmd pod on the Node"),
            Cause::PodFinished(how) => write!(f, "slurmd pod finished ({how})"),
        }
    }
}

/// One named action, in the order the reconciler takes them.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Remove a dynamic node's record (its pod is gone and no job holds it), before a replacement
    /// registers, so that changed CPUs, memory or GRES take effect.
    DeleteSlurmNode {
        slurm_node: String,
    },
    /// A dynamic node of ours whose pod is gone, drained or whose slurmd no longer answers, holds
    /// only completing jobs, which cannot complete without that slurmd: mark it DOWN so that
    /// slurmctld lets them go now rather than after SlurmdTimeout, and its record can go.
    ReleaseCompleting {
        slurm_node: String,
    },
    /// The Slurm node is drained and idle (or gone, or `force` after the drain timeout).
    DeletePod {
        pod: String,
        uid: String,
        cause: Cause,
        forced: bool,
    },
    /// Ask the drain policy for a reason and drain (`in_slurm`), and mark the pod with the time. When
    /// the node is already drained by someone else only the pod is marked.
    Drain {
        pod: String,
        slurm_node: String,
        cause: Cause,
        in_slurm: bool,
    },
    /// The pod stays after all: forget the mark, and undo the drain in Slurm (`in_slurm`) only when
    /// it is still the one the NodeSet set.
    Undrain {
        pod: String,
        slurm_node: String,
        in_slurm: bool,
    },
    /// Record who the Slurm node belongs to in its comment.
    SetOwner {
        slurm_node: String,
        comment: String,
    },
    CreatePod {
        kube_node: String,
        slurm_node: String,
    },
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Step::DeleteSlurmNode { slurm_node } => write!(f, "delete Slurm node {slurm_node}"),
            Step::ReleaseCompleting { slurm_node } => {
                write!(f, "mark Slurm node {slurm_node} DOWN to release its completing jobs")
            }
            Step::DeletePod { pod, cause, forced: false, .. } => write!(f, "delete pod {pod} ({cause})"),
            Step::DeletePod { pod, cause, forced: true, .. } => write!(f, "force-delete pod {pod} ({cause})"),
            Step::Drain { slurm_node, cause, .. } => write!(f, "drain Slurm node {slurm_node} ({cause})"),
            Step::Undrain { slurm_node, .. } => write!(f, "keep Slurm node {slurm_node}"),
            Step::SetOwner { slurm_node, .. } => write!(f, "record the owner of Slurm node {slurm_node}"),
            Step::CreatePod { kube_node, .. } => write!(f, "create the slurmd pod of Node {kube_node}"),
        }
    }
}

impl Step {
    fn rank(&self) -> u8 {
        match self {
            Step::DeleteSlurmNode { .. } | Step::ReleaseCompleting { .. } => 0,
            Step::DeletePod { .. } => 1,
            Step::Drain { .. } => 2,
            Step::Undrain { .. } => 3,
            Step::SetOwner { .. } => 4,
            Step::CreatePod { .. } => 5,
        }
    }
}

/// A drain that has waited longer than the drain timeout for the jobs on its node.
#[derive(Debug, Clone, PartialEq)]
pub struct Blocked {
    pub pod: String,
    pub slurm_node: String,
    pub since: SystemTime,
    pub cause: Cause,
}

/// What to do now, and what is being waited for.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Plan {
    pub steps: Vec<Step>,
    pub blocked: Vec<Blocked>,
    /// Human-readable reasons the NodeSet is not settled yet.
    pub waiting: Vec<String>,
    /// Look again this soon even if nothing changes (a drain deadline, a registration window).
    pub requeue_after: Option<Duration>,
}

impl Plan {
    /// Nothing to do and nothing pending.
    pub fn settled(&self) -> bool {
        self.steps.is_empty() && self.blocked.is_empty() && self.waiting.is_empty()
    }

    pub(super) fn step(&mut self, step: Step) {
        self.steps.push(step);
    }

    pub(super) fn wait(&mut self, why: String, recheck: Option<Duration>) {
        self.waiting.push(why);
        if let Some(recheck) = recheck {
            self.recheck(recheck);
        }
    }

    pub(super) fn recheck(&mut self, after: Duration) {
        let after = after.max(Duration::from_secs(1));
        self.requeue_after = Some(self.requeue_after.map_or(after, |current| current.min(after)));
    }

    pub(super) fn order(&mut self) {
        self.steps.sort_by_key(Step::rank);
    }
}
