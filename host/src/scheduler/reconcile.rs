//! One pass over one pod: make Slurm and Kubernetes agree about it, as observe -> decide -> act.
//!
//! `observe` gathers the [`Facts`] (the pod, its placeholder jobs from the job cache, what Slurm and
//! the host have seen, where a running job's pod goes), [`decide`] (pure, in `decide.rs`) says what
//! comes [`Next`] and [`course`] how, `act` turns that into the pass's [`Plan`], and the `executor`
//! takes the plan's writes. Two courses look further first, at what only they need: a job waiting
//! in Slurm (its exclusions, the preemption policy's choice: `waiting`) and a submission (the
//! job-mapper, placement). A submission is the one write whose answer chooses the next: its course
//! has the executor submit and decides on the answer (`submit_pod`, a gang's submission). A plan
//! whose writes change what the pass observes (a job replaced) has the pass decide again at once, in
//! a second round.
//!
//! The pod's placeholder job is the source of truth. No job yet: ask the policy and submit one.
//! Pending: say so on the pod (held by Slurm: as an error). Running: bind the pod where Slurm put it.
//! Over: delete the pod. Pod leaving: cancel the job. Everything is re-derived from the pod and the
//! job cache, so a restart at any point resumes where it stopped.

use std::borrow::Cow;
use std::sync::Arc;

use crate::scheduler::watched_pod::WatchedPod;
use kube::ResourceExt;
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;

use super::context::Context;
use super::decide::{Course, Facts, Next, course, decide};
use super::link::{self, PodKey};
use super::metrics::AttemptResult;
use super::placeholder::Placeholder;
use super::pod_phase::{leaving, still_running_on_its_node};
use super::step::{Again, Plan, Step};
use super::submit::Submitted;
use super::timing::{RECHECK, RETRY, SLURM_PATIENCE};
use super::{bind, executor, gang, held, preemption, submit, waiting};
use crate::error::Error;
use crate::slurm::JobState;

/// At most this many rounds of observe -> decide -> act in one pass: a replaced job and its
/// successor's submission take two.
const ROUNDS: usize = 2;

pub async fn reconcile(pod: Arc<WatchedPod>, ctx: Arc<Context>) -> Result<Action, Error> {
    let key = PodKey {
        namespace: pod.namespace().unwrap_or_default(),
        name: pod.name_any(),
        uid: pod.uid().unwrap_or_default(),
    };
    read_queued(&key, &ctx).await;
    for _ in 0..ROUNDS {
        if let Some(action) = round(&pod, &key, &ctx).await?.action() {
            return Ok(action);
        }
    }
    Ok(Action::requeue(RETRY))
}

/// One round of the pass: observe the pod and its jobs, decide, and carry the decision out.
async fn round(pod: &WatchedPod, key: &PodKey, ctx: &Context) -> Result<Again, Error> {
    let mut placeholders = ctx.jobs.for_pod(&key.uid);
    placeholders.sort_by_key(|p| p.job.job_id);
    let (mut live, ended): (Vec<_>, Vec<_>) = placeholders.into_iter().partition(|p| p.job.state() != JobState::Ended);
    let bound_to = pod.spec.as_ref().and_then(|spec| spec.node_name.clone());
    if let Some(node) = &bound_to {
        // Should a second job ever appear for a bound pod (a submission whose answer was lost, granted
        // after all), the one on the pod's Node is the pod's; the other is the duplicate.
        live.sort_by_key(|p| ctx.slurmd.kube_node_of(&p.job.nodes).as_ref() != Some(node));
    }
    // A job the host cancelled to replace it, or an immediate allocation that came to nothing, never
    // ends the pod.
    let ended: Vec<_> =
        ended.into_iter().filter(|p| !link::is_replaced(&p.job) && !link::is_failed_attempt(&p.job)).collect();
    let facts = observe(pod, key, &live, &ended, bound_to.as_deref(), ctx).await;
    let decision = decide(&facts);
    // Marked as replaced first: should the kept job be gone by the next listing, the duplicate's end
    // must not read as the end of the pod.
    let why = "a duplicate placeholder for the same pod";
    let duplicates =
        decision.duplicates.iter().map(|placeholder| Step::CancelAsReplaced { placeholder, why: why.into() });
    // A job allocated as its tenant, found by its seal: linked for good before anything else.
    let seal = ctx.installation.seal();
    let unlinked = live.iter().filter_map(|placeholder| {
        let link = seal.open(&placeholder.job.comment, placeholder.job.user_id)?;
        Some(Step::WriteLink { placeholder, link })
    });
    let first = unlinked.chain(duplicates).collect();
    let plan = act(pod, key.clone(), decision.next, ctx).await?;
    executor::execute(ctx, pod, plan.after_steps(first)).await
}

/// The job this host just queued for the pod, read alone once it had a moment to start: a listing of
/// thousands of jobs takes seconds to show it. Once the cache holds it running, no listing wakes the
/// other pods it runs for (a gang's other members, an array's other started tasks): they are woken
/// here.
async fn read_queued(key: &PodKey, ctx: &Context) {
    let Some(job) = ctx.jobs.unlisted_queued(&key.uid, ctx.quiet_after_queueing) else { return };
    match ctx.jobs.read_alone(ctx.slurm.as_ref(), job.clone()).await {
        Ok(running_for) => {
            for other in running_for.iter().filter(|pod| pod.uid != key.uid) {
                let _ = ctx.decide_again.unbounded_send(ObjectRef::new(&other.name).within(&other.namespace));
            }
        }
        Err(error) => tracing::debug!(job, %error, "reading a queued placeholder failed; a listing will show it"),
    }
}

/// What the pass knows: the pod, its jobs (`live`, `ended`), and what Slurm and the host have seen.
async fn observe<'a>(
    pod: &WatchedPod,
    key: &PodKey,
    live: &'a [Placeholder],
    ended: &'a [Placeholder],
    bound_to: Option<&'a str>,
    ctx: &Context,
) -> Facts<'a> {
    let first = live.first();
    let leaving = leaving(pod);
    // Observed only where the decision reads it: a leaving pod is not bound.
    let running_unbound =
        first.filter(|p| bound_to.is_none() && leaving.is_none() && p.job.state() == JobState::Running);
    let running = match running_unbound {
        Some(placeholder) => Some(bind::running(pod, placeholder, ctx).await),
        None => None,
    };
    // Asked only where the decision reads it: it starts the patience of a preemptor not seen yet.
    let maybe_taken = match (first, bound_to) {
        (None, _) => ended.last(),
        (Some(p), Some(_)) if p.job.state() == JobState::Pending => Some(p),
        _ => None,
    };
    let taken_by_slurm = maybe_taken.and_then(|p| preemption::taken_by_slurm(pod, &p.job, ctx));
    // A finished member is not a deleted one: its gang's job goes on for the others.
    let finished = pod.metadata.deletion_timestamp.is_none() && leaving.is_some();
    let members_still_run = first
        .filter(|p| finished && p.job.state() == JobState::Running && link::is_gang(&p.job))
        .is_some_and(|p| gang::others_still_run(p, ctx));
    let uid_grant = first
        .filter(|p| bound_to.is_none() && held::is_held(&p.job))
        .and_then(|p| ctx.grants.giving(&key.namespace, p.job.user_id?));
    Facts {
        leaving,
        bound_to,
        slurm_unreachable: ctx.jobs.unreachable(SLURM_PATIENCE),
        jobs_listed: ctx.jobs.is_listed(),
        live,
        ended,
        containers_may_run: still_running_on_its_node(pod),
        members_still_run,
        job_in_doubt: ctx.jobs.in_doubt(&key.uid),
        refused_for: ctx.jobs.refused_for(&key.uid, RECHECK),
        quiet_for: ctx.jobs.quiet_for(&key.uid, ctx.quiet_after_queueing),
        group: gang::group_of(pod),
        running,
        taken_by_slurm,
        uid_grant,
    }
}

/// The pass's plan for a decision: decided already, or made by the course that decides as it goes.
async fn act<'a>(pod: &WatchedPod, key: PodKey, next: Next<'a>, ctx: &Context) -> Result<Plan<'a>, Error> {
    Ok(match course(next) {
        Course::Plan(plan) => plan,
        Course::Submit => submit_pod(pod, key, ctx).await?,
        Course::SubmitGang(group) => gang::submit(pod, &group, ctx).await?,
        Course::WaitInSlurm(placeholder) => waiting::plan(placeholder, waiting::observe(pod, placeholder, ctx).await?),
    })
}

/// The pod's job, submitted by the executor, and what the pod is told then; a job allocated at once
/// is bound in the same pass.
async fn submit_pod(pod: &WatchedPod, key: PodKey, ctx: &Context) -> Result<Plan<'static>, Error> {
    let submission = match submit::prepare(pod, key.clone(), ctx).await {
        Ok(submission) => submission,
        Err(plan) => return Ok(plan),
    };
    match executor::submit(ctx, submission).await {
        Submitted::Allocated(placeholder) => {
            let job_id = placeholder.job.job_id;
            let placing = bind::placing(pod, Cow::Owned(*placeholder), ctx).await;
            Ok(submit::allocated(bind::binding(placing), job_id))
        }
        submitted => submit::answered(pod, vec![key], "the job", submitted),
    }
}

pub fn error_policy(pod: Arc<WatchedPod>, error: &Error, ctx: Arc<Context>) -> Action {
    if pod.spec.as_ref().is_none_or(|spec| spec.node_name.is_none()) {
        ctx.metrics.attempt(AttemptResult::error);
    }
    tracing::warn!(pod = %format!("{}/{}", pod.namespace().unwrap_or_default(), pod.name_any()), %error, "reconcile failed; retrying");
    Action::requeue(RETRY)
}
