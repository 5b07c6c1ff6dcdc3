//! A pod whose job waits in Slurm: what the pass observes of it ([`observe`]: the job's exclusions
//! against the pod's placement rules, a Node tainted, labelled or added since it was submitted, and
//! what the preemption policy chose for it), and the plan that follows ([`plan`], pure): the
//! exclusions kept in line, the preemption round carried out, and what the pod says it waits for.

use super::conditions::{describe, pending_reason};
use super::context::Context;
use super::link;
use super::mapping::{self, Mapped};
use super::placeholder::Placeholder;
use super::placement::Verdict;
use super::placement::exclusions;
use super::placement::placement_checks::{Grounds, GroundsDigest};
use super::placement::pod_rules::{self, PodPlacement};
use super::preemption::outcome::Outcome;
use super::preemption::{self, Considered};
use super::replace::replaced;
use super::step::{Again, Plan, Step};
use super::timing::{RECHECK, RETRY};
use super::watched_pod::WatchedPod;
use crate::error::Error;
use crate::slurm::{Job, JobState, compress_hostlist};

/// What a pass observes of its pod's job that does not run yet.
#[derive(Debug, PartialEq)]
pub struct Waiting {
    /// What the job's excluded nodes need against the pod's placement rules as they are now.
    pub excluded_nodes: ExcludedNodes,
    /// What considering preemption for the job came to; `None` where it does not apply (a job not
    /// pending, or one that needs a job of its own first).
    pub preemption: Option<Considered>,
}

/// Observes what a job not yet running needs: its exclusions judged against the pod's placement
/// rules (a gang's are fixed at submission: its members may differ), and preemption considered for
/// a pending one (the policy asked).
pub async fn observe(pod: &WatchedPod, placeholder: &Placeholder, ctx: &Context) -> Result<Waiting, Error> {
    let pending = placeholder.job.state() == JobState::Pending;
    let excluded_nodes = if pending && !link::is_gang(&placeholder.job) {
        excluded_nodes(pod, placeholder, ctx).await?
    } else {
        ExcludedNodes::Unjudged
    };
    let preemption = if pending && excluded_nodes != ExcludedNodes::NeedsOwnJob {
        preemption::consider(pod, placeholder, ctx).await
    } else {
        None
    };
    Ok(Waiting { excluded_nodes, preemption })
}

/// What a pass does for a job waiting in Slurm, as observed: keep its exclusions in line (or replace
/// it, when only a job of its own can carry them), carry out the preemption round the policy chose,
/// and say on the pod what the job waits for.
pub fn plan(placeholder: &Placeholder, waiting: Waiting) -> Plan<'_> {
    let Waiting { excluded_nodes, preemption } = waiting;
    if excluded_nodes == ExcludedNodes::NeedsOwnJob {
        let note = format!(
            "the pod's placement rules changed, and Slurm job {} waits in its job array's record, whose \
             excluded nodes every task of the array shares; cancelled it, and a new job of the pod's own will \
             carry them",
            placeholder.job.target()
        );
        return replaced(placeholder, note);
    }
    let in_line = excluded_nodes.step(placeholder);
    let job = &placeholder.job;
    let waiting = match preemption {
        // What the pod then says depends on what the round did: the step says it, and ends the plan.
        Some(Considered::Chosen(round)) => Plan { steps: vec![Step::Preempt { round, job }], again: Again::OnChange },
        Some(Considered::Settled(outcome)) => said(job, Some(&outcome)),
        None => said(job, None),
    };
    match in_line {
        Some(step) => waiting.after(step),
        None => waiting,
    }
}

/// What a pod whose job waits in Slurm says: the job and Slurm's reason, and what preemption did for
/// it, if it was considered; looked at again soon while victims leave.
pub fn said(job: &Job, preemption: Option<&Outcome>) -> Plan<'static> {
    let mut message = format!("waiting for Slurm: job {}", describe(job));
    let mut again = RECHECK;
    if let Some(outcome) = preemption {
        message = format!("{message}; {}", outcome.note);
        if outcome.look_again_soon {
            again = RETRY;
        }
    }
    Plan::wait(pending_reason(&job.state_reason), message, Again::After(again))
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
async fn excluded_nodes(pod: &WatchedPod, placeholder: &Placeholder, ctx: &Context) -> Result<ExcludedNodes, Error> {
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
    let Ok(PodPlacement::Verdict(verdict)) = pod_rules::where_it_may_go(&ctx.placement, pod, &ctx.pod_rules()) else {
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

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use super::*;
    use crate::policy::worlds::ChooseVictimsInput;
    use crate::policy::{PreemptionDecision, Preemptor, WorkloadKind};
    use crate::scheduler::conditions::WaitReason;
    use crate::scheduler::link::PodKey;
    use crate::scheduler::preemption::Round;
    use crate::scheduler::preemption::outcome::Outcome;
    use crate::slurm::NoValue;

    #[test]
    fn a_waiting_job_is_kept_in_line_preempted_for_and_said() {
        let pod = PodKey { namespace: "ml".into(), name: "p".into(), uid: "u".into() };
        let job = Job {
            job_id: 7,
            job_state: vec!["PENDING".into()],
            state_reason: "Resources".into(),
            ..Default::default()
        };
        let placeholder = Placeholder { pod, job };
        let job = &placeholder.job;
        let grounds = Grounds::of(&WatchedPod::default(), job, 1, 0).digest();
        let checked = Step::PlacementChecked { placeholder: &placeholder, grounds };
        let excluded = vec!["n2".to_string()];
        let update = Step::UpdateExcludedNodes { placeholder: &placeholder, excluded: excluded.clone(), grounds };
        let settled = || Outcome { note: "preempting nothing: no victims".into(), look_again_soon: false };
        let preemptor = Preemptor {
            kind: WorkloadKind::Pod,
            name: "ml/p".into(),
            job_id: Some(7),
            priority: 100,
            partition: "pods".into(),
            node_count: 1,
            cpus: 1,
            memory_mib: 64,
            gpus: 0,
        };
        let round = Box::new(Round {
            input: ChooseVictimsInput { preemptor, nodes: vec![], candidates: vec![] },
            decision: PreemptionDecision { victims: vec![], reason: "room for p".into() },
        });
        let own_job_note = "the pod's placement rules changed, and Slurm job 7 waits in its job array's record, \
            whose excluded nodes every task of the array shares; cancelled it, and a new job of the pod's own \
            will carry them";
        let rows = [
            (
                "in line, nothing to preempt: said",
                ExcludedNodes::InLine(grounds),
                None,
                said(job, None).after(checked.clone()),
            ),
            (
                "exclusions updated, preemption settled: said with why",
                ExcludedNodes::Update { excluded, grounds },
                Some(Considered::Settled(settled())),
                said(job, Some(&settled())).after(update),
            ),
            (
                "the policy chose victims: the round, which says the wait",
                ExcludedNodes::Unjudged,
                Some(Considered::Chosen(round.clone())),
                Plan { steps: vec![Step::Preempt { round, job }], again: Again::OnChange },
            ),
            (
                "exclusions only a job of its own can carry: replaced",
                ExcludedNodes::NeedsOwnJob,
                None,
                replaced(&placeholder, own_job_note.into()),
            ),
        ];
        for (name, excluded_nodes, preemption, expected) in rows {
            assert_eq!(plan(&placeholder, Waiting { excluded_nodes, preemption }), expected, "{name}");
        }
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
    fn a_job_waiting_in_slurm_says_why_and_what_preemption_did() {
        let waiting = |reason: &str| Job {
            job_id: 7,
            job_state: vec!["PENDING".into()],
            state_reason: reason.into(),
            ..Default::default()
        };
        let preempting = |soon| Outcome { note: "preempting job 3".into(), look_again_soon: soon };
        let rows = [
            ("for nodes", waiting("Resources"), None, WaitReason::Unschedulable, "", RECHECK),
            ("for a dependency", waiting("Dependency"), None, WaitReason::SlurmJobPending, "", RECHECK),
            (
                "victims leaving",
                waiting("Resources"),
                Some(preempting(true)),
                WaitReason::Unschedulable,
                "; preempting job 3",
                RETRY,
            ),
            (
                "nothing to preempt",
                waiting("Resources"),
                Some(preempting(false)),
                WaitReason::Unschedulable,
                "; preempting job 3",
                RECHECK,
            ),
        ];
        for (name, job, outcome, reason, preemption, again) in rows {
            let message = format!("waiting for Slurm: job 7 (PENDING: {}){preemption}", job.state_reason);
            assert_eq!(said(&job, outcome.as_ref()), Plan::wait(reason, message, Again::After(again)), "{name}");
        }
    }
}
