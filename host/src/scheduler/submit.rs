//! A pod's placeholder job: asked of the job-mapper policy (`mapping`), limited by the pod's placement
//! rules, submitted once, and kept in step with those rules while it waits. What the pod says when it
//! cannot be submitted, or its submission failed, is decided here as a [`Plan`] for the executor.

use std::ops::ControlFlow;
use std::sync::Arc;

use crate::scheduler::watched_pod::{PodNeeds, WatchedPod};
use kube::ResourceExt;
use kube::runtime::controller::Action;

use super::batch::{TimedTurn, Turn};
use super::conditions::WaitReason;
use super::context::Context;
use super::fast_path::{self, Allocation};
use super::link::PodKey;
use super::mapping::{self, Mapped};
use super::placeholder::Placeholder;
use super::placeholder::{self, PlaceholderKind};
use super::placement::Verdict;
use super::placement::exclusions;
use super::placement::placement_checks::{Grounds, GroundsDigest};
use super::placement::pod_rules::{self, PodPlacement};
use super::step::{Again, Plan, Step};
use super::timing::{RECHECK, RETRY, SUBMITTED_RECHECK, UNREADABLE_RECHECK};
use super::{bind, executor};
use crate::error::Error;
use crate::failpoint;
use crate::slurm::{Job, JobDescription, NoValue, SlurmError, Unreadable, compress_hostlist};

pub async fn submit(pod: &WatchedPod, key: PodKey, ctx: &Context) -> Result<Action, Error> {
    let mut request = match mapping::map(pod, ctx).await? {
        ControlFlow::Continue(request) => request,
        ControlFlow::Break(action) => return Ok(action),
    };
    // The verdict names every Slurm node (thousands, at scale): it must not be held while the pod
    // waits for its turn below.
    request.excluded_nodes = match placement(pod, ctx).await? {
        ControlFlow::Continue(verdict) => exclusions::for_job(&request.excluded_nodes, &verdict),
        ControlFlow::Break(action) => return Ok(action),
    };
    let kind = ctx.placeholder_kind();
    let description = placeholder::job_description(&key, request, kind, &ctx.installation);
    if kind == PlaceholderKind::External {
        // Slurm has no arrays of external jobs: every pod's placeholder is submitted on its own.
        return submit_alone(pod, key, description, None, ctx).await;
    }
    match ctx.batches.join(ctx.slurm.as_ref(), key.clone(), description.clone()).await {
        Turn::Alone(turn) => submit_alone(pod, key, description, Some(turn), ctx).await,
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
            executor::execute(ctx, pod, submitted(&target)).await
        }
        Turn::Task(Err(error)) => match after_failure(pod, &[key], "the job", &error, ctx).await? {
            Some(action) => Ok(action),
            None => Err(Error::SharedSlurm(error)),
        },
    }
}

/// A pod submitted on its own: an immediate allocation first (with the fast path), else a queued job.
/// Its `turn` ends once Slurm has answered: the pods waiting behind it need not wait for what the pass
/// writes to the API server next.
async fn submit_alone(
    pod: &WatchedPod,
    key: PodKey,
    description: JobDescription,
    mut turn: Option<TimedTurn>,
    ctx: &Context,
) -> Result<Action, Error> {
    let who = fast_path::allocate_as(&description, ctx.installation.seal().can_seal());
    let fast = ctx.fast_path && !ctx.batches.in_burst() && !pod_rules::concern(pod, &ctx.pod_rules());
    if let Some(who) = who.filter(|_| fast) {
        let allocation = fast_path::allocate(ctx, &description, who).await;
        if !matches!(allocation, Allocation::Refused) {
            drop(turn.take());
        }
        match allocation {
            Allocation::Running(job) => {
                tracing::info!(job = job.job_id, pod = %description.name, nodes = %job.nodes, "allocated at once");
                ctx.jobs.record_job(key.clone(), (*job).clone());
                failpoint::hit("after-submit");
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
            Allocation::InDoubt(error) => return executor::execute(ctx, pod, in_doubt(&[key], &error)).await,
            Allocation::Refused => {}
        }
    }
    let answer = ctx.slurm.submit(&description).await;
    drop(turn);
    let job_id = match answer {
        Ok(job_id) => job_id,
        Err(error) => {
            return match after_failure(pod, &[key], "the job", &error, ctx).await? {
                Some(action) => Ok(action),
                None => Err(error.into()),
            };
        }
    };
    ctx.jobs.record_submitted(key, job_id, &description);
    failpoint::hit("after-submit");
    tracing::info!(job = job_id, pod = %description.name, "submitted placeholder");
    executor::execute(ctx, pod, submitted(&job_id.to_string())).await
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
pub fn not_submitted<'a>(keys: &'a [PodKey], job: &str, error: &SlurmError) -> Option<Plan<'a>> {
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
fn in_doubt<'a>(keys: &'a [PodKey], error: &SlurmError) -> Plan<'a> {
    let message = format!("{error}; the pod waits for slurmrestd");
    let mut in_doubt = Plan::wait(WaitReason::SlurmUnreachable, message, Again::After(RETRY));
    in_doubt.steps.insert(0, Step::RecordInDoubt(keys));
    in_doubt
}

/// Carries out [`not_submitted`] on `pod`, whose pass submitted; `None` for an error that is the
/// pass's own.
pub async fn after_failure(
    pod: &WatchedPod,
    keys: &[PodKey],
    job: &str,
    error: &SlurmError,
    ctx: &Context,
) -> Result<Option<Action>, Error> {
    let Some(plan) = not_submitted(keys, job, error) else {
        return Ok(None);
    };
    if failure(error) == Some(Failure::NodeVanished) {
        tracing::debug!(pod = %pod.name_any(), %error, "a node named in the job vanished; trying again");
    }
    executor::execute(ctx, pod, plan).await.map(Some)
}

/// What a pending job's excluded nodes need, against the pod's placement rules as they are now (a
/// Node tainted, labelled or added since the job was submitted).
#[derive(Debug, PartialEq, Eq)]
pub enum ExcludedNodes {
    /// Nothing now: found in line on the same grounds before, or not to be judged now (Slurm's nodes
    /// unreadable, a rule it cannot honour: the pod says so when it is next placed).
    Unjudged,
    /// In line with the rules, on these grounds.
    InLine(GroundsDigest),
    /// To exclude exactly `excluded` (host lists); then in line on these grounds.
    Update { excluded: Vec<String>, grounds: GroundsDigest },
    /// They must change, and the job is an array's task still in the array's record, which cannot be
    /// updated without changing every task (see `Job::update_id`): the pod needs a job of its own.
    NeedsOwnJob,
}

impl ExcludedNodes {
    /// The write that keeps `placeholder`'s job in line, if there is one to make.
    pub fn step(self, placeholder: &Placeholder) -> Option<Step<'_>> {
        match self {
            ExcludedNodes::Unjudged | ExcludedNodes::NeedsOwnJob => None,
            ExcludedNodes::InLine(grounds) => Some(Step::PlacementChecked { placeholder, grounds }),
            ExcludedNodes::Update { excluded, grounds } => {
                Some(Step::UpdateExcludedNodes { placeholder, excluded, grounds })
            }
        }
    }
}

/// What the pending job of `placeholder` needs for its excluded nodes.
pub async fn excluded_nodes(
    pod: &WatchedPod,
    placeholder: &Placeholder,
    ctx: &Context,
) -> Result<ExcludedNodes, Error> {
    // Taken before anything is read: a change published while this pass runs is checked again.
    let grounds =
        Grounds::of(pod, &placeholder.job, ctx.placement.published(), ctx.policies.job_mapper.revision()).digest();
    if ctx.placement_checks.is_current(&placeholder.pod.uid, grounds) {
        return Ok(ExcludedNodes::Unjudged);
    }
    // The policy's own exclusions are asked again: they are part of what the job must carry.
    let Ok(Mapped::Job(request)) = mapping::ask(pod, ctx).await else {
        return Ok(ExcludedNodes::Unjudged);
    };
    let Ok(verdict) = ctx.placement.verdict(pod_spec(pod)) else {
        return Ok(ExcludedNodes::Unjudged);
    };
    let PodPlacement::Verdict(verdict) = pod_rules::apply(verdict, pod, &ctx.pod_rules()) else {
        return Ok(ExcludedNodes::Unjudged);
    };
    // The verdict names every Slurm node: only the decision, a host list, outlives this call.
    Ok(judged(&placeholder.job, &request.excluded_nodes, &verdict, grounds))
}

/// What `job`'s excluded nodes need to carry the policy's exclusions (`requested`) and the verdict's.
fn judged(job: &Job, requested: &[String], verdict: &Verdict, grounds: GroundsDigest) -> ExcludedNodes {
    let wanted = exclusions::wanted(requested, verdict);
    if !exclusions::differs(job, &wanted, verdict) {
        return ExcludedNodes::InLine(grounds);
    }
    if job.update_id().is_none() {
        return ExcludedNodes::NeedsOwnJob;
    }
    ExcludedNodes::Update { excluded: compress_hostlist(&wanted), grounds }
}

/// Where the pod may go, or what to do when nowhere (a Node change brings it back).
async fn placement(pod: &WatchedPod, ctx: &Context) -> Result<ControlFlow<Action, Arc<Verdict>>, Error> {
    let verdict = ctx.placement.verdict(pod_spec(pod)).map(|verdict| pod_rules::apply(verdict, pod, &ctx.pod_rules()));
    match placed(verdict) {
        Ok(verdict) => Ok(ControlFlow::Continue(verdict)),
        Err(plan) => Ok(ControlFlow::Break(executor::execute(ctx, pod, plan).await?)),
    }
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

pub(super) fn pod_spec(pod: &WatchedPod) -> &PodNeeds {
    static EMPTY: std::sync::OnceLock<PodNeeds> = std::sync::OnceLock::new();
    pod.spec.as_ref().unwrap_or_else(|| EMPTY.get_or_init(Default::default))
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
        let vanished = not_submitted(&members, job, &answered(2018));
        assert_eq!(vanished, Some(Plan::look_again(Again::After(RETRY))), "a vanished node: soon again");

        let lost = SlurmError::NoAnswer("job submission", Duration::from_secs(5));
        let message = format!("{lost}; the pod waits for slurmrestd");
        let in_doubt = Plan {
            steps: vec![Step::RecordInDoubt(&members), Step::Wait { reason: WaitReason::SlurmUnreachable, message }],
            again: Again::After(RETRY),
        };
        assert_eq!(not_submitted(&members, job, &lost), Some(in_doubt), "a lost answer: every member waits");

        let refusal = answered(2050);
        let message = format!("Slurm refused pod group g's job: {refusal}");
        let refused = Plan {
            steps: vec![
                Step::RecordRefusal(&members),
                Step::Wait { reason: WaitReason::SlurmRejected, message: message.clone() },
                Step::Event { warning: true, reason: "FailedScheduling", action: "Schedule", note: message },
            ],
            again: Again::After(RECHECK),
        };
        assert_eq!(not_submitted(&members, job, &refusal), Some(refused), "a refusal: no member tries again at once");
        assert_eq!(not_submitted(&members, job, &SlurmError::Withheld("not the leader")), None);
    }

    #[test]
    fn a_waiting_job_is_brought_in_line_with_the_placement_rules() {
        let verdict = Verdict {
            excluded: BTreeMap::from([("n2".to_string(), "tainted".to_string())]),
            eligible: BTreeSet::from(["n1".to_string(), "n3".to_string()]),
        };
        let pod = serde_json::from_value::<WatchedPod>(serde_json::json!({"metadata": {"name": "p"}})).unwrap();
        let grounds = Grounds::of(&pod, &Job::default(), 1, 0).digest();
        let own = |excluded: &str| Job { job_id: 7, excluded_nodes: excluded.into(), ..Default::default() };
        let in_the_arrays_record =
            Job { job_id: 7, array_job_id: NoValue::of(7), array_task_id: NoValue::of(3), ..Default::default() };
        let update = |excluded: &[&str]| ExcludedNodes::Update {
            excluded: excluded.iter().map(|name| name.to_string()).collect(),
            grounds,
        };
        let rows = [
            ("in line", own("n2"), vec![], ExcludedNodes::InLine(grounds)),
            ("a deleted node it names needs nothing", own("n2,gone-9"), vec![], ExcludedNodes::InLine(grounds)),
            ("a Node tainted since", own(""), vec![], update(&["n2"])),
            ("the policy's own exclusions too", own("n2"), vec!["n[1-2]".to_string()], update(&["n[1-2]"])),
            ("a task still in its array's record", in_the_arrays_record, vec![], ExcludedNodes::NeedsOwnJob),
        ];
        for (name, job, requested, expected) in rows {
            assert_eq!(judged(&job, &requested, &verdict, grounds), expected, "{name}");
        }
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
