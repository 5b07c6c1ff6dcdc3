//! One pass over one Kubernetes Node that runs a slurmd pod: Kubernetes -> Slurm (drain, resume,
//! as the drain policy decides), then Slurm -> Kubernetes (conditions and annotations). Everything
//! is re-derived from the Node, its pod and the shared Slurm node cache, so a restart, a missed
//! event or a Slurm outage only delays what is due.

use std::borrow::Cow;
use std::cmp::Reverse;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use futures::FutureExt;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};

use super::causes;
use super::context::Context;
use super::decide::{self, DecideInput, Decided, SyncStep, View, Withheld, decide};
use super::mirror;
use crate::error::Error;
use crate::kube::gone_is_done;
use crate::nodeset::{DRAIN_SINCE_ANNOTATION, SLURM_NODE_LABEL, SlurmNodeOwner, controlling_nodeset, node_context};
use crate::policy::worlds::NodeEventInput;
use crate::policy::{NodeEvent, SlurmStateChange};
use crate::slurm::{self, NodeSnapshot, NodeUpdate};
use crate::vocabulary::{DRAIN_ANNOTATION, DRAINED_FOR_ANNOTATION, STATE_ANNOTATION};

/// Even a settled Node is looked at again this often.
const RESYNC: Duration = Duration::from_secs(300);
/// While Slurm cannot be read, or a slurmd has not registered yet.
const RETRY: Duration = Duration::from_secs(5);
/// How old a listing a drain may still be decided on: past this, a listing that is slow to come is
/// one that does not come (the request timeout is 30 s).
const DRAIN_ON_VIEW_WITHIN: Duration = Duration::from_secs(30);
/// After a write to Slurm, or a decision on a view that may not show the last write yet (a stale one
/// among them): look again once the cache has polled.
const SOON: Duration = Duration::from_secs(1);

pub async fn reconcile(node: Arc<Node>, ctx: Arc<Context>) -> Result<Action, Error> {
    let listed = |ready: Option<Result<(), _>>| matches!(ready, Some(Ok(())));
    if !listed(ctx.pods.wait_until_ready().now_or_never()) {
        return Ok(Action::requeue(Duration::from_millis(500)));
    }
    let name = node.name_any();
    let pods = slurmd_pods_on(&ctx, &name);
    if pods.is_empty() {
        return Ok(Action::await_change());
    }
    // Fail closed: nothing is done on a view that cannot be trusted. On one only slow to come
    // (`View::Stale`) writes go ahead, each decided again on the node read alone; nothing is mirrored.
    let (snapshot, view) = match ctx.slurm_nodes.snapshot() {
        Ok(snapshot) => (snapshot, View::Fresh),
        Err(unreadable) => match ctx.slurm_nodes.snapshot_no_older_than(DRAIN_ON_VIEW_WITHIN) {
            Ok(snapshot) => (snapshot, View::Stale),
            Err(_) => {
                tracing::debug!(node = %name, %unreadable, "not synced: Slurm's nodes cannot be read");
                return Ok(Action::requeue(RETRY));
            }
        },
    };
    // Also while a slurmd has not registered yet, or the NodeSet controller has yet to record its pod.
    let Some((pod, listed)) = believed_pod(&pods, &snapshot) else {
        tracing::debug!(node = %name, "not synced: no slurmd pod here is one its Slurm node records");
        return Ok(Action::requeue(RETRY));
    };
    ctx.metrics.observe_view_age(snapshot.confirmed_at);
    // Decided on the Syncer's own last write where the listing predates it; mirrored as listed.
    let believed = ctx.own_writes.believed(listed, snapshot.confirmed_at);

    let started = std::time::Instant::now();
    let mut decided = decide_for(&ctx, &node, &pod, &believed, view).await?;
    // The listing may predate someone else's drain by a poll (an administrator's, 0.4 s before a
    // cordon): a write is decided again on the node as Slurm has it now, so it never lands on a
    // reason sunk did not write. The window left is this read's round trip.
    let reread = decide::writes(&decided.action);
    let slurm_node = if reread {
        let asked_at = SystemTime::now();
        let Some(fresh) = ctx.slurm.node(&listed.name).await? else {
            return Ok(Action::requeue(RETRY));
        };
        let fresh = ctx.own_writes.believed(&fresh, asked_at).into_owned();
        decided = decide_for(&ctx, &node, &pod, &fresh, View::Fresh).await?;
        Cow::Owned(fresh)
    } else {
        believed
    };
    if !decided.refused_annotations.is_empty() {
        let keys = decided.refused_annotations.join(",");
        tracing::warn!(node = %node.name_any(), %keys, "the drain policy asked to write annotations the host keeps; not written");
    }
    let mut annotations: BTreeMap<String, Option<String>> = match view {
        View::Fresh => {
            mirror::pod_annotations(listed).into_iter().map(|(key, value)| (key.to_owned(), value)).collect()
        }
        View::Stale => BTreeMap::new(),
    };
    apply(&ctx, &node, &slurm_node, &decided.action, &mut annotations).await?;
    let applied = started.elapsed();
    let unsettled = decide::writes(&decided.action) || !decided_on_settled_view(&node, &slurm_node);
    let mirrored = match view {
        View::Fresh => slurm_state_annotations(&ctx, &node, &pod, listed).await?,
        View::Stale => Vec::new(),
    };
    for kv in decided.annotations.into_iter().chain(mirrored) {
        annotations.insert(kv.key, (!kv.value.is_empty()).then_some(kv.value));
    }
    let now = Timestamp::now().to_string();
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &pod.namespace().unwrap_or_default());
    if let Some(patch) = mirror::annotation_patch(&pod, &annotations) {
        gone_is_done(pods.patch(&pod.name_any(), &PatchParams::default(), &Patch::Merge(patch)).await)?;
    }
    let cordoned = cordoned(&node);
    let (state, reason) = (&slurm_node.state, &slurm_node.reason);
    if view == View::Stale {
        // Mirrored once a listing is fresh (the node cache then wakes every Node). Looked at again
        // soon meanwhile: a view that old may miss what a pass decides on.
        tracing::debug!(node = %name, cordoned, ?state, %reason, action = ?decided.action, reread, ?applied, took = ?started.elapsed(), "synced on a stale view");
        return Ok(Action::requeue(SOON));
    }
    if let Some(patch) = mirror::pod_status_patch(&pod, &mirror::pod_conditions(listed), &now) {
        gone_is_done(pods.patch_status(&pod.name_any(), &PatchParams::default(), &Patch::Strategic(patch)).await)?;
    }
    if let Some(patch) = mirror::node_status_patch(&node, listed, &now) {
        let nodes: Api<Node> = Api::all(ctx.client.clone());
        gone_is_done(nodes.patch_status(&name, &PatchParams::default(), &Patch::Strategic(patch)).await)?;
    }
    // Where a slow cordon -> drain goes: a pass over a Node holds back the next one over it.
    tracing::debug!(node = %name, cordoned, ?state, %reason, action = ?decided.action, reread, ?applied, took = ?started.elapsed(), "synced");
    Ok(Action::requeue(if unsettled { SOON } else { RESYNC }))
}

fn cordoned(node: &Node) -> bool {
    node.spec.as_ref().and_then(|spec| spec.unschedulable).unwrap_or(false)
}

/// A drained node on an uncordoned Node, or the reverse, may be a view that predates the Syncer's
/// own last write: worth a second look soon. Not when someone else holds the node: the Syncer
/// writes nothing there, and a listing that shows them gone wakes the Node anyway.
fn decided_on_settled_view(node: &Node, slurm_node: &slurm::Node) -> bool {
    cordoned(node) == slurm_node.flags().is_draining() || decide::held_by_another(slurm_node)
}

pub fn error_policy(node: Arc<Node>, error: &Error, _ctx: Arc<Context>) -> Action {
    tracing::warn!(node = %node.name_any(), %error, "sync failed; retrying");
    Action::requeue(RETRY)
}

/// The slurmd pods on the Node that a NodeSet controls, newest first (a replacement may overlap).
/// Whatever `--nodeset-namespace` says: anyone who may create a pod may label it as a slurmd pod.
fn slurmd_pods_on(ctx: &Context, node: &str) -> Vec<Arc<Pod>> {
    let mut pods: Vec<Arc<Pod>> = ctx
        .pods
        .state()
        .into_iter()
        .filter(|pod| pod.spec.as_ref().and_then(|spec| spec.node_name.as_deref()) == Some(node))
        .filter(|pod| !matches!(pod.status.as_ref().and_then(|s| s.phase.as_deref()), Some("Succeeded" | "Failed")))
        .filter(|pod| controlling_nodeset(pod).is_some())
        .collect();
    pods.sort_by_key(|pod| Reverse(pod.metadata.creation_timestamp.clone()));
    pods
}

/// The newest of `pods` that the Slurm node it names records as its own (`SlurmNodeOwner`, written
/// by the NodeSet controller through slurmrestd), and that node as listed.
fn believed_pod<'a>(pods: &[Arc<Pod>], snapshot: &'a NodeSnapshot) -> Option<(Arc<Pod>, &'a slurm::Node)> {
    pods.iter().find_map(|pod| {
        let listed = snapshot.get(pod.labels().get(SLURM_NODE_LABEL)?)?;
        let owner = SlurmNodeOwner::from_comment(&listed.comment)?;
        owner.names(pod).then(|| (pod.clone(), listed))
    })
}

async fn decide_for(
    ctx: &Context,
    node: &Node,
    pod: &Pod,
    slurm_node: &slurm::Node,
    view: View,
) -> Result<Decided, Error> {
    let causes = causes::present(node, pod, &ctx.watched_conditions);
    let drained_for = pod.annotations().get(DRAINED_FOR_ANNOTATION).map(String::as_str);
    let input = DecideInput {
        causes: &causes,
        slurm: slurm_node,
        view,
        drained_for,
        cleared: drained_for.and_then(|key| causes::cleared(key, node)),
        nodeset_owned: pod.annotations().contains_key(DRAIN_SINCE_ANNOTATION),
    };
    let context = node_context(&slurm_node.name, Some(node), Some(slurm_node));
    let decided = crate::decisions::off_io(|| {
        decide(&input, |event| {
            ctx.policies.drain.decide(&NodeEventInput { event: event.clone(), node: context.clone() })
        })
    })
    .await?;
    Ok(decided)
}

/// Carries the decision out in Slurm and notes it on the pod (`annotations`) and in an Event.
async fn apply(
    ctx: &Context,
    node: &Node,
    slurm_node: &slurm::Node,
    action: &SyncStep,
    annotations: &mut BTreeMap<String, Option<String>>,
) -> Result<(), Error> {
    let about = node.object_ref(&());
    match action {
        SyncStep::Nothing => {}
        SyncStep::Drain { reason, cause, reapplied } => {
            ctx.slurm.update_node(&slurm_node.name, &NodeUpdate::drain(reason)).await?;
            ctx.own_writes.drained(&slurm_node.name, reason);
            annotations.insert(DRAINED_FOR_ANNOTATION.into(), Some(cause.clone()));
            annotations.insert(DRAIN_ANNOTATION.into(), Some(reason.clone()));
            let (event, note) = if *reapplied {
                (
                    "SlurmDrainReapplied",
                    format!(
                        "Slurm node {} was resumed while {cause} persists: drained again: {reason}",
                        slurm_node.name
                    ),
                )
            } else {
                ("SlurmDrainRequested", format!("drained Slurm node {}: {reason}", slurm_node.name))
            };
            tracing::info!(node = %node.name_any(), "{note}");
            ctx.recorder.publish(&about, true, event, "Drain", note).await;
            ctx.metrics.applied(if *reapplied { "reapply" } else { "drain" }, cause);
        }
        SyncStep::Resume { cause } => {
            ctx.slurm.update_node(&slurm_node.name, &NodeUpdate::undrain()).await?;
            ctx.own_writes.resumed(&slurm_node.name);
            annotations.insert(DRAINED_FOR_ANNOTATION.into(), None);
            let cause = cause.as_deref().unwrap_or("none left");
            let note =
                format!("resumed Slurm node {} (was: {}); cause cleared: {cause}", slurm_node.name, slurm_node.reason);
            tracing::info!(node = %node.name_any(), "{note}");
            ctx.recorder.publish(&about, false, "SlurmResumed", "Resume", note).await;
            ctx.metrics.applied("resume", cause);
        }
        SyncStep::Withheld(withheld) => {
            let held = format!(
                "Slurm node {} is {} by {}: {}",
                slurm_node.name,
                if slurm_node.flags().is_draining() { "drained" } else { "down" },
                who(slurm_node),
                slurm_node.reason
            );
            let (wanted, event, note, cause) = match withheld {
                Withheld::Drain { cause } => {
                    let note = format!("{held}; not drained for {cause}: the reason is not sunk's");
                    ("drain", "SlurmDrainWithheld", note, cause)
                }
                Withheld::Resume { cause } => {
                    // Sunk's drain was replaced: nothing of sunk's is left on the node to undo.
                    annotations.insert(DRAINED_FOR_ANNOTATION.into(), None);
                    let note = format!("{held}; it replaced sunk's drain for {cause}, so it is not resumed");
                    ("resume", "SlurmResumeWithheld", note, cause)
                }
            };
            ctx.recorder.publish(&about, false, event, "Withhold", note).await;
            ctx.metrics.withheld(wanted, cause);
        }
    }
    Ok(())
}

/// When Slurm's state differs from what the pod last showed: the drain policy's annotations for
/// the change, and an Event when Slurm itself (not sunk) drained or downed the node.
async fn slurm_state_annotations(
    ctx: &Context,
    node: &Node,
    pod: &Pod,
    slurm_node: &slurm::Node,
) -> Result<Vec<crate::policy::KeyValue>, Error> {
    let shown = pod.annotations().get(STATE_ANNOTATION).cloned().unwrap_or_default();
    let now = slurm_node.state.join("+");
    if shown == now {
        return Ok(Vec::new());
    }
    let before: Vec<String> = shown.split('+').filter(|s| !s.is_empty()).map(str::to_owned).collect();
    let had = |flag: &str| before.iter().any(|s| s.eq_ignore_ascii_case(flag));
    let flags = slurm_node.flags();
    let by_slurm = !crate::vocabulary::is_owned_drain(&slurm_node.reason);
    let about = node.object_ref(&());
    if flags.has("DRAIN") && !had("DRAIN") && by_slurm {
        let note = format!("Slurm node {} drained by {}: {}", slurm_node.name, who(slurm_node), slurm_node.reason);
        ctx.recorder.publish(&about, true, "SlurmDrained", "Observe", note).await;
    }
    if flags.base() == "DOWN" && !had("DOWN") {
        let note = format!("Slurm node {} is DOWN: {}", slurm_node.name, slurm_node.reason);
        ctx.recorder.publish(&about, true, "SlurmDown", "Observe", note).await;
    }
    let change = SlurmStateChange {
        before,
        after: slurm_node.state.clone(),
        reason: (!slurm_node.reason.is_empty()).then(|| slurm_node.reason.clone()),
        reason_user: (!slurm_node.reason_set_by_user.is_empty()).then(|| slurm_node.reason_set_by_user.clone()),
    };
    let input = NodeEventInput {
        event: NodeEvent::SlurmStateChanged(change),
        node: node_context(&slurm_node.name, Some(node), Some(slurm_node)),
    };
    let decision = crate::decisions::off_io(|| ctx.policies.drain.decide(&input)).await?;
    Ok(decision.annotations)
}

fn who(node: &slurm::Node) -> &str {
    if node.reason_set_by_user.is_empty() { "Slurm" } else { &node.reason_set_by_user }
}
