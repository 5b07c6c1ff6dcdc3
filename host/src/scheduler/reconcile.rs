//! One pass over one pod: make Slurm and Kubernetes agree about it, as observe -> decide -> act.
//!
//! `observe` gathers the [`Facts`] (the pod, its placeholder jobs from the job cache, what Slurm and
//! the host have seen), [`decide`] (pure, in `decide.rs`) says what comes [`Next`], and `act` carries
//! it out. The pod's placeholder job is the source of truth. No job yet: ask the policy and submit
//! one. Pending: say so on the pod (held by Slurm: as an error). Running: bind the pod where Slurm
//! put it. Over: delete the pod. Pod leaving: cancel the job. Everything is re-derived from the pod
//! and the job cache, so a restart at any point resumes where it stopped.

use std::sync::Arc;

use crate::scheduler::watched_pod::WatchedPod;
use kube::ResourceExt;
use kube::runtime::controller::Action;

use super::conditions::WaitReason;
use super::context::Context;
use super::decide::{Facts, Next, decide, describe};
use super::link::{self, PodKey};
use super::metrics::AttemptResult;
use super::placeholder::Placeholder;
use super::pod_phase::leaving;
use super::preemption::TakenBySlurm;
use super::submit::ExcludedNodes;
use super::timing::{CONTAINERS_STOPPED_RECHECK, FIRST_LISTING_RECHECK, RECHECK, RETRY, SLURM_PATIENCE, STOP_GRACE};
use super::{bind, conditions, gang, held, preemption, submit};
use crate::error::Error;
use crate::slurm::JobState;

pub async fn reconcile(pod: Arc<WatchedPod>, ctx: Arc<Context>) -> Result<Action, Error> {
    let key = PodKey {
        namespace: pod.namespace().unwrap_or_default(),
        name: pod.name_any(),
        uid: pod.uid().unwrap_or_default(),
    };
    let mut placeholders = ctx.jobs.for_pod(&key.uid);
    placeholders.sort_by_key(|p| p.job.job_id);
    let (mut live, ended): (Vec<_>, Vec<_>) = placeholders.into_iter().partition(|p| p.job.state() != JobState::Ended);
    let bound_to = pod.spec.as_ref().and_then(|spec| spec.node_name.clone());
    if let Some(node) = &bound_to {
        // Should a second job ever appear for a bound pod (a submission whose answer was lost, granted
        // after all), the one on the pod's Node is the pod's; the other is the duplicate.
        live.sort_by_key(|p| ctx.slurmd.kube_node_of(&p.job.nodes).as_ref() != Some(node));
    }
    // A job the host cancelled to replace it, or an immediate allocation Slurm refused, never ends the pod.
    let ended: Vec<_> =
        ended.into_iter().filter(|p| !link::is_replaced(&p.job) && !link::is_refused_attempt(&p.job)).collect();
    let facts = observe(&pod, &key, &live, &ended, bound_to.as_deref(), &ctx);
    let decision = decide(&facts);
    for duplicate in decision.duplicates {
        // Marked as replaced first: should the kept job be gone by the next listing, the duplicate's
        // end must not read as the end of the pod.
        tracing::info!(job = %duplicate.job.target(), pod = %key.name, "cancelling placeholder: a duplicate placeholder for the same pod");
        bind::cancel_as_replaced(duplicate, &ctx).await?;
    }
    act(&pod, key, decision.next, &ctx).await
}

/// What the pass knows: the pod, its jobs (`live`, `ended`), and what Slurm and the host have seen.
fn observe<'a>(
    pod: &WatchedPod,
    key: &PodKey,
    live: &'a [Placeholder],
    ended: &'a [Placeholder],
    bound_to: Option<&'a str>,
    ctx: &Context,
) -> Facts<'a> {
    let first = live.first();
    let running_unbound = bound_to.is_none() && first.is_some_and(|p| p.job.state() == JobState::Running);
    // Asked only where the decision reads it: it starts the patience of a preemptor not seen yet.
    let taken_by_slurm = match (first, bound_to) {
        (None, _) => ended.last().and_then(|p| preemption::taken_by_slurm(pod, &p.job, ctx)),
        (Some(p), Some(_)) if p.job.state() == JobState::Pending => preemption::taken_by_slurm(pod, &p.job, ctx),
        _ => None,
    };
    let uid_grant = first
        .filter(|p| bound_to.is_none() && held::is_held(&p.job))
        .and_then(|p| ctx.grants.giving(&key.namespace, p.job.user_id?));
    Facts {
        leaving: leaving(pod),
        bound_to,
        slurm_unreachable: ctx.jobs.unreachable(SLURM_PATIENCE),
        jobs_listed: ctx.jobs.is_listed(),
        live,
        ended,
        containers_may_run: still_running_on_its_node(pod),
        submission_in_doubt: ctx.jobs.in_doubt(&key.uid),
        refused_for: ctx
            .jobs
            .recent_refusal(&key.uid, RECHECK)
            .map(|refusal| RECHECK.saturating_sub(refusal.elapsed())),
        group: gang::group_of(pod),
        misplaced: first.filter(|_| running_unbound).and_then(|p| bind::misplaced(pod, p, ctx)),
        taken_by_slurm,
        uid_grant,
    }
}

/// Carries a decision out.
async fn act(pod: &WatchedPod, key: PodKey, next: Next<'_>, ctx: &Context) -> Result<Action, Error> {
    match next {
        Next::WaitForSlurm(message) => {
            conditions::waiting(ctx, pod, WaitReason::SlurmUnreachable, &message).await?;
            Ok(Action::requeue(RETRY))
        }
        Next::AwaitFirstListing => Ok(Action::requeue(FIRST_LISTING_RECHECK)),
        Next::AwaitContainersStopped => Ok(Action::requeue(CONTAINERS_STOPPED_RECHECK)),
        Next::CancelForLeaving { live, why } => {
            for placeholder in live {
                gang::keep_members_waiting(ctx.slurm.as_ref(), placeholder).await;
                cancel(ctx, placeholder, &why).await?;
                let note = format!("cancelled Slurm job {}: {why}", placeholder.job.target());
                ctx.writer.event(pod, false, "SlurmJobCancelled", "Cancel", note).await;
            }
            Ok(Action::await_change())
        }
        Next::LookAgainIn(wait) => Ok(Action::requeue(wait)),
        Next::Submit => submit::submit(pod, key, ctx).await,
        Next::SubmitGang(group) => gang::submit(pod, &group, ctx).await,
        Next::Failed(job) => {
            // The pod stays, Pending, saying why, so nothing is lost and nothing is retried blindly.
            let message =
                format!("Slurm job {} failed before it ran; fix the pod's request and recreate it", describe(job));
            conditions::waiting(ctx, pod, WaitReason::SlurmJobFailed, &message).await?;
            Ok(Action::await_change())
        }
        Next::PreemptedBySlurm { requeued, taken } => preempted_by_slurm(pod, requeued, taken, ctx).await,
        Next::DeleteEnded(why) => {
            ctx.writer.event(pod, true, "SlurmJobEnded", "Delete", format!("deleting the pod: {why}")).await;
            ctx.writer.delete(pod).await?;
            Ok(Action::await_change())
        }
        Next::Replace { placeholder, why } => {
            let note = format!(
                "Slurm job {} was given {why}; cancelled it, and a new job will exclude that node",
                placeholder.job.target()
            );
            replace(pod, placeholder, ctx, note).await
        }
        Next::Bind(placeholder) => bind::bind(pod, placeholder, ctx).await,
        Next::BindGang(placeholder) => gang::bind(pod, placeholder, ctx).await,
        Next::WaitInSlurm(placeholder) => wait_in_slurm(pod, placeholder, ctx).await,
        Next::Held { placeholder, hold } => {
            // The job stays: released once its cause is fixed, it runs and the pod is bound.
            let message = held::message(&placeholder.job, &hold);
            conditions::failing(ctx, pod, WaitReason::SlurmHeld, &message, "SlurmJobHeld").await?;
            Ok(Action::requeue(RECHECK))
        }
        Next::DeleteRequeued { placeholder, node } => {
            let note = format!(
                "deleting the pod: Slurm job {} was requeued and no longer holds node {node}",
                placeholder.job.target()
            );
            ctx.writer.event(pod, true, "SlurmJobRequeued", "Delete", note).await;
            cancel(ctx, placeholder, "its pod lost its allocation").await?;
            ctx.writer.delete(pod).await?;
            Ok(Action::await_change())
        }
        Next::Nothing => Ok(Action::await_change()),
    }
}

/// Cancels the pod's job for a new one, saying why in `note`.
async fn replace(pod: &WatchedPod, placeholder: &Placeholder, ctx: &Context, note: String) -> Result<Action, Error> {
    match bind::replace(pod, placeholder, ctx, note).await? {
        bind::Replaced::LookAgain(action) => Ok(action),
        bind::Replaced::SubmitNow => submit::submit(pod, placeholder.pod.clone(), ctx).await,
    }
}

/// A job not yet running: keep its exclusions in step with the pod's placement rules, consider
/// preemption for it, and say on the pod what it waits for.
async fn wait_in_slurm(pod: &WatchedPod, placeholder: &Placeholder, ctx: &Context) -> Result<Action, Error> {
    let state = placeholder.job.state();
    // A gang's exclusions are fixed at submission (its members may differ).
    if state == JobState::Pending
        && !link::is_gang(&placeholder.job)
        && submit::keep_placement(pod, placeholder, ctx).await? == ExcludedNodes::NeedsOwnJob
    {
        let note = format!(
            "the pod's placement rules changed, and Slurm job {} waits in its job array's record, whose \
             excluded nodes every task of the array shares; cancelled it, and a new job of the pod's own will \
             carry them",
            placeholder.job.target()
        );
        return replace(pod, placeholder, ctx, note).await;
    }
    let mut message = format!("waiting for Slurm: job {}", describe(&placeholder.job));
    let mut look_again = RECHECK;
    if state == JobState::Pending
        && let Some(outcome) = preemption::consider(pod, placeholder, ctx).await?
    {
        message = format!("{message}; {}", outcome.note);
        if outcome.look_again_soon {
            look_again = RETRY;
        }
    }
    let reason = conditions::pending_reason(&placeholder.job.state_reason);
    conditions::waiting(ctx, pod, reason, &message).await?;
    Ok(Action::requeue(look_again))
}

/// A bound pod whose placeholder Slurm's own preemption took: deleted with its grace period, with an
/// Event naming the preempting job (once that job has started, or a few seconds have passed). A
/// requeued placeholder is cancelled: its pod is gone, and a new pod gets a new job.
async fn preempted_by_slurm(
    pod: &WatchedPod,
    requeued: Option<&Placeholder>,
    taken: TakenBySlurm,
    ctx: &Context,
) -> Result<Action, Error> {
    let note = match taken {
        TakenBySlurm::Named(note) => note,
        TakenBySlurm::AwaitPreemptor(wait) => return Ok(Action::requeue(wait)),
    };
    ctx.writer.event(pod, true, "SlurmJobPreempted", "Delete", note).await;
    if let Some(placeholder) = requeued {
        cancel(ctx, placeholder, "its pod was preempted").await?;
    }
    ctx.writer.delete(pod).await?;
    Ok(Action::await_change())
}

pub fn error_policy(pod: Arc<WatchedPod>, error: &Error, ctx: Arc<Context>) -> Action {
    if pod.spec.as_ref().is_none_or(|spec| spec.node_name.is_none()) {
        ctx.metrics.attempt(AttemptResult::error);
    }
    tracing::warn!(pod = %format!("{}/{}", pod.namespace().unwrap_or_default(), pod.name_any()), %error, "reconcile failed; retrying");
    Action::requeue(RETRY)
}

/// Whether a bound pod being deleted may still have containers on its Node (until its grace period
/// ended `STOP_GRACE` ago).
fn still_running_on_its_node(pod: &WatchedPod) -> bool {
    let Some(deleted) = pod.metadata.deletion_timestamp.as_ref() else { return false };
    if pod.spec.as_ref().and_then(|spec| spec.node_name.as_ref()).is_none() {
        return false;
    }
    // The deletion timestamp is when the grace period ends.
    let past_grace = k8s_openapi::jiff::Timestamp::now().duration_since(deleted.0);
    if past_grace.as_secs() > i64::try_from(STOP_GRACE.as_secs()).unwrap_or(i64::MAX) {
        return false;
    }
    let statuses = pod.status.as_ref().and_then(|status| status.container_statuses.as_deref()).unwrap_or_default();
    statuses.iter().any(|status| status.state.as_ref().is_none_or(|state| state.terminated.is_none()))
}

pub(super) async fn cancel(ctx: &Context, placeholder: &Placeholder, why: &str) -> Result<(), Error> {
    tracing::info!(job = %placeholder.job.target(), pod = %placeholder.pod.name, "cancelling placeholder: {why}");
    ctx.slurm.cancel(&placeholder.job.target()).await?;
    ctx.jobs.record_cancelled(&placeholder.job.target(), None);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deleted_pod(seconds_from_now: i64, container_state: serde_json::Value) -> WatchedPod {
        let at = k8s_openapi::jiff::Timestamp::now() + k8s_openapi::jiff::SignedDuration::from_secs(seconds_from_now);
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "deletionTimestamp": at.to_string()},
            "spec": {"nodeName": "n1", "containers": [{"name": "a"}]},
            "status": {"containerStatuses": [{"name": "a", "image": "i", "imageID": "", "ready": true,
                                               "restartCount": 0, "state": container_state}]}
        }))
        .unwrap()
    }

    #[test]
    fn a_deleted_pod_holds_its_node_until_its_containers_stop() {
        let running = serde_json::json!({"running": {}});
        assert!(still_running_on_its_node(&deleted_pod(5, running.clone())));
        let stopped = serde_json::json!({"terminated": {"exitCode": 0}});
        assert!(!still_running_on_its_node(&deleted_pod(5, stopped)));
        assert!(!still_running_on_its_node(&deleted_pod(-60, running)), "not past its grace period and 30 s");
    }
}
