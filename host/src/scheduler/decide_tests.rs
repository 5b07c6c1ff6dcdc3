//! Every path through `decide`, one row each: the facts that differ from a quiet, listed cluster and
//! the decision they lead to.

use std::borrow::Cow;
use std::time::Duration;

use super::*;
use crate::scheduler::PodKey;
use crate::scheduler::bind::Host;
use crate::scheduler::preemption::by_slurm::TakenBySlurm;
use crate::tenancy::{GivenUid, GrantName};
use crate::vocabulary::GANG_LINK;

fn placeholder(job_id: u32, state: &str) -> Placeholder {
    let pod = PodKey { namespace: "ml".into(), name: "p".into(), uid: "u".into() };
    let job = Job { job_id, job_state: vec![state.into()], admin_comment: pod.link().into(), ..Default::default() };
    Placeholder { pod, job }
}

fn held(reason: &str, system_comment: &str) -> Placeholder {
    let mut held = placeholder(7, "PENDING");
    (held.job.state_reason, held.job.system_comment) = (reason.into(), system_comment.into());
    held
}

fn gang(job_id: u32, state: &str) -> Placeholder {
    let mut gang = placeholder(job_id, state);
    gang.job.admin_comment = format!("{GANG_LINK}ml/g/p:u,q:v").into();
    gang
}

/// What a pass observes of `placeholder`'s running job when the pod may run on `node`.
fn placeable<'a>(placeholder: &'a Placeholder, node: &str) -> Box<Placing<'a>> {
    Box::new(Placing { placeholder: Cow::Borrowed(placeholder), host: Host::Node(node.into()), concern: false })
}

fn listed<'a>() -> Facts<'a> {
    Facts { jobs_listed: true, ..Default::default() }
}

/// A row's name, its facts, and what `decide` must say next (no duplicate to cancel, unless the row
/// says so through `duplicates`).
type Row<'a> = (&'a str, Facts<'a>, Next<'a>);

#[test]
fn every_path_through_decide() {
    let pending = [placeholder(7, "PENDING")];
    let running = [placeholder(7, "RUNNING")];
    let gang_running = [gang(9, "RUNNING")];
    let mut on_s2 = gang(9, "RUNNING");
    on_s2.job.nodes = "s2".into();
    let own_node = Box::new(Placing { placeholder: Cow::Owned(on_s2), host: Host::Node("k2".into()), concern: false });
    let two = [placeholder(7, "RUNNING"), placeholder(8, "PENDING")];
    let failed = [placeholder(5, "FAILED")];
    let cancelled = [placeholder(5, "CANCELLED")];
    let group = Group { name: "g".into(), label: crate::vocabulary::POD_GROUP_LABEL };
    let preempted = || Some(TakenBySlurm::Named("deleting the pod: job 12 preempted its Slurm job 7 on n1".into()));
    let held_by_hand = [held("JobHeldUser", "")];
    let unknown_user = [held("JobHeldAdmin", "slurm_cred_create failure, holding job.")];
    let uid_grant = UidGrant { namespace: "ml".into(), grant: GrantName::Listed(0), given: GivenUid::User };
    let rows: Vec<Row> = vec![
        (
            "Slurm unreadable: an unbound pod says so",
            Facts { slurm_unreachable: Some("timed out".into()), ..listed() },
            Next::WaitForSlurm("cannot read Slurm's jobs (timed out); the pod waits for slurmrestd".into()),
        ),
        (
            "Slurm unreadable: a bound pod goes on as before",
            Facts { slurm_unreachable: Some("timed out".into()), bound_to: Some("n1"), live: &running, ..listed() },
            Next::Nothing,
        ),
        ("before the first listing, no job means nothing", Facts::default(), Next::AwaitFirstListing),
        (
            "leaving, its containers still on the Node",
            Facts { leaving: Some("deleted".into()), live: &running, containers_may_run: true, ..listed() },
            Next::AwaitContainersStopped,
        ),
        (
            "leaving: its jobs are cancelled",
            Facts { leaving: Some("deleted".into()), live: &running, ..listed() },
            Next::CancelForLeaving { live: &running, why: "deleted".into() },
        ),
        (
            "finished, its gang's job running for members still at work: kept",
            Facts {
                leaving: Some("its pod has succeeded".into()),
                live: &gang_running,
                members_still_run: true,
                ..listed()
            },
            Next::AwaitMembers,
        ),
        ("no job yet: submit", listed(), Next::Submit),
        (
            "no job yet, a gang member: the group's job",
            Facts { group: Some(group.clone()), ..listed() },
            Next::SubmitGang(group),
        ),
        (
            "a submission's answer was lost: wait for the listing",
            Facts { job_in_doubt: true, ..listed() },
            Next::WaitForSlurm(
                "Slurm's job list does not show yet whether this pod has a job (a submission got no answer, or \
                 slurmrestd cut an array's task list); waiting for it before submitting one"
                    .into(),
            ),
        ),
        (
            "refused moments ago: not again at once",
            Facts { refused_for: Some(Duration::from_secs(40)), ..listed() },
            Next::LookAgainIn(Duration::from_secs(40)),
        ),
        ("its job failed before it ran", Facts { ended: &failed, ..listed() }, Next::Failed(&failed[0].job)),
        (
            "its job was cancelled: the pod goes",
            Facts { ended: &cancelled, ..listed() },
            Next::DeleteEnded("Slurm job 5 (CANCELLED) ended".into()),
        ),
        (
            "bound, and its job is gone",
            Facts { bound_to: Some("n1"), ..listed() },
            Next::DeleteEnded("its Slurm job no longer exists".into()),
        ),
        (
            "bound, its job taken by Slurm's preemption",
            Facts { bound_to: Some("n1"), ended: &cancelled, taken_by_slurm: preempted(), ..listed() },
            Next::PreemptedBySlurm { requeued: None, taken: preempted().unwrap() },
        ),
        ("its job waits in Slurm", Facts { live: &pending, ..listed() }, Next::WaitInSlurm(&pending[0])),
        (
            "its job was queued moments ago: nothing said yet",
            Facts { live: &pending, quiet_for: Some(Duration::from_millis(400)), ..listed() },
            Next::LookAgainIn(Duration::from_millis(400)),
        ),
        (
            "its job was queued moments ago and runs already: bind",
            Facts {
                live: &running,
                quiet_for: Some(Duration::from_millis(400)),
                running: Some(Running::Placeable(placeable(&running[0], "k1"))),
                ..listed()
            },
            Next::Bind(placeable(&running[0], "k1")),
        ),
        (
            "its job is held: an error, the job kept",
            Facts { live: &held_by_hand, ..listed() },
            Next::Held { placeholder: &held_by_hand[0], hold: Hold::Other },
        ),
        (
            "its job is held for a user slurmctld does not know: which grant gave the uid",
            Facts { live: &unknown_user, uid_grant: Some(uid_grant.clone()), ..listed() },
            Next::Held { placeholder: &unknown_user[0], hold: Hold::UnknownUser(Some(uid_grant)) },
        ),
        (
            "its job runs: bind",
            Facts { live: &running, running: Some(Running::Placeable(placeable(&running[0], "k1"))), ..listed() },
            Next::Bind(placeable(&running[0], "k1")),
        ),
        (
            "a gang's job runs: bind the member on its own node",
            Facts { live: &gang_running, running: Some(Running::Placeable(own_node.clone())), ..listed() },
            Next::Bind(own_node.clone()),
        ),
        (
            "its job runs where the pod may not: replace it",
            Facts { live: &running, running: Some(Running::Misplaced("n1: tainted".into())), ..listed() },
            Next::Replace { placeholder: &running[0], why: "n1: tainted".into() },
        ),
        (
            "bound, its job requeued by Slurm's preemption",
            Facts { bound_to: Some("n1"), live: &pending, taken_by_slurm: preempted(), ..listed() },
            Next::PreemptedBySlurm { requeued: Some(&pending[0]), taken: preempted().unwrap() },
        ),
        (
            "bound, its job requeued for another reason",
            Facts { bound_to: Some("n1"), live: &pending, ..listed() },
            Next::DeleteRequeued { placeholder: &pending[0], node: "n1" },
        ),
        (
            "bound, the preemptor not seen yet: wait for it",
            Facts {
                bound_to: Some("n1"),
                live: &pending,
                taken_by_slurm: Some(TakenBySlurm::AwaitPreemptor(Duration::from_secs(1))),
                ..listed()
            },
            Next::PreemptedBySlurm {
                requeued: Some(&pending[0]),
                taken: TakenBySlurm::AwaitPreemptor(Duration::from_secs(1)),
            },
        ),
        ("bound and running: nothing to do", Facts { bound_to: Some("n1"), live: &running, ..listed() }, Next::Nothing),
    ];
    for (name, facts, expected) in rows {
        assert_eq!(decide(&facts), Decision::only(expected), "{name}");
    }
    let two_live = Facts { live: &two, running: Some(Running::Placeable(placeable(&two[0], "k1"))), ..listed() };
    let expected = Decision { duplicates: &two[1..], next: Next::Bind(placeable(&two[0], "k1")) };
    assert_eq!(decide(&two_live), expected, "two live jobs: the younger is cancelled, the older bound");
}

#[test]
fn every_next_decided_to_the_write_is_a_plan() {
    let pending = [placeholder(7, "PENDING")];
    let running = [placeholder(7, "RUNNING")];
    let leaving = [placeholder(7, "RUNNING"), gang(9, "PENDING")];
    let gang_running = [gang(9, "RUNNING")];
    let failed = placeholder(5, "FAILED");
    let held_by_hand = [held("JobHeldUser", "")];
    let look_again = |wait| Plan::look_again(Again::After(wait));
    let on_change = |steps| Plan { steps, again: Again::OnChange };
    let event = |warning, reason, action, note: &str| Step::Event { warning, reason, action, note: note.into() };
    let cancel = |placeholder, why: &str| Step::Cancel { placeholder, why: why.into() };
    let delete_ended = "deleting the pod: Slurm job 5 (CANCELLED) ended";
    let requeued = "deleting the pod: Slurm job 7 was requeued and no longer holds node n1";
    let preempted = "deleting the pod: job 12 preempted its Slurm job 7 on n1";
    let bound = "Successfully assigned ml/p to k1 (Slurm job 7 on s1)";
    let mut on_s1 = placeholder(7, "RUNNING");
    on_s1.job.nodes = "s1".into();
    let replaced = |placeholder: &'static str| {
        format!("Slurm job {placeholder} was given n1: tainted; cancelled it, and a new job will exclude that node")
    };
    let replacing = |placeholder, note: String, again| {
        let cancel = Step::CancelAsReplaced { placeholder, why: note.clone() };
        Plan {
            steps: vec![cancel, Step::Event { warning: true, reason: "SlurmJobReplaced", action: "Schedule", note }],
            again,
        }
    };
    let rows: Vec<(&str, Next, Plan)> = vec![
        (
            "Slurm unreadable: the pod says so, and looks again soon",
            Next::WaitForSlurm("cannot read Slurm's jobs".into()),
            Plan::wait(WaitReason::SlurmUnreachable, "cannot read Slurm's jobs", Again::After(RETRY)),
        ),
        ("before the first listing", Next::AwaitFirstListing, look_again(FIRST_LISTING_RECHECK)),
        ("containers still on the Node", Next::AwaitContainersStopped, look_again(CONTAINERS_STOPPED_RECHECK)),
        ("a finished member, the gang at work", Next::AwaitMembers, look_again(RECHECK)),
        (
            "leaving: each job kept from its gang, cancelled, and said",
            Next::CancelForLeaving { live: &leaving, why: "deleted".into() },
            on_change(vec![
                Step::KeepMembersWaiting(&leaving[0]),
                cancel(&leaving[0], "deleted"),
                event(false, "SlurmJobCancelled", "Cancel", "cancelled Slurm job 7: deleted"),
                Step::KeepMembersWaiting(&leaving[1]),
                cancel(&leaving[1], "deleted"),
                event(false, "SlurmJobCancelled", "Cancel", "cancelled Slurm job 9: deleted"),
            ]),
        ),
        ("refused moments ago", Next::LookAgainIn(Duration::from_secs(40)), look_again(Duration::from_secs(40))),
        (
            "failed before it ran: said, kept for its owner",
            Next::Failed(&failed.job),
            Plan::wait(
                WaitReason::SlurmJobFailed,
                "Slurm job 5 (FAILED) failed before it ran; fix the pod's request and recreate it",
                Again::OnChange,
            ),
        ),
        (
            "the preemptor not seen yet",
            Next::PreemptedBySlurm {
                requeued: Some(&pending[0]),
                taken: TakenBySlurm::AwaitPreemptor(Duration::from_secs(1)),
            },
            look_again(Duration::from_secs(1)),
        ),
        (
            "preempted and requeued: said, the job cancelled, the pod deleted",
            Next::PreemptedBySlurm { requeued: Some(&pending[0]), taken: TakenBySlurm::Named(preempted.into()) },
            on_change(vec![
                event(true, "SlurmJobPreempted", "Delete", preempted),
                cancel(&pending[0], "its pod was preempted"),
                Step::DeletePod,
            ]),
        ),
        (
            "preempted, its job over: said, the pod deleted",
            Next::PreemptedBySlurm { requeued: None, taken: TakenBySlurm::Named(preempted.into()) },
            on_change(vec![event(true, "SlurmJobPreempted", "Delete", preempted), Step::DeletePod]),
        ),
        (
            "its job ended: said, the pod deleted",
            Next::DeleteEnded("Slurm job 5 (CANCELLED) ended".into()),
            on_change(vec![event(true, "SlurmJobEnded", "Delete", delete_ended), Step::DeletePod]),
        ),
        (
            "held: an error, warned once",
            Next::Held { placeholder: &held_by_hand[0], hold: Hold::Other },
            Plan {
                steps: vec![Step::Failing {
                    reason: WaitReason::SlurmHeld,
                    message: held::message(&held_by_hand[0].job, &Hold::Other),
                    event: "SlurmJobHeld",
                }],
                again: Again::After(RECHECK),
            },
        ),
        (
            "its job runs: assumed bound, then bound",
            Next::Bind(placeable(&on_s1, "k1")),
            on_change(vec![
                Step::Assume { node: "k1".into(), recheck: None },
                Step::Bind { node: "k1".into(), note: bound.into(), allocated: None },
            ]),
        ),
        (
            "requeued under a bound pod: said, the job cancelled, the pod deleted",
            Next::DeleteRequeued { placeholder: &pending[0], node: "n1" },
            on_change(vec![
                event(true, "SlurmJobRequeued", "Delete", requeued),
                cancel(&pending[0], "its pod lost its allocation"),
                Step::DeletePod,
            ]),
        ),
        (
            "running where the pod may not: marked, cancelled, said, and its successor submitted at once",
            Next::Replace { placeholder: &running[0], why: "n1: tainted".into() },
            replacing(&running[0], replaced("7"), Again::Now),
        ),
        (
            "a gang's job where a member may not run: replaced, the members decide at their next look",
            Next::Replace { placeholder: &gang_running[0], why: "n1: tainted".into() },
            replacing(&gang_running[0], replaced("9"), Again::After(RETRY)),
        ),
        ("nothing to do", Next::Nothing, Plan::look_again(Again::OnChange)),
    ];
    for (name, next, expected) in rows {
        assert_eq!(course(next), Course::Plan(expected), "{name}");
    }
}
