//! One pass over one pod: make Slurm and Kubernetes agree about it, as observe -> decide -> act.
//!
//! `observe` gathers the [`Facts`] (the pod, its placeholder jobs from the job cache, what Slurm and
//! the host have seen), [`decide`] (pure, in `decide.rs`) says what comes [`Next`] and [`course`] how,
//! and `act` carries it out: `executor` takes the writes decided, and submitting or binding, whose
//! next write depends on what Slurm or the API server answers, decide the rest as they go. The pod's
//! placeholder job is the source of truth. No job yet: ask the policy and submit
//! one. Pending: say so on the pod (held by Slurm: as an error). Running: bind the pod where Slurm
//! put it. Over: delete the pod. Pod leaving: cancel the job. Everything is re-derived from the pod
//! and the job cache, so a restart at any point resumes where it stopped.

use std::sync::Arc;

use crate::scheduler::watched_pod::WatchedPod;
use kube::ResourceExt;
use kube::runtime::controller::Action;

use super::context::Context;
use super::decide::{Course, Facts, Next, course, decide, waiting_in_slurm};
use super::link::{self, PodKey};
use super::metrics::AttemptResult;
use super::placeholder::Placeholder;
use super::pod_phase::leaving;
use super::step::Step;
use super::submit::ExcludedNodes;
use super::timing::{RECHECK, RETRY, SLURM_PATIENCE, STOP_GRACE};
use super::{bind, executor, gang, held, preemption, submit};
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
    // A job the host cancelled to replace it, or an immediate allocation that came to nothing, never
    // ends the pod.
    let ended: Vec<_> =
        ended.into_iter().filter(|p| !link::is_replaced(&p.job) && !link::is_failed_attempt(&p.job)).collect();
    let facts = observe(&pod, &key, &live, &ended, bound_to.as_deref(), &ctx);
    let decision = decide(&facts);
    // Marked as replaced first: should the kept job be gone by the next listing, the duplicate's end
    // must not read as the end of the pod.
    let why = "a duplicate placeholder for the same pod";
    let duplicates = decision.duplicates.iter().map(|placeholder| Step::CancelAsReplaced { placeholder, why });
    // A job allocated as its tenant, found by its seal: linked for good before anything else.
    let seal = ctx.installation.seal();
    let unlinked = live.iter().filter_map(|placeholder| {
        let link = seal.open(&placeholder.job.comment, placeholder.job.user_id)?;
        Some(Step::WriteLink { placeholder, link })
    });
    executor::take_all(&ctx, &pod, unlinked.chain(duplicates).collect()).await?;
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
        job_in_doubt: ctx.jobs.in_doubt(&key.uid),
        refused_for: ctx.jobs.refused_for(&key.uid, RECHECK),
        quiet_for: ctx.jobs.quiet_for(&key.uid, ctx.quiet_after_queueing),
        group: gang::group_of(pod),
        misplaced: first.filter(|_| running_unbound).and_then(|p| bind::misplaced(pod, p, ctx)),
        taken_by_slurm,
        uid_grant,
    }
}

/// Carries a decision out: the executor takes its writes, or the step that decides as it goes does.
async fn act(pod: &WatchedPod, key: PodKey, next: Next<'_>, ctx: &Context) -> Result<Action, Error> {
    match course(next) {
        Course::Plan(plan) => executor::execute(ctx, pod, plan).await,
        Course::Submit => submit::submit(pod, key, ctx).await,
        Course::SubmitGang(group) => gang::submit(pod, &group, ctx).await,
        Course::Bind(placeholder) => bind::bind(pod, placeholder, ctx).await,
        Course::BindGang(placeholder) => gang::bind(pod, placeholder, ctx).await,
        Course::WaitInSlurm(placeholder) => wait_in_slurm(pod, placeholder, ctx).await,
        Course::Replace { placeholder, note } => replace(pod, placeholder, ctx, note).await,
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
    let pending = placeholder.job.state() == JobState::Pending;
    // A gang's exclusions are fixed at submission (its members may differ).
    let excluded_nodes = if pending && !link::is_gang(&placeholder.job) {
        submit::excluded_nodes(pod, placeholder, ctx).await?
    } else {
        ExcludedNodes::Unjudged
    };
    if excluded_nodes == ExcludedNodes::NeedsOwnJob {
        let note = format!(
            "the pod's placement rules changed, and Slurm job {} waits in its job array's record, whose \
             excluded nodes every task of the array shares; cancelled it, and a new job of the pod's own will \
             carry them",
            placeholder.job.target()
        );
        return replace(pod, placeholder, ctx, note).await;
    }
    executor::take_all(ctx, pod, excluded_nodes.step(placeholder).into_iter().collect()).await?;
    let preemption = if pending { preemption::consider(pod, placeholder, ctx).await? } else { None };
    executor::execute(ctx, pod, waiting_in_slurm(&placeholder.job, preemption.as_ref())).await
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
