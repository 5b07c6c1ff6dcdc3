//! Carries out a pod's submission: with the pods waiting beside it as an array's task, or alone,
//! then as an immediate allocation first where the fast path applies and no burst is on, else as a
//! queued job. What Slurm made of it is recorded in the job cache and answered as a [`Submitted`],
//! from which `submit::answered` decides what the pod is told.

use super::super::batch::{TimedTurn, Turn};
use super::super::context::Context;
use super::super::fast_path::{self, AllocateAs, Allocation};
use super::super::link::PodKey;
use super::super::placeholder::Placeholder;
use super::super::submit::{Submission, Submitted};
use crate::failpoint;
use crate::slurm::{Job, JobDescription, NoValue};

/// Submits the pod's job as `submission` says, and records what Slurm made of it.
pub async fn submit(ctx: &Context, submission: Submission) -> Submitted {
    let Submission { key, description, alone, at_once } = submission;
    if alone {
        return submit_alone(ctx, key, description, at_once, None).await;
    }
    match ctx.batches.join(ctx.slurm.as_ref(), key.clone(), description.clone()).await {
        Turn::Alone(turn) => submit_alone(ctx, key, description, at_once, Some(turn)).await,
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

/// A pod submitted on its own: an immediate allocation first (with the fast path), else a queued job.
/// Its `turn` ends once Slurm has answered: the pods waiting behind it need not wait for what the pass
/// writes to the API server next.
async fn submit_alone(
    ctx: &Context,
    key: PodKey,
    description: JobDescription,
    at_once: Option<AllocateAs>,
    mut turn: Option<TimedTurn>,
) -> Submitted {
    if let Some(who) = at_once.filter(|_| !ctx.batches.in_burst()) {
        let allocation = fast_path::allocate(ctx, &description, who).await;
        if !matches!(allocation, Allocation::Refused) {
            drop(turn.take());
        }
        match allocation {
            Allocation::Running(job) => {
                tracing::info!(job = job.job_id, pod = %description.name, nodes = %job.nodes, "allocated at once");
                ctx.jobs.record_job(key.clone(), (*job).clone());
                failpoint::hit("after-submit");
                return Submitted::Allocated(Box::new(Placeholder { pod: key, job: *job }));
            }
            Allocation::Granted(job_id, request) => {
                ctx.jobs.record_submitted(key, job_id, &request);
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
            ctx.jobs.record_submitted(key, job_id, &description);
            failpoint::hit("after-submit");
            tracing::info!(job = job_id, pod = %description.name, "submitted placeholder");
            Submitted::Queued(job_id.to_string())
        }
        Err(error) => Submitted::Failed(error),
    }
}
