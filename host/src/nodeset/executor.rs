//! Carries out a plan's steps against Kubernetes and slurmrestd, in order, each idempotent: a step
//! that was already done (a pod gone, a record deleted) is not an error, so a restart may repeat it.

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use serde_json::json;

use super::context::Context;
use super::drain_reason::{self, node_context, termination_event};
use super::naming::{DRAIN_REASON_ANNOTATION, DRAIN_SINCE_ANNOTATION};
use super::plan::{Cause, Step, Target};
use super::resource::NodeSet;
use super::settings::Settings;
use super::slurmd_pod::{self, SlurmdPlacement};
use super::targets::selection;
use crate::error::Error;
use crate::kube::{gone_is_done, gone_or_replaced_is_done};
use crate::slurm::{NodeSnapshot, NodeUpdate};

/// What the steps of one pass refer to.
pub struct Pass<'a> {
    pub nodeset: &'a NodeSet,
    /// None when the spec is invalid (then no pod is created).
    pub settings: Option<&'a Settings>,
    pub revision: &'a str,
    pub targets: &'a [Target],
    pub slurm: Option<&'a NodeSnapshot>,
}

/// Takes every step; the first error is returned once all were tried, so one stuck node does not
/// hold up the others.
pub async fn execute(ctx: &Context, pass: &Pass<'_>, steps: &[Step]) -> Result<(), Error> {
    let mut first_error = None;
    for step in steps {
        match take(ctx, pass, step).await {
            // A step is planned only when something is to change: each one taken is news.
            Ok(()) => tracing::info!(nodeset = %pass.nodeset.name_any(), %step, "step taken"),
            Err(error) => {
                tracing::warn!(nodeset = %pass.nodeset.name_any(), %step, %error, "step failed");
                first_error.get_or_insert(error);
            }
        }
    }
    first_error.map_or(Ok(()), Err)
}

async fn take(ctx: &Context, pass: &Pass<'_>, step: &Step) -> Result<(), Error> {
    let nodeset = pass.nodeset;
    match step {
        Step::DeleteSlurmNode { slurm_node } => {
            ctx.slurm.delete_node(slurm_node).await?;
            let note = format!("deleted the record of Slurm node {slurm_node}: its pod is gone and no job holds it");
            ctx.publish(nodeset, false, "SlurmNodeDeleted", "Delete", note).await;
        }
        Step::ReleaseCompleting { slurm_node } => {
            let reason = "sunk: its slurmd pod is gone; releasing the jobs left completing there";
            ctx.slurm.update_node(slurm_node, &NodeUpdate::down(reason)).await?;
            let note =
                format!("marked Slurm node {slurm_node} DOWN: its slurmd pod is gone and only completing jobs held it");
            ctx.publish(nodeset, true, "CompletingJobsReleased", "Release", note).await;
        }
        Step::DeletePod { pod, uid, cause, forced } => {
            delete_pod(ctx, nodeset, pod, uid).await?;
            let (reason, note) = if let Cause::PodFinished(_) = cause {
                ("SlurmdPodFinished", format!("deleted pod {pod} to replace it: {cause}"))
            } else if *forced {
                (
                    "ForcedDeletion",
                    format!(
                        "deleted pod {pod} although its Slurm node still runs jobs: the drain timed out and spec.force is set ({cause})"
                    ),
                )
            } else {
                ("Deleting", format!("deleted pod {pod}: its Slurm node is drained and idle ({cause})"))
            };
            let warning = *forced || matches!(cause, Cause::PodFinished(_));
            ctx.publish(nodeset, warning, reason, "Delete", note).await;
        }
        Step::Drain { pod, slurm_node, cause, in_slurm } => {
            let reason = if *in_slurm {
                Some(drain_reason_for(ctx, pass, pod, slurm_node, &cause.to_string()).await?)
            } else {
                None
            };
            mark_pod(ctx, nodeset, pod, reason.as_deref()).await?;
            if let Some(reason) = reason {
                ctx.slurm.update_node(slurm_node, &NodeUpdate::drain(&reason)).await?;
                let note = format!("draining Slurm node {slurm_node} before deleting pod {pod} ({cause}): {reason}");
                ctx.publish(nodeset, false, "Draining", "Drain", note).await;
            }
        }
        Step::Undrain { pod, slurm_node, in_slurm } => {
            if *in_slurm {
                ctx.slurm.update_node(slurm_node, &NodeUpdate::undrain()).await?;
                let note = format!("undid the drain of Slurm node {slurm_node}: pod {pod} stays");
                ctx.publish(nodeset, false, "DrainUndone", "Undrain", note).await;
            }
            unmark_pod(ctx, nodeset, pod).await?;
        }
        Step::SetOwner { slurm_node, comment } => {
            ctx.slurm.update_node(slurm_node, &NodeUpdate::comment(comment)).await?;
        }
        Step::CreatePod { kube_node, slurm_node } => create_pod(ctx, pass, kube_node, slurm_node).await?,
    }
    Ok(())
}

fn pods(ctx: &Context, nodeset: &NodeSet) -> Api<Pod> {
    Api::namespaced(ctx.client.clone(), &nodeset.namespace().unwrap_or_default())
}

/// Asks the drain policy (see [`crate::decisions::off_io`]).
async fn drain_reason_for(
    ctx: &Context,
    pass: &Pass<'_>,
    pod: &str,
    slurm_node: &str,
    why: &str,
) -> Result<String, Error> {
    let kube_node = ctx
        .pods
        .state()
        .iter()
        .find(|p| p.name_any() == pod && p.namespace() == pass.nodeset.namespace())
        .and_then(|p| p.spec.as_ref()?.node_name.clone())
        .and_then(|name| ctx.kube_nodes.state().into_iter().find(|node| node.name_any() == name));
    let slurm = pass.slurm.and_then(|snapshot| snapshot.get(slurm_node));
    let context = node_context(slurm_node, kube_node.as_deref(), slurm);
    let namespace = pass.nodeset.namespace().unwrap_or_default();
    let input = termination_event(&namespace, pod, why, context);
    let decision = crate::decisions::off_io(|| ctx.policies.drain.decide(&input)).await;
    Ok(drain_reason::reason(decision, &input)?)
}

/// Notes on the pod when the drain began (kept if already noted) and the reason given, if any.
async fn mark_pod(ctx: &Context, nodeset: &NodeSet, pod: &str, reason: Option<&str>) -> Result<(), Error> {
    let since = ctx
        .pods
        .state()
        .iter()
        .find(|p| p.name_any() == pod && p.namespace() == nodeset.namespace())
        .and_then(|p| p.annotations().get(DRAIN_SINCE_ANNOTATION).cloned())
        .unwrap_or_else(|| Timestamp::now().to_string());
    let patch = json!({"metadata": {"annotations": {
        DRAIN_SINCE_ANNOTATION: since,
        DRAIN_REASON_ANNOTATION: reason.unwrap_or_default(),
    }}});
    patch_pod(ctx, nodeset, pod, patch).await
}

async fn unmark_pod(ctx: &Context, nodeset: &NodeSet, pod: &str) -> Result<(), Error> {
    let patch = json!({"metadata": {"annotations": {DRAIN_SINCE_ANNOTATION: null, DRAIN_REASON_ANNOTATION: null}}});
    patch_pod(ctx, nodeset, pod, patch).await
}

async fn patch_pod(ctx: &Context, nodeset: &NodeSet, pod: &str, patch: serde_json::Value) -> Result<(), Error> {
    Ok(gone_is_done(pods(ctx, nodeset).patch(pod, &PatchParams::default(), &Patch::Merge(patch)).await)?)
}

/// Deletes the pod with its own grace period, only if it is still the one planned for.
async fn delete_pod(ctx: &Context, nodeset: &NodeSet, pod: &str, uid: &str) -> Result<(), Error> {
    let params = DeleteParams {
        preconditions: Some(Preconditions { uid: Some(uid.to_owned()), resource_version: None }),
        ..Default::default()
    };
    Ok(gone_or_replaced_is_done(pods(ctx, nodeset).delete(pod, &params).await)?)
}

async fn create_pod(ctx: &Context, pass: &Pass<'_>, kube_node: &str, slurm_node: &str) -> Result<(), Error> {
    let Some(settings) = pass.settings else {
        return Ok(());
    };
    let target = pass.targets.iter().find(|t| t.kube_node == kube_node);
    let Some(target) = target else {
        return Err(Error::NodeGone(kube_node.to_owned()));
    };
    let placement = SlurmdPlacement { kube_node, slurm_node, revision: pass.revision, conf: &target.conf };
    let pod = slurmd_pod::build(pass.nodeset, settings, &selection(settings, pass.nodeset), &ctx.cluster, &placement);
    match pods(ctx, pass.nodeset).create(&PostParams::default(), &pod).await {
        Err(kube::Error::Api(status)) if status.code == 409 => return Ok(()),
        other => other.map(drop)?,
    }
    let note = format!("created pod {} on Node {kube_node} (Slurm node {slurm_node})", pod.name_any());
    ctx.publish(pass.nodeset, false, "Created", "Create", note).await;
    Ok(())
}
