//! The scheduler's decision for one pod, pure: what was observed about the pod, its placeholder jobs
//! and Slurm ([`Facts`]) -> a [`Decision`]: the duplicate jobs to cancel, and the one thing to do next
//! ([`Next`]), and how that is carried out ([`course`]): the writes it takes, as a [`Plan`] for the
//! executor, or the course that reads further or writes first (a submission: what Slurm answers
//! chooses the next write; a waiting job: its exclusions and the preemption policy's choice are read
//! first, its plan pure). `reconcile` observes and carries the decision out; nothing here talks to Kubernetes or Slurm, so every path
//! has a table-driven test.

use std::time::Duration;

use super::bind::{self, Placing, Running};
use super::conditions::{WaitReason, describe};
use super::gang::group::Group;
use super::held::{self, Hold, UidGrant};
use super::placeholder::Placeholder;
use super::preemption::by_slurm::TakenBySlurm;
use super::replace;
use super::step::{Again, Plan, Step};
use super::timing::{CONTAINERS_STOPPED_RECHECK, FIRST_LISTING_RECHECK, RECHECK, RETRY};
use crate::slurm::{Job, JobState};

/// What a pass knows about one pod when it decides.
#[derive(Debug, Default)]
pub struct Facts<'a> {
    /// Why the pod no longer needs a job (being deleted, finished), if so.
    pub leaving: Option<String>,
    /// The Node the pod is bound to.
    pub bound_to: Option<&'a str>,
    /// Why Slurm's jobs cannot be read (for longer than the host's patience), if they cannot.
    pub slurm_unreachable: Option<String>,
    /// Whether a full job listing has arrived since the host started ("no job" means something).
    pub jobs_listed: bool,
    /// The pod's jobs that have not ended, oldest first (for a bound pod, the one on its Node first).
    pub live: &'a [Placeholder],
    /// Its jobs that ended, oldest first, leaving out jobs the host replaced and immediate
    /// allocations that came to nothing (neither ends a pod).
    pub ended: &'a [Placeholder],
    /// A leaving pod's containers may still run on its Node (its allocation stays the pod's).
    pub containers_may_run: bool,
    /// The pod finished (not deleted) and its gang's running job still holds the nodes of other
    /// members that run on. Observed only for a finished pod whose first live job is a running gang's.
    pub members_still_run: bool,
    /// Whether the pod has a job is in doubt: a submission for it got no answer and no listing since
    /// tells whether Slurm took it, or the last listing cut the list of array tasks that may hold it.
    pub job_in_doubt: bool,
    /// How long the pod must still wait after Slurm refused it moments ago.
    pub refused_for: Option<Duration>,
    /// How long the pod still says nothing of the job this host queued for it moments ago: Slurm
    /// starts most jobs within that time, and a pod bound then was never waiting.
    pub quiet_for: Option<Duration>,
    /// The pod's group, when it is a gang member.
    pub group: Option<Group>,
    /// What the pod's running job means for it: whether it may run there (a taint or label that came
    /// since may refuse it), and where it goes. Observed only for an unbound pod, not leaving, whose
    /// first live job runs.
    pub running: Option<Running<'a>>,
    /// Whether Slurm's own preemption took the job: the Event's note, or how long to wait for the
    /// preemptor to show. Observed only where it matters (an ended job of an unbound pod, or the
    /// pending job of a bound one).
    pub taken_by_slurm: Option<TakenBySlurm>,
    /// The grant that gave the uid the pod's first live job runs as. Observed only where it matters:
    /// a job Slurm holds, of an unbound pod.
    pub uid_grant: Option<UidGrant>,
}

/// What a pass does: cancel the pod's duplicate jobs (any but its first live one), then the one
/// thing that comes next.
#[derive(Debug, PartialEq)]
pub struct Decision<'a> {
    pub duplicates: &'a [Placeholder],
    pub next: Next<'a>,
}

impl<'a> Decision<'a> {
    /// `next`, with no duplicate to cancel first.
    pub fn only(next: Next<'a>) -> Self {
        Self { duplicates: &[], next }
    }
}

/// The one thing a pass does for the pod.
#[derive(Debug, PartialEq)]
pub enum Next<'a> {
    /// Say the pod waits for slurmrestd; look again soon.
    WaitForSlurm(String),
    /// Look again shortly: until the first listing, "no job" is not known to be true.
    AwaitFirstListing,
    /// Look again in a second: the leaving pod's containers may still hold its Node.
    AwaitContainersStopped,
    /// A finished gang member whose job holds the nodes of members still running: the job stays
    /// until the last of them finishes (its pass cancels it) or one is deleted (the gang goes).
    AwaitMembers,
    /// Cancel every live job of a pod that no longer needs one.
    CancelForLeaving { live: &'a [Placeholder], why: String },
    /// Look again once this long has passed (Slurm refused the pod moments ago, or its job was
    /// queued moments ago).
    LookAgainIn(Duration),
    /// Ask the job-mapper and submit the pod's job (alone, or with others as an array).
    Submit,
    /// Submit the group's one job once every member is there.
    SubmitGang(Group),
    /// The job failed before it ever held a node: say so and wait for the owner.
    Failed(&'a Job),
    /// Slurm's own preemption took the job: delete the pod with this note (and cancel the job, if it
    /// was requeued), or wait for the preemptor to show.
    PreemptedBySlurm { requeued: Option<&'a Placeholder>, taken: TakenBySlurm },
    /// The job ended (or is gone): delete the pod, saying why.
    DeleteEnded(String),
    /// The job runs where the pod may not: cancel it for one that excludes the node.
    Replace { placeholder: &'a Placeholder, why: String },
    /// Bind the pod where its job runs (a gang member: on its own node of the job's).
    Bind(Box<Placing<'a>>),
    /// Say what the job waits for in Slurm (and consider preemption for a pending one).
    WaitInSlurm(&'a Placeholder),
    /// Slurm holds the job until someone releases it: say why, as an error, and keep the job.
    Held { placeholder: &'a Placeholder, hold: Hold },
    /// A bound pod's job was requeued: its allocation is gone, so cancel the job and delete the pod.
    DeleteRequeued { placeholder: &'a Placeholder, node: &'a str },
    /// Nothing to do until something changes.
    Nothing,
}

pub fn decide<'a>(facts: &Facts<'a>) -> Decision<'a> {
    let unbound = facts.bound_to.is_none();
    if unbound
        && facts.leaving.is_none()
        && let Some(why) = &facts.slurm_unreachable
    {
        let message = format!("cannot read Slurm's jobs ({why}); the pod waits for slurmrestd");
        return Decision::only(Next::WaitForSlurm(message));
    }
    if !facts.jobs_listed {
        return Decision::only(Next::AwaitFirstListing);
    }
    if let Some(why) = &facts.leaving {
        if !facts.live.is_empty() && facts.containers_may_run {
            return Decision::only(Next::AwaitContainersStopped);
        }
        if facts.members_still_run {
            return Decision::only(Next::AwaitMembers);
        }
        return Decision::only(Next::CancelForLeaving { live: facts.live, why: why.clone() });
    }
    // One pod, one job: should a second ever appear, the first (for a bound pod, the one on its Node)
    // is the pod's.
    Decision { duplicates: facts.live.get(1..).unwrap_or_default(), next: decide_one_job(facts) }
}

/// The decision about the pod's first live job (or its ended ones, when none is live).
fn decide_one_job<'a>(facts: &Facts<'a>) -> Next<'a> {
    match (facts.live.first(), facts.bound_to) {
        (None, None) if facts.ended.is_empty() => {
            if facts.job_in_doubt {
                return Next::WaitForSlurm(
                    "Slurm's job list does not show yet whether this pod has a job (a submission got no answer, or \
                     slurmrestd cut an array's task list); waiting for it before submitting one"
                        .into(),
                );
            }
            if let Some(wait) = facts.refused_for {
                return Next::LookAgainIn(wait);
            }
            match &facts.group {
                Some(group) => Next::SubmitGang(group.clone()),
                None => Next::Submit,
            }
        }
        (None, None) if facts.ended.last().is_some_and(|p| !withdrawn(&p.job)) => {
            Next::Failed(&facts.ended.last().expect("checked").job)
        }
        (None, _) => {
            if let Some(taken) = &facts.taken_by_slurm {
                return Next::PreemptedBySlurm { requeued: None, taken: taken.clone() };
            }
            Next::DeleteEnded(match facts.ended.last() {
                Some(p) => format!("Slurm job {} ended", describe(&p.job)),
                None => "its Slurm job no longer exists".to_string(),
            })
        }
        (Some(placeholder), None) => match &facts.running {
            Some(Running::Misplaced(why)) => Next::Replace { placeholder, why: why.clone() },
            Some(Running::Placeable(placing)) => Next::Bind(placing.clone()),
            None => match (facts.quiet_for, held::hold(&placeholder.job, facts.uid_grant.as_ref())) {
                (Some(wait), _) => Next::LookAgainIn(wait),
                (None, Some(hold)) => Next::Held { placeholder, hold },
                (None, None) => Next::WaitInSlurm(placeholder),
            },
        },
        (Some(placeholder), Some(node)) if placeholder.job.state() == JobState::Pending => {
            match &facts.taken_by_slurm {
                Some(taken) => Next::PreemptedBySlurm { requeued: Some(placeholder), taken: taken.clone() },
                None => Next::DeleteRequeued { placeholder, node },
            }
        }
        (Some(_), Some(_)) => Next::Nothing,
    }
}

/// How a [`Next`] is carried out.
#[derive(Debug, PartialEq)]
pub enum Course<'a> {
    /// Writes decided now, for the executor.
    Plan(Plan<'a>),
    /// Ask the job-mapper and submit the pod's job (alone, or with others as an array).
    Submit,
    /// Submit the group's one job once every member is there.
    SubmitGang(Group),
    /// Observe the waiting job's exclusions and what the preemption policy chooses for it, then take
    /// the plan that follows (`waiting::plan`).
    WaitInSlurm(&'a Placeholder),
}

pub fn course(next: Next<'_>) -> Course<'_> {
    let plan = match next {
        Next::WaitForSlurm(message) => Plan::wait(WaitReason::SlurmUnreachable, message, Again::After(RETRY)),
        Next::AwaitFirstListing => Plan::look_again(Again::After(FIRST_LISTING_RECHECK)),
        Next::AwaitContainersStopped => Plan::look_again(Again::After(CONTAINERS_STOPPED_RECHECK)),
        // A member's end or deletion changes the job, which brings the pod back sooner.
        Next::AwaitMembers => Plan::look_again(Again::After(RECHECK)),
        Next::CancelForLeaving { live, why } => {
            let steps = live.iter().flat_map(|placeholder| {
                let note = format!("cancelled Slurm job {}: {why}", placeholder.job.target());
                [
                    Step::KeepMembersWaiting(placeholder),
                    Step::Cancel { placeholder, why: why.clone() },
                    Step::Event { warning: false, reason: "SlurmJobCancelled", action: "Cancel", note },
                ]
            });
            Plan { steps: steps.collect(), again: Again::OnChange }
        }
        Next::LookAgainIn(wait) => Plan::look_again(Again::After(wait)),
        Next::Submit => return Course::Submit,
        Next::SubmitGang(group) => return Course::SubmitGang(group),
        // The pod stays, Pending, saying why, so nothing is lost and nothing is retried blindly.
        Next::Failed(job) => Plan::wait(
            WaitReason::SlurmJobFailed,
            format!("Slurm job {} failed before it ran; fix the pod's request and recreate it", describe(job)),
            Again::OnChange,
        ),
        Next::PreemptedBySlurm { taken: TakenBySlurm::AwaitPreemptor(wait), .. } => {
            Plan::look_again(Again::After(wait))
        }
        Next::PreemptedBySlurm { requeued, taken: TakenBySlurm::Named(note) } => {
            let event = Step::Event { warning: true, reason: "SlurmJobPreempted", action: "Delete", note };
            let cancel = requeued.map(|placeholder| Step::Cancel { placeholder, why: "its pod was preempted".into() });
            let steps = std::iter::once(event).chain(cancel).chain([Step::DeletePod]).collect();
            Plan { steps, again: Again::OnChange }
        }
        Next::DeleteEnded(why) => {
            let note = format!("deleting the pod: {why}");
            let event = Step::Event { warning: true, reason: "SlurmJobEnded", action: "Delete", note };
            Plan { steps: vec![event, Step::DeletePod], again: Again::OnChange }
        }
        Next::Replace { placeholder, why } => {
            let note = format!(
                "Slurm job {} was given {why}; cancelled it, and a new job will exclude that node",
                placeholder.job.target()
            );
            replace::replaced(placeholder, note)
        }
        Next::Bind(placing) => bind::binding(*placing),
        Next::WaitInSlurm(placeholder) => return Course::WaitInSlurm(placeholder),
        // The job stays: released once its cause is fixed, it runs and the pod is bound.
        Next::Held { placeholder, hold } => {
            let message = held::message(&placeholder.job, &hold);
            let failing = Step::Failing { reason: WaitReason::SlurmHeld, message, event: "SlurmJobHeld" };
            Plan { steps: vec![failing], again: Again::After(RECHECK) }
        }
        Next::DeleteRequeued { placeholder, node } => {
            let note = format!(
                "deleting the pod: Slurm job {} was requeued and no longer holds node {node}",
                placeholder.job.target()
            );
            let steps = vec![
                Step::Event { warning: true, reason: "SlurmJobRequeued", action: "Delete", note },
                Step::Cancel { placeholder, why: "its pod lost its allocation".into() },
                Step::DeletePod,
            ];
            Plan { steps, again: Again::OnChange }
        }
        Next::Nothing => Plan::look_again(Again::OnChange),
    };
    Course::Plan(plan)
}

/// Whether a job was ended on purpose (cancelled, preempted, out of time), as opposed to failing.
fn withdrawn(job: &Job) -> bool {
    job.job_state.iter().any(|state| matches!(state.as_str(), "CANCELLED" | "PREEMPTED" | "TIMEOUT" | "DEADLINE"))
}

#[cfg(test)]
#[path = "decide_tests.rs"]
mod tests;
