//! A pod's placeholder job: asked of the job-mapper policy (`mapping`) and limited by the pod's
//! placement rules ([`prepare`], which reads and writes nothing else), submitted by the executor
//! (`executor::submit`), and what the pod is told then ([`answered`]), as a [`Plan`]. What a failed
//! submission means is decided here for single pods and gangs alike ([`not_submitted`]).

use std::sync::Arc;

use crate::scheduler::watched_pod::WatchedPod;
use kube::ResourceExt;

use super::conditions::WaitReason;
use super::context::Context;
use super::fast_path::{self, AllocateAs};
use super::link::PodKey;
use super::mapping;
use super::placeholder::{self, Placeholder, PlaceholderKind};
use super::placement::Verdict;
use super::placement::exclusions;
use super::placement::pod_rules::{self, PodPlacement};
use super::step::{Again, Plan, Step};
use super::timing::{RECHECK, RETRY, SUBMITTED_RECHECK, UNREADABLE_RECHECK};
use crate::error::Error;
use crate::slurm::{JobDescription, SlurmError, Unreadable};

/// A job ready for Slurm, for one pod or a whole gang.
#[derive(Debug, Clone, PartialEq)]
pub struct Submission {
    /// The pods it is for: one, or every member of a gang.
    pub pods: Vec<PodKey>,
    pub description: JobDescription,
    /// Submitted on its own, never as an array's task: a gang's job, or an external job (Slurm has
    /// no arrays of them).
    pub alone: bool,
    /// Whom the job may be allocated as at once (the fast path), when it may be.
    pub at_once: Option<AllocateAs>,
}

/// What Slurm made of a submission.
#[derive(Debug)]
pub enum Submitted {
    /// Queued as this job (an id, or an array's task).
    Queued(String),
    /// Allocated at once, and running: the pod is bound next.
    Allocated(Box<Placeholder>),
    /// Allocated at once, not yet described: looked at again shortly.
    Granted,
    /// The answer to an immediate allocation was lost: Slurm may have granted it.
    InDoubt(SlurmError),
    /// The submission failed.
    Failed(SlurmError),
    /// The array the pod's job went with failed.
    ArrayFailed(Arc<SlurmError>),
}

/// The pod's job as the job-mapper and its placement rules make it, or what the pod says when it
/// gets none.
pub async fn prepare(pod: &WatchedPod, key: PodKey, ctx: &Context) -> Result<Submission, Plan<'static>> {
    let mut request = mapping::map(pod, ctx).await?;
    // The verdict names every Slurm node (thousands, at scale): it must not be held while the pod
    // waits for its turn to submit.
    request.excluded_nodes = exclusions::for_job(&request.excluded_nodes, &*placement(pod, ctx)?);
    let kind = ctx.placeholder_kind();
    let description = placeholder::job_description(&key, request, kind, &ctx.installation);
    let fast = ctx.fast_path && !pod_rules::concern(pod, &ctx.pod_rules());
    let at_once = fast_path::allocate_as(&description, ctx.installation.seal().can_seal()).filter(|_| fast);
    Ok(Submission { pods: vec![key], description, alone: kind == PlaceholderKind::External, at_once })
}

/// What `pod` is told once Slurm answered the submission of `job` for the pods of `keys` (one pod, or
/// every member of a gang); an allocation is bound first (`allocated`).
pub fn answered(pod: &WatchedPod, keys: Vec<PodKey>, job: &str, submitted: Submitted) -> Result<Plan<'static>, Error> {
    match submitted {
        Submitted::Queued(target) => Ok(self::submitted(&target)),
        Submitted::Allocated(_) | Submitted::Granted => Ok(Plan::look_again(Again::After(RETRY))),
        Submitted::InDoubt(error) => Ok(in_doubt(keys, &error)),
        Submitted::Failed(error) => failed(pod, keys, job, &error).ok_or_else(|| error.into()),
        Submitted::ArrayFailed(error) => failed(pod, keys, job, &error).ok_or(Error::SharedSlurm(error)),
    }
}

/// What a pod allocated at once as job `job_id` is told: so, in an Event written while it is bound (a
/// round trip before the binding would delay it), or before whatever else its `binding` plan says.
pub fn allocated(mut binding: Plan<'static>, job_id: u32) -> Plan<'static> {
    let note = format!("allocated at once as Slurm job {job_id}");
    if let Some(Step::Bind { allocated, .. }) = binding.steps.iter_mut().find(|step| matches!(step, Step::Bind { .. }))
    {
        *allocated = Some(note);
        return binding;
    }
    binding.after(Step::Event { warning: false, reason: "SlurmJobAllocated", action: "Schedule", note })
}

/// What the pod says once its job is queued: an Event, and no condition yet. Slurm starts most jobs
/// within a second, and a pod bound then was never waiting; one that was is told what for by the look
/// after [`SUBMITTED_RECHECK`], as Slurm lists the job.
fn submitted(job: &str) -> Plan<'static> {
    let note = format!("submitted as Slurm job {job}");
    let event = Step::Event { warning: false, reason: "SlurmJobSubmitted", action: "Schedule", note };
    Plan { steps: vec![event], again: Again::After(SUBMITTED_RECHECK) }
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

/// What a failed submission for the pods of `keys` (one pod, or every member of a gang) takes; `job`
/// names the job in a refusal. `None` for an error that is the pass's own.
pub fn not_submitted(keys: Vec<PodKey>, job: &str, error: &SlurmError) -> Option<Plan<'static>> {
    Some(match failure(error)? {
        Failure::NodeVanished => Plan::look_again(Again::After(RETRY)),
        Failure::InDoubt => in_doubt(keys, error),
        Failure::Refused => {
            let message = format!("Slurm refused {job}: {error}");
            let mut refused = Plan::refused(WaitReason::SlurmRejected, message.clone(), message, Again::After(RECHECK));
            refused.steps.insert(0, Step::RecordRefusal(keys));
            refused
        }
    })
}

/// The submission's answer was lost: Slurm may have made the job, so nothing is submitted again for
/// the pods of `keys` until a listing shows whether it did.
fn in_doubt(keys: Vec<PodKey>, error: &SlurmError) -> Plan<'static> {
    let message = format!("{error}; the pod waits for slurmrestd");
    let mut in_doubt = Plan::wait(WaitReason::SlurmUnreachable, message, Again::After(RETRY));
    in_doubt.steps.insert(0, Step::RecordInDoubt(keys));
    in_doubt
}

/// [`not_submitted`], for a submission made by `pod`'s pass.
fn failed(pod: &WatchedPod, keys: Vec<PodKey>, job: &str, error: &SlurmError) -> Option<Plan<'static>> {
    if failure(error) == Some(Failure::NodeVanished) {
        tracing::debug!(pod = %pod.name_any(), %error, "a node named in the job vanished; trying again");
    }
    not_submitted(keys, job, error)
}

/// Where the pod may go, or what it says when nowhere (a Node change brings it back).
fn placement(pod: &WatchedPod, ctx: &Context) -> Result<Arc<Verdict>, Plan<'static>> {
    placed(pod_rules::where_it_may_go(&ctx.placement, pod, &ctx.pod_rules()))
}

/// The nodes the pod may use, or what it says when there are none.
fn placed(verdict: Result<PodPlacement, Unreadable>) -> Result<Arc<Verdict>, Plan<'static>> {
    match verdict {
        Ok(PodPlacement::Verdict(verdict)) if !verdict.eligible.is_empty() => Ok(verdict),
        Ok(PodPlacement::Verdict(verdict)) => {
            let message = verdict.nothing_fits();
            Err(Plan::refused(WaitReason::Unschedulable, message.clone(), message, Again::After(RECHECK)))
        }
        // A claim bound meanwhile brings the pod back at once (`volume_stores`).
        Ok(PodPlacement::Waits(reason, message)) => {
            let failing = Step::Failing { reason, message, event: "FailedScheduling" };
            Err(Plan { steps: vec![failing], again: Again::After(RECHECK) })
        }
        Err(unreadable) => {
            let message = format!("cannot read Slurm's nodes ({unreadable}); the pod waits for slurmrestd");
            Err(Plan::wait(WaitReason::SlurmUnreachable, message, Again::After(UNREADABLE_RECHECK)))
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};
    use std::time::Duration;

    use super::*;
    use crate::slurm::ApiMessage;

    fn answered(error_number: i64) -> SlurmError {
        let errors = vec![ApiMessage { error_number, ..Default::default() }];
        SlurmError::Api { what: "job submission", status: 500, errors }
    }

    #[test]
    fn a_queued_pod_is_told_nothing_until_its_job_had_a_moment_to_start() {
        let plan = submitted("12_3");
        assert!(plan.steps.iter().all(|step| matches!(step, Step::Event { .. })), "no condition: {plan:?}");
        assert_eq!(plan.again, Again::After(SUBMITTED_RECHECK));
    }

    #[test]
    fn what_a_pod_is_told_once_slurm_answered() {
        let pod = serde_json::from_value::<WatchedPod>(serde_json::json!({"metadata": {"name": "p"}})).unwrap();
        let key = PodKey { namespace: "ml".into(), name: "p".into(), uid: "u".into() };
        let lost = || SlurmError::NoAnswer("job submission", Duration::from_secs(5));
        let refused = format!("Slurm refused the job: {}", answered(2050));
        let refusal = Plan::refused(WaitReason::SlurmRejected, refused.clone(), refused, Again::After(RECHECK));
        let rows = [
            ("queued: an Event, and quiet for a moment", Submitted::Queued("12_3".into()), Some(submitted("12_3"))),
            ("granted, not described yet: soon again", Submitted::Granted, Some(Plan::look_again(Again::After(RETRY)))),
            ("an allocation's answer lost", Submitted::InDoubt(lost()), Some(in_doubt(vec![key.clone()], &lost()))),
            ("refused", Submitted::Failed(answered(2050)), Some(refusal.after(Step::RecordRefusal(vec![key.clone()])))),
            (
                "its array named a node deleted meanwhile: soon again",
                Submitted::ArrayFailed(Arc::new(answered(2018))),
                Some(Plan::look_again(Again::After(RETRY))),
            ),
            ("never sent: the pass's own error", Submitted::Failed(SlurmError::Withheld("not the leader")), None),
            (
                "its array never sent: the pass's own error",
                Submitted::ArrayFailed(Arc::new(SlurmError::Withheld("not the leader"))),
                None,
            ),
        ];
        for (name, submitted, expected) in rows {
            assert_eq!(super::answered(&pod, vec![key.clone()], "the job", submitted).ok(), expected, "{name}");
        }
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

    #[test]
    fn a_gang_and_a_pod_fail_alike_every_member_remembered() {
        let key = |name: &str| PodKey { namespace: "ml".into(), name: name.into(), uid: format!("uid-{name}") };
        let members = [key("a"), key("b")];
        let job = "pod group g's job";
        let vanished = not_submitted(members.to_vec(), job, &answered(2018));
        assert_eq!(vanished, Some(Plan::look_again(Again::After(RETRY))), "a vanished node: soon again");

        let lost = SlurmError::NoAnswer("job submission", Duration::from_secs(5));
        let message = format!("{lost}; the pod waits for slurmrestd");
        let in_doubt = Plan {
            steps: vec![
                Step::RecordInDoubt(members.to_vec()),
                Step::Wait { reason: WaitReason::SlurmUnreachable, message },
            ],
            again: Again::After(RETRY),
        };
        assert_eq!(not_submitted(members.to_vec(), job, &lost), Some(in_doubt), "a lost answer: every member waits");

        let refusal = answered(2050);
        let message = format!("Slurm refused pod group g's job: {refusal}");
        let refused = Plan {
            steps: vec![
                Step::RecordRefusal(members.to_vec()),
                Step::Wait { reason: WaitReason::SlurmRejected, message: message.clone() },
                Step::Event { warning: true, reason: "FailedScheduling", action: "Schedule", note: message },
            ],
            again: Again::After(RECHECK),
        };
        assert_eq!(
            not_submitted(members.to_vec(), job, &refusal),
            Some(refused),
            "a refusal: no member tries again at once"
        );
        assert_eq!(not_submitted(members.to_vec(), job, &SlurmError::Withheld("not the leader")), None);
    }

    #[test]
    fn a_pod_with_nowhere_to_go_says_why() {
        let nothing_fits = Verdict {
            excluded: BTreeMap::from([("s1".to_string(), "tainted".to_string())]),
            eligible: BTreeSet::new(),
        };
        let message = nothing_fits.nothing_fits();
        assert_eq!(
            placed(Ok(PodPlacement::Verdict(Arc::new(nothing_fits)))).err(),
            Some(Plan::refused(WaitReason::Unschedulable, message.clone(), message, Again::After(RECHECK)))
        );
        let waits = PodPlacement::Waits(WaitReason::VolumeNotReady, "waiting for a volume".into());
        let failing = Step::Failing {
            reason: WaitReason::VolumeNotReady,
            message: "waiting for a volume".into(),
            event: "FailedScheduling",
        };
        assert_eq!(placed(Ok(waits)).err(), Some(Plan { steps: vec![failing], again: Again::After(RECHECK) }));
        let fits = Verdict { excluded: BTreeMap::new(), eligible: BTreeSet::from(["s1".to_string()]) };
        assert!(placed(Ok(PodPlacement::Verdict(Arc::new(fits)))).is_ok());
    }
}
