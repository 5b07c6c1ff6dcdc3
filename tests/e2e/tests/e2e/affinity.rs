//! Pod-level placement rules end to end: required pod anti-affinity honoured (kube-scheduler's
//! meaning, as Slurm nodes the placeholder must not run on), and a rule sunk cannot honour refused
//! with the field named, never ignored. The local cluster has two Slurm nodes.

use std::time::Duration;

use sunk_e2e::{Cluster, node_name, pod, scheduled_condition, wait_for};

const BIND: Duration = Duration::from_secs(60);

/// A replica of `app` that refuses to share a Node with another.
fn replica(name: &str) -> serde_json::Value {
    let mut pod = pod(name, "100m", "64Mi");
    pod["metadata"]["labels"] = serde_json::json!({"app": "web"});
    pod["spec"]["affinity"] = serde_json::json!({"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname"}
    ]}});
    pod
}

#[tokio::test]
async fn replicas_that_refuse_each_other_get_a_node_each_and_the_third_waits() -> anyhow::Result<()> {
    let mut cluster = Cluster::connect("anti-affinity").await?;
    // The scheduler sees every pod only when the host reads them: the pool audit does.
    cluster.start_host(&[("SUNK_POOL_AUDIT", "true"), ("SUNK_NODESET_NAMESPACE", "slurm")])?;
    for name in ["web-0", "web-1", "web-2"] {
        cluster.create_pod(replica(name)).await?;
    }
    let nodes = wait_for("two replicas bound", BIND, || async {
        let pods = cluster.pods().list(&Default::default()).await.ok()?;
        let nodes: Vec<String> = pods.items.iter().filter_map(|pod| node_name(pod).map(str::to_owned)).collect();
        (nodes.len() == 2).then_some(nodes)
    })
    .await?;
    assert_ne!(nodes[0], nodes[1], "two replicas that refuse each other share a Node");
    let pods = cluster.pods().list(&Default::default()).await?;
    let waiting = pods.items.iter().find(|pod| node_name(pod).is_none()).expect("one waits");
    let name = waiting.metadata.name.clone().unwrap_or_default();
    cluster
        .wait_pod(&name, "the third to say the anti-affinity keeps it off both nodes", BIND, |pod| {
            scheduled_condition(pod).is_some_and(|(_, reason, message)| {
                reason == "Unschedulable" && message.contains("0/2") && message.contains("anti-affinity")
            })
        })
        .await?;

    // A namespaceSelector needs namespaces' labels, which this host does not watch: named, not ignored.
    let mut selecting = pod("selecting", "100m", "64Mi");
    selecting["spec"]["affinity"] = serde_json::json!({"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "db"}}, "namespaceSelector": {}, "topologyKey": "kubernetes.io/hostname"}
    ]}});
    cluster.create_pod(selecting).await?;
    cluster
        .wait_pod("selecting", "Unsupported naming the namespaceSelector", BIND, |pod| {
            scheduled_condition(pod)
                .is_some_and(|(_, reason, message)| reason == "Unsupported" && message.contains("namespaceSelector"))
        })
        .await?;
    Ok(())
}
