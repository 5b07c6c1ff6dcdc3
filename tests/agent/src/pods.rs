//! The kubelet's part for pods bound to the fake Nodes: start them (a real slurmd for slurmd
//! pods), report them Running, and finish their deletion.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use futures::channel::mpsc;
use futures::{FutureExt, StreamExt};
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, Patch, PatchParams, Preconditions};
use kube::runtime::controller::{self, Action};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{Controller, WatchStreamExt, watcher};
use kube::{Client, ResourceExt};

use crate::slurmd::{Ensure, Supervisor, conf_from_args};
use crate::status::{self, Run};

/// Marks a slurmd pod; the value is the Slurm node name.
pub const SLURM_NODE_LABEL: &str = "sunk.dev/slurm-node";
/// The longest a slurmd is given to stop when its pod is deleted.
const MAX_GRACE: Duration = Duration::from_secs(10);
/// Grace for the slurmd of a pod that vanished without a graceful deletion (force-deleted).
const ORPHAN_GRACE: Duration = Duration::from_secs(5);
/// How often the agent's slurmd are compared with the pods that exist, in case a deletion was
/// missed while the watch was down.
const SWEEP_EVERY: Duration = Duration::from_secs(2);
/// Pods bound to Nodes that are not (or not yet) fake ones are looked at again this often.
const FOREIGN_NODE_RECHECK: Duration = Duration::from_secs(5);

struct Context {
    client: Client,
    nodes: Store<Node>,
    pods: Store<Pod>,
    supervisor: Arc<Supervisor>,
    restarted: mpsc::UnboundedSender<ObjectRef<Pod>>,
}

#[derive(Debug, thiserror::Error)]
enum Error {
    #[error(transparent)]
    Kube(#[from] kube::Error),
    #[error("{0:#}")]
    Slurmd(#[from] anyhow::Error),
}

/// Runs the pod reconciler until `shutdown` resolves and the running reconciliations finish.
pub async fn run(
    client: Client,
    nodes: Store<Node>,
    supervisor: Arc<Supervisor>,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) {
    let (pods, writer) = reflector::store();
    let forget = supervisor.clone();
    let bound = watcher::Config::default().fields("spec.nodeName!=");
    let stream = watcher(Api::<Pod>::all(client.clone()), bound)
        .default_backoff()
        .reflect(writer)
        .inspect(move |event| {
            if let Ok(watcher::Event::Delete(pod)) = event {
                stop_for_vanished(&forget, pod);
            }
        })
        .touched_objects();
    let (restarted, restarts) = mpsc::unbounded();
    let sweeper = tokio::spawn(sweep(pods.clone(), supervisor.clone()));
    let ctx = Arc::new(Context { client, nodes, pods: pods.clone(), supervisor, restarted });
    Controller::for_stream(stream, pods)
        .reconcile_on(restarts)
        .graceful_shutdown_on(shutdown)
        .run(reconcile, error_policy, ctx)
        .for_each(|result| async move {
            match result {
                Ok(_) => {}
                Err(controller::Error::ObjectNotFound(pod)) => tracing::debug!(%pod, "pod is gone"),
                Err(controller::Error::ReconcilerFailed(..)) => {} // logged by error_policy
                Err(error) => tracing::warn!(error = %error, "pod controller"),
            }
        })
        .await;
    sweeper.abort();
}

fn error_policy(pod: Arc<Pod>, error: &Error, _: Arc<Context>) -> Action {
    tracing::warn!(pod = %ObjectRef::from_obj(&*pod), %error, "reconciling pod failed; retrying");
    Action::requeue(Duration::from_secs(1))
}

fn slurm_node(pod: &Pod) -> Option<&str> {
    pod.labels().get(SLURM_NODE_LABEL).map(String::as_str).filter(|name| !name.is_empty())
}

fn node_name(pod: &Pod) -> Option<&str> {
    pod.spec.as_ref()?.node_name.as_deref().filter(|name| !name.is_empty())
}

/// The grace period a deleted pod's slurmd gets: the pod's own, at most [`MAX_GRACE`].
pub fn grace_of(pod: &Pod) -> Duration {
    let seconds = pod.metadata.deletion_grace_period_seconds.unwrap_or(30);
    Duration::from_secs(u64::try_from(seconds).unwrap_or(0)).min(MAX_GRACE)
}

async fn reconcile(pod: Arc<Pod>, ctx: Arc<Context>) -> Result<Action, Error> {
    let Some(node) = node_name(&pod) else { return Ok(Action::await_change()) };
    if ctx.nodes.get(&ObjectRef::new(node)).is_none() {
        tracing::debug!(pod = %ObjectRef::from_obj(&*pod), node, "bound to a Node that is not a fake one");
        return Ok(Action::requeue(FOREIGN_NODE_RECHECK));
    }
    let api: Api<Pod> = Api::namespaced(ctx.client.clone(), &pod.namespace().unwrap_or_default());
    if pod.metadata.deletion_timestamp.is_some() {
        finish_deletion(&pod, &api, &ctx).await?;
        return Ok(Action::await_change());
    }
    if matches!(pod.status.as_ref().and_then(|status| status.phase.as_deref()), Some("Succeeded" | "Failed")) {
        return Ok(Action::await_change());
    }
    let run = match slurm_node(&pod) {
        Some(slurm_node) => match start_slurmd(&pod, slurm_node, &ctx).await? {
            Some(run) => Some(run),
            None => return Ok(Action::requeue(Duration::from_secs(1))),
        },
        None => None,
    };
    if !status::up_to_date(&pod, run.as_ref()) {
        let patch = status::running_status(&pod, run.as_ref(), Timestamp::now());
        match api.patch_status(&pod.name_any(), &PatchParams::default(), &Patch::Strategic(patch)).await {
            Ok(_) => tracing::info!(
                pod = %ObjectRef::from_obj(&*pod),
                node,
                restarts = run.as_ref().map(|run| run.restarts),
                "pod running"
            ),
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(error) => return Err(error.into()),
        }
    }
    Ok(Action::await_change())
}

/// Makes sure the slurmd pod's slurmd runs. `None` while another pod's slurmd still holds the
/// Slurm node name (an old pod of the same name still stopping).
async fn start_slurmd(pod: &Pod, slurm_node: &str, ctx: &Context) -> Result<Option<Run>, Error> {
    let uid = pod.uid().unwrap_or_default();
    let first = pod.spec.as_ref().and_then(|spec| spec.containers.first());
    let args = first.and_then(|container| container.args.as_deref()).unwrap_or_default();
    let conf = conf_from_args(args).unwrap_or_else(|| {
        tracing::warn!(pod = %ObjectRef::from_obj(pod), "slurmd pod without `--conf <config>` in its first container's args");
        ""
    });
    let base_restarts = first
        .and_then(|container| {
            pod.status
                .as_ref()?
                .container_statuses
                .as_ref()?
                .iter()
                .find(|status| status.name == container.name)
                .map(|status| status.restart_count)
        })
        .unwrap_or(0);
    let key = ObjectRef::from_obj(pod);
    let still_wanted = {
        let (pods, key, uid) = (ctx.pods.clone(), key.clone(), uid.clone());
        move || {
            pods.get(&key)
                .is_some_and(|pod| pod.uid() == Some(uid.clone()) && pod.metadata.deletion_timestamp.is_none())
        }
    };
    let restarted = {
        let sender = ctx.restarted.clone();
        move || drop(sender.unbounded_send(key.clone()))
    };
    match ctx.supervisor.ensure(slurm_node, &uid, conf, base_restarts, still_wanted, restarted).await? {
        Ensure::Running(run) => Ok(Some(run)),
        Ensure::Busy(other) => {
            tracing::debug!(
                pod = %ObjectRef::from_obj(pod),
                slurm_node,
                holder = other,
                "another pod's slurmd still runs as this Slurm node; waiting"
            );
            Ok(None)
        }
    }
}

/// The kubelet's end of a graceful deletion: stop the containers, then remove the pod for good.
async fn finish_deletion(pod: &Pod, api: &Api<Pod>, ctx: &Context) -> Result<(), Error> {
    let uid = pod.uid();
    if let Some(slurm_node) = slurm_node(pod) {
        ctx.supervisor.stop(slurm_node, uid.as_deref(), grace_of(pod)).await;
    }
    let params = DeleteParams {
        grace_period_seconds: Some(0),
        preconditions: Some(Preconditions { uid, resource_version: None }),
        ..DeleteParams::default()
    };
    match api.delete(&pod.name_any(), &params).await {
        Ok(_) => tracing::info!(pod = %ObjectRef::from_obj(pod), "pod deleted"),
        Err(kube::Error::Api(status)) if status.code == 404 || status.code == 409 => {}
        Err(error) => return Err(error.into()),
    }
    Ok(())
}

/// A pod left the API (deleted for good, possibly forced): its slurmd, if any, must end.
fn stop_for_vanished(supervisor: &Arc<Supervisor>, pod: &Pod) {
    let (Some(slurm_node), Some(uid)) = (slurm_node(pod), pod.uid()) else { return };
    let (supervisor, slurm_node) = (supervisor.clone(), slurm_node.to_string());
    tokio::spawn(async move { supervisor.stop(&slurm_node, Some(&uid), ORPHAN_GRACE).await });
}

/// Stops slurmd whose pod no longer exists, for deletions the watch did not deliver.
async fn sweep(pods: Store<Pod>, supervisor: Arc<Supervisor>) {
    loop {
        tokio::time::sleep(SWEEP_EVERY).await;
        if pods.wait_until_ready().now_or_never().is_none_or(|ready| ready.is_err()) {
            continue;
        }
        // Slots first: a slurmd started after this snapshot belongs to a pod the store has.
        let owned = supervisor.owned();
        let live: HashSet<String> = pods.state().iter().filter_map(|pod| pod.uid()).collect();
        for (slurm_node, uid) in owned {
            if !live.contains(&uid) {
                tracing::info!(slurm_node, uid, "the pod of this slurmd is gone; stopping it");
                supervisor.stop(&slurm_node, Some(&uid), ORPHAN_GRACE).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(metadata: serde_json::Value) -> Pod {
        serde_json::from_value(json!({"metadata": metadata, "spec": {"containers": [{"name": "c"}]}})).unwrap()
    }

    #[test]
    fn grace_is_the_pods_own_capped_at_ten_seconds() {
        assert_eq!(grace_of(&pod(json!({"deletionGracePeriodSeconds": 3}))), Duration::from_secs(3));
        assert_eq!(grace_of(&pod(json!({"deletionGracePeriodSeconds": 0}))), Duration::ZERO);
        assert_eq!(grace_of(&pod(json!({"deletionGracePeriodSeconds": 30}))), MAX_GRACE);
        assert_eq!(grace_of(&pod(json!({}))), MAX_GRACE);
    }

    #[test]
    fn slurmd_pods_are_known_by_their_label() {
        assert_eq!(slurm_node(&pod(json!({"labels": {"sunk.dev/slurm-node": "slurm-1"}}))), Some("slurm-1"));
        assert_eq!(slurm_node(&pod(json!({"labels": {"sunk.dev/slurm-node": ""}}))), None);
        assert_eq!(slurm_node(&pod(json!({"labels": {"app": "x"}}))), None);
    }
}
