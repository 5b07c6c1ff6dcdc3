//! A running placeholder: bind its pod where Slurm put it, unless the pod may not run there (a taint
//! or label that appeared after the job was submitted, or a neighbour placed since that its pod-level
//! rules refuse), in which case the job is replaced (`replace`). Every pod bound is assumed bound at once
//! (`placement::assumed`), before the pod watch shows it.

use crate::scheduler::watched_pod::WatchedPod;
use kube::ResourceExt;
use kube::api::{Api, ListParams};
use kube::runtime::reflector::ObjectRef;

use super::conditions::WaitReason;
use super::context::Context;
use super::node_room;
use super::placeholder::Placeholder;
use super::placement::pod_rules;
use super::step::{Again, Plan, Step};
use super::timing::{RETRY, ROOM_RECHECK, ROOM_WAIT_LIMIT, UNHOSTED_PATIENCE};
use crate::slurm::{Job, expand_hostlist};

/// Why the pod may not run on the nodes its job holds, if it may not.
pub fn misplaced(pod: &WatchedPod, placeholder: &Placeholder, ctx: &Context) -> Option<String> {
    let spec = pod.spec.as_ref()?;
    let nodes = expand_hostlist(&placeholder.job.nodes).unwrap_or_else(|_| vec![placeholder.job.nodes.clone()]);
    let running_for = running_for(&placeholder.job).unwrap_or_default();
    if running_for >= UNHOSTED_PATIENCE.as_secs()
        && let Some(node) = nodes.iter().find(|node| ctx.slurmd.kube_node_of(node).is_none())
    {
        return Some(format!("{node}: no slurmd pod hosts it, {running_for} s after the job started"));
    }
    nodes.iter().find_map(|node| {
        let why = ctx
            .placement
            .refusal(spec, node)
            .or_else(|| super::placement::pod_rules::refusal(pod, node, placeholder.job.job_id, &ctx.pod_rules()))?;
        Some(format!("{node}: {why}"))
    })
}

/// The pod leaving `node` whose requests leave no room there for `pod` yet, if one does. Only when
/// this scheduler's own pods show one leaving is the Node's every pod read (one live list, by node).
/// Anything unknown binds, as before: the kubelet decides.
async fn room_held(pod: &WatchedPod, node: &str, ctx: &Context) -> Option<String> {
    let has_live_job = |uid: &str| ctx.jobs.has_live_job(uid);
    let leaving = ctx.pods.find(|other| node_room::is_leaving(other, pod, node, has_live_job))?.name_any();
    let kube_node = ctx.placement.nodes.get(&ObjectRef::new(node))?;
    let on_node = ListParams::default().fields(&format!("spec.nodeName={node}"));
    let neighbours = match Api::<WatchedPod>::all(ctx.client.clone()).list(&on_node).await {
        Ok(list) => list.items,
        Err(error) => {
            tracing::debug!(%error, node, "cannot list the Node's pods; binding without waiting");
            return None;
        }
    };
    node_room::overcommitted(pod, &kube_node, &neighbours).then_some(leaving)
}

/// How long the job has run, in seconds, when Slurm says when it started.
fn running_for(job: &Job) -> Option<u64> {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |now| now.as_secs());
    job.start_time.get().filter(|start| *start > 0).map(|start| now.saturating_sub(start))
}

/// The binding of the pod where its job runs, once the Node can take it. The pod is assumed bound to
/// the Node now; the executor forgets that should the binding fail.
pub async fn bind(pod: &WatchedPod, placeholder: &Placeholder, ctx: &Context) -> Plan<'static> {
    let node = ctx.slurmd.kube_node_of(&placeholder.job.nodes);
    let may_wait = running_for(&placeholder.job).is_none_or(|seconds| seconds < ROOM_WAIT_LIMIT.as_secs());
    let leaving = match &node {
        Some(node) if may_wait => room_held(pod, node, ctx).await,
        _ => None,
    };
    let uid = pod.uid().unwrap_or_default();
    if let Some(kube_node) = node.as_deref().filter(|_| leaving.is_none()) {
        if !pod_rules::concern(pod, &ctx.pod_rules()) {
            ctx.assumed.assume(&uid, kube_node);
        } else if let Some(why) = ctx.assumed.judge_then_assume(&uid, kube_node, || misplaced(pod, placeholder, ctx)) {
            // A neighbour bound since the pass observed refuses the Node: the next pass replaces the job.
            tracing::info!(pod = %placeholder.pod.name, %why, "not bound: a pod placed meanwhile refuses the node");
            return Plan::look_again(Again::After(RETRY));
        }
    }
    binding(placeholder, node, leaving)
}

/// The binding of a pod whose job runs: to `node`, the Kubernetes Node hosting the slurmd of the
/// job's Slurm node (`None`: no slurmd pod is known to), unless pod `leaving` still holds its room.
fn binding(placeholder: &Placeholder, node: Option<String>, leaving: Option<String>) -> Plan<'static> {
    let (slurm_node, job) = (placeholder.job.nodes.as_str(), placeholder.job.target());
    let Some(node) = node else {
        let message =
            format!("Slurm job {job} runs on {slurm_node}, but no bound slurmd pod is labelled with that node");
        return Plan::wait(WaitReason::SlurmNodeUnknown, message, Again::After(RETRY));
    };
    if let Some(leaving) = leaving {
        let message = format!(
            "Slurm job {job} runs on {slurm_node}; Node {node} has no room for the pod until pod {leaving}, which is leaving it, is gone"
        );
        return Plan::wait(WaitReason::PreviousPodLeaving, message, Again::After(ROOM_RECHECK));
    }
    let (namespace, name) = (&placeholder.pod.namespace, &placeholder.pod.name);
    let note = format!("Successfully assigned {namespace}/{name} to {node} (Slurm job {job} on {slurm_node})");
    Plan { steps: vec![Step::Bind { node, note, allocated: None }], again: Again::OnChange }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduler::link::PodKey;

    #[test]
    fn a_running_job_binds_its_pod_unless_the_node_cannot_take_it() {
        let pod = PodKey { namespace: "ml".into(), name: "p".into(), uid: "u".into() };
        let job = Job { job_id: 7, job_state: vec!["RUNNING".into()], nodes: "s1".into(), ..Default::default() };
        let placeholder = Placeholder { pod, job };
        let node = || Some("k1".to_string());
        let unhosted = "Slurm job 7 runs on s1, but no bound slurmd pod is labelled with that node";
        let held =
            "Slurm job 7 runs on s1; Node k1 has no room for the pod until pod old, which is leaving it, is gone";
        let bound = "Successfully assigned ml/p to k1 (Slurm job 7 on s1)";
        let rows = [
            (
                "no slurmd pod hosts its node: soon again",
                None,
                None,
                Plan::wait(WaitReason::SlurmNodeUnknown, unhosted, Again::After(RETRY)),
            ),
            (
                "a leaving pod holds its room",
                node(),
                Some("old".to_string()),
                Plan::wait(WaitReason::PreviousPodLeaving, held, Again::After(ROOM_RECHECK)),
            ),
            (
                "bound",
                node(),
                None,
                Plan {
                    steps: vec![Step::Bind { node: "k1".into(), note: bound.into(), allocated: None }],
                    again: Again::OnChange,
                },
            ),
        ];
        for (name, node, leaving, expected) in rows {
            assert_eq!(binding(&placeholder, node, leaving), expected, "{name}");
        }
    }
}
