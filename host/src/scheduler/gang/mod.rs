//! Gang scheduling: the pods of one group become ONE multi-node Slurm job, one node per pod, and are
//! bound only when that job runs (Slurm allocates all its nodes at once, so never a partial group).
//!
//! The job is submitted once the group has all its members, by whichever member's pass gets there
//! first (passes of one group are serialised, and the job is recorded for every member before the
//! next looks). Its `admin_comment` names every member ([`link::GangLink`]), so after a restart each
//! member finds the job and its node again. A member deleted tears the gang down: its job is
//! cancelled; members already bound are deleted with it (the job they ran in is gone), members still
//! pending stay Pending for a new job once the group is complete again.

mod assign;
pub mod group;
mod job;
pub mod locks;
mod membership;
mod shape;

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use crate::scheduler::watched_pod::WatchedPod;
use kube::ResourceExt;
use kube::runtime::reflector::ObjectRef;

pub use group::{Group, group_of};
use job::GangJob;
use locks::GroupWait;
use membership::{Membership, membership};
use shape::{GangShape, gang_shape};

use super::conditions::WaitReason;
use super::context::Context;
use super::link::{GangLink, PodKey};
use super::placeholder::Placeholder;
use super::placement::Verdict;
use super::placement::pod_rules::{self, PodPlacement};
use super::step::{Again, Plan, Step};
use super::submit::{self, Submission, Submitted};
use super::timing::{RECHECK, RETRY};
use super::{executor, mapping, pod_lookup};
use crate::error::Error;
use crate::slurm::expand_hostlist;

/// Submits the group's job when the group is complete and has none; what its members are told then.
pub async fn submit(pod: &WatchedPod, group: &Group, ctx: &Context) -> Result<Plan<'static>, Error> {
    let namespace = pod.namespace().unwrap_or_default();
    let size = match group::size(&ctx.client, pod, group).await {
        Ok(size) => size as usize,
        Err(message) => {
            return Ok(Plan::refused(WaitReason::GroupInvalid, message.clone(), message, Again::OnChange));
        }
    };
    let lock = ctx.gang_locks.of(&namespace, &group.name);
    let mut last_wait = lock.lock().await;
    let members = waiting_members(ctx, &namespace, group);
    let has_live_job = |member: &WatchedPod| {
        let uid = member.uid().unwrap_or_default();
        ctx.jobs.for_pod(&uid).iter().any(|p| p.job.state() != crate::slurm::JobState::Ended)
    };
    let chosen = match membership(size, &members, &pod.uid().unwrap_or_default(), has_live_job) {
        Membership::Incomplete { have } => {
            let message = format!("pod group {} has {have} of its {size} pods; waiting for the rest", group.name);
            return Ok(group_waits(pod, &members, &mut last_wait, WaitReason::GroupIncomplete, message));
        }
        Membership::NoPlace => {
            let message = format!("pod group {} already has its {size} pods; this one waits for a place", group.name);
            return Ok(Plan::wait(WaitReason::GroupFull, message, Again::After(RECHECK)));
        }
        Membership::Submitted => return Ok(Plan::look_again(Again::After(RETRY))),
        Membership::Complete(chosen) => chosen,
    };
    let keys: Vec<PodKey> = chosen.iter().map(|member| key_of(member)).collect();
    // Every member mapped: a member the policy refuses says why on its own condition.
    let mut requests = Vec::with_capacity(chosen.len());
    for member in chosen {
        match mapping::map(member, ctx).await {
            Ok(request) => requests.push((member.name_any(), request)),
            Err(plan) => return Ok(on_member(pod, member, plan)),
        }
    }
    let request = match gang_shape(&requests) {
        GangShape::Job(request) => *request,
        GangShape::Differs { member, field } => {
            let message = format!(
                "pod {member} of group {} asks Slurm for another {field} than pod {}: a group is one Slurm job",
                group.name,
                chosen[0].name_any()
            );
            return Ok(group_waits(pod, chosen, &mut last_wait, WaitReason::GroupInvalid, message));
        }
    };
    let verdict = match gang_verdict(chosen, ctx) {
        Some(Ok(verdict)) => verdict,
        Some(Err((reason, why))) => {
            let message = format!("a member of pod group {} waits: {why}", group.name);
            return Ok(group_waits(pod, chosen, &mut last_wait, reason, message));
        }
        None => return Ok(Plan::look_again(Again::After(RETRY))),
    };
    if let Some(message) = job::short_of_nodes(&group.name, size, &verdict) {
        return Ok(group_waits(pod, chosen, &mut last_wait, WaitReason::Unschedulable, message));
    }
    *last_wait = None;
    let gang_job = GangJob { namespace: &namespace, group: &group.name, members: &keys, request, verdict: &verdict };
    let description = job::description(gang_job, ctx.placeholder_kind(), &ctx.installation);
    let job = format!("pod group {}'s job", group.name);
    let submission = Submission { pods: keys.clone(), description, alone: true, at_once: None };
    let job_id = match executor::submit(ctx, submission).await {
        Submitted::Queued(job_id) => job_id,
        other => return submit::answered(pod, keys, &job, other),
    };
    let note = format!("submitted pod group {} ({size} pods) as Slurm job {job_id}, one node per pod", group.name);
    tracing::info!(job = job_id, group = %group.name, "{note}");
    let steps = chosen.iter().map(|member| {
        let submitted =
            Step::Event { warning: false, reason: "SlurmJobSubmitted", action: "Schedule", note: note.clone() };
        Step::OnPod { pod: member.clone(), steps: vec![submitted] }
    });
    Ok(Plan { steps: steps.collect(), again: Again::After(RECHECK) })
}

/// `plan`, said on `member` instead of on `pod`, whose pass looks again as the plan says.
fn on_member(pod: &WatchedPod, member: &Arc<WatchedPod>, plan: Plan<'static>) -> Plan<'static> {
    if member.uid() == pod.uid() {
        return plan;
    }
    Plan { steps: vec![Step::OnPod { pod: member.clone(), steps: plan.steps }], again: plan.again }
}

/// The member's own node of the running gang job: the job as this member binds by it, naming that one
/// node (the job as it is when it links no members), or why the member has none.
pub fn own_node<'a>(
    pod: &WatchedPod,
    placeholder: &'a Placeholder,
    ctx: &Context,
) -> Result<Cow<'a, Placeholder>, String> {
    let Some(link) = GangLink::parse(&placeholder.job.admin_comment) else {
        return Ok(Cow::Borrowed(placeholder));
    };
    let nodes = expand_hostlist(&placeholder.job.nodes).unwrap_or_default();
    let slurm_node_on: HashMap<String, String> =
        ctx.slurmd.kube_nodes().into_iter().map(|(slurm, kube)| (kube, slurm)).collect();
    let bound: HashMap<String, String> = link
        .members
        .iter()
        .filter_map(|member| {
            let pod = pod_lookup::find(&ctx.pods, member)?;
            let node = pod.spec.as_ref()?.node_name.as_ref()?;
            Some((member.uid.clone(), slurm_node_on.get(node)?.clone()))
        })
        .collect();
    let uids: Vec<String> = link.members.iter().map(|member| member.uid.clone()).collect();
    let placed = assign::assign(&uids, &nodes, &bound);
    let Some(slurm_node) = placed.get(&pod.uid().unwrap_or_default()) else {
        let message = format!(
            "Slurm job {} holds {} nodes for the {} pods of group {}",
            placeholder.job.job_id,
            nodes.len(),
            uids.len(),
            link.group
        );
        return Err(message);
    };
    Ok(Cow::Owned(Placeholder {
        pod: placeholder.pod.clone(),
        job: crate::slurm::Job { nodes: slurm_node.clone(), ..placeholder.job.clone() },
    }))
}

/// Whether members of the gang whose job is `placeholder`'s, other than its pod, still run where the
/// job put them: bound, and neither deleted nor finished.
pub fn others_still_run(placeholder: &Placeholder, ctx: &Context) -> bool {
    let Some(link) = GangLink::parse(&placeholder.job.admin_comment) else { return false };
    link.members.iter().filter(|member| member.uid != placeholder.pod.uid).any(|member| {
        pod_lookup::find(&ctx.pods, member).is_some_and(|pod| {
            pod.spec.as_ref().is_some_and(|spec| spec.node_name.is_some()) && super::pod_phase::leaving(&pod).is_none()
        })
    })
}

/// The group's unbound pods that are not leaving, oldest first (then by name).
fn waiting_members(ctx: &Context, namespace: &str, group: &Group) -> Vec<Arc<WatchedPod>> {
    let mut members: Vec<Arc<WatchedPod>> = ctx
        .pods
        .state()
        .into_iter()
        .filter(|pod| pod.namespace().as_deref() == Some(namespace))
        .filter(|pod| group_of(pod).as_ref() == Some(group))
        .filter(|pod| super::pod_phase::leaving(pod).is_none())
        .filter(|pod| pod.spec.as_ref().is_none_or(|spec| spec.node_name.is_none()))
        .collect();
    members.sort_by(|a, b| {
        (a.creation_timestamp().map(|t| t.0), a.name_any()).cmp(&(b.creation_timestamp().map(|t| t.0), b.name_any()))
    });
    members
}

/// The whole group waits: this member says why, and when that differs from what the group last waited
/// for, every other member decides again now (not at its next recheck), so that all of them say it.
fn group_waits(
    pod: &WatchedPod,
    members: &[Arc<WatchedPod>],
    last_wait: &mut GroupWait,
    reason: WaitReason,
    message: String,
) -> Plan<'static> {
    let plan = Plan::wait(reason, message.clone(), Again::After(RECHECK));
    if !record_wait(last_wait, reason, message) {
        return plan;
    }
    // Asked first: the news is recorded already, so a retry of a failed write would not ask them.
    let others = members.iter().filter(|member| member.uid() != pod.uid());
    plan.after(Step::DecideAgain(others.map(|member| ObjectRef::from_obj(member.as_ref())).collect()))
}

/// Records what the group waits for now; true when that is news, so every other member must decide
/// again. A member deciding the same as the last one is no news: the passes it sets off end there.
fn record_wait(last_wait: &mut GroupWait, reason: WaitReason, message: String) -> bool {
    let wait = Some((reason, message));
    let news = *last_wait != wait;
    *last_wait = wait;
    news
}

/// The nodes every member may use: exclusions of all members joined (none while Slurm's nodes cannot
/// be read), or what a member waits for (a rule sunk cannot honour, a volume not ready).
fn gang_verdict(members: &[Arc<WatchedPod>], ctx: &Context) -> Option<Result<Verdict, (WaitReason, String)>> {
    let mut verdict: Option<Verdict> = None;
    for member in members {
        let spec = member.spec.as_ref()?;
        let next = match pod_rules::apply(ctx.placement.verdict(spec).ok()?, member, &ctx.pod_rules()) {
            PodPlacement::Verdict(next) => next,
            PodPlacement::Waits(reason, why) => {
                return Some(Err((reason, format!("pod {}: {why}", member.name_any()))));
            }
        };
        verdict = Some(match verdict {
            None => Arc::unwrap_or_clone(next),
            Some(mut joined) => {
                let excluded: HashSet<String> = next.excluded.keys().cloned().collect();
                joined.eligible.retain(|node| !excluded.contains(node));
                joined.excluded.extend(next.excluded.iter().map(|(node, why)| (node.clone(), why.clone())));
                joined
            }
        });
    }
    verdict.map(Ok)
}

fn key_of(pod: &WatchedPod) -> PodKey {
    PodKey { namespace: pod.namespace().unwrap_or_default(), name: pod.name_any(), uid: pod.uid().unwrap_or_default() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_change_of_what_a_group_waits_for_is_news_and_a_repeat_is_not() {
        use WaitReason::{GroupIncomplete, Unschedulable};
        let needs_three = "pod group h needs 3 Slurm nodes, one per pod, and 2 of the cluster's 2 may take its pods";
        // h1 alone, h2 arrives, h3 arrives, then h1 and h2 decide again and see what h3 saw.
        let passes = [
            (GroupIncomplete, "pod group h has 1 of its 3 pods; waiting for the rest", true),
            (GroupIncomplete, "pod group h has 2 of its 3 pods; waiting for the rest", true),
            (Unschedulable, needs_three, true),
            (Unschedulable, needs_three, false),
            (Unschedulable, needs_three, false),
        ];
        let mut last_wait = None;
        for (reason, message, news) in passes {
            assert_eq!(record_wait(&mut last_wait, reason, message.into()), news, "{reason:?}: {message}");
        }
    }
}
