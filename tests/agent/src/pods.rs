//! The kubelet's part for pods bound to the fake Nodes: run them, report them Running, and
//! finish their deletion.

use std::sync::Arc;
use std::time::Duration;

use futures::{FutureExt, StreamExt};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, Patch, PatchParams, Preconditions};
use kube::runtime::controller::Action;
use kube::runtime::reflector::Store;
use kube::runtime::{Controller, watcher};
use kube::{Client, ResourceExt};
use serde_json::json;

use crate::slurmd::{Supervisor, conf_from_args};

const SLURM_NODE_LABEL: &str = "sunk.dev/slurm-node";
/// How often a slurmd pod is looked at again, to restart a slurmd that died.
const SLURMD_CHECK: Duration = Duration::from_secs(2);

struct Context {
    client: Client,
    supervisor: Arc<Supervisor>,
}

#[derive(Debug, thiserror::Error)]
enum Error {
    #[error(transparent)]
    Kube(#[from] kube::Error),
    #[error(transparent)]
    Process(#[from] anyhow::Error),
}

pub async fn run(client: Client, supervisor: Arc<Supervisor>) -> anyhow::Result<()> {
    let bound = watcher::Config::default().fields("spec.nodeName!=");
    let controller = Controller::new(Api::<Pod>::all(client.clone()), bound);
    tokio::spawn(stop_orphans(controller.store(), supervisor.clone()));
    let ctx = Arc::new(Context { client, supervisor });
    controller
        .run(
            reconcile,
            |_, error, _| {
                tracing::warn!(%error, "agent reconcile failed");
                Action::requeue(Duration::from_secs(1))
            },
            ctx,
        )
        .for_each(|_| async {})
        .await;
    Ok(())
}

fn slurm_node(pod: &Pod) -> Option<&str> {
    pod.labels().get(SLURM_NODE_LABEL).map(String::as_str)
}

async fn reconcile(pod: Arc<Pod>, ctx: Arc<Context>) -> Result<Action, Error> {
    let api: Api<Pod> = Api::namespaced(ctx.client.clone(), &pod.namespace().unwrap_or_default());
    if pod.metadata.deletion_timestamp.is_some() {
        if let Some(node) = slurm_node(&pod) {
            let grace = pod.metadata.deletion_grace_period_seconds.unwrap_or(0).clamp(0, 10) as u64;
            ctx.supervisor.stop(node, Duration::from_secs(grace)).await;
        }
        let params = DeleteParams {
            grace_period_seconds: Some(0),
            preconditions: Some(Preconditions { uid: pod.uid(), resource_version: None }),
            ..Default::default()
        };
        match api.delete(&pod.name_any(), &params).await {
            Err(kube::Error::Api(status)) if status.code == 404 || status.code == 409 => {}
            other => drop(other?),
        }
        return Ok(Action::await_change());
    }
    let mut restarted = false;
    if let Some(node) = slurm_node(&pod) {
        let args =
            pod.spec.as_ref().and_then(|spec| spec.containers.first()).and_then(|c| c.args.clone()).unwrap_or_default();
        let conf = conf_from_args(&args).unwrap_or("");
        restarted = ctx.supervisor.ensure_running(node, conf).await?;
    }
    let running = pod.status.as_ref().and_then(|status| status.phase.as_deref()) == Some("Running");
    if !running || restarted {
        api.patch_status(
            &pod.name_any(),
            &PatchParams::default(),
            &Patch::Merge(running_status(&pod, restarted && running)),
        )
        .await?;
    }
    Ok(if slurm_node(&pod).is_some() { Action::requeue(SLURMD_CHECK) } else { Action::await_change() })
}

/// The status a kubelet reports for a pod whose containers all started.
fn running_status(pod: &Pod, restart: bool) -> serde_json::Value {
    let now = Timestamp::now().to_string();
    let uid = pod.uid().unwrap_or_default();
    let previous_restarts = |name: &str| {
        pod.status
            .as_ref()
            .and_then(|status| status.container_statuses.as_ref())
            .and_then(|statuses| statuses.iter().find(|s| s.name == name))
            .map_or(0, |s| s.restart_count)
    };
    let containers: Vec<_> = pod
        .spec
        .iter()
        .flat_map(|spec| spec.containers.iter())
        .map(|container| {
            json!({
                "name": container.name,
                "image": container.image.clone().unwrap_or_default(),
                "imageID": format!("fake://{}", container.image.clone().unwrap_or_default()),
                "containerID": format!("fake://{uid}/{}", container.name),
                "ready": true,
                "started": true,
                "restartCount": previous_restarts(&container.name) + i32::from(restart),
                "state": {"running": {"startedAt": now}},
            })
        })
        .collect();
    let condition = |kind: &str| json!({"type": kind, "status": "True", "lastTransitionTime": now});
    json!({"status": {
        "phase": "Running",
        "hostIP": "127.0.0.1", "hostIPs": [{"ip": "127.0.0.1"}],
        "podIP": "127.0.0.1", "podIPs": [{"ip": "127.0.0.1"}],
        "startTime": pod.status.as_ref().and_then(|s| s.start_time.as_ref()).map_or(now.clone(), |t| t.0.to_string()),
        "conditions": [condition("PodScheduled"), condition("Initialized"), condition("ContainersReady"), condition("Ready")],
        "containerStatuses": containers,
    }})
}

/// Stops slurmd whose pod vanished without a graceful deletion (e.g. force-deleted).
async fn stop_orphans(pods: Store<Pod>, supervisor: Arc<Supervisor>) {
    loop {
        tokio::time::sleep(SLURMD_CHECK).await;
        if pods.wait_until_ready().now_or_never().is_none() {
            continue;
        }
        let wanted: Vec<String> = pods.state().iter().filter_map(|pod| slurm_node(pod).map(str::to_string)).collect();
        for node in supervisor.nodes().await {
            if !wanted.contains(&node) {
                supervisor.stop(&node, Duration::from_secs(5)).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_every_container_running() {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "p", "uid": "u"},
            "spec": {"containers": [{"name": "a", "image": "img"}, {"name": "b"}]}
        }))
        .unwrap();
        let status = running_status(&pod, false);
        assert_eq!(status["status"]["phase"], "Running");
        assert_eq!(status["status"]["containerStatuses"].as_array().unwrap().len(), 2);
        assert_eq!(status["status"]["containerStatuses"][0]["restartCount"], 0);
        assert_eq!(running_status(&pod, true)["status"]["containerStatuses"][1]["restartCount"], 1);
    }
}
