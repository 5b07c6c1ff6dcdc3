//! Carries out a pass's [`Plan`]: its steps in order, then when to look at the pod again. The first
//! step that fails ends the pass with its error and the controller retries it; the retry observes and
//! decides afresh, so a step already taken (the job cancelled, the condition said) is not taken again
//! blindly.
//!
//! The pod's condition, its Events, its binding and deletion, what a gang's other members are told,
//! the cancelling and replacing of its jobs, a waiting job's excluded nodes and the preemption rounds
//! made for it (`preempt`) are written here, and so is the one write whose answer a course decides
//! on: the submission of a pod's or a gang's job ([`submit`], whose answer `submit::answered` turns
//! into the pod's plan). No other part of a pass writes to Slurm or the API server.

mod preempt;
mod submit;

pub use submit::submit;

use super::conditions::{WaitReason, says_already};
use super::context::Context;
use super::link;
use super::placeholder::Placeholder;
use super::placement::placement_checks::GroundsDigest;
use super::placement::pod_rules;
use super::step::{Again, Plan, Step};
use super::timing::RETRY;
use super::waiting;
use super::watched_pod::WatchedPod;
use crate::error::Error;
use crate::slurm::{JobState, JobUpdate, Slurm, SlurmError};

/// Takes the plan's steps, and says when to look again.
pub async fn execute(ctx: &Context, pod: &WatchedPod, plan: Plan<'_>) -> Result<Again, Error> {
    Ok(take_all(ctx, pod, plan.steps).await?.unwrap_or(plan.again))
}

/// Takes `steps` in order, the first that fails ending the pass, and one that stops the plan ending
/// it with when to look again.
async fn take_all(ctx: &Context, pod: &WatchedPod, steps: Vec<Step<'_>>) -> Result<Option<Again>, Error> {
    for step in steps {
        if let Some(again) = take(ctx, pod, step).await? {
            return Ok(Some(again));
        }
    }
    Ok(None)
}

/// Takes one step; `Some` when the plan stops there, with when to look again.
async fn take(ctx: &Context, pod: &WatchedPod, step: Step<'_>) -> Result<Option<Again>, Error> {
    match step {
        Step::Wait { reason, message } => say_waiting(ctx, pod, reason, &message).await?,
        Step::Failing { reason, message, event } => {
            let news = !says_already(pod.condition("PodScheduled"), reason, &message);
            say_waiting(ctx, pod, reason, &message).await?;
            if news {
                ctx.writer.event(pod, true, event, "Schedule", message).await;
            }
        }
        Step::Event { warning, reason, action, note } => ctx.writer.event(pod, warning, reason, action, note).await,
        Step::KeepMembersWaiting(placeholder) => keep_members_waiting(ctx.slurm.as_ref(), placeholder).await,
        Step::Cancel { placeholder, why } => cancel(ctx, placeholder, &why).await?,
        Step::CancelAsReplaced { placeholder, why } => {
            tracing::info!(job = %placeholder.job.target(), pod = %placeholder.pod.name, "cancelling placeholder: {why}");
            cancel_as_replaced(ctx, placeholder).await?;
        }
        Step::WriteLink { placeholder, link } => write_link(ctx, placeholder, &link).await?,
        Step::PlacementChecked { placeholder, grounds } => ctx.placement_checks.record(&placeholder.pod.uid, grounds),
        Step::UpdateExcludedNodes { placeholder, excluded, grounds } => {
            update_excluded_nodes(ctx, placeholder, excluded, grounds).await?;
        }
        Step::RecordRefusal(keys) => keys.iter().for_each(|key| ctx.jobs.record_refusal(&key.uid)),
        Step::RecordInDoubt(keys) => keys.iter().for_each(|key| ctx.jobs.record_in_doubt(&key.uid)),
        Step::Assume { node, recheck } => return Ok(assume(ctx, pod, &node, recheck.as_deref())),
        Step::Bind { node, note, allocated } => bind_to(ctx, pod, &node, note, allocated).await?,
        Step::Preempt { round, job } => {
            let outcome = preempt::preempt(ctx, pod, &round).await?;
            let said = waiting::said(job, Some(&outcome));
            Box::pin(take_all(ctx, pod, said.steps)).await?;
            return Ok(Some(said.again));
        }
        Step::OnPod { pod: other, steps } => {
            Box::pin(take_all(ctx, &other, steps)).await?;
        }
        Step::DecideAgain(pods) => {
            for other in pods {
                let _ = ctx.decide_again.unbounded_send(other);
            }
        }
        Step::DeletePod => ctx.writer.delete(pod).await?,
    }
    Ok(None)
}

/// Assumes the pod bound to `node`; with `recheck`, only if its pod-level rules still let it run
/// where that job does. The judgement reads what other passes assumed, so it is made here, under the
/// same lock as the assumption: two pods whose rules refuse each other are never both assumed onto
/// one Node. Refused: the next pass, observing the neighbour, replaces the job.
fn assume(ctx: &Context, pod: &WatchedPod, node: &str, recheck: Option<&Placeholder>) -> Option<Again> {
    let uid = pod.metadata.uid.as_deref().unwrap_or_default();
    let Some(placeholder) = recheck else {
        ctx.assumed.assume(uid, node);
        return None;
    };
    let why = ctx.assumed.judge_then_assume(uid, node, || {
        pod_rules::misplaced(&ctx.placement, pod, &placeholder.job, &ctx.pod_rules())
    })?;
    tracing::info!(pod = %placeholder.pod.name, %why, "not bound: a pod placed meanwhile refuses the node");
    Some(Again::After(RETRY))
}

async fn bind_to(
    ctx: &Context,
    pod: &WatchedPod,
    node: &str,
    note: String,
    allocated: Option<String>,
) -> Result<(), Error> {
    let bound = match allocated {
        Some(news) => {
            let event = ctx.writer.event(pod, false, "SlurmJobAllocated", "Schedule", news);
            tokio::join!(event, ctx.writer.bind(pod, node)).1
        }
        None => ctx.writer.bind(pod, node).await,
    };
    let bound = bound.inspect_err(|_| ctx.assumed.forget(pod.metadata.uid.as_deref().unwrap_or_default()))?;
    // Bound by an earlier pass: the watch brings the bound pod next.
    if !bound {
        return Ok(());
    }
    if let Some(created) = pod.metadata.creation_timestamp.as_ref() {
        let waited = k8s_openapi::jiff::Timestamp::now().duration_since(created.0);
        ctx.metrics.bound(waited.as_secs_f64());
    }
    tracing::info!("{note}");
    ctx.writer.event(pod, false, "Scheduled", "Bind", note).await;
    Ok(())
}

/// Says on the pod why it is not scheduled, and counts the attempt.
async fn say_waiting(ctx: &Context, pod: &WatchedPod, reason: WaitReason, message: &str) -> kube::Result<()> {
    ctx.metrics.attempt(reason.attempt_result());
    let current = pod.condition("PodScheduled");
    ctx.writer.set_scheduled_condition(pod, current, false, reason.condition_reason(), message).await
}

async fn cancel(ctx: &Context, placeholder: &Placeholder, why: &str) -> Result<(), Error> {
    tracing::info!(job = %placeholder.job.target(), pod = %placeholder.pod.name, "cancelling placeholder: {why}");
    ctx.slurm.cancel(&placeholder.job.target()).await?;
    ctx.jobs.record_cancelled(&placeholder.job.target(), None);
    Ok(())
}

/// Writes `link`, the one the job's seal opened: the job as the pass knows it may be the one the fast
/// path recorded, whose `admin_comment` Slurm had not been given yet (empty).
async fn write_link(ctx: &Context, placeholder: &Placeholder, link: &str) -> Result<(), Error> {
    let Some(job_id) = placeholder.job.update_id() else { return Ok(()) };
    let admin_comment = Some(link.to_owned());
    let comment = Some(link::carried(&placeholder.job.comment).to_owned());
    let update = JobUpdate { admin_comment, comment, ..Default::default() };
    ctx.slurm.update_job(&job_id, &update).await?;
    tracing::info!(job = job_id, pod = %placeholder.pod.name, "wrote the admin link of an allocation found by its seal");
    Ok(())
}

async fn update_excluded_nodes(
    ctx: &Context,
    placeholder: &Placeholder,
    excluded: Vec<String>,
    grounds: GroundsDigest,
) -> Result<(), Error> {
    let Some(job_id) = placeholder.job.update_id() else { return Ok(()) };
    let shown = excluded.join(",");
    let update = JobUpdate { excluded_nodes: Some(excluded), ..Default::default() };
    match ctx.slurm.update_job(&job_id, &update).await {
        Ok(()) => {
            tracing::info!(job = job_id, excluded = %shown, "placement rules changed: excluded nodes updated");
            // The job's listing changes with the update, and so do the grounds: the next pass checks
            // once more that Slurm took it.
            ctx.placement_checks.record(&placeholder.pod.uid, grounds);
        }
        // The job started or ended meanwhile, or a node vanished: the next pass sees the new state.
        Err(error @ SlurmError::Api { .. }) => {
            tracing::debug!(job = job_id, %error, "could not update the job's excluded nodes");
        }
        Err(error) => return Err(error.into()),
    }
    Ok(())
}

/// Marks a placeholder as replaced, then cancels it: a job so cancelled never ends its pod. A job
/// Slurm does not let mark keeps its mark in the host's memory (see `replace`).
async fn cancel_as_replaced(ctx: &Context, placeholder: &Placeholder) -> Result<(), Error> {
    let job_id = placeholder.job.target();
    let marked_comment = link::replaced(&placeholder.job.admin_comment);
    let mark = JobUpdate { admin_comment: Some(marked_comment.clone()), ..Default::default() };
    let marked = match placeholder.job.update_id() {
        Some(own_id) => match ctx.slurm.update_job(&own_id, &mark).await {
            Ok(()) => true,
            Err(error) if error.names_a_vanished_node() => false,
            Err(error) => return Err(error.into()),
        },
        None => false,
    };
    ctx.slurm.cancel(&job_id).await?;
    ctx.jobs.record_replaced(&job_id, &marked_comment, marked);
    Ok(())
}

/// Before a member's gang job is cancelled because the member leaves: a job that does not run yet is
/// marked replaced, so the other members stay Pending for a new job (bound members, whose job ran, go
/// with it). A failed mark only costs those members: they are deleted as for a running gang.
pub async fn keep_members_waiting(slurm: &dyn Slurm, placeholder: &Placeholder) {
    if !link::is_gang(&placeholder.job) || placeholder.job.state() == JobState::Running {
        return;
    }
    let mark = JobUpdate { admin_comment: Some(link::replaced(&placeholder.job.admin_comment)), ..Default::default() };
    if let Err(error) = slurm.update_job(&placeholder.job.job_id, &mark).await {
        tracing::warn!(job = placeholder.job.job_id, %error, "could not mark the gang's job as replaced");
    }
}
