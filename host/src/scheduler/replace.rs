//! A job replaced by a new one: the pod's job runs where the pod may not (a taint or label that came
//! since, a neighbour its rules refuse), or its exclusions must change and it cannot carry them. The
//! job is cancelled and the pod, still Pending, gets a new job.

use super::context::Context;
use super::executor;
use super::link;
use super::placeholder::Placeholder;
use super::step::{Again, Plan, Step};
use super::submit;
use super::timing::RETRY;
use super::watched_pod::WatchedPod;
use crate::error::Error;

/// Cancels the pod's job for a new one, saying why in `note`.
pub async fn replace(
    pod: &WatchedPod,
    placeholder: &Placeholder,
    ctx: &Context,
    note: String,
) -> Result<Plan<'static>, Error> {
    match cancel(placeholder, ctx, note).await? {
        Replaced::LookAgain(plan) => Ok(plan),
        Replaced::SubmitNow(replaced) => {
            // Said before the submission: should it fail, the pod still tells why its job went.
            executor::take_all(ctx, pod, vec![replaced]).await?;
            submit::submit(pod, placeholder.pod.clone(), ctx).await
        }
    }
}

/// Cancels a job Slurm placed where the pod may not run; the pod stays Pending and gets a new job
/// that excludes the node. The job is marked first, so that a restart between the two steps still
/// knows the cancelled job was replaced rather than ended.
///
/// slurmctld refuses to update a job whose excluded nodes name a node deleted since, and an array's
/// task whose record is still the array's cannot be updated alone (see `Job::update_id`): such a
/// job cannot be marked in Slurm, so the host keeps the mark (`JobCache::record_replaced`) and submits
/// its successor in the same pass. A successor not submitted (no node fits the pod any more) leaves
/// the pod waiting; a host restarted before the successor is submitted reads a cancelled job, and
/// deletes the pod for its owner to recreate.
async fn cancel(placeholder: &Placeholder, ctx: &Context, note: String) -> Result<Replaced, Error> {
    let marked = executor::cancel_as_replaced(ctx, placeholder).await?;
    tracing::info!(pod = %placeholder.pod.name, "{note}");
    let replaced = Step::Event { warning: true, reason: "SlurmJobReplaced", action: "Schedule", note };
    if marked || link::is_gang(&placeholder.job) {
        return Ok(Replaced::LookAgain(Plan { steps: vec![replaced], again: Again::After(RETRY) }));
    }
    Ok(Replaced::SubmitNow(replaced))
}

/// What follows a replaced job: the pod's Event saying so, and then
enum Replaced {
    /// the pod's next pass submits its new job (the old one is marked as replaced);
    LookAgain(Plan<'static>),
    /// or the old job could not be marked in Slurm: its successor is submitted in this pass, the
    /// sooner to leave nothing that a restarted host would read as the pod's end.
    SubmitNow(Step<'static>),
}
