//! Preemption in both directions.
//!
//! Kubernetes -> Slurm: a pod whose placeholder waits for resources (`Resources`) asks the
//! `preemption` policy whether lower-priority work on the nodes it may use should make room, and the
//! host carries out the answer ([`consider`]). Priorities are Slurm's: the job-mapper turns a pod's
//! PriorityClass into its placeholder's priority, so pods and Slurm jobs are ranked on one scale.
//! Nothing is preempted while Slurm's lists may be stale, for a pod without a PriorityClass or that
//! says `preemptionPolicy: Never`, or while an earlier round for the same job is still under way.
//! Only jobs Slurm's own preemption rules let be preempted for the pod's placeholder
//! ([`slurm_rules`], read every 30 s by [`known_rules`]), or that the pod's grant names
//! (`preemptable`), are offered; while those rules are not known, nothing is.
//!
//! Slurm -> Kubernetes: a placeholder Slurm's own preemption took ([`by_slurm`]) deletes its pod, with
//! an Event naming the job that preempted it.

pub mod by_slurm;
pub mod in_flight;
pub mod known_rules;
mod offer;
pub mod outcome;
mod slurm_rules;

use std::collections::BTreeSet;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::scheduler::watched_pod::WatchedPod;

pub use in_flight::InFlight;
pub use known_rules::{KnownRules, Stated as StatedRules, partition_preempt_mode, read as read_rules, slurm_duration};
pub use slurm_rules::PreemptType;

use super::context::Context;
use super::link::{PodKey, linked_pods};
use super::metrics::PreemptionResult;
use super::placeholder::Placeholder;
use super::placement::exclusions;
use super::pod_lookup;
use super::pod_phase::leaving;
use super::timing::{PREEMPTION_PATIENCE, PREEMPTOR_RECHECK};
use crate::policy::PreemptionDecision;
use crate::policy::worlds::ChooseVictimsInput;
use crate::slurm::{Job, JobState, expand_hostlist};
use crate::tenancy;
use by_slurm::TakenBySlurm;
use outcome::Outcome;
use slurm_rules::Protection;

/// Slurm's reason for a job that waits for nodes to free. (`Priority` is not enough: a job of higher
/// priority waits first, and room made now would go to it.)
const WAITING_FOR_RESOURCES: &str = "Resources";

/// A preemption round the policy chose: what it was offered, and its answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Round {
    pub input: ChooseVictimsInput,
    pub decision: PreemptionDecision,
}

/// What considering preemption for a waiting pod came to.
#[derive(Debug, PartialEq)]
pub enum Considered {
    /// Nothing is preempted now: why, for the pod's condition.
    Settled(Outcome),
    /// The policy chose victims: the pass carries the round out (`Step::Preempt`).
    Chosen(Box<Round>),
}

/// Asks the preemption policy whether to make room for a pod whose placeholder waits. `None` when
/// preemption does not apply.
pub async fn consider(pod: &WatchedPod, placeholder: &Placeholder, ctx: &Context) -> Option<Considered> {
    let settled = |note: String| Some(Considered::Settled(Outcome::settled(note)));
    let job = &placeholder.job;
    if !ctx.preemption || job.state_reason != WAITING_FOR_RESOURCES || never_preempts(pod) {
        return None;
    }
    let holding = ctx.jobs.holding();
    if let Some(busy) = ctx.preemptions.busy(job.job_id, &holding) {
        return Some(Considered::Settled(Outcome { note: busy, look_again_soon: true }));
    }
    // Fail closed: a decision on a stale view could kill a job that has already gone or moved.
    if ctx.jobs.unreachable(PREEMPTION_PATIENCE).is_some() {
        return None;
    }
    let mut input = match offer_for(pod, placeholder, &holding, ctx) {
        Offer::Unseen => return None,
        Offer::NoRules(why) => {
            ctx.metrics.preemption(PreemptionResult::none);
            return settled(format!("preempting nothing: Slurm's preemption rules are not known ({why})"));
        }
        Offer::NoVictims(protected) => {
            ctx.metrics.preemption(PreemptionResult::none);
            return settled(no_victims(&protected));
        }
        Offer::Input(input) => *input,
    };
    if !ctx.grants.trust_annotations() {
        // Ranked by its PriorityClass, capped by its namespace's grant: an annotation never raises it.
        // While the grant cannot be said, the pod preempts nothing.
        input.preemptor.priority = match ctx.grants.of(&placeholder.pod.namespace) {
            Some(grant) => tenancy::preemption_rank(pod.needs().priority, grant),
            None => 0,
        };
    }
    let decision = match crate::decisions::off_io(|| ctx.policies.preemption.decide(&input)).await {
        Ok(decision) => decision,
        Err(error) => {
            ctx.metrics.preemption(PreemptionResult::error);
            return settled(format!("the preemption policy failed: {error}"));
        }
    };
    if decision.victims.is_empty() {
        ctx.metrics.preemption(PreemptionResult::none);
        return settled(format!("preempting nothing: {}", decision.reason));
    }
    Some(Considered::Chosen(Box::new(Round { input, decision })))
}

/// Only a pod with a PriorityClass above zero preempts, unless it opts out as Kubernetes lets it
/// (`preemptionPolicy: Never`). Without one, its placeholder's priority is whatever Slurm computed
/// (with `priority/basic`, older jobs rank higher), which says nothing about what may be killed for it.
fn never_preempts(pod: &WatchedPod) -> bool {
    let Some(spec) = pod.spec.as_ref() else { return true };
    spec.priority.is_none_or(|priority| priority <= 0) || spec.preemption_policy.as_deref() == Some("Never")
}

/// What the preemption policy may be offered for a waiting placeholder.
enum Offer {
    /// Slurm's nodes cannot be read now.
    Unseen,
    /// Slurm's preemption rules are not known: why.
    NoRules(String),
    /// No running job on the nodes it may use may make room; those there are protected, and why.
    NoVictims(Vec<(u32, Protection)>),
    Input(Box<ChooseVictimsInput>),
}

/// The pod's note when nothing may be preempted: the first few protected jobs and why.
fn no_victims(protected: &[(u32, Protection)]) -> String {
    const NAMED: usize = 3;
    if protected.is_empty() {
        return "no running job on the nodes it may use could make room".into();
    }
    let named: Vec<String> = protected.iter().take(NAMED).map(|(job, why)| format!("job {job}: {why}")).collect();
    let more = match protected.len().saturating_sub(NAMED) {
        0 => String::new(),
        more => format!("; {more} more"),
    };
    format!("no running job on the nodes it may use may be preempted ({}{more})", named.join("; "))
}

/// The policy's input, drawn from views of every Slurm node that are gone before the decision is
/// awaited: thousands of names each, at scale, for every waiting pod.
fn offer_for(pod: &WatchedPod, placeholder: &Placeholder, holding: &[Job], ctx: &Context) -> Offer {
    let job = &placeholder.job;
    let (Ok(snapshot), Ok(verdict)) = (ctx.placement.slurm_nodes.snapshot(), ctx.placement.verdict(pod.needs())) else {
        return Offer::Unseen;
    };
    let rules = match ctx.slurm_rules.current() {
        Ok(rules) => rules,
        Err(why) => return Offer::NoRules(why),
    };
    let excluded = exclusions::current(job);
    let allowed: BTreeSet<String> = verdict.eligible.iter().filter(|node| !excluded.contains(*node)).cloned().collect();
    let mut leaving_jobs = ctx.preemptions.victims();
    leaving_jobs.extend(jobs_of_leaving_pods(holding, ctx));
    let grace = |key: &PodKey| pod_lookup::find(&ctx.pods, key).map(|pod| grace_of(&pod));
    let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |since| since.as_secs());
    // A grant not known yet (its namespace's labels are not) names nothing.
    let grant = ctx.grants.of(&placeholder.pod.namespace).map(|grant| &grant.preemptable);
    let judge = |victim: &Job| {
        let named = grant.is_some_and(|preemptable| preemptable.names(&victim.partition, &victim.qos));
        slurm_rules::overruled(slurm_rules::judge(&rules, job, victim, now), named)
    };
    let views = offer::Views {
        nodes: snapshot.nodes().collect(),
        holding,
        allowed: &allowed,
        leaving: &leaving_jobs,
        grace: &grace,
        now,
        can_requeue: ctx.slurm.can_requeue(),
        judge: &judge,
    };
    let name = format!("{}/{}", placeholder.pod.namespace, placeholder.pod.name);
    match offer::offer(job, &name, &views) {
        offer::Offered::Input(input) => Offer::Input(Box::new(input)),
        offer::Offered::Nothing { protected } => Offer::NoVictims(protected),
    }
}

/// Placeholders whose every pod is leaving: what they hold is about to be free.
fn jobs_of_leaving_pods(holding: &[Job], ctx: &Context) -> Vec<u32> {
    let is_leaving = |key: &PodKey| pod_lookup::find(&ctx.pods, key).is_some_and(|pod| leaving(&pod).is_some());
    holding
        .iter()
        .filter(|job| {
            let linked = linked_pods(job);
            !linked.is_empty() && linked.iter().all(is_leaving)
        })
        .map(|job| job.job_id)
        .collect()
}

/// A pod's grace period, in seconds (Kubernetes' default, 30, when it names none).
fn grace_of(pod: &WatchedPod) -> u32 {
    let grace = pod.spec.as_ref().and_then(|spec| spec.termination_grace_period_seconds).unwrap_or(30);
    u32::try_from(grace.max(0)).unwrap_or(u32::MAX)
}

/// Whether Slurm's own preemption took a bound pod's placeholder `job` (ended PREEMPTED, or pending
/// again after a requeue): the Event's note naming the job that did, or how long to wait for that job
/// to start. `None` when nothing says it was preempted (a requeue after a node failure, say).
pub fn taken_by_slurm(pod: &WatchedPod, job: &Job, ctx: &Context) -> Option<TakenBySlurm> {
    let kube_node = pod.spec.as_ref()?.node_name.as_deref()?;
    let preempted_at = job.preempt_time.get().filter(|time| *time > 0);
    let requeued = job.state() == JobState::Pending;
    let since = match preempted_at {
        Some(at) => at,
        None if requeued => bound_at(pod)?,
        None => return None,
    };
    // A requeued job's listing may no longer name its nodes: the slurmd pods on the pod's Node do.
    let mut nodes: BTreeSet<String> = expand_hostlist(&job.nodes).unwrap_or_default().into_iter().collect();
    if nodes.is_empty() {
        nodes =
            ctx.slurmd.kube_nodes().into_iter().filter(|(_, kube)| kube == kube_node).map(|(slurm, _)| slurm).collect();
    }
    let holding = ctx.jobs.holding();
    let who = match by_slurm::preemptor(job.job_id, &nodes, since, &holding) {
        Some(preemptor) => by_slurm::describe(preemptor),
        None if !ctx.requeued_seen.patience_over(job.job_id) => {
            return Some(TakenBySlurm::AwaitPreemptor(PREEMPTOR_RECHECK));
        }
        None if preempted_at.is_some() => "a job Slurm does not name".to_string(),
        None => return None,
    };
    let nodes: Vec<String> = nodes.into_iter().collect();
    Some(TakenBySlurm::Named(format!(
        "deleting the pod: {who} preempted its Slurm job {} on {}",
        job.job_id,
        nodes.join(",")
    )))
}

/// When the pod was bound (its PodScheduled condition turned True), in UNIX seconds.
fn bound_at(pod: &WatchedPod) -> Option<u64> {
    let scheduled = pod.condition("PodScheduled").filter(|c| c.status == "True")?;
    u64::try_from(scheduled.last_transition_time.as_ref()?.0.as_second()).ok()
}
