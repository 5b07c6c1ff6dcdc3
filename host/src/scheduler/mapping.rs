//! What the job-mapper policy and the namespace's grant make of a pod: the request for its
//! placeholder job, or why it gets none (the policy refused it, it asks for more than its namespace
//! is granted, the grant is not known yet, the policy failed), said on the pod as a [`Plan`].

use super::conditions::WaitReason;
use super::context::Context;
use super::pod_record;
use super::step::{Again, Plan};
use super::timing::{RECHECK, RETRY};
use super::watched_pod::WatchedPod;
use crate::policy::worlds::MapPodInput;
use crate::policy::{JobRequest, Mapping, PolicyError, Rejection};
use crate::tenancy::{self, NotGranted};

/// What the job-mapper policy and the namespace's grant make of a pod.
pub enum Mapped {
    Job(Box<JobRequest>),
    /// The policy refused the pod.
    Rejected(Rejection),
    /// The policy asked for more than the pod's namespace is granted.
    NotGranted(NotGranted),
    /// Which grant the namespace gets depends on labels not known yet.
    GrantUnknown,
}

/// The job request, or what the pod says when there is none.
pub async fn map(pod: &WatchedPod, ctx: &Context) -> Result<JobRequest, Plan<'static>> {
    let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
    request(ask(pod, ctx).await, namespace)
}

/// The job request, or what a pod of `namespace` says when there is none.
fn request(mapped: Result<Mapped, PolicyError>, namespace: &str) -> Result<JobRequest, Plan<'static>> {
    let refused = |reason, message: String| {
        let note = format!("not submitted to Slurm: {message}");
        Plan::refused(reason, message, note, Again::OnChange)
    };
    match mapped {
        Ok(Mapped::Job(request)) => Ok(*request),
        Ok(Mapped::Rejected(rejection)) => {
            Err(refused(WaitReason::PolicyRejected, format!("{}: {}", rejection.field, rejection.message)))
        }
        Ok(Mapped::NotGranted(beyond)) => Err(refused(WaitReason::NotGranted, beyond.to_string())),
        // The watch of namespaces lists it in a moment (or keeps failing, and this says so).
        Ok(Mapped::GrantUnknown) => {
            let message = format!("namespace {namespace} is not listed yet: its labels choose its grant");
            Err(Plan::wait(WaitReason::GrantUnknown, message, Again::After(RETRY)))
        }
        Err(error) => {
            let message = format!("the job-mapper policy failed: {error}");
            Err(Plan::refused(WaitReason::PolicyFailed, message.clone(), message, Again::After(RECHECK)))
        }
    }
}

/// Asks the job-mapper policy for the pod's job, within its namespace's grant.
pub async fn ask(pod: &WatchedPod, ctx: &Context) -> Result<Mapped, PolicyError> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_a_pod_without_a_job_request_says() {
        let rejection = Rejection { field: "spec.containers".into(), message: "no image".into() };
        let beyond = NotGranted {
            annotation: "sunk.dev/account",
            value: "physics".into(),
            namespace: "ml".into(),
            granted: "account ml".into(),
        };
        let not_granted = beyond.to_string();
        let rows = [
            (
                "refused by the policy: its owner must fix it",
                Ok(Mapped::Rejected(rejection)),
                Plan::refused(
                    WaitReason::PolicyRejected,
                    "spec.containers: no image",
                    "not submitted to Slurm: spec.containers: no image",
                    Again::OnChange,
                ),
            ),
            (
                "beyond its namespace's grant",
                Ok(Mapped::NotGranted(beyond)),
                Plan::refused(
                    WaitReason::NotGranted,
                    not_granted.clone(),
                    format!("not submitted to Slurm: {not_granted}"),
                    Again::OnChange,
                ),
            ),
            (
                "its namespace not listed yet: soon again",
                Ok(Mapped::GrantUnknown),
                Plan::wait(
                    WaitReason::GrantUnknown,
                    "namespace ml is not listed yet: its labels choose its grant",
                    Again::After(RETRY),
                ),
            ),
            (
                "the policy failed: looked at again later",
                Err(PolicyError::Timeout),
                Plan::refused(
                    WaitReason::PolicyFailed,
                    "the job-mapper policy failed: policy ran out of time",
                    "the job-mapper policy failed: policy ran out of time",
                    Again::After(RECHECK),
                ),
            ),
        ];
        for (name, mapped, expected) in rows {
            assert_eq!(request(mapped, "ml").err(), Some(expected), "{name}");
        }
    }
}
