//! Instant placement: with free capacity, a pod's job is an immediate allocation (`job/allocate`
//! with `immediate`, as `salloc --immediate`), RUNNING when the call returns, so the pod is bound in
//! milliseconds instead of at slurmctld's next scheduling pass. Slurm grants an immediate allocation
//! only to a job that could start now and is the top priority of its partition, so it never jumps
//! ahead of higher-priority pending work; when it is refused, the queued batch placeholder is used.
//!
//! The allocation carries the same admin comment as a placeholder, so everything else (binding,
//! cancelling, restarts) treats it the same. It runs no script and holds its node until cancelled or
//! out of time; slurm.conf's `InactiveLimit` must stay 0 (the default), or Slurm ends allocations
//! whose allocating client does not answer.
//!
//! slurmrestd's `job/allocate` makes every allocation its caller's (the host's Slurm user), whatever
//! user id the request names (checked on 26.05.5), so only a placeholder that names no user, as with
//! `tenancy.trustAnnotations`, may take this path; one that runs as its namespace's grant is queued.

use super::context::Context;
use crate::slurm::{Job, JobDescription, JobState, SlurmError};

/// What an immediate allocation came to.
pub enum Allocation {
    /// Granted, and Slurm lists it running on its node.
    Running(Box<Job>),
    /// Granted, but not yet described: treat as submitted (with this admin comment).
    Granted(u32, Box<JobDescription>),
    /// Slurm said no (no room now, or a higher-priority job waits): queue a placeholder instead.
    Refused,
    /// The answer was lost: Slurm may have granted it.
    InDoubt(SlurmError),
}

/// Whether `placeholder` may be an immediate allocation: it would run as the host's Slurm user.
pub fn applies_to(placeholder: &JobDescription) -> bool {
    placeholder.user_id.is_none() && placeholder.group_id.is_none()
}

pub async fn allocate(ctx: &Context, placeholder: &JobDescription) -> Allocation {
    let request = JobDescription {
        script: String::new(),
        immediate: Some(true),
        admin_comment: placeholder.admin_comment.as_deref().map(super::link::attempt),
        ..placeholder.clone()
    };
    let job_id = match ctx.slurm.allocate(&request).await {
        Ok(job_id) => job_id,
        Err(error) if error.is_unanswered() => return Allocation::InDoubt(error),
        Err(error) => {
            tracing::debug!(%error, job = %placeholder.name, "no immediate allocation; queueing a placeholder");
            return Allocation::Refused;
        }
    };
    match ctx.slurm.job(&job_id).await {
        Ok(Some(job)) if job.state() == JobState::Running && !job.nodes.is_empty() => {
            Allocation::Running(Box::new(job))
        }
        _ => Allocation::Granted(job_id, Box::new(request)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_placeholder_that_names_no_user_may_be_allocated_at_once() {
        let trusted = JobDescription { name: "ml/a".into(), ..Default::default() };
        assert!(applies_to(&trusted));
        let granted = JobDescription { user_id: Some("65534".into()), group_id: Some("65534".into()), ..trusted };
        assert!(!applies_to(&granted), "job/allocate would run it as the host's Slurm user");
    }
}
