//! A running placeholder: where its pod goes, as observed ([`running`]: the Node hosting the job's
//! Slurm node, whether a leaving pod still holds its room, whether the pod may run there at all), and
//! the binding that follows from it, pure ([`binding`]). A pod that may not run where its job does (a
//! taint or label that appeared after the job was submitted, or a neighbour placed since that its
//! pod-level rules refuse) has its job replaced (`replace`). Every pod bound is assumed bound at once
//! (`placement::assumed`), before the pod watch shows it.

use std::borrow::Cow;

use crate::scheduler::watched_pod::WatchedPod;
use kube::ResourceExt;
use kube::api::{Api, ListParams};
use kube::runtime::reflector::ObjectRef;

use super::conditions::WaitReason;
use super::context::Context;
use super::gang;
use super::node_room;
use super::placeholder::Placeholder;
use super::placement::pod_rules;
use super::step::{Again, Plan, Step};
use super::timing::{RETRY, ROOM_RECHECK, ROOM_WAIT_LIMIT};

/// What the pass observed of an unbound pod's running job.
#[derive(Debug, Clone, PartialEq)]
pub enum Running<'a> {
    /// The pod may not run where the job does: why.
    Misplaced(String),
    /// Where the pod goes.
    Placeable(Box<Placing<'a>>),
}

/// Where an unbound pod whose job runs goes, as observed.
#[derive(Debug, Clone, PartialEq)]
pub struct Placing<'a> {
    /// The job as the pod binds by it: for a gang member, naming the member's own node.
    pub placeholder: Cow<'a, Placeholder>,
    pub host: Host,
    /// Whether pod-level rules concern the pod: they are judged again as it is assumed bound, since a
    /// neighbour bound meanwhile may refuse the Node.
    pub concern: bool,
}

/// The Kubernetes Node that hosts the job's Slurm node, as far as the pod can go there.
#[derive(Debug, Clone, PartialEq)]
pub enum Host {
    /// That Node, with room for the pod.
    Node(String),
    /// That Node, whose room pod `leaving`, which is leaving it, still holds.
    Held { node: String, leaving: String },
    /// No bound slurmd pod is labelled with the job's Slurm node.
    Unknown,
    /// A gang's job that holds no node of this member's own: the wait's message.
    NoneOfItsOwn(String),
}

/// What an unbound pod's running job means for it: whether it may run there, and where it goes.
pub async fn running<'a>(pod: &WatchedPod, placeholder: &'a Placeholder, ctx: &Context) -> Running<'a> {
    if let Some(why) = pod_rules::misplaced(&ctx.placement, pod, &placeholder.job, &ctx.pod_rules()) {
        return Running::Misplaced(why);
    }
    let own = match gang::own_node(pod, placeholder, ctx) {
        Ok(own) => own,
        Err(message) => {
            let placeholder = Cow::Borrowed(placeholder);
            let placing = Placing { placeholder, host: Host::NoneOfItsOwn(message), concern: false };
            return Running::Placeable(Box::new(placing));
        }
    };
    Running::Placeable(Box::new(placing(pod, own, ctx).await))
}

/// Where the pod goes on the nodes `placeholder`'s job holds.
pub async fn placing<'a>(pod: &WatchedPod, placeholder: Cow<'a, Placeholder>, ctx: &Context) -> Placing<'a> {
    let may_wait = placeholder.job.seconds_running().is_none_or(|seconds| seconds < ROOM_WAIT_LIMIT.as_secs());
    let host = match ctx.slurmd.kube_node_of(&placeholder.job.nodes) {
        None => Host::Unknown,
        Some(node) if may_wait => match room_held(pod, &node, ctx).await {
            Some(leaving) => Host::Held { node, leaving },
            None => Host::Node(node),
        },
        Some(node) => Host::Node(node),
    };
    let concern = matches!(host, Host::Node(_)) && pod_rules::concern(pod, &ctx.pod_rules());
    Placing { placeholder, host, concern }
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

/// The binding of a pod whose job runs, once the Node can take it: the pod is assumed bound to the
/// Node first (the executor forgets that should the binding fail).
pub fn binding(placing: Placing<'_>) -> Plan<'static> {
    let Placing { placeholder, host, concern } = placing;
    let (slurm_node, job) = (placeholder.job.nodes.as_str(), placeholder.job.target());
    let node = match host {
        Host::Node(node) => node,
        Host::Unknown => {
            let message =
                format!("Slurm job {job} runs on {slurm_node}, but no bound slurmd pod is labelled with that node");
            return Plan::wait(WaitReason::SlurmNodeUnknown, message, Again::After(RETRY));
        }
        Host::NoneOfItsOwn(message) => return Plan::wait(WaitReason::SlurmNodeUnknown, message, Again::After(RETRY)),
        Host::Held { node, leaving } => {
            let message = format!(
                "Slurm job {job} runs on {slurm_node}; Node {node} has no room for the pod until pod {leaving}, which is leaving it, is gone"
            );
            return Plan::wait(WaitReason::PreviousPodLeaving, message, Again::After(ROOM_RECHECK));
        }
    };
    let (namespace, name) = (&placeholder.pod.namespace, &placeholder.pod.name);
    let note = format!("Successfully assigned {namespace}/{name} to {node} (Slurm job {job} on {slurm_node})");
    let recheck = concern.then(|| Box::new(placeholder.into_owned()));
    let assume = Step::Assume { node: node.clone(), recheck };
    Plan { steps: vec![assume, Step::Bind { node, note, allocated: None }], again: Again::OnChange }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduler::link::PodKey;
    use crate::slurm::Job;

    #[test]
    fn a_running_job_binds_its_pod_unless_the_node_cannot_take_it() {
        let pod = PodKey { namespace: "ml".into(), name: "p".into(), uid: "u".into() };
        let job = Job { job_id: 7, job_state: vec!["RUNNING".into()], nodes: "s1".into(), ..Default::default() };
        let placeholder = Placeholder { pod, job };
        let unhosted = "Slurm job 7 runs on s1, but no bound slurmd pod is labelled with that node";
        let held =
            "Slurm job 7 runs on s1; Node k1 has no room for the pod until pod old, which is leaving it, is gone";
        let bound = "Successfully assigned ml/p to k1 (Slurm job 7 on s1)";
        let binds = |recheck| Plan {
            steps: vec![
                Step::Assume { node: "k1".into(), recheck },
                Step::Bind { node: "k1".into(), note: bound.into(), allocated: None },
            ],
            again: Again::OnChange,
        };
        let rows = [
            (
                "no slurmd pod hosts its node: soon again",
                Host::Unknown,
                false,
                Plan::wait(WaitReason::SlurmNodeUnknown, unhosted, Again::After(RETRY)),
            ),
            (
                "a gang's job with no node of the member's own: soon again",
                Host::NoneOfItsOwn("too few nodes".into()),
                false,
                Plan::wait(WaitReason::SlurmNodeUnknown, "too few nodes", Again::After(RETRY)),
            ),
            (
                "a leaving pod holds its room",
                Host::Held { node: "k1".into(), leaving: "old".into() },
                false,
                Plan::wait(WaitReason::PreviousPodLeaving, held, Again::After(ROOM_RECHECK)),
            ),
            ("bound", Host::Node("k1".into()), false, binds(None)),
            (
                "bound, its pod-level rules judged again as it is assumed bound",
                Host::Node("k1".into()),
                true,
                binds(Some(Box::new(placeholder.clone()))),
            ),
        ];
        for (name, host, concern, expected) in rows {
            let placing = Placing { placeholder: Cow::Borrowed(&placeholder), host, concern };
            assert_eq!(binding(placing), expected, "{name}");
        }
    }
}
