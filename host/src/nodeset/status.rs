//! The NodeSet's status, composed from what one reconcile saw and decided.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;

use super::claims::NodeSetKey;
use super::observed::ObservedPod;
use super::plan::{Blocked, Plan, Target};
use super::resource::NodeSetStatus;
use super::settings::SpecErrors;
use crate::slurm::{NodeSnapshot, Unreadable};

/// What a status is made from.
pub struct StatusInput<'a> {
    pub previous: &'a NodeSetStatus,
    pub generation: Option<i64>,
    pub revision: &'a str,
    pub targets: &'a [Target],
    pub pods: &'a [ObservedPod],
    pub slurm: Result<&'a NodeSnapshot, &'a Unreadable>,
    pub plan: &'a Plan,
    /// Nodes this NodeSet selects that went to another NodeSet.
    pub conflicts: &'a [(String, NodeSetKey)],
    /// Jobs on the Slurm nodes of blocked drains.
    pub blocking_jobs: &'a BTreeMap<String, Vec<u32>>,
    pub now: Timestamp,
}

pub fn compose(input: &StatusInput) -> NodeSetStatus {
    let mut status = input.previous.clone();
    status.observed_generation = input.generation;
    status.update_revision = Some(input.revision.to_owned());
    let on_target = |pod: &&ObservedPod| {
        !pod.terminating
            && pod.finished.is_none()
            && input.targets.iter().any(|t| pod.kube_node.as_ref() == Some(&t.kube_node))
    };
    let current: Vec<&ObservedPod> = input.pods.iter().filter(on_target).collect();
    let up_to_date = |pod: &&&ObservedPod| {
        pod.revision == input.revision
            && input.targets.iter().any(|t| pod.kube_node.as_ref() == Some(&t.kube_node) && t.conf == pod.conf)
    };
    status.desired = count(input.targets.len());
    status.current = count(current.len());
    status.ready = count(current.iter().filter(|pod| pod.ready).count());
    status.updated = count(current.iter().filter(up_to_date).count());
    status.current_revision = current_revision(&current, input.revision);
    let mut available = 0;
    if let Ok(slurm) = input.slurm {
        let live = input.pods.iter().filter(|pod| !pod.terminating);
        let nodes: Vec<_> = live.filter_map(|pod| slurm.get(&pod.slurm_node)).collect();
        let base = |state: &str| count(nodes.iter().filter(|node| node.flags().base() == state).count());
        (status.idle, status.allocated, status.mixed, status.down) =
            (base("IDLE"), base("ALLOCATED"), base("MIXED"), base("DOWN"));
        status.drained = count(nodes.iter().filter(|node| node.flags().has("DRAIN")).count());
        available = current
            .iter()
            .filter(|pod| pod.ready && slurm.get(&pod.slurm_node).is_some_and(|n| n.flags().is_responsive()))
            .count();
    }
    let previous = &input.previous.conditions;
    let at = input.now;
    let generation = input.generation;
    status.conditions = vec![
        available_condition(input, available).build(previous, generation, at),
        progressing_condition(input.plan).build(previous, generation, at),
        blocked_condition(input).build(previous, generation, at),
        conflict_condition(input.conflicts).build(previous, generation, at),
    ];
    status
}

/// The status of a NodeSet whose spec cannot be used: counters kept, the mistake in `Progressing`.
pub fn invalid(
    previous: &NodeSetStatus,
    generation: Option<i64>,
    errors: &SpecErrors,
    now: Timestamp,
) -> NodeSetStatus {
    let mut status = previous.clone();
    status.observed_generation = generation;
    let mut conditions: Vec<Condition> =
        previous.conditions.iter().filter(|c| c.type_ != "Progressing").cloned().collect();
    let progressing = Verdict::new("Progressing", false, "InvalidSpec", errors.to_string());
    conditions.push(progressing.build(&previous.conditions, generation, now));
    status.conditions = conditions;
    status
}

fn count(n: usize) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

/// The revision most current pods run (the update revision when they all do).
fn current_revision(current: &[&ObservedPod], update_revision: &str) -> Option<String> {
    let mut tally: BTreeMap<&str, usize> = BTreeMap::new();
    for pod in current {
        *tally.entry(pod.revision.as_str()).or_default() += 1;
    }
    let most =
        tally.iter().max_by_key(|(revision, n)| (**n, **revision == update_revision)).map(|(r, _)| r.to_string());
    most.or_else(|| Some(update_revision.to_owned()))
}

/// A condition before its transition time is known.
struct Verdict {
    type_: &'static str,
    status: &'static str,
    reason: &'static str,
    message: String,
}

impl Verdict {
    fn new(type_: &'static str, holds: bool, reason: &'static str, message: String) -> Self {
        Self { type_, status: if holds { "True" } else { "False" }, reason, message }
    }

    /// Keeps the previous transition time while the status stays the same.
    fn build(self, previous: &[Condition], generation: Option<i64>, now: Timestamp) -> Condition {
        let before = previous.iter().find(|c| c.type_ == self.type_);
        let last_transition_time = match before {
            Some(before) if before.status == self.status => before.last_transition_time.clone(),
            _ => Time(now),
        };
        Condition {
            type_: self.type_.into(),
            status: self.status.into(),
            reason: self.reason.into(),
            message: crate::kube::one_line(&self.message),
            last_transition_time,
            observed_generation: generation,
        }
    }
}

fn available_condition(input: &StatusInput, available: usize) -> Verdict {
    let desired = input.targets.len();
    match input.slurm {
        Err(why) => {
            Verdict { type_: "Available", status: "Unknown", reason: "SlurmUnreadable", message: why.to_string() }
        }
        Ok(_) => {
            let message = format!("{available}/{desired} selected Nodes have a ready slurmd registered in Slurm");
            let reason = if available == desired { "AllAvailable" } else { "Unavailable" };
            Verdict::new("Available", available == desired, reason, message)
        }
    }
}

fn progressing_condition(plan: &Plan) -> Verdict {
    if plan.settled() {
        return Verdict::new("Progressing", false, "Settled", "every selected Node runs an up-to-date slurmd".into());
    }
    let mut parts: Vec<String> = plan.steps.iter().map(ToString::to_string).take(3).collect();
    parts.extend(plan.waiting.iter().take(5).cloned());
    let more = plan.steps.len().saturating_sub(3) + plan.waiting.len().saturating_sub(5);
    if more > 0 {
        parts.push(format!("and {more} more"));
    }
    Verdict::new("Progressing", true, "Reconciling", parts.join("; "))
}

fn blocked_condition(input: &StatusInput) -> Verdict {
    if input.plan.blocked.is_empty() {
        return Verdict::new("UpdateBlocked", false, "NotBlocked", String::new());
    }
    let now = SystemTime::from(input.now);
    let parts: Vec<String> =
        input.plan.blocked.iter().map(|blocked| describe_blocked(blocked, input.blocking_jobs, now)).collect();
    Verdict::new("UpdateBlocked", true, "DrainTimeout", parts.join("; "))
}

/// `Slurm node w1 (pod cpu-w1, rolling update): jobs 12, 13 still run; drained for 1h2m`.
pub fn describe_blocked(blocked: &Blocked, jobs: &BTreeMap<String, Vec<u32>>, now: SystemTime) -> String {
    let waited = human(now.duration_since(blocked.since).unwrap_or_default());
    format!("{}; drained for {waited}", what_blocks(blocked, jobs))
}

/// What blocks, without how long: it changes only when the node or its jobs do, so an Event is due
/// exactly when a condition message lacks it.
pub fn what_blocks(blocked: &Blocked, jobs: &BTreeMap<String, Vec<u32>>) -> String {
    let jobs = match jobs.get(&blocked.slurm_node) {
        Some(ids) if !ids.is_empty() => {
            let ids: Vec<String> = ids.iter().map(u32::to_string).collect();
            format!("jobs {} still run", ids.join(", "))
        }
        _ => "its jobs still run".to_owned(),
    };
    format!("Slurm node {} (pod {}, {}): {jobs}", blocked.slurm_node, blocked.pod, blocked.cause)
}

fn human(duration: Duration) -> String {
    let seconds = duration.as_secs();
    match (seconds / 3600, seconds % 3600 / 60, seconds % 60) {
        (0, 0, s) => format!("{s}s"),
        (0, m, s) => format!("{m}m{s}s"),
        (h, m, _) => format!("{h}h{m}m"),
    }
}

fn conflict_condition(conflicts: &[(String, NodeSetKey)]) -> Verdict {
    if conflicts.is_empty() {
        return Verdict::new("NodeConflict", false, "NoConflict", String::new());
    }
    let parts: Vec<String> =
        conflicts.iter().map(|(node, winner)| format!("Node {node} goes to NodeSet {winner}")).collect();
    Verdict::new("NodeConflict", true, "NodeClaimedByAnother", parts.join("; "))
}

#[cfg(test)]
#[path = "status_tests.rs"]
mod tests;
