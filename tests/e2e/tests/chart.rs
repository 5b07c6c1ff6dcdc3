//! The Helm chart, installed by the real `helm` into the local cluster: the host runs as a pod from
//! the project's sunk image, with the chart's ServiceAccount and RBAC, reaches the API server and
//! slurmrestd through cluster Services and DNS, and schedules a pod through Slurm.

use std::time::Duration;

use kube::api::ListParams;
use sunk_e2e::{Cluster, SUNK_IMAGE_REPOSITORY, SUNK_IMAGE_TAG, node_name, pod, wait_for};

#[tokio::test]
async fn the_chart_runs_the_host_in_a_pod_that_schedules_through_slurm() -> anyhow::Result<()> {
    let cluster = Cluster::connect("chart").await?;
    cluster.create_jwt_key_secret("slurm-jwt-key").await?;
    let release = format!("sunk-{}", cluster.namespace);
    cluster.helm(&[
        "install",
        &release,
        "charts/sunk",
        "--set",
        &format!("image.repository={SUNK_IMAGE_REPOSITORY}"),
        "--set",
        &format!("image.tag={SUNK_IMAGE_TAG}"),
        // The local cluster's NodeSet has a keeper already; a second one would roll its pods.
        "--set",
        "nodesetController.enabled=false",
        "--wait",
        "--timeout",
        "120s",
    ])?;

    cluster.create_pod(pod("rbac", "1", "256Mi")).await?;
    let bound = cluster
        .wait_pod("rbac", "the pod to be bound by the host running in the chart's pod", Duration::from_secs(60), |p| {
            node_name(p).is_some()
        })
        .await?;
    assert!(node_name(&bound).is_some());
    cluster.wait_event("rbac", "Scheduled, recorded with the chart's RBAC", |reason, _| reason == "Scheduled").await?;

    cluster.helm(&["uninstall", &release, "--wait"])?;
    // `--wait` covers the Deployment, not its pod: until the kubelet has stopped it, the host in it
    // still schedules pods named for `sunk`, and would race the next test's host.
    let selector = format!("app.kubernetes.io/instance={release}");
    wait_for("the host's pod to be gone", Duration::from_secs(60), || async {
        let pods = cluster.pods().list(&ListParams::default().labels(&selector)).await.ok()?;
        pods.items.is_empty().then_some(())
    })
    .await?;
    Ok(())
}
