//! The Helm chart, installed by the real `helm` into the real kube-apiserver: its RBAC must be
//! exactly enough for the host to schedule a pod (the host runs with the chart's ServiceAccount).

use std::time::Duration;

use sunk_e2e::{Cluster, node_name, pod};

#[tokio::test]
async fn the_charts_service_account_can_schedule_pods() -> anyhow::Result<()> {
    let mut cluster = Cluster::connect("chart").await?;
    let release = format!("sunk-{}", cluster.namespace);
    cluster.helm(&["install", &release, "charts/sunk", "--wait=false"])?;

    let kubeconfig = cluster.service_account_kubeconfig(&release).await?;
    cluster.start_host_as(&kubeconfig, &[])?;
    cluster.create_pod(pod("rbac", "1", "256Mi")).await?;
    cluster
        .wait_pod("rbac", "the pod to be bound by the chart's account", Duration::from_secs(30), |p| {
            node_name(p).is_some()
        })
        .await?;
    let events = cluster.events_of("rbac").await?;
    assert!(
        events.iter().any(|(reason, _)| reason == "Scheduled"),
        "events are recorded with the chart's RBAC: {events:?}"
    );

    cluster.helm(&["uninstall", &release])?;
    Ok(())
}
