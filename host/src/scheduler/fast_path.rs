//! Instant placement: with free capacity, a pod's job is an immediate allocation (`job/allocate`
//! with `immediate`, as `salloc --immediate`), RUNNING when the call returns, so the pod is bound in
//! milliseconds instead of at slurmctld's next scheduling pass. Slurm grants an immediate allocation
//! only to a job that could start now and is the top priority of its partition, so it never jumps
//! ahead of higher-priority pending work; when it is refused, the queued batch placeholder is used.
//! A pod that pod-level rules concern is left to the queue (`pod_rules::concern`), and so is a pod that
//! comes while a burst is on (`batch::Batches::in_burst`).
//!
//! The allocation carries the same admin comment as a placeholder, so everything else (binding,
//! cancelling, restarts) treats it the same. It runs no script and holds its node until cancelled or
//! out of time; slurm.conf's `InactiveLimit` must stay 0 (the default), or Slurm ends allocations
//! whose allocating client does not answer.
//!
//! A placeholder that runs as its namespace's grant is allocated as that user: the host's token names
//! the grant's uid (`X-SLURM-USER-NAME`, which slurmctld takes from root or SlurmUser), so the job is
//! the tenant's in Slurm's accounting and limits, not the host's. Such a request may not set
//! `admin_comment`, so the link travels sealed in `comment` (`link::Seal`) and the host writes the
//! admin link right after: a host killed between the two finds the job by its seal on restart
//! (`job_cache`) and writes the link then (`Step::WriteLink`), so the pod gets neither a second job
//! nor an orphan. slurmctld runs an allocation as the user it resolves the uid to, and a uid it
//! cannot resolve as its nobody (99): the job's uid and gid are checked, and a job that runs as
//! anyone else is cancelled and the pod queued as before.

use super::context::Context;
use super::link;
use crate::failpoint;
use crate::slurm::{Job, JobDescription, JobState, JobUpdate, SlurmError};

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

/// Whom an immediate allocation runs as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AllocateAs {
    /// The host's Slurm user: a placeholder that names no user (`tenancy.trustAnnotations`).
    Host,
    /// The grant's user and group, sealing the link for the tenant-writable comment.
    Tenant { uid: u32, gid: u32 },
}

/// Whom `placeholder` may be allocated as at once, if anyone: a tenant only where links can be sealed.
pub fn allocate_as(placeholder: &JobDescription, can_seal: bool) -> Option<AllocateAs> {
    let id = |field: &Option<String>| field.as_deref().map(str::parse::<u32>);
    match (id(&placeholder.user_id), id(&placeholder.group_id)) {
        (None, None) => Some(AllocateAs::Host),
        (Some(Ok(uid)), Some(Ok(gid))) if can_seal => Some(AllocateAs::Tenant { uid, gid }),
        _ => None,
    }
}

pub async fn allocate(ctx: &Context, placeholder: &JobDescription, who: AllocateAs) -> Allocation {
    let admin_link = placeholder.admin_comment.as_deref().map(link::attempt);
    let request = JobDescription { script: String::new(), immediate: Some(true), ..placeholder.clone() };
    let asked = match who {
        AllocateAs::Host => {
            let request = JobDescription { admin_comment: admin_link.clone(), ..request };
            ctx.slurm.allocate(&request).await.map(|job_id| (job_id, request))
        }
        AllocateAs::Tenant { uid, .. } => {
            let sealed = admin_link.as_deref().and_then(|link| ctx.installation.seal().seal(link, uid));
            // The job-mapper's comment rides after the seal, for a host that writes the link later.
            let sealed = sealed.map(|sealed| format!("{sealed}{}", placeholder.comment.as_deref().unwrap_or_default()));
            let request = JobDescription { admin_comment: None, comment: sealed, ..request };
            ctx.slurm.allocate_as(&request, uid).await.map(|job_id| (job_id, request))
        }
    };
    let (job_id, request) = match asked {
        Ok(granted) => granted,
        Err(error) if error.is_unanswered() => return Allocation::InDoubt(error),
        Err(error) => {
            tracing::debug!(%error, job = %placeholder.name, "no immediate allocation; queueing a placeholder");
            return Allocation::Refused;
        }
    };
    let listed = ctx.slurm.job(&job_id).await;
    if let AllocateAs::Tenant { uid, gid } = who {
        failpoint::hit("after-allocate");
        return as_tenant(ctx, job_id, listed, (uid, gid), admin_link, placeholder.comment.clone()).await;
    }
    match listed {
        Ok(Some(job)) if job.state() == JobState::Running && !job.nodes.is_empty() => {
            Allocation::Running(Box::new(job))
        }
        _ => Allocation::Granted(job_id, Box::new(request)),
    }
}

/// A tenant's allocation: checked to run as `ids`, then linked by the administrator's `admin_comment`
/// and its policy's `comment` given back.
async fn as_tenant(
    ctx: &Context,
    job_id: u32,
    listed: Result<Option<Job>, SlurmError>,
    ids: (u32, u32),
    admin_link: Option<String>,
    comment: Option<String>,
) -> Allocation {
    let job = match listed {
        Ok(Some(job)) if (job.user_id, job.group_id) == (Some(ids.0), Some(ids.1)) => job,
        Ok(Some(job)) => {
            tracing::warn!(
                job = job_id, wanted = ?ids, runs_as = ?(job.user_id, job.group_id),
                "slurmctld ran the allocation as another user (the uid does not resolve where it runs, or its \
                 primary group is not the grant's); cancelled it, and the pod is queued"
            );
            if let Err(error) = ctx.slurm.cancel(&job_id).await {
                tracing::error!(job = job_id, %error, "could not cancel an allocation made as the wrong user");
            }
            return Allocation::Refused;
        }
        // Not described: its seal links it once a listing shows it.
        _ => {
            return Allocation::Granted(
                job_id,
                Box::new(JobDescription { admin_comment: admin_link, ..Default::default() }),
            );
        }
    };
    let update = JobUpdate {
        admin_comment: admin_link.clone(),
        comment: Some(comment.clone().unwrap_or_default()),
        ..Default::default()
    };
    if let Err(error) = ctx.slurm.update_job(&job_id, &update).await {
        // Still sealed: the next pass over the pod writes the link (`Step::WriteLink`).
        tracing::warn!(job = job_id, %error, "could not write an allocation's admin link yet");
        return Allocation::Running(Box::new(job));
    }
    let linked =
        Job { admin_comment: admin_link.unwrap_or_default().into(), comment: comment.unwrap_or_default(), ..job };
    match linked.state() == JobState::Running && !linked.nodes.is_empty() {
        true => Allocation::Running(Box::new(linked)),
        false => Allocation::Granted(
            job_id,
            Box::new(JobDescription { admin_comment: Some(linked.admin_comment.to_string()), ..Default::default() }),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_placeholder_is_allocated_as_the_host_or_as_its_grant_where_links_can_be_sealed() {
        let trusted = JobDescription { name: "ml/a".into(), ..Default::default() };
        let granted = JobDescription { user_id: Some("1000".into()), group_id: Some("1001".into()), ..trusted.clone() };
        let half = JobDescription { user_id: Some("1000".into()), ..trusted.clone() };
        let rows = [
            ("no user named", &trusted, true, Some(AllocateAs::Host)),
            ("a grant's user, sealed", &granted, true, Some(AllocateAs::Tenant { uid: 1000, gid: 1001 })),
            ("a grant's user, no seal", &granted, false, None),
            ("a user without a group", &half, true, None),
        ];
        for (name, placeholder, can_seal, expected) in rows {
            assert_eq!(allocate_as(placeholder, can_seal), expected, "{name}");
        }
    }
}
