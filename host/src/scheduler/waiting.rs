//! A pod whose job waits in Slurm: keep the job's exclusions in step with the pod's placement rules
//! (a Node tainted, labelled or added since it was submitted), consider preemption for it, and say on
//! the pod what it waits for.

use super::context::Context;
use super::decide::waiting_in_slurm;
use super::executor;
use super::link;
use super::mapping::{self, Mapped};
use super::placeholder::Placeholder;
use super::placement::Verdict;
use super::placement::exclusions;
use super::placement::placement_checks::{Grounds, GroundsDigest};
use super::placement::pod_rules::PodPlacement;
use super::preemption::{self, Considered};
use super::replace::replaced;
use super::step::{Plan, Step};
use super::submit::where_it_may_go;
use super::watched_pod::WatchedPod;
use crate::error::Error;
use crate::slurm::{Job, JobState, compress_hostlist};

/// A job not yet running: keep its exclusions in step with the pod's placement rules, consider
/// preemption for it, and say on the pod what it waits for.
pub async fn wait_in_slurm<'a>(
    pod: &WatchedPod,
    placeholder: &'a Placeholder,
    ctx: &Context,
) -> Result<Plan<'a>, Error> {
    let pending = placeholder.job.state() == JobState::Pending;
    // A gang's exclusions are fixed at submission (its members may differ).
    let excluded_nodes = if pending && !link::is_gang(&placeholder.job) {
        excluded_nodes(pod, placeholder, ctx).await?
    } else {
        ExcludedNodes::Unjudged
    };
    if excluded_nodes == ExcludedNodes::NeedsOwnJob {
        let note = format!(
            "the pod's placement rules changed, and Slurm job {} waits in its job array's record, whose \
             excluded nodes every task of the array shares; cancelled it, and a new job of the pod's own will \
             carry them",
            placeholder.job.target()
        );
        return Ok(replaced(placeholder, note));
    }
    let in_line = excluded_nodes.step(placeholder);
    let considered = if pending { preemption::consider(pod, placeholder, ctx).await } else { None };
    let preemption = match considered {
        None => None,
        Some(Considered::Settled(outcome)) => Some(outcome),
        Some(Considered::Chosen(round)) => Some(executor::preempt(ctx, pod, &round).await?),
    };
    let waiting = waiting_in_slurm(&placeholder.job, preemption.as_ref());
    Ok(match in_line {
        Some(step) => waiting.after(step),
        None => waiting,
    })
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
    let Ok(PodPlacement::Verdict(verdict)) = where_it_may_go(pod, ctx) else {
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
    use crate::slurm::NoValue;

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
}
