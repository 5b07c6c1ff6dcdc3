//! Carries out a submission: a pod's job with the pods waiting beside it, as an array's task, or
//! alone (a gang's job, too), then as an immediate allocation first where the fast path applies and
//! no burst is on, else as a queued job. What Slurm made of it is recorded in the job cache and
//! answered as a [`Submitted`], from which `submit::answered` decides what the pod is told.

use super::super::batch::{TimedTurn, Turn};
use super::super::context::Context;
use super::super::fast_path::{self, AllocateAs, Allocation};
use super::super::link::PodKey;
use super::super::placeholder::Placeholder;
use super::super::submit::{Submission, Submitted};
use crate::failpoint;
use crate::slurm::{Job, JobDescription, NoValue};

/// Submits the job as `submission` says, and records what Slurm made of it for each of its pods.
pub async fn submit(ctx: &Context, submission: Submission) -> Submitted {
    let Submission { pods, description, alone, at_once } = submission;
    match (alone, pods.as_slice()) {
        (false, [key]) => with_the_batch(ctx, key.clone(), description, at_once).await,
        _ => submit_alone(ctx, &pods, description, at_once, None).await,
    }
}

/// One pod's job, with the pods waiting beside it as an array, or alone when none is.
async fn with_the_batch(
    ctx: &Context,
    key: PodKey,
    description: JobDescription,
    at_once: Option<AllocateAs>,
) -> Submitted {
    match ctx.batches.join(ctx.slurm.as_ref(), key.clone(), description.clone()).await {
        Turn::Alone(turn) => submit_alone(ctx, &[key], description, at_once, Some(turn)).await,
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
            Submitted::Queued(target)
        }
        Turn::Task(Err(error)) => Submitted::ArrayFailed(error),
    }
}

/// A job submitted on its own: for one pod, an immediate allocation first (with the fast path),
/// else a queued job. Its `turn` ends once Slurm has answered: the pods waiting behind it need not
/// wait for what the pass writes to the API server next.
async fn submit_alone(
    ctx: &Context,
    pods: &[PodKey],
    description: JobDescription,
    at_once: Option<AllocateAs>,
    mut turn: Option<TimedTurn>,
) -> Submitted {
    if let (Some(who), [key]) = (at_once.filter(|_| !ctx.batches.in_burst()), pods) {
        let allocation = fast_path::allocate(ctx, &description, who).await;
        if !matches!(allocation, Allocation::Refused) {
            drop(turn.take());
        }
        match allocation {
            Allocation::Running(job) => {
                tracing::info!(job = job.job_id, pod = %description.name, nodes = %job.nodes, "allocated at once");
                ctx.jobs.record_job(key.clone(), (*job).clone());
                failpoint::hit("after-submit");
                return Submitted::Allocated(Box::new(Placeholder { pod: key.clone(), job: *job }));
            }
            Allocation::Granted(job_id, request) => {
                ctx.jobs.record_submitted(key.clone(), job_id, &request);
                return Submitted::Granted;
            }
            Allocation::InDoubt(error) => return Submitted::InDoubt(error),
            Allocation::Refused => {}
        }
    }
    let answer = ctx.slurm.submit(&description).await;
    drop(turn);
    match answer {
        Ok(job_id) => {
            for key in pods {
                ctx.jobs.record_submitted(key.clone(), job_id, &description);
            }
            failpoint::hit("after-submit");
            tracing::info!(job = job_id, pod = %description.name, "submitted placeholder");
            Submitted::Queued(job_id.to_string())
        }
        Err(error) => Submitted::Failed(error),
    }
}
