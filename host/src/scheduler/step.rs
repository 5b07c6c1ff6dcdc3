//! The writes a pass decides on, as values: what is said on the pod (and on the other members of its
//! gang), what Slurm and the host's memory are told, and when the pod is looked at again. Every course
//! of a pass returns a [`Plan`]; only `executor` carries one out, once per round, so every decision can
//! be checked in a table test without a cluster.
//!
//! A plan's steps are taken in order and the first that fails ends the pass (the pass is retried):
//! a pod is deleted only after its job was cancelled, and a wait is said before its Event.

use std::sync::Arc;
use std::time::Duration;

use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;

use super::conditions::WaitReason;
use super::link::PodKey;
use super::placeholder::Placeholder;
use super::placement::placement_checks::GroundsDigest;
use super::preemption::Round;
use super::watched_pod::WatchedPod;
use crate::slurm::Job;

/// One write of a pass.
#[derive(Debug, Clone, PartialEq)]
pub enum Step<'a> {
    /// Say on the pod's `PodScheduled` condition why it is not scheduled (the attempt is counted).
    Wait { reason: WaitReason, message: String },
    /// [`Step::Wait`], with a Warning Event `event` saying the same when the condition said
    /// something else: a pod looked at again every minute is not told again.
    Failing { reason: WaitReason, message: String, event: &'static str },
    /// An Event on the pod.
    Event { warning: bool, reason: &'static str, action: &'static str, note: String },
    /// Before a gang's job is cancelled for a member that leaves: a job that does not run yet is
    /// marked replaced, so the other members wait for a new one.
    KeepMembersWaiting(&'a Placeholder),
    /// Cancel the pod's job, saying why in the log.
    Cancel { placeholder: &'a Placeholder, why: String },
    /// Mark the job replaced, then cancel it, saying why in the log: a job so cancelled never ends
    /// its pod.
    CancelAsReplaced { placeholder: &'a Placeholder, why: String },
    /// Write the admin link of a job allocated as its tenant that names its pod only in its sealed
    /// comment (`link`, as the seal opened it), and give the comment back what followed the seal.
    WriteLink { placeholder: &'a Placeholder, link: String },
    /// Remember that the pod's waiting job is in line with its placement rules on these grounds: not
    /// judged again until one of them changes.
    PlacementChecked { placeholder: &'a Placeholder, grounds: GroundsDigest },
    /// Update the pod's waiting job to exclude exactly `excluded` (host lists), then as
    /// [`Step::PlacementChecked`]. A job Slurm no longer lets update (started, ended, a node it names
    /// deleted) is left to the next pass, which sees it as it is then.
    UpdateExcludedNodes { placeholder: &'a Placeholder, excluded: Vec<String>, grounds: GroundsDigest },
    /// Remember that Slurm refused a submission for these pods: not submitted again at once.
    RecordRefusal(Vec<PodKey>),
    /// Remember that a submission for these pods got no answer: nothing is submitted for them until a
    /// listing shows whether Slurm made the job.
    RecordInDoubt(Vec<PodKey>),
    /// Assume the pod bound to Kubernetes Node `node` (`placement::assumed`) before it is. `recheck`:
    /// the job it binds by, whose Node its pod-level rules judge again first, as one step with the
    /// assumption: a neighbour assumed bound since the pass observed may refuse the Node, and then
    /// nothing more of the plan is taken and the pod is looked at again shortly.
    Assume { node: String, recheck: Option<Box<Placeholder>> },
    /// Bind the pod to Kubernetes Node `node`; once it is bound (not by an earlier pass), the time it
    /// waited is counted and its Event says `note`. `allocated`: the note of a `SlurmJobAllocated`
    /// Event written while the binding is made (a round trip before it would delay the binding).
    Bind { node: String, note: String, allocated: Option<String> },
    /// Carry out the preemption round the policy chose for the pod's waiting `job`, then say what the
    /// job waits for and what the round did (`waiting::said`); the plan ends there, looked
    /// at again as that says.
    Preempt { round: Box<Round>, job: &'a Job },
    /// Take `steps` on another pod: a gang member this pod's pass speaks for.
    OnPod { pod: Arc<WatchedPod>, steps: Vec<Step<'static>> },
    /// Have these pods decide again now, not at their next look (the members of a gang whose wait
    /// changed).
    DecideAgain(Vec<ObjectRef<WatchedPod>>),
    /// Delete the pod.
    DeletePod,
}

/// When the pod is looked at again, unless something changes first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Again {
    /// In this very pass, once the plan is taken: its writes changed what the pass observes (the
    /// pod's job was cancelled to be replaced, and its successor is submitted next).
    Now,
    After(Duration),
    /// Only when something changes (the pod, its jobs, a Node).
    OnChange,
}

impl Again {
    /// The controller's action; `None` for [`Again::Now`], which the pass takes itself.
    pub fn action(self) -> Option<Action> {
        match self {
            Again::Now => None,
            Again::After(wait) => Some(Action::requeue(wait)),
            Again::OnChange => Some(Action::await_change()),
        }
    }
}

/// The writes of a pass, in order, and when it looks again.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan<'a> {
    pub steps: Vec<Step<'a>>,
    pub again: Again,
}

impl<'a> Plan<'a> {
    /// Nothing written: only looked at again.
    pub fn look_again(again: Again) -> Self {
        Self { steps: Vec::new(), again }
    }

    /// The pod says it waits for `reason`, and is looked at again.
    pub fn wait(reason: WaitReason, message: impl Into<String>, again: Again) -> Self {
        Self { steps: vec![Step::Wait { reason, message: message.into() }], again }
    }

    /// The plan after `first`, which is taken before its steps.
    pub fn after(mut self, first: Step<'a>) -> Self {
        self.steps.insert(0, first);
        self
    }

    /// The plan after `first`, which are taken before its steps.
    pub fn after_steps(mut self, first: Vec<Step<'a>>) -> Self {
        self.steps.splice(0..0, first);
        self
    }

    /// [`Plan::wait`], with a Warning Event `FailedScheduling` whose note is `note`.
    pub fn refused(reason: WaitReason, message: impl Into<String>, note: impl Into<String>, again: Again) -> Self {
        let event = Step::Event { warning: true, reason: "FailedScheduling", action: "Schedule", note: note.into() };
        Self { steps: vec![Step::Wait { reason, message: message.into() }, event], again }
    }
}
