//! One pass over one NodeSet: look at everything, plan, act, report. Everything is re-derived from
//! the NodeSet, its Nodes and pods, and Slurm's node cache, so a restart resumes where it stopped.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use futures::FutureExt;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use serde_json::json;

use super::context::Context;
use super::executor::{self, Pass};
use super::naming::NODESET_FINALIZER;
use super::observed::ObservedPod;
use super::plan::PlanInput;
use super::planner;
use super::resource::{NodeSet, NodeSetStatus};
use super::settings::{self, Settings, SpecErrors, Strategy, parse_duration};
use super::slurmd_pod::revision;
use super::status::{self, StatusInput, what_blocks};
use super::targets::{self, key_of, pod_owner};
use crate::error::Error;
use crate::kube::gone_is_done;

/// Even a settled NodeSet is looked at again this often (claims between NodeSets, missed events).
const RESYNC: Duration = Duration::from_secs(120);
const RETRY: Duration = Duration::from_secs(5);

pub async fn reconcile(nodeset: Arc<NodeSet>, ctx: Arc<Context>) -> Result<Action, Error> {
    // Before the first full listing of Nodes and pods, a missing one only means "not known yet": a
    // pod would look orphaned and be drained.
    let listed = |ready: Option<Result<(), _>>| matches!(ready, Some(Ok(())));
    if !listed(ctx.kube_nodes.wait_until_ready().now_or_never()) || !listed(ctx.pods.wait_until_ready().now_or_never())
    {
        return Ok(Action::requeue(Duration::from_millis(500)));
    }
    let deleting = nodeset.metadata.deletion_timestamp.is_some();
    if deleting && !nodeset.finalizers().iter().any(|f| f == NODESET_FINALIZER) {
        return Ok(Action::await_change());
    }
    if !deleting && !nodeset.finalizers().iter().any(|f| f == NODESET_FINALIZER) {
        set_finalizer(&ctx, &nodeset, true).await?;
    }
    let name = nodeset.name_any();
    let parsed = settings::settings(&name, &nodeset.spec);
    if let (Err(errors), false) = (&parsed, deleting) {
        return report_invalid(&ctx, &nodeset, errors).await;
    }
    let settings = parsed.ok();
    let key = key_of(&nodeset);
    let revision = revision(&nodeset, &ctx.cluster);
    let all_pods = ctx.pods.state();
    let pods: Vec<ObservedPod> =
        all_pods.iter().filter(|pod| pod_owner(pod).as_ref() == Some(&key)).map(|pod| ObservedPod::of(pod)).collect();
    let assignment = match &settings {
        Some(settings) => {
            targets::assign(&nodeset, settings, &ctx.nodesets.state(), &ctx.kube_nodes.state(), &all_pods)
        }
        None => Default::default(),
    };
    let snapshot = ctx.slurm_nodes.snapshot();
    let uid = nodeset.uid().unwrap_or_default();
    let input = PlanInput {
        owner: &key,
        owner_uid: &uid,
        revision: &revision,
        deleting,
        strategy: settings.as_ref().map_or(Strategy::OnDelete, |s| s.strategy),
        drain_timeout: drain_timeout(&nodeset, settings.as_ref()),
        force: nodeset.spec.force,
        targets: &assignment.targets,
        departures: &assignment.departures,
        occupied: &assignment.occupied,
        pods: &pods,
        slurm: snapshot.as_ref().ok(),
        now: SystemTime::now(),
    };
    let plan = planner::plan(&input);
    if !plan.settled() {
        let steps: Vec<String> = plan.steps.iter().map(ToString::to_string).collect();
        tracing::debug!(nodeset = %key, ?steps, waiting = ?plan.waiting, requeue_after = ?plan.requeue_after, "plan");
    }
    let pass = Pass {
        nodeset: &nodeset,
        settings: settings.as_ref(),
        revision: &revision,
        targets: &assignment.targets,
        slurm: snapshot.as_ref().ok(),
    };
    let executed = executor::execute(&ctx, &pass, &plan.steps).await;

    let blocked_nodes: Vec<String> = plan.blocked.iter().map(|b| b.slurm_node.clone()).collect();
    let blocking_jobs = ctx.blocking_jobs.on(&blocked_nodes).await;
    let previous = nodeset.status.clone().unwrap_or_default();
    let status = status::compose(&StatusInput {
        previous: &previous,
        generation: nodeset.metadata.generation,
        revision: &revision,
        targets: &assignment.targets,
        pods: &pods,
        slurm: snapshot.as_ref(),
        plan: &plan,
        conflicts: &assignment.conflicts,
        blocking_jobs: &blocking_jobs,
        now: Timestamp::now(),
    });
    // Told once per block: the condition's message remembers across restarts (up to its cut), the
    // Context past the cut.
    let already_reported = blocked_message(&previous);
    let blocks: Vec<String> = plan.blocked.iter().map(|blocked| what_blocks(blocked, &blocking_jobs)).collect();
    for what in ctx.reported_blocks.news(&key.to_string(), &blocks) {
        if !already_reported.is_some_and(|message| message.contains(&what)) {
            let note = format!("{what}; drainTimeout passed, nothing is forced");
            ctx.publish(&nodeset, true, "UpdateBlocked", "Drain", note).await;
        }
    }
    write_status(&ctx, &nodeset, &previous, status).await?;
    executed?;
    if deleting && plan.settled() {
        set_finalizer(&ctx, &nodeset, false).await?;
        return Ok(Action::await_change());
    }
    Ok(Action::requeue(plan.requeue_after.unwrap_or(RESYNC)))
}

pub fn error_policy(nodeset: Arc<NodeSet>, error: &Error, _ctx: Arc<Context>) -> Action {
    tracing::warn!(nodeset = %format!("{}/{}", nodeset.namespace().unwrap_or_default(), nodeset.name_any()), %error, "reconcile failed; retrying");
    Action::requeue(RETRY)
}

/// The drain timeout, even for a NodeSet being deleted with a spec that no longer validates.
fn drain_timeout(nodeset: &NodeSet, settings: Option<&Settings>) -> Duration {
    settings.map(|s| s.drain_timeout).unwrap_or_else(|| {
        let fallback = Duration::from_secs(3600);
        nodeset.spec.drain_timeout.as_deref().and_then(|text| parse_duration(text).ok()).unwrap_or(fallback)
    })
}

/// The message of an `UpdateBlocked` condition that is true.
fn blocked_message(status: &NodeSetStatus) -> Option<&str> {
    let condition = status.conditions.iter().find(|c| c.type_ == "UpdateBlocked" && c.status == "True")?;
    Some(&condition.message)
}

async fn report_invalid(ctx: &Context, nodeset: &NodeSet, errors: &SpecErrors) -> Result<Action, Error> {
    let previous = nodeset.status.clone().unwrap_or_default();
    let status = status::invalid(&previous, nodeset.metadata.generation, errors, Timestamp::now());
    if write_status(ctx, nodeset, &previous, status).await? {
        ctx.publish(nodeset, true, "InvalidSpec", "Validate", format!("nothing changes until fixed: {errors}")).await;
    }
    Ok(Action::requeue(RESYNC))
}

/// Writes the status when it says something new; returns whether it did.
async fn write_status(
    ctx: &Context,
    nodeset: &NodeSet,
    previous: &NodeSetStatus,
    status: NodeSetStatus,
) -> Result<bool, Error> {
    if nodeset.status.is_some() && *previous == status {
        return Ok(false);
    }
    let api = Api::<NodeSet>::namespaced(ctx.client.clone(), &nodeset.namespace().unwrap_or_default());
    api.patch_status(&nodeset.name_any(), &PatchParams::default(), &Patch::Merge(json!({ "status": status }))).await?;
    Ok(true)
}

/// Adds or removes the cleanup finalizer, guarded by the resource version it was computed from.
async fn set_finalizer(ctx: &Context, nodeset: &NodeSet, present: bool) -> Result<(), Error> {
    let mut finalizers: Vec<String> =
        nodeset.finalizers().iter().filter(|f| *f != NODESET_FINALIZER).cloned().collect();
    if present {
        finalizers.push(NODESET_FINALIZER.to_owned());
    }
    let patch = json!({"metadata": {"finalizers": finalizers, "resourceVersion": nodeset.resource_version()}});
    let api = Api::<NodeSet>::namespaced(ctx.client.clone(), &nodeset.namespace().unwrap_or_default());
    Ok(gone_is_done(api.patch(&nodeset.name_any(), &PatchParams::default(), &Patch::Merge(patch)).await)?)
}
