//! One pass over one pod: make Slurm and Kubernetes agree about it.
//!
//! The pod's placeholder job is the source of truth. No job yet: ask the policy and submit one.
//! Pending: say so on the pod. Running: bind the pod where Slurm put it. Over: delete the pod.
//! Pod leaving: cancel the job. Everything is re-derived from the pod and the job cache, so a
//! restart at any point resumes where it stopped.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::runtime::controller::Action;

use super::conditions::WaitReason;
use super::job_cache::Placeholder;
use super::link::{self, PodKey};
use super::metrics::AttemptResult;
use super::pod_phase::leaving;
use super::timing::{RECHECK, RETRY, SLURM_PATIENCE};
use super::{Context, Error, bind, conditions, gang, preemption, submit};
use crate::slurm::JobState;

pub async fn reconcile(pod: Arc<Pod>, ctx: Arc<Context>) -> Result<Action, Error> {
    let unbound = pod.spec.as_ref().is_none_or(|spec| spec.node_name.is_none());
    if unbound
        && leaving(&pod).is_none()
        && let Some(why) = ctx.jobs.unreachable(SLURM_PATIENCE)
    {
        let message = format!("cannot read Slurm's jobs ({why}); the pod waits for slurmrestd");
        conditions::waiting(&ctx, &pod, WaitReason::SlurmUnreachable, &message).await?;
        return Ok(Action::requeue(RETRY));
    }
    // Before the first full job listing, "no job" only means "not known yet".
    if !ctx.jobs.is_listed() {
        return Ok(Action::requeue(Duration::from_millis(500)));
    }
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

    if let Some(why) = leaving(&pod) {
        if !live.is_empty() && still_running_on_its_node(&pod) {
            // The kubelet still counts the pod on its Node: the allocation stays the pod's until its
            // containers stop, so the next pod Slurm puts there is not refused for lack of room. (Once
            // the pod is gone, the orphan sweep cancels the job if no pass did.)
            return Ok(Action::requeue(Duration::from_secs(1)));
        }
        for placeholder in &live {
            gang::keep_members_waiting(&ctx.slurm, placeholder).await;
            cancel(&ctx, placeholder, &why).await?;
            let note = format!("cancelled Slurm job {}: {why}", placeholder.job.target());
            ctx.writer.event(&pod, false, "SlurmJobCancelled", "Cancel", note).await;
        }
        return Ok(Action::await_change());
    }
    // One pod, one job: should a second ever appear, the oldest wins (for a bound pod, the one on its
    // Node).
    for duplicate in live.iter().skip(1) {
        cancel(&ctx, duplicate, "a duplicate placeholder for the same pod").await?;
    }
    // A job the host cancelled to replace it, or an immediate allocation Slurm refused, never ends the pod.
    let ended: Vec<_> =
        ended.into_iter().filter(|p| !link::is_replaced(&p.job) && !link::is_refused_attempt(&p.job)).collect();
    match (live.first(), bound_to) {
        (None, None) if ended.is_empty() => {
            if ctx.jobs.in_doubt(&key.uid) {
                let message =
                    "a submission to slurmrestd got no answer; waiting for Slurm's job list before trying again";
                conditions::waiting(&ctx, &pod, WaitReason::SlurmUnreachable, message).await?;
                return Ok(Action::requeue(RETRY));
            }
            if let Some(refusal) = ctx.jobs.recent_refusal(&key.uid, RECHECK) {
                // Slurm refused this pod moments ago; a pod update must not resubmit at once.
                return Ok(Action::requeue(RECHECK.saturating_sub(refusal.elapsed())));
            }
            match gang::group_of(&pod) {
                Some(group) => gang::submit(&pod, &group, &ctx).await,
                None => submit::submit(&pod, key, &ctx).await,
            }
        }
        (None, None) if ended.last().is_some_and(|p| !withdrawn(&p.job)) => {
            // The job failed before it ever held a node (e.g. a constraint no node can meet): the
            // pod stays, Pending, saying why, so nothing is lost and nothing is retried blindly.
            let job = &ended.last().expect("checked above").job;
            let message =
                format!("Slurm job {} failed before it ran; fix the pod's request and recreate it", describe(job));
            conditions::waiting(&ctx, &pod, WaitReason::SlurmJobFailed, &message).await?;
            Ok(Action::await_change())
        }
        (None, _) => {
            if let Some(taken) = ended.last().and_then(|p| preemption::taken_by_slurm(&pod, &p.job, &ctx)) {
                return preempted_by_slurm(&pod, None, taken, &ctx).await;
            }
            let why = match ended.last() {
                Some(p) => format!("Slurm job {} ended", describe(&p.job)),
                None => "its Slurm job no longer exists".to_string(),
            };
            ctx.writer.event(&pod, true, "SlurmJobEnded", "Delete", format!("deleting the pod: {why}")).await;
            ctx.writer.delete(&pod).await?;
            Ok(Action::await_change())
        }
        (Some(placeholder), None) => match placeholder.job.state() {
            JobState::Running => match bind::misplaced(&pod, placeholder, &ctx) {
                Some(why) => match bind::replace(&pod, placeholder, &ctx, &why).await? {
                    bind::Replaced::LookAgain(action) => Ok(action),
                    bind::Replaced::SubmitNow => submit::submit(&pod, placeholder.pod.clone(), &ctx).await,
                },
                None if link::is_gang(&placeholder.job) => gang::bind(&pod, placeholder, &ctx).await,
                None => bind::bind(&pod, placeholder, &ctx).await,
            },
            state => {
                // A gang's exclusions are fixed at submission (its members may differ).
                if state == JobState::Pending && !link::is_gang(&placeholder.job) {
                    submit::keep_placement(&pod, placeholder, &ctx).await?;
                }
                let mut message = format!("waiting for Slurm: job {}", describe(&placeholder.job));
                let mut look_again = RECHECK;
                if state == JobState::Pending
                    && let Some(outcome) = preemption::consider(&pod, placeholder, &ctx).await?
                {
                    message = format!("{message}; {}", outcome.note);
                    if outcome.look_again_soon {
                        look_again = RETRY;
                    }
                }
                let reason = conditions::pending_reason(&placeholder.job.state_reason);
                conditions::waiting(&ctx, &pod, reason, &message).await?;
                Ok(Action::requeue(look_again))
            }
        },
        (Some(placeholder), Some(node)) => {
            if placeholder.job.state() == JobState::Pending {
                // Requeued (e.g. preempted): the allocation the pod was bound to is gone.
                if let Some(taken) = preemption::taken_by_slurm(&pod, &placeholder.job, &ctx) {
                    return preempted_by_slurm(&pod, Some(placeholder), taken, &ctx).await;
                }
                let note = format!(
                    "deleting the pod: Slurm job {} was requeued and no longer holds node {node}",
                    placeholder.job.target()
                );
                ctx.writer.event(&pod, true, "SlurmJobRequeued", "Delete", note).await;
                cancel(&ctx, placeholder, "its pod lost its allocation").await?;
                ctx.writer.delete(&pod).await?;
            }
            Ok(Action::await_change())
        }
    }
}

/// A bound pod whose placeholder Slurm's own preemption took: deleted with its grace period, with an
/// Event naming the preempting job (once that job has started, or a few seconds have passed). A
/// requeued placeholder is cancelled: its pod is gone, and a new pod gets a new job.
async fn preempted_by_slurm(
    pod: &Pod,
    requeued: Option<&Placeholder>,
    taken: Result<String, Duration>,
    ctx: &Context,
) -> Result<Action, Error> {
    let note = match taken {
        Ok(note) => note,
        Err(wait) => return Ok(Action::requeue(wait)),
    };
    ctx.writer.event(pod, true, "SlurmJobPreempted", "Delete", note).await;
    if let Some(placeholder) = requeued {
        cancel(ctx, placeholder, "its pod was preempted").await?;
    }
    ctx.writer.delete(pod).await?;
    Ok(Action::await_change())
}

pub fn error_policy(pod: Arc<Pod>, error: &Error, ctx: Arc<Context>) -> Action {
    if pod.spec.as_ref().is_none_or(|spec| spec.node_name.is_none()) {
        ctx.metrics.attempt(AttemptResult::error);
    }
    tracing::warn!(pod = %format!("{}/{}", pod.namespace().unwrap_or_default(), pod.name_any()), %error, "reconcile failed; retrying");
    Action::requeue(RETRY)
}

/// How long past its grace period a deleted pod may keep its allocation (a kubelet that never reports
/// its containers stopped must not hold a Slurm node for ever).
const STOP_GRACE: Duration = Duration::from_secs(30);

/// Whether a bound pod being deleted may still have containers on its Node (until its grace period
/// ended `STOP_GRACE` ago).
fn still_running_on_its_node(pod: &Pod) -> bool {
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

/// Whether a job was ended on purpose (cancelled, preempted, out of time), as opposed to failing.
fn withdrawn(job: &crate::slurm::Job) -> bool {
    job.job_state.iter().any(|state| matches!(state.as_str(), "CANCELLED" | "PREEMPTED" | "TIMEOUT" | "DEADLINE"))
}

/// `12 (PENDING: Resources)`: the job, its state and Slurm's reason when it gives one.
pub(super) fn describe(job: &crate::slurm::Job) -> String {
    match job.state_reason.as_str() {
        "" | "None" => format!("{} ({})", job.target(), job.state_name()),
        reason => format!("{} ({}: {reason})", job.target(), job.state_name()),
    }
}

pub(super) async fn cancel(ctx: &Context, placeholder: &Placeholder, why: &str) -> Result<(), Error> {
    tracing::info!(job = %placeholder.job.target(), pod = %placeholder.pod.name, "cancelling placeholder: {why}");
    ctx.slurm.cancel(placeholder.job.target()).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deleted_pod(seconds_from_now: i64, container_state: serde_json::Value) -> Pod {
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
