//! A pod's placeholder job: asked of the job-mapper policy, limited by the pod's placement rules,
//! submitted once, and kept in step with those rules while it waits.

use std::ops::ControlFlow;
use std::sync::Arc;

use crate::scheduler::watched_pod::{PodNeeds, WatchedPod};
use kube::ResourceExt;
use kube::runtime::controller::Action;

use super::batch::Turn;
use super::conditions::WaitReason;
use super::context::Context;
use super::fast_path::{self, Allocation};
use super::link::PodKey;
use super::placeholder::Placeholder;
use super::placeholder::{self, PlaceholderKind};
use super::placement::Verdict;
use super::placement::exclusions;
use super::placement::placement_checks::Grounds;
use super::placement::pod_rules::{self, PodPlacement};
use super::timing::{RECHECK, RETRY, UNREADABLE_RECHECK};
use super::{bind, conditions, pod_record};
use crate::error::Error;
use crate::failpoint;
use crate::policy::worlds::MapPodInput;
use crate::policy::{JobRequest, Mapping, PolicyError, Rejection};
use crate::slurm::{Job, JobDescription, JobUpdate, NoValue, SlurmError, compress_hostlist};
use crate::tenancy::{self, NotGranted};

pub async fn submit(pod: &WatchedPod, key: PodKey, ctx: &Context) -> Result<Action, Error> {
    let mut request = match map(pod, ctx).await? {
        ControlFlow::Continue(request) => request,
        ControlFlow::Break(action) => return Ok(action),
    };
    // The verdict names every Slurm node (thousands, at scale): it must not be held while the pod
    // waits for its turn below.
    request.excluded_nodes = match placement(pod, ctx).await? {
        ControlFlow::Continue(verdict) => exclusions::for_job(&request.excluded_nodes, &verdict),
        ControlFlow::Break(action) => return Ok(action),
    };
    let kind = ctx.placeholder_kind();
    let description = placeholder::job_description(&key, request, kind, &ctx.installation);
    if kind == PlaceholderKind::External {
        // Slurm has no arrays of external jobs: every pod's placeholder is submitted on its own.
        return submit_alone(pod, key, description, ctx).await;
    }
    match ctx.batches.join(ctx.slurm.as_ref(), key.clone(), description.clone()).await {
        Turn::Alone(_turn) => submit_alone(pod, key, description, ctx).await,
        Turn::Task(Ok(task)) => {
            // Known as the pod's before Slurm lists it, as a lone submission is.
            let job = Job {
                job_id: task.array_job_id,
                name: description.name,
                job_state: vec!["PENDING".into()],
                excluded_nodes: description.excluded_nodes.join(","),
                admin_comment: task.admin_comment,
                array_job_id: NoValue::of(task.array_job_id.into()),
                array_task_id: NoValue::of(task.task.into()),
                ..Default::default()
            };
            let target = job.target();
            ctx.jobs.record_job(key, job);
            submitted(pod, &target, ctx).await
        }
        Turn::Task(Err(error)) => match not_submitted(pod, &[key], "the job", &error, ctx).await? {
            Some(action) => Ok(action),
            None => Err(Error::SharedSlurm(error)),
        },
    }
}

/// A pod submitted on its own: an immediate allocation first (with the fast path), else a queued job.
async fn submit_alone(
    pod: &WatchedPod,
    key: PodKey,
    description: JobDescription,
    ctx: &Context,
) -> Result<Action, Error> {
    if ctx.fast_path && fast_path::applies_to(&description) {
        match fast_path::allocate(ctx, &description).await {
            Allocation::Running(job) => {
                tracing::info!(job = job.job_id, pod = %description.name, nodes = %job.nodes, "allocated at once");
                ctx.jobs.record_job(key.clone(), (*job).clone());
                failpoint::hit("after-submit");
                let note = format!("allocated at once as Slurm job {}", job.job_id);
                // Side by side: the Event must not add an API round trip before the binding.
                let placeholder = Placeholder { pod: key, job: *job };
                let (_, bound) = tokio::join!(
                    ctx.writer.event(pod, false, "SlurmJobAllocated", "Schedule", note),
                    bind::bind(pod, &placeholder, ctx)
                );
                return bound;
            }
            Allocation::Granted(job_id, request) => {
                ctx.jobs.record_submitted(key, job_id, &request);
                return Ok(Action::requeue(RETRY));
            }
            Allocation::InDoubt(error) => return in_doubt(pod, &[key], &error, ctx).await,
            Allocation::Refused => {}
        }
    }
    let job_id = match ctx.slurm.submit(&description).await {
        Ok(job_id) => job_id,
        Err(error) => {
            return match not_submitted(pod, &[key], "the job", &error, ctx).await? {
                Some(action) => Ok(action),
                None => Err(error.into()),
            };
        }
    };
    ctx.jobs.record_submitted(key, job_id, &description);
    failpoint::hit("after-submit");
    tracing::info!(job = job_id, pod = %description.name, "submitted placeholder");
    submitted(pod, &job_id.to_string(), ctx).await
}

/// Says on the pod that its job is queued.
async fn submitted(pod: &WatchedPod, job: &str, ctx: &Context) -> Result<Action, Error> {
    ctx.writer.event(pod, false, "SlurmJobSubmitted", "Schedule", format!("submitted as Slurm job {job}")).await;
    let message = format!("waiting for Slurm: job {job} submitted");
    conditions::waiting(ctx, pod, WaitReason::Unschedulable, &message).await?;
    Ok(Action::requeue(RECHECK))
}

/// What a failed submission means for the pods it was for.
#[derive(Debug, PartialEq, Eq)]
pub enum Failure {
    /// A node the job names (among its excluded nodes) was deleted meanwhile: the next pass, on a
    /// newer listing, names only nodes Slurm knows.
    NodeVanished,
    /// The answer was lost: Slurm may have made the job, so nothing is submitted again until a
    /// listing shows whether it did.
    InDoubt,
    /// Slurm refused the job.
    Refused,
}

/// What a failed submission means; `None` for an error that is the pass's own (retried as one).
pub fn failure(error: &SlurmError) -> Option<Failure> {
    match error {
        error if error.names_a_vanished_node() => Some(Failure::NodeVanished),
        // Before refusals: slurmrestd passes on a slurmctld it could not reach as an error list too.
        error if error.is_unanswered() => Some(Failure::InDoubt),
        SlurmError::Api { .. } | SlurmError::NotSubmitted(_) => Some(Failure::Refused),
        _ => None,
    }
}

/// Carries out what a failed submission for the pods of `keys` means (one pod, or every member of a
/// gang), saying it on `pod`, whose pass submitted; `job` names the job in a refusal. `None` for an
/// error that is the pass's own.
pub async fn not_submitted(
    pod: &WatchedPod,
    keys: &[PodKey],
    job: &str,
    error: &SlurmError,
    ctx: &Context,
) -> Result<Option<Action>, Error> {
    match failure(error) {
        Some(Failure::NodeVanished) => {
            tracing::debug!(pod = %pod.name_any(), %error, "a node named in the job vanished; trying again");
            Ok(Some(Action::requeue(RETRY)))
        }
        Some(Failure::InDoubt) => in_doubt(pod, keys, error, ctx).await.map(Some),
        Some(Failure::Refused) => {
            for key in keys {
                ctx.jobs.record_refusal(&key.uid);
            }
            let message = format!("Slurm refused {job}: {error}");
            conditions::waiting(ctx, pod, WaitReason::SlurmRejected, &message).await?;
            ctx.writer.event(pod, true, "FailedScheduling", "Schedule", message).await;
            Ok(Some(Action::requeue(RECHECK)))
        }
        None => Ok(None),
    }
}

/// The submission's answer was lost: Slurm may have made the job, so nothing is submitted again for
/// the pods of `keys` until a listing shows whether it did.
async fn in_doubt(pod: &WatchedPod, keys: &[PodKey], error: &SlurmError, ctx: &Context) -> Result<Action, Error> {
    for key in keys {
        ctx.jobs.record_in_doubt(&key.uid);
    }
    let message = format!("{error}; the pod waits for slurmrestd");
    conditions::waiting(ctx, pod, WaitReason::SlurmUnreachable, &message).await?;
    Ok(Action::requeue(RETRY))
}

/// What became of a pending job's excluded nodes.
#[derive(Debug, PartialEq, Eq)]
pub enum ExcludedNodes {
    /// In line with the pod's placement rules, updated to be, or to be looked at again next pass.
    Kept,
    /// They must change, and the job is an array's task still in the array's record, which cannot be
    /// updated without changing every task (see `Job::update_id`): the pod needs a job of its own.
    NeedsOwnJob,
}

/// Brings a pending job's excluded nodes in line with the pod's placement rules as they are now
/// (a Node tainted, labelled or added since the job was submitted).
pub async fn keep_placement(
    pod: &WatchedPod,
    placeholder: &Placeholder,
    ctx: &Context,
) -> Result<ExcludedNodes, Error> {
    // Taken before anything is read: a change published while this pass runs is checked again.
    let grounds = Grounds::of(pod, &placeholder.job, ctx.placement.published(), ctx.policies.job_mapper.revision());
    let uid = &placeholder.pod.uid;
    if ctx.placement_checks.is_current(uid, &grounds) {
        return Ok(ExcludedNodes::Kept);
    }
    // The policy's own exclusions are asked again: they are part of what the job must carry.
    let Ok(Mapped::Job(request)) = decide(pod, ctx).await else {
        return Ok(ExcludedNodes::Kept);
    };
    let Ok(verdict) = ctx.placement.verdict(pod_spec(pod)) else {
        return Ok(ExcludedNodes::Kept); // Slurm's nodes are not known now; the next pass looks again.
    };
    // A rule it cannot honour now leaves the job as it is: the pod says so when it is next placed.
    let PodPlacement::Verdict(verdict) = pod_rules::apply(verdict, pod, ctx) else {
        return Ok(ExcludedNodes::Kept);
    };
    let wanted = exclusions::wanted(&request.excluded_nodes, &verdict);
    if !exclusions::differs(&placeholder.job, &wanted, &verdict) {
        ctx.placement_checks.record(uid, &grounds);
        return Ok(ExcludedNodes::Kept);
    }
    let Some(job_id) = placeholder.job.update_id() else {
        return Ok(ExcludedNodes::NeedsOwnJob);
    };
    let excluded = compress_hostlist(&wanted);
    // Both name every Slurm node: not held while the update is awaited.
    drop((verdict, wanted));
    let update = JobUpdate { excluded_nodes: Some(excluded.clone()), ..Default::default() };
    match ctx.slurm.update_job(&job_id, &update).await {
        Ok(()) => {
            tracing::info!(job = job_id, excluded = %excluded.join(","), "placement rules changed: excluded nodes updated");
            // The job's listing changes with the update, and so do the grounds: the next pass checks
            // once more that Slurm took it.
            ctx.placement_checks.record(uid, &grounds);
        }
        // The job started or ended meanwhile, or a node vanished: the next pass sees the new state.
        Err(error @ SlurmError::Api { .. }) => {
            tracing::debug!(job = job_id, %error, "could not update the job's excluded nodes");
        }
        Err(error) => return Err(error.into()),
    }
    Ok(ExcludedNodes::Kept)
}

/// What the job-mapper policy and the namespace's grant make of a pod.
enum Mapped {
    Job(Box<JobRequest>),
    /// The policy refused the pod.
    Rejected(Rejection),
    /// The policy asked for more than the pod's namespace is granted.
    NotGranted(NotGranted),
    /// Which grant the namespace gets depends on labels not known yet.
    GrantUnknown,
}

/// The job request, or what to do when there is none.
pub async fn map(pod: &WatchedPod, ctx: &Context) -> Result<ControlFlow<Action, JobRequest>, Error> {
    let refused = |reason, message: String| async move {
        conditions::waiting(ctx, pod, reason, &message).await?;
        ctx.writer.event(pod, true, "FailedScheduling", "Schedule", format!("not submitted to Slurm: {message}")).await;
        Ok::<_, Error>(ControlFlow::Break(Action::await_change()))
    };
    match decide(pod, ctx).await {
        Ok(Mapped::Job(request)) => Ok(ControlFlow::Continue(*request)),
        Ok(Mapped::Rejected(rejection)) => {
            refused(WaitReason::PolicyRejected, format!("{}: {}", rejection.field, rejection.message)).await
        }
        Ok(Mapped::NotGranted(beyond)) => refused(WaitReason::NotGranted, beyond.to_string()).await,
        Ok(Mapped::GrantUnknown) => {
            let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
            let message = format!("namespace {namespace} is not listed yet: its labels choose its grant");
            conditions::waiting(ctx, pod, WaitReason::GrantUnknown, &message).await?;
            // The watch of namespaces lists it in a moment (or keeps failing, and this says so).
            Ok(ControlFlow::Break(Action::requeue(RETRY)))
        }
        Err(error) => {
            let message = format!("the job-mapper policy failed: {error}");
            conditions::waiting(ctx, pod, WaitReason::PolicyFailed, &message).await?;
            ctx.writer.event(pod, true, "FailedScheduling", "Schedule", message).await;
            Ok(ControlFlow::Break(Action::requeue(RECHECK)))
        }
    }
}

async fn decide(pod: &WatchedPod, ctx: &Context) -> Result<Mapped, PolicyError> {
    let input = MapPodInput { pod: pod_record::pod_record(pod), cluster: ctx.cluster.clone() };
    let mapping = crate::decisions::off_io(|| ctx.policies.job_mapper.decide(&input)).await?;
    Ok(match mapping {
        Mapping::Reject(rejection) => Mapped::Rejected(rejection),
        Mapping::Job(request) if ctx.grants.trust_annotations() => Mapped::Job(Box::new(request)),
        Mapping::Job(request) => match ctx.grants.of(&input.pod.namespace) {
            None => Mapped::GrantUnknown,
            Some(grant) => match tenancy::enforce(request, &input.pod, &input.cluster, grant) {
                Ok(request) => Mapped::Job(Box::new(request)),
                Err(beyond) => Mapped::NotGranted(beyond),
            },
        },
    })
}

/// Where the pod may go, or what to do when nowhere (a Node change brings it back).
async fn placement(pod: &WatchedPod, ctx: &Context) -> Result<ControlFlow<Action, Arc<Verdict>>, Error> {
    let verdict = ctx.placement.verdict(pod_spec(pod)).map(|verdict| pod_rules::apply(verdict, pod, ctx));
    match verdict {
        Ok(PodPlacement::Verdict(verdict)) if !verdict.eligible.is_empty() => Ok(ControlFlow::Continue(verdict)),
        Ok(PodPlacement::Verdict(verdict)) => {
            let message = verdict.nothing_fits();
            conditions::waiting(ctx, pod, WaitReason::Unschedulable, &message).await?;
            ctx.writer.event(pod, true, "FailedScheduling", "Schedule", message).await;
            Ok(ControlFlow::Break(Action::requeue(RECHECK)))
        }
        // A claim bound meanwhile brings the pod back at once (`volume_stores`).
        Ok(PodPlacement::Waits(reason, message)) => {
            conditions::failing(ctx, pod, reason, &message, "FailedScheduling").await?;
            Ok(ControlFlow::Break(Action::requeue(RECHECK)))
        }
        Err(unreadable) => {
            let message = format!("cannot read Slurm's nodes ({unreadable}); the pod waits for slurmrestd");
            conditions::waiting(ctx, pod, WaitReason::SlurmUnreachable, &message).await?;
            Ok(ControlFlow::Break(Action::requeue(UNREADABLE_RECHECK)))
        }
    }
}

pub(super) fn pod_spec(pod: &WatchedPod) -> &PodNeeds {
    static EMPTY: std::sync::OnceLock<PodNeeds> = std::sync::OnceLock::new();
    pod.spec.as_ref().unwrap_or_else(|| EMPTY.get_or_init(Default::default))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::slurm::ApiMessage;

    fn answered(error_number: i64) -> SlurmError {
        let errors = vec![ApiMessage { error_number, ..Default::default() }];
        SlurmError::Api { what: "job submission", status: 500, errors }
    }

    #[test]
    fn what_a_failed_submission_means() {
        let rows = [
            ("a node it names was deleted", answered(2018), Some(Failure::NodeVanished)),
            ("slurmrestd lost slurmctld (ECONNRESET)", answered(104), Some(Failure::InDoubt)),
            (
                "no answer in time",
                SlurmError::NoAnswer("job submission", Duration::from_secs(5)),
                Some(Failure::InDoubt),
            ),
            ("Slurm refused it", answered(2050), Some(Failure::Refused)),
            ("slurmrestd did not submit it", SlurmError::NotSubmitted(vec![]), Some(Failure::Refused)),
            ("never sent", SlurmError::Withheld("not the leader"), None),
        ];
        for (name, error, expected) in rows {
            assert_eq!(failure(&error), expected, "{name}");
        }
    }
}
