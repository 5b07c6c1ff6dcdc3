//! The reasons sunk gives on a pod's `PodScheduled=False` condition, and what each is counted as.
//!
//! `Unschedulable` is the reason cluster-autoscaler and Kueue read: it means more capacity would
//! let the pod run (Slurm waits for resources, or no node fits the pod's placement rules). Every
//! other reason is sunk's own, so nothing scales up for a pod that waits on its owner or on Slurm.

use k8s_openapi::api::core::v1::Pod;

use super::Context;
use super::metrics::AttemptResult;

/// Waiting for capacity: Slurm has no room yet, or no node fits the pod's placement rules.
pub const UNSCHEDULABLE: &str = "Unschedulable";
/// Waiting in Slurm for something more nodes would not change (a hold, a limit, a dependency).
pub const SLURM_JOB_PENDING: &str = "SlurmJobPending";
/// The job-mapper policy refused the pod (bad input): its owner must fix it.
pub const POLICY_REJECTED: &str = "PolicyRejected";
/// The job-mapper policy failed; retried.
pub const POLICY_FAILED: &str = "PolicyFailed";
/// Slurm refused the job at submission.
pub const SLURM_REJECTED: &str = "SlurmRejected";
/// The job failed before it ever ran (e.g. a constraint no node can meet).
pub const SLURM_JOB_FAILED: &str = "SlurmJobFailed";
/// slurmrestd cannot be reached (or Slurm's lists are stale): the pod waits for it.
pub const SLURM_UNREACHABLE: &str = "SlurmUnreachable";
/// The job runs on a Slurm node no known slurmd pod hosts; retried.
pub const SLURM_NODE_UNKNOWN: &str = "SlurmNodeUnknown";

/// The condition reason for a job Slurm keeps pending with `slurm_reason`.
pub fn pending_reason(slurm_reason: &str) -> &'static str {
    // Not yet looked at, waiting for nodes, behind higher priority work, or its nodes unavailable.
    let capacity = matches!(slurm_reason, "" | "None" | "Resources" | "Priority" | "NodeDown" | "Nodes_required")
        || slurm_reason.starts_with("ReqNodeNotAvail");
    if capacity { UNSCHEDULABLE } else { SLURM_JOB_PENDING }
}

/// Says on the pod why it is not scheduled, and counts the attempt.
pub async fn waiting(ctx: &Context, pod: &Pod, reason: &str, message: &str) -> kube::Result<()> {
    ctx.metrics.attempt(AttemptResult::of_reason(reason));
    ctx.writer.set_scheduled_condition(pod, false, reason, message).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_capacity_waits_are_unschedulable() {
        for reason in ["Resources", "Priority", "None", "", "ReqNodeNotAvail, UnavailableNodes:n1"] {
            assert_eq!(pending_reason(reason), UNSCHEDULABLE, "{reason}");
        }
        for reason in ["JobHeldUser", "JobHeldAdmin", "Dependency", "QOSMaxJobsPerUserLimit", "BeginTime"] {
            assert_eq!(pending_reason(reason), SLURM_JOB_PENDING, "{reason}");
        }
    }
}
