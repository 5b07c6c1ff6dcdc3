//! `scope.type=namespace` installed for real: the chart's host, whose pod access is only
//! RoleBindings in its release namespace and one more, schedules pods in both and leaves every other
//! namespace's pods alone, with no request its RBAC refuses.

use std::time::Duration;

use sunk_e2e::{Cluster, node_name, pod, scheduled_condition};

#[tokio::test]
async fn the_chart_scoped_to_namespaces_schedules_in_them_and_nowhere_else() -> anyhow::Result<()> {
    let cluster = Cluster::connect("chart-scope").await?;
    let team = Cluster::connect("chart-scope-team").await?;
    let outside = Cluster::connect("chart-scope-out").await?;
    // Created before the host starts: a host that listed every namespace would find it in its
    // first list, before the pods it binds.
    let ignored = outside.create_pod(pod("ignored", "1", "256Mi")).await?;
    let team_scope = format!("scope.namespaces={{{}}}", team.namespace);
    let release = cluster.install_host_chart(&["--set", "scope.type=namespace", "--set", &team_scope]).await?;

    cluster.create_pod(pod("home", "1", "256Mi")).await?;
    team.create_pod(pod("team", "1", "256Mi")).await?;
    let bind = Duration::from_secs(60);
    cluster.wait_pod("home", "the release namespace's pod to be bound", bind, |p| node_name(p).is_some()).await?;
    team.wait_pod("team", "the other watched namespace's pod to be bound", bind, |p| node_name(p).is_some()).await?;
    team.wait_event("team", "Scheduled, recorded through the RoleBinding", |reason, _| reason == "Scheduled").await?;

    let untouched = outside.pods().get("ignored").await?;
    assert!(node_name(&untouched).is_none());
    assert!(scheduled_condition(&untouched).is_none(), "a condition: {:?}", scheduled_condition(&untouched));
    assert!(outside.events_of("ignored").await?.is_empty(), "Events: {:?}", outside.events_of("ignored").await?);
    assert!(outside.jobs_of(ignored.metadata.uid.as_deref().unwrap_or_default()).await?.is_empty());
    let log = cluster.host_chart_log(&release)?;
    assert!(!log.to_lowercase().contains("forbidden"), "a request the chart's RBAC refused:\n{log}");

    cluster.uninstall_host_chart(&release).await?;
    Ok(())
}
