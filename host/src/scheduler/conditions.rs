//! The reasons sunk gives on a pod's `PodScheduled=False` condition, and what each is counted as.
//!
//! `Unschedulable` is the reason cluster-autoscaler and Kueue read: it means more capacity would
//! let the pod run (Slurm waits for resources, or no node fits the pod's placement rules). Every
//! other reason is sunk's own, so nothing scales up for a pod that waits on its owner or on Slurm.

use k8s_openapi::api::core::v1::PodCondition;

use super::metrics::AttemptResult;
use crate::slurm::Job;

/// Why a pod is not scheduled: the reason its `PodScheduled=False` condition gives, and what the
/// attempt is counted as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitReason {
    /// Waiting for capacity: Slurm has no room yet, or no node fits the pod's placement rules.
    Unschedulable,
    /// Waiting in Slurm for something more nodes would not change (a limit, a dependency).
    SlurmJobPending,
    /// Slurm holds the job until someone releases it (e.g. slurmctld knows no user with its uid).
    SlurmHeld,
    /// The job-mapper policy refused the pod (bad input): its owner must fix it.
    PolicyRejected,
    /// The pod asks for more in Slurm than its namespace is granted: its owner (or the operator's
    /// grant) must change.
    NotGranted,
    /// Which grant the pod's namespace gets depends on its labels, not known yet; retried.
    GrantUnknown,
    /// The job-mapper policy failed; retried.
    PolicyFailed,
    /// Slurm refused the job at submission.
    SlurmRejected,
    /// The job failed before it ever ran (e.g. a constraint no node can meet).
    SlurmJobFailed,
    /// slurmrestd cannot be reached (or Slurm's lists are stale): the pod waits for it.
    SlurmUnreachable,
    /// The job runs on a Slurm node no known slurmd pod hosts; retried.
    SlurmNodeUnknown,
    /// Slurm placed the pod on a Node another pod is still leaving, and the kubelet would refuse it
    /// until that pod is gone.
    PreviousPodLeaving,
    /// The pod carries a placement rule sunk cannot honour (named): its owner must change it.
    Unsupported,
    /// A claimed volume is not ready for the pod (its claim missing or not bound yet): it waits for
    /// it, as kube-scheduler's pods do; no more capacity would change that.
    VolumeNotReady,
    /// The pod's group does not have all its pods yet: no job is asked for until it has.
    GroupIncomplete,
    /// The group's size cannot be read (bad input: its owner must fix it).
    GroupInvalid,
    /// More pods carry the group label than the group's size: the extra ones wait.
    GroupFull,
}

impl WaitReason {
    /// The condition's `reason`, as users, autoscalers and the tests read it.
    pub fn condition_reason(self) -> &'static str {
        match self {
            WaitReason::Unschedulable => "Unschedulable",
            WaitReason::SlurmJobPending => "SlurmJobPending",
            WaitReason::SlurmHeld => "SlurmHeld",
            WaitReason::PolicyRejected => "PolicyRejected",
            WaitReason::NotGranted => "NotGranted",
            WaitReason::GrantUnknown => "GrantUnknown",
            WaitReason::PolicyFailed => "PolicyFailed",
            WaitReason::SlurmRejected => "SlurmRejected",
            WaitReason::SlurmJobFailed => "SlurmJobFailed",
            WaitReason::SlurmUnreachable => "SlurmUnreachable",
            WaitReason::SlurmNodeUnknown => "SlurmNodeUnknown",
            WaitReason::PreviousPodLeaving => "PreviousPodLeaving",
            WaitReason::GroupIncomplete => "PodGroupIncomplete",
            WaitReason::GroupInvalid => "PodGroupInvalid",
            WaitReason::GroupFull => "PodGroupFull",
            WaitReason::Unsupported => "Unsupported",
            WaitReason::VolumeNotReady => "VolumeNotReady",
        }
    }

    /// What an attempt that ends here is counted as in `sunk_scheduler_schedule_attempts_total`.
    pub fn attempt_result(self) -> AttemptResult {
        match self {
            WaitReason::Unschedulable
            | WaitReason::SlurmJobPending
            | WaitReason::PreviousPodLeaving
            | WaitReason::VolumeNotReady => AttemptResult::unschedulable,
            WaitReason::PolicyRejected
            | WaitReason::NotGranted
            | WaitReason::SlurmRejected
            | WaitReason::SlurmJobFailed
            | WaitReason::GroupInvalid
            | WaitReason::Unsupported => AttemptResult::rejected,
            WaitReason::GroupIncomplete | WaitReason::GroupFull => AttemptResult::waiting_for_group,
            WaitReason::PolicyFailed
            | WaitReason::SlurmHeld
            | WaitReason::GrantUnknown
            | WaitReason::SlurmUnreachable
            | WaitReason::SlurmNodeUnknown => AttemptResult::error,
        }
    }
}

/// The wait reason for a job Slurm keeps pending with `slurm_reason`.
pub fn pending_reason(slurm_reason: &str) -> WaitReason {
    // Not yet looked at, waiting for nodes, behind higher priority work, or its nodes unavailable.
    let capacity = matches!(slurm_reason, "" | "None" | "Resources" | "Priority" | "NodeDown" | "Nodes_required")
        || slurm_reason.starts_with("ReqNodeNotAvail");
    if capacity { WaitReason::Unschedulable } else { WaitReason::SlurmJobPending }
}

/// `12 (PENDING: Resources)`: the job, its state and Slurm's reason when it gives one, as a pod's
/// condition and Events name a job.
pub fn describe(job: &Job) -> String {
    match job.state_reason.as_str() {
        "" | "None" => format!("{} ({})", job.target(), job.state_name()),
        reason => format!("{} ({}: {reason})", job.target(), job.state_name()),
    }
}

/// Whether the pod's `PodScheduled` condition already says it waits for `reason`, in these words (as
/// written: on one line).
pub fn says_already(current: Option<&PodCondition>, reason: WaitReason, message: &str) -> bool {
    current.is_some_and(|condition| {
        condition.status == "False"
            && condition.reason.as_deref() == Some(reason.condition_reason())
            && condition.message.as_deref() == Some(crate::kube::one_line(message).as_str())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_capacity_waits_are_unschedulable() {
        for reason in ["Resources", "Priority", "None", "", "ReqNodeNotAvail, UnavailableNodes:n1"] {
            assert_eq!(pending_reason(reason), WaitReason::Unschedulable, "{reason}");
        }
        for reason in ["Dependency", "QOSMaxJobsPerUserLimit", "BeginTime", "PartitionConfig"] {
            assert_eq!(pending_reason(reason), WaitReason::SlurmJobPending, "{reason}");
        }
    }

    #[test]
    fn a_group_waiting_for_its_pods_is_neither_an_error_nor_unschedulable() {
        let cases = [
            (WaitReason::Unschedulable, "Unschedulable", AttemptResult::unschedulable),
            (WaitReason::SlurmJobPending, "SlurmJobPending", AttemptResult::unschedulable),
            (WaitReason::SlurmHeld, "SlurmHeld", AttemptResult::error),
            (WaitReason::PolicyRejected, "PolicyRejected", AttemptResult::rejected),
            (WaitReason::NotGranted, "NotGranted", AttemptResult::rejected),
            (WaitReason::GroupInvalid, "PodGroupInvalid", AttemptResult::rejected),
            (WaitReason::GroupIncomplete, "PodGroupIncomplete", AttemptResult::waiting_for_group),
            (WaitReason::GroupFull, "PodGroupFull", AttemptResult::waiting_for_group),
            (WaitReason::SlurmUnreachable, "SlurmUnreachable", AttemptResult::error),
            (WaitReason::VolumeNotReady, "VolumeNotReady", AttemptResult::unschedulable),
        ];
        for (reason, condition, counted) in cases {
            assert_eq!((reason.condition_reason(), reason.attempt_result()), (condition, counted), "{reason:?}");
        }
    }

    #[test]
    fn a_failure_is_news_only_when_the_condition_says_something_else() {
        let condition = |status: &str, reason: &str, message: &str| PodCondition {
            type_: "PodScheduled".into(),
            status: status.into(),
            reason: Some(reason.into()),
            message: Some(message.into()),
            ..Default::default()
        };
        let cases = [
            (None, false),
            (Some(condition("False", "SlurmHeld", "held")), true),
            (Some(condition("False", "SlurmHeld", "held again")), false),
            (Some(condition("False", "SlurmJobPending", "held")), false),
            (Some(condition("True", "SlurmHeld", "held")), false),
        ];
        for (current, said) in cases {
            assert_eq!(says_already(current.as_ref(), WaitReason::SlurmHeld, "held"), said, "{current:?}");
        }
        // Compared as written: on one line.
        let written = condition("False", "SlurmHeld", "held: by the admin");
        assert!(says_already(Some(&written), WaitReason::SlurmHeld, "held:\n  by the admin"));
    }
}
