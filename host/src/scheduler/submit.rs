//! A pod's placeholder job: asked of the job-mapper policy, limited by the pod's placement rules,
//! submitted once, and kept in step with those rules while it waits.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::runtime::controller::Action;

use super::fast_path::{self, Allocation};
use super::job_cache::Placeholder;
use super::placeholder::{self, PodKey};
use super::placement::Verdict;
use super::reconcile::{RECHECK, RETRY};
use super::{Context, Error, bind, conditions, exclusions, pod_record};
use crate::failpoint;
use crate::policy::worlds::MapPodInput;
use crate::policy::{JobRequest, Mapping, PolicyError};
use crate::slurm::{JobUpdate, SlurmError};

/// How soon a pod looks again when Slurm's nodes could not be read.
const UNREADABLE_RECHECK: Duration = Duration::from_millis(500);

/// ESLURM_INVALID_NODE_NAME: a node named in the job vanished since the last listing.
pub const INVALID_NODE_NAME: i64 = 2018;

pub async fn submit(pod: &Pod, key: PodKey, ctx: &Context) -> Result<Action, Error> {
    let mut request = match map(pod, ctx).await? {
        Ok(request) => request,
        Err(action) => return Ok(action),
    };
    let verdict = match placement(pod, ctx).await? {
        Ok(verdict) => verdict,
        Err(action) => return Ok(action),
    };
    request.excluded_nodes = exclusions::wanted(&request.excluded_nodes, &verdict);
    let description = placeholder::job_description(&key, request);
    if ctx.fast_path {
        match fast_path::allocate(ctx, &description).await {
            Allocation::Running(job) => {
                tracing::info!(job = job.job_id, pod = %description.name, nodes = %job.nodes, "allocated at once");
                ctx.jobs.record_job(key.clone(), (*job).clone());
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
            Allocation::InDoubt(error) => {
                ctx.jobs.record_in_doubt(&key.uid);
                let message = format!("{error}; the pod waits for slurmrestd");
                conditions::waiting(ctx, pod, conditions::SLURM_UNREACHABLE, &message).await?;
                return Ok(Action::requeue(RETRY));
            }
            Allocation::Refused => {}
        }
    }
    let job_id = match ctx.slurm.submit(&description).await {
        Ok(job_id) => job_id,
        Err(error) if names_a_vanished_node(&error) => {
            tracing::info!(pod = %description.name, %error, "a node named in the job vanished; trying again");
            return Ok(Action::requeue(RETRY));
        }
        Err(error @ SlurmError::Api { .. } | error @ SlurmError::NotSubmitted(_)) => {
            ctx.jobs.record_refusal(&key.uid);
            let message = format!("Slurm refused the job: {error}");
            conditions::waiting(ctx, pod, conditions::SLURM_REJECTED, &message).await?;
            ctx.writer.event(pod, true, "FailedScheduling", "Schedule", message).await;
            return Ok(Action::requeue(RECHECK));
        }
        Err(error @ SlurmError::Http(_)) => {
            ctx.jobs.record_in_doubt(&key.uid);
            let message = format!("{error}; the pod waits for slurmrestd");
            conditions::waiting(ctx, pod, conditions::SLURM_UNREACHABLE, &message).await?;
            return Ok(Action::requeue(RETRY));
        }
        Err(error) => return Err(error.into()),
    };
    ctx.jobs.record_submitted(key, job_id, &description);
    failpoint::hit("after-submit");
    tracing::info!(job = job_id, pod = %description.name, "submitted placeholder");
    ctx.writer.event(pod, false, "SlurmJobSubmitted", "Schedule", format!("submitted as Slurm job {job_id}")).await;
    let message = format!("waiting for Slurm: job {job_id} submitted");
    conditions::waiting(ctx, pod, conditions::UNSCHEDULABLE, &message).await?;
    Ok(Action::requeue(RECHECK))
}

/// Brings a pending job's excluded nodes in line with the pod's placement rules as they are now
/// (a Node tainted, labelled or added since the job was submitted).
pub async fn keep_placement(pod: &Pod, placeholder: &Placeholder, ctx: &Context) -> Result<(), Error> {
    let Ok(verdict) = ctx.placement.verdict(pod_spec(pod)) else {
        return Ok(()); // Slurm's nodes are not known now; the next pass looks again.
    };
    // The policy's own exclusions are asked again: they are part of what the job must carry.
    let Ok(Mapping::Job(request)) = decide(pod, ctx) else {
        return Ok(());
    };
    let wanted = exclusions::wanted(&request.excluded_nodes, &verdict);
    if !exclusions::differs(&placeholder.job, &wanted, &verdict) {
        return Ok(());
    }
    let job_id = placeholder.job.job_id;
    let update = JobUpdate { excluded_nodes: Some(wanted.clone()), ..Default::default() };
    match ctx.slurm.update_job(job_id, &update).await {
        Ok(()) => {
            tracing::info!(job = job_id, excluded = %wanted.join(","), "placement rules changed: excluded nodes updated");
            Ok(())
        }
        // The job started or ended meanwhile, or a node vanished: the next pass sees the new state.
        Err(error @ SlurmError::Api { .. }) => {
            tracing::info!(job = job_id, %error, "could not update the job's excluded nodes");
            Ok(())
        }
        Err(error) => Err(error.into()),
    }
}

/// The policy's job request, or what to do when there is none.
pub async fn map(pod: &Pod, ctx: &Context) -> Result<Result<JobRequest, Action>, Error> {
    match decide(pod, ctx) {
        Ok(Mapping::Job(request)) => Ok(Ok(request)),
        Ok(Mapping::Reject(rejection)) => {
            let message = format!("{}: {}", rejection.field, rejection.message);
            conditions::waiting(ctx, pod, conditions::POLICY_REJECTED, &message).await?;
            ctx.writer
                .event(pod, true, "FailedScheduling", "Schedule", format!("not submitted to Slurm: {message}"))
                .await;
            Ok(Err(Action::await_change()))
        }
        Err(error) => {
            let message = format!("the job-mapper policy failed: {error}");
            conditions::waiting(ctx, pod, conditions::POLICY_FAILED, &message).await?;
            ctx.writer.event(pod, true, "FailedScheduling", "Schedule", message).await;
            Ok(Err(Action::requeue(RECHECK)))
        }
    }
}

fn decide(pod: &Pod, ctx: &Context) -> Result<Mapping, PolicyError> {
    let input = MapPodInput { pod: pod_record::pod_record(pod), cluster: ctx.cluster.clone() };
    // A decision may compute for up to its time budget: keep it off the threads that drive I/O.
    tokio::task::block_in_place(|| ctx.policies.job_mapper.decide(&input))
}

/// Where the pod may go, or what to do when nowhere (a Node change brings it back).
async fn placement(pod: &Pod, ctx: &Context) -> Result<Result<Verdict, Action>, Error> {
    match ctx.placement.verdict(pod_spec(pod)) {
        Ok(verdict) if !verdict.eligible.is_empty() => Ok(Ok(verdict)),
        Ok(verdict) => {
            let message = verdict.nothing_fits();
            conditions::waiting(ctx, pod, conditions::UNSCHEDULABLE, &message).await?;
            ctx.writer.event(pod, true, "FailedScheduling", "Schedule", message).await;
            Ok(Err(Action::requeue(RECHECK)))
        }
        Err(unreadable) => {
            let message = format!("cannot read Slurm's nodes ({unreadable}); the pod waits for slurmrestd");
            conditions::waiting(ctx, pod, conditions::SLURM_UNREACHABLE, &message).await?;
            // Usually a moment (the first listing after a start, one failed poll): look again soon.
            Ok(Err(Action::requeue(UNREADABLE_RECHECK)))
        }
    }
}

pub fn names_a_vanished_node(error: &SlurmError) -> bool {
    match error {
        SlurmError::Api { errors, .. } | SlurmError::NotSubmitted(errors) => {
            errors.iter().any(|e| e.error_number == INVALID_NODE_NAME)
        }
        _ => false,
    }
}

pub(super) fn pod_spec(pod: &Pod) -> &k8s_openapi::api::core::v1::PodSpec {
    static EMPTY: std::sync::OnceLock<k8s_openapi::api::core::v1::PodSpec> = std::sync::OnceLock::new();
    pod.spec.as_ref().unwrap_or_else(|| EMPTY.get_or_init(Default::default))
}
