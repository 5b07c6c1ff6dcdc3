//! Hold jobs: what Slurm offers on a Node beyond what the pods outside Slurm leave it is held by
//! Slurm jobs of the host's own, so Slurm never gives it to a job or a sunk pod. Pure.
//!
//! Why jobs, and not a smaller node: a dynamic node's CPUs and memory are fixed when slurmd
//! registers (`slurmd -Z --conf`), and re-registering means restarting the slurmd pod, which ends
//! the jobs on it. `CoreSpecCount`/`MemSpecLimit` are read at the same moment. A job can start and
//! end while the node runs, and Slurm accounts for it as for any other, so the two views meet on
//! every poll, as pods outside Slurm (DaemonSets, static pods, the slurmd pod's own requests) come
//! and go.
//!
//! A Node holds any number of hold jobs; their sum covers what is needed. A need that grows gets a
//! job for the difference; one that shrinks loses a job once the rest still cover it. Slurm counts
//! whole CPUs and MiB, so the sum is rounded up, and every job holds at least one CPU.

use std::collections::HashMap;

use super::ledger::{Amounts, NodeLedger};
use crate::scheduler::{PlaceholderKind, hold_link, holder};
use crate::slurm::{self, JobDescription, NoValue, Resources};

const MIB: u64 = 1024 * 1024;

/// Above any priority a pod's PriorityClass maps to: a Node's outside pods take what they hold
/// first, before anything waiting for it.
const PRIORITY: u64 = 1_000_000_000;

/// A hold job of the host's, as last listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HoldJob {
    pub job_id: u32,
    pub holds: Resources,
    /// Holding its node now, not waiting for room.
    pub running: bool,
}

/// What the running ones of a Node's hold jobs hold for the pods outside Slurm.
pub fn running(held: &[HoldJob]) -> Amounts {
    Amounts::of_slurm(held.iter().filter(|job| job.running).fold(Resources::default(), |sum, job| sum.plus(job.holds)))
}

/// What to do about one Node's hold jobs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HoldStep {
    /// Hold `more` too.
    Submit { more: Resources },
    /// This job is no longer needed: the others cover what is.
    Cancel { job_id: u32 },
}

/// What hold jobs must hold on a Node: what Slurm offers beyond the outside pods' room, in Slurm's
/// units, rounded up.
pub fn needed(ledger: &NodeLedger) -> Resources {
    let Amounts { cpu_millis, memory_bytes, gpus } = ledger.beyond_room();
    Resources { cpus: cpu_millis.div_ceil(1000), memory_mib: memory_bytes.div_ceil(MIB), gpus }
}

/// The one step that brings the Node's hold jobs `held` to cover `needed`, the fewest jobs
/// possible; `None` when they already do. A draining Node needs none: Slurm starts nothing there.
pub fn plan(needed: Resources, draining: bool, held: &[HoldJob]) -> Option<HoldStep> {
    let needed = if draining { Resources::default() } else { needed };
    let sum = held.iter().fold(Resources::default(), |sum, job| sum.plus(job.holds));
    if !sum.covers(needed) {
        let more = Resources {
            cpus: needed.cpus.saturating_sub(sum.cpus).max(1),
            memory_mib: needed.memory_mib.saturating_sub(sum.memory_mib),
            gpus: needed.gpus.saturating_sub(sum.gpus),
        };
        return Some(HoldStep::Submit { more });
    }
    // The largest job the others can spare, so a need that fell goes back in few steps.
    let spare = held.iter().filter(|job| minus(sum, job.holds).covers(needed));
    let largest = spare.max_by_key(|job| (job.holds.gpus, job.holds.cpus, job.holds.memory_mib, job.job_id))?;
    Some(HoldStep::Cancel { job_id: largest.job_id })
}

fn minus(sum: Resources, part: Resources) -> Resources {
    Resources {
        cpus: sum.cpus.saturating_sub(part.cpus),
        memory_mib: sum.memory_mib.saturating_sub(part.memory_mib),
        gpus: sum.gpus.saturating_sub(part.gpus),
    }
}

/// The submission of a hold job of `holds` on `slurm_node` (in `partition`), signed by `sign`.
pub fn job_description(
    slurm_node: &str,
    kube_node: &str,
    partition: &str,
    holds: Resources,
    kind: PlaceholderKind,
    sign: impl FnOnce(String) -> String,
) -> JobDescription {
    JobDescription {
        comment: Some(format!("holds what pods outside Slurm use on Kubernetes Node {kube_node}")),
        partition: Some(partition.to_owned()),
        required_nodes: vec![slurm_node.to_owned()],
        priority: Some(NoValue::of(PRIORITY)),
        cpus_per_task: u32::try_from(holds.cpus.max(1)).unwrap_or(u32::MAX),
        memory_per_node: NoValue::of(holds.memory_mib.max(1)),
        tres_per_node: (holds.gpus > 0).then(|| format!("gres/gpu:{}", holds.gpus)),
        ..holder(kind, format!("sunk-hold/{kube_node}"), sign(hold_link(slurm_node)))
    }
}

/// The hold jobs of each Slurm node, from a listing.
pub fn by_node(jobs: &[slurm::Job]) -> HashMap<&str, Vec<HoldJob>> {
    let mut by_node: HashMap<&str, Vec<HoldJob>> = HashMap::new();
    for job in jobs {
        if let Some(node) = crate::scheduler::held_node(&job.admin_comment) {
            let held = HoldJob { job_id: job.job_id, holds: job.asked_per_node(), running: job.holds_nodes() };
            by_node.entry(node).or_default().push(held);
        }
    }
    by_node
}

#[cfg(test)]
#[path = "holds_tests.rs"]
mod tests;
