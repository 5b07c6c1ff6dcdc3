//! `--watch-namespaces`: only pods of the listed namespaces are scheduled.

use std::time::Duration;

use sunk_e2e::{Cluster, node_name, pod, scheduled_condition, wait_for};

const BIND: Duration = Duration::from_secs(30);

#[tokio::test]
async fn only_pods_of_watched_namespaces_are_scheduled() -> anyhow::Result<()> {
    let mut cluster = Cluster::connect("scope").await?;
    let elsewhere = format!("{}-elsewhere", cluster.namespace);
    let blind = cluster.start_host(&[("SUNK_WATCH_NAMESPACES", &elsewhere)])?;
    let created = cluster.create_pod(pod("outside", "1", "256Mi")).await?;
    // The host is up once it is ready (Slurm answered, its controllers run); then give it a few
    // polls to do something wrong.
    wait_for("the host to be ready", Duration::from_secs(60), || async {
        (cluster.readyz(blind).await.ok()?.0 == 200).then_some(())
    })
    .await?;
    let metrics = cluster.metrics(blind).await?;
    assert!(metrics.contains("sunk_scheduler_pending_pods 0"), "no pod of its scope waits:\n{metrics}");
    tokio::time::sleep(Duration::from_secs(3)).await;
    let untouched = cluster.pods().get("outside").await?;
    assert!(node_name(&untouched).is_none());
    assert!(scheduled_condition(&untouched).is_none(), "not even a condition: {:?}", scheduled_condition(&untouched));
    assert!(cluster.jobs_of(created.metadata.uid.as_deref().unwrap_or_default()).await?.is_empty());
    cluster.kill_host(blind)?;

    let both = format!("{elsewhere},{}", cluster.namespace);
    cluster.start_host(&[("SUNK_WATCH_NAMESPACES", &both)])?;
    cluster
        .wait_pod("outside", "the pod to be bound once its namespace is watched", BIND, |pod| node_name(pod).is_some())
        .await?;
    Ok(())
}
