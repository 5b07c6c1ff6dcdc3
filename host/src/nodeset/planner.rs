//! The heart of the NodeSet controller: one pure pass from what is seen to the named steps to take.
//!
//! Rules, each a bug users of similar operators have met (docs/nodesets.md):
//! - A pod is deleted only once its Slurm node is DRAIN and neither ALLOCATED, MIXED nor COMPLETING
//!   (or, with `force`, once the drain has waited `drainTimeout`). A drain blocked longer than that
//!   is reported, never waited on silently.
//! - Fail closed: while Slurm cannot be read nothing is deleted, neither pod nor record.
//! - A node missing from a fresh, successful listing ("absent") has no job, because Slurm only runs
//!   jobs on nodes it knows; the only risk is a slurmd registering just after the listing. So absent
//!   counts as "no job" when the pod's slurmd container is not running, or has run for longer than
//!   [`REGISTRATION_GRACE`] before the listing was confirmed. Otherwise the planner waits.
//! - The NodeSet never drains over someone else's drain: a node already DRAIN is only marked, and
//!   only a drain whose reason is still the one the NodeSet set is ever undone.
//! - A Slurm record is deleted only once its pod is gone, no job holds it, and it is dynamic; a
//!   replacement pod is created only once the old record is gone, so new CPUs/GRES take effect.
//!   A record whose pod is gone, that holds only completing jobs and that is drained or whose slurmd
//!   does not answer is marked DOWN first: nothing runs there or can start, and those jobs would
//!   otherwise hold it (and keep its Node without slurmd) until slurmctld's SlurmdTimeout.

use std::collections::BTreeMap;
use std::time::Duration;

use super::claims::NodeSetKey;
use super::naming::pod_name;
use super::observed::ObservedPod;
use super::owner::SlurmNodeOwner;
use super::plan::{Blocked, Cause, Departure, Plan, PlanInput, Step, Target};
use super::rollout::{self, Candidate};
use super::settings::Strategy;
use crate::slurm::{Node, SlurmView};

/// How long a running slurmd may take to register before "absent from Slurm" means "never will".
pub const REGISTRATION_GRACE: Duration = Duration::from_secs(30);
/// How soon a blocked drain is looked at again.
const BLOCKED_RECHECK: Duration = Duration::from_secs(60);
/// How soon anything else being waited for is looked at again, when no event comes first.
const WAIT_RECHECK: Duration = Duration::from_secs(10);
/// A finished (e.g. refused) slurmd pod is replaced no sooner than this after it was created.
pub const FINISHED_POD_BACKOFF: Duration = Duration::from_secs(10);

pub fn plan(input: &PlanInput) -> Plan {
    let mut plan = Plan::default();
    let mut targets: Vec<&Target> = input.targets.iter().collect();
    targets.sort_by(|a, b| a.kube_node.cmp(&b.kube_node));

    let mut live: Vec<&ObservedPod> = Vec::new();
    for pod in input.pods {
        if pod.terminating {
            plan.wait(format!("pod {} is terminating", pod.name), Some(WAIT_RECHECK));
        } else {
            live.push(pod);
        }
    }
    // The pod kept on a Node with several: the up-to-date, then the ready one.
    live.sort_by_key(|pod| (!up_to_date(input, pod, &targets), !pod.ready, pod.name.clone()));
    let mut kept: BTreeMap<&str, &ObservedPod> = BTreeMap::new();
    for pod in live {
        match departure(input, pod, &targets, &kept) {
            Some(Cause::Duplicate) => remove_duplicate(pod, &kept, &mut plan),
            Some(cause) => {
                set_owner(input, pod, &mut plan);
                remove(input, pod, cause, &mut plan);
            }
            None => {
                set_owner(input, pod, &mut plan);
                kept.insert(pod.kube_node.as_deref().unwrap_or_default(), pod);
            }
        }
    }
    update(input, &targets, &kept, &mut plan);
    create(input, &targets, &kept, &mut plan);
    clean_records(input, &targets, &mut plan);
    plan.order();
    if !plan.settled() && plan.requeue_after.is_none() {
        plan.recheck(WAIT_RECHECK);
    }
    plan
}

fn target_of<'t>(targets: &[&'t Target], kube_node: Option<&str>) -> Option<&'t Target> {
    targets.iter().copied().find(|target| Some(target.kube_node.as_str()) == kube_node)
}

fn up_to_date(input: &PlanInput, pod: &ObservedPod, targets: &[&Target]) -> bool {
    target_of(targets, pod.kube_node.as_deref()).is_some_and(|target| {
        pod.revision == input.revision && pod.conf == target.conf && pod.slurm_node == target.slurm_node
    })
}

/// Why a live pod must go whatever the update strategy says, if it must.
fn departure(
    input: &PlanInput,
    pod: &ObservedPod,
    targets: &[&Target],
    kept: &BTreeMap<&str, &ObservedPod>,
) -> Option<Cause> {
    if input.deleting {
        return Some(Cause::NodeSetDeleted);
    }
    if let Some(how) = &pod.finished {
        return Some(Cause::PodFinished(how.clone()));
    }
    let Some(node) = pod.kube_node.as_deref() else {
        return Some(Cause::NodeGone);
    };
    if target_of(targets, Some(node)).is_none() {
        return Some(match input.departures.get(node) {
            Some(Departure::Unmatched) => Cause::NodeUnmatched,
            Some(Departure::ClaimedBy(winner)) => Cause::NodeClaimed(winner.clone()),
            None => Cause::NodeGone,
        });
    }
    kept.contains_key(node).then_some(Cause::Duplicate)
}

/// Drain, wait, then delete: never while a job may run there.
fn remove(input: &PlanInput, pod: &ObservedPod, cause: Cause, plan: &mut Plan) {
    let delete = |forced| Step::DeletePod { pod: pod.name.clone(), uid: pod.uid.clone(), cause: cause.clone(), forced };
    if let Cause::PodFinished(how) = &cause {
        // A pod the kubelet refuses (OutOfcpu, ...) fails at once: replacing it at once would loop.
        let age = pod.created.and_then(|created| input.now.duration_since(created).ok()).unwrap_or_default();
        match FINISHED_POD_BACKOFF.checked_sub(age).filter(|left| !left.is_zero()) {
            Some(left) => {
                plan.wait(format!("pod {} finished ({how}); replaced in {}s", pod.name, left.as_secs()), Some(left))
            }
            None => plan.step(delete(false)),
        }
        return;
    }
    match input.view(&pod.slurm_node) {
        SlurmView::Unknown => {
            plan.wait(format!("pod {}: Slurm cannot be read, so it stays ({cause})", pod.name), Some(WAIT_RECHECK))
        }
        SlurmView::Absent => match registration_pending(input, pod) {
            None => plan.step(delete(false)),
            Some(left) => plan.wait(
                format!("pod {}: its slurmd may still be registering as {}", pod.name, pod.slurm_node),
                Some(left),
            ),
        },
        SlurmView::Known(node) => {
            let flags = node.flags();
            if flags.is_drained() {
                plan.step(delete(false));
                return;
            }
            if !flags.is_draining() || pod.drain.is_none() {
                plan.step(Step::Drain {
                    pod: pod.name.clone(),
                    slurm_node: pod.slurm_node.clone(),
                    cause: cause.clone(),
                    in_slurm: !flags.is_draining(),
                });
            }
            let since = pod.drain.as_ref().map_or(input.now, |mark| mark.since);
            let waited = input.now.duration_since(since).unwrap_or_default();
            if waited < input.drain_timeout {
                let why = format!("pod {}: waiting for Slurm node {} to drain ({cause})", pod.name, pod.slurm_node);
                plan.wait(why, Some((input.drain_timeout - waited).min(WAIT_RECHECK * 6)));
            } else if input.force {
                plan.step(delete(true));
            } else {
                let slurm_node = pod.slurm_node.clone();
                plan.blocked.push(Blocked { pod: pod.name.clone(), slurm_node, since, cause });
                plan.recheck(BLOCKED_RECHECK);
            }
        }
    }
}

/// A second pod of the NodeSet on a Node shares the Slurm node of the first, so draining it would
/// drain both: it goes at once if its slurmd never started, and otherwise waits for a person.
fn remove_duplicate(pod: &ObservedPod, kept: &BTreeMap<&str, &ObservedPod>, plan: &mut Plan) {
    if pod.slurmd_started.is_none() {
        let (name, uid) = (pod.name.clone(), pod.uid.clone());
        plan.step(Step::DeletePod { pod: name, uid, cause: Cause::Duplicate, forced: false });
        return;
    }
    let node = pod.kube_node.as_deref().unwrap_or_default();
    let first = kept.get(node).map(|first| first.name.as_str()).unwrap_or_default();
    let why =
        format!("pods {first} and {} both run slurmd on Node {node}: delete one once no job runs there", pod.name);
    plan.wait(why, None);
}

/// How long to wait before an absent Slurm node proves its slurmd never registered; None when it
/// already has.
fn registration_pending(input: &PlanInput, pod: &ObservedPod) -> Option<Duration> {
    let started = pod.slurmd_started?;
    let confirmed = input.slurm?.confirmed_at;
    let proven_at = started + REGISTRATION_GRACE;
    match confirmed.duration_since(proven_at) {
        Ok(_) => None,
        Err(_) => Some(proven_at.duration_since(input.now).unwrap_or_default().max(Duration::from_secs(1))),
    }
}

/// Rolling update of the kept pods; kept pods that stay lose any drain the NodeSet set.
fn update(input: &PlanInput, targets: &[&Target], kept: &BTreeMap<&str, &ObservedPod>, plan: &mut Plan) {
    let mut outdated: Vec<(&ObservedPod, Candidate)> = Vec::new();
    let mut unavailable = 0;
    for (ordinal, target) in targets.iter().enumerate() {
        let Some(pod) = kept.get(target.kube_node.as_str()) else {
            unavailable += 1;
            continue;
        };
        let node = registered_by(input, pod);
        let responsive = node.as_ref().is_some_and(|n| n.flags().is_responsive());
        let available = pod.ready && responsive;
        let started = pod.drain.is_some();
        let current = up_to_date(input, pod, targets);
        if !current {
            let idle = node.as_ref().is_some_and(|n| n.flags().base() == "IDLE" && !n.flags().is_busy());
            // While Slurm cannot be read a pod is not known to be broken: only the budget stops it.
            let healthy = pod.ready && (responsive || input.slurm.is_none());
            outdated.push((pod, Candidate { ordinal, available: healthy, idle, started }));
        }
        if !available || (started && !current) {
            unavailable += 1;
        }
    }
    let candidates: Vec<Candidate> = outdated.iter().map(|(_, candidate)| *candidate).collect();
    let chosen = rollout::choose(input.strategy, targets.len(), unavailable, &candidates);
    let replacing: Vec<&str> = chosen.iter().map(|&index| outdated[index].0.name.as_str()).collect();
    for &index in &chosen {
        remove(input, outdated[index].0, Cause::Outdated, plan);
    }
    for pod in kept.values().filter(|pod| !replacing.contains(&pod.name.as_str())) {
        let Some(mark) = &pod.drain else { continue };
        let ours = match input.view(&pod.slurm_node) {
            // The mark is the only memory of whose drain it is: keep it until Slurm can be asked.
            SlurmView::Unknown => {
                plan.wait(format!("pod {}: Slurm cannot be read to undo its drain", pod.name), Some(WAIT_RECHECK));
                continue;
            }
            SlurmView::Absent => false,
            SlurmView::Known(node) => {
                node.flags().is_draining() && mark.reason.as_deref() == Some(node.reason.as_str())
            }
        };
        let (name, slurm_node) = (pod.name.clone(), pod.slurm_node.clone());
        plan.step(Step::Undrain { pod: name, slurm_node, in_slurm: ours });
    }
    if let Strategy::RollingUpdate { partition, .. } = input.strategy {
        let held = candidates
            .iter()
            .enumerate()
            .filter(|(index, c)| !chosen.contains(index) && c.ordinal >= partition as usize)
            .count();
        if held > 0 {
            plan.wait(format!("{held} outdated pod(s) wait for their turn (maxUnavailable)"), Some(WAIT_RECHECK));
        }
    }
}

/// The pod's Slurm node, if the pod's own slurmd registered it: its address is the pod's IP. A
/// record of the same name from another slurmd (a pod of an earlier NodeSet still shutting down)
/// is neither available nor ours to label.
fn registered_by(input: &PlanInput, pod: &ObservedPod) -> Option<Node> {
    match input.view(&pod.slurm_node) {
        SlurmView::Known(node) if pod.ip.as_deref().is_some_and(|ip| ip == node.address) => Some(*node),
        _ => None,
    }
}

/// A pod for every target Node without one, once nothing else is there and no old record is left.
fn create(input: &PlanInput, targets: &[&Target], kept: &BTreeMap<&str, &ObservedPod>, plan: &mut Plan) {
    for target in targets {
        let node = target.kube_node.as_str();
        let ours_here = input.pods.iter().any(|pod| pod.kube_node.as_deref() == Some(node));
        if kept.contains_key(node) || ours_here {
            continue;
        }
        if let Some(other) = input.occupied.get(node) {
            plan.wait(format!("Node {node} still runs a slurmd pod of NodeSet {other}"), Some(WAIT_RECHECK));
            continue;
        }
        match input.view(&target.slurm_node) {
            SlurmView::Absent => {
                plan.step(Step::CreatePod { kube_node: node.to_owned(), slurm_node: target.slurm_node.clone() })
            }
            SlurmView::Unknown => plan.wait(
                format!("Node {node}: Slurm cannot be read to check for an old record of {}", target.slurm_node),
                Some(WAIT_RECHECK),
            ),
            // The old record goes first (clean_records), unless another NodeSet's pod owns it.
            SlurmView::Known(record) => match owner_key(&record).filter(|owner| owner != input.owner) {
                Some(other) => plan.wait(
                    format!("Slurm node {} still belongs to NodeSet {other}", target.slurm_node),
                    Some(WAIT_RECHECK),
                ),
                None => plan.wait(
                    format!("Node {node}: the old Slurm node {} goes before a new pod starts", target.slurm_node),
                    Some(WAIT_RECHECK),
                ),
            },
        }
    }
}

fn owner_key(node: &Node) -> Option<NodeSetKey> {
    SlurmNodeOwner::from_comment(&node.comment).map(|owner| owner.nodeset_key())
}

/// Records of the NodeSet with no pod left: deleted once no job holds them.
fn clean_records(input: &PlanInput, targets: &[&Target], plan: &mut Plan) {
    let Some(snapshot) = input.slurm else {
        if input.deleting {
            plan.wait("Slurm cannot be read to remove the NodeSet's nodes".into(), Some(WAIT_RECHECK));
        }
        return;
    };
    let mut records: Vec<&Node> = snapshot.nodes().collect();
    records.sort_by(|a, b| a.name.cmp(&b.name));
    for record in records {
        let owner = owner_key(record);
        let named_for_target = targets.iter().find(|t| t.slurm_node == record.name);
        // Without an owner yet (its pod went before the owner was recorded), the record is ours
        // when one of our pods registered it: slurmd registers with its pod's name as host name.
        let ours = match &owner {
            Some(owner) => owner == input.owner,
            None => {
                named_for_target.is_some_and(|t| !input.occupied.contains_key(&t.kube_node))
                    || record.hostname == pod_name(&input.owner.name, &record.name)
            }
        };
        if !ours || input.pods.iter().any(|pod| pod.slurm_node == record.name) {
            continue;
        }
        let flags = record.flags();
        // Its pod is gone, so is its slurmd (or it is going: a pod deleted without a grace period),
        // and the epilogs that would complete these jobs never run. DOWN kills nothing there: no job
        // runs, and none can start while the node is drained or its slurmd does not answer.
        let no_job_can_start = flags.is_draining() || !flags.is_responsive();
        if flags.only_completing() && no_job_can_start && flags.is_dynamic() {
            plan.step(Step::ReleaseCompleting { slurm_node: record.name.clone() });
        } else if flags.is_busy() {
            let why = format!("Slurm node {} has no pod left but a job still holds it", record.name);
            plan.wait(why, Some(WAIT_RECHECK));
        } else if !flags.is_dynamic() {
            if named_for_target.is_some() {
                let why = format!("Slurm node {} is not a dynamic node: remove it from slurm.conf", record.name);
                plan.wait(why, None);
            }
        } else {
            plan.step(Step::DeleteSlurmNode { slurm_node: record.name.clone() });
        }
    }
}

/// Writes the owner into the Slurm node's comment when it says something else.
fn set_owner(input: &PlanInput, pod: &ObservedPod, plan: &mut Plan) {
    let Some(record) = registered_by(input, pod) else {
        return;
    };
    let owner = SlurmNodeOwner {
        namespace: input.owner.namespace.clone(),
        pod: pod.name.clone(),
        node: pod.kube_node.clone().unwrap_or_default(),
        nodeset: input.owner.name.clone(),
        uid: pod.uid.clone(),
        nodeset_uid: input.owner_uid.to_owned(),
    };
    if SlurmNodeOwner::from_comment(&record.comment).as_ref() != Some(&owner) {
        plan.step(Step::SetOwner { slurm_node: pod.slurm_node.clone(), comment: owner.to_comment() });
    }
}

#[cfg(test)]
#[path = "planner_tests.rs"]
mod tests;
