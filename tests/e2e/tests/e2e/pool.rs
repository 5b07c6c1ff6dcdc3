//! One pool, held once, audited: a pod that bypasses sunk onto a Slurm Node holds what Slurm still
//! offers there, and the host says so (`sunk_pool_overcommitted`, the Node's `SlurmPoolOvercommitted`
//! condition, an Event naming the pod) until the pod is gone.
//!
//! The local cluster's Slurm nodes are its GPU NodeSet's two, of 2 CPUs and 2 GPUs each; their
//! slurmd pods request nothing of the kubelet, so with no other pod there the pool is held once.

use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::Api;
use sunk_e2e::{BUSYBOX, Cluster, is_running, wait_for};

const AUDIT: Duration = Duration::from_secs(60);
const NODE: &str = "kube-node-1";

fn gpus_over(metrics: &str) -> Option<u64> {
    let series = format!(r#"sunk_pool_overcommitted{{node="{NODE}",resource="gpus"}} "#);
    metrics.lines().find_map(|line| line.strip_prefix(&series)?.trim().parse().ok())
}

/// The Node's pool condition as (status, message).
async fn pool_condition(nodes: &Api<Node>) -> Option<(String, String)> {
    let node = nodes.get(NODE).await.ok()?;
    let conditions = node.status?.conditions?;
    let condition = conditions.into_iter().find(|condition| condition.type_ == "SlurmPoolOvercommitted")?;
    Some((condition.status, condition.message.unwrap_or_default()))
}

#[tokio::test]
async fn a_pod_that_bypasses_sunk_onto_a_slurm_node_is_reported_until_it_leaves() -> anyhow::Result<()> {
    let mut cluster = Cluster::connect("pool").await?;
    let host = cluster.start_host(&[
        ("SUNK_POOL_AUDIT", "true"),
        ("SUNK_SCHEDULER", "false"),
        ("SUNK_NODESET_NAMESPACE", "slurm"),
    ])?;
    let nodes: Api<Node> = Api::all(Cluster::client().await?);
    wait_for("the Node audited as held once", AUDIT, || async {
        let metrics = cluster.metrics(host).await.ok()?;
        let (status, _) = pool_condition(&nodes).await?;
        (gpus_over(&metrics)? == 0 && status == "False").then_some(())
    })
    .await?;

    // Bound by name, past any scheduler: the kubelet admits it and gives it both GPUs.
    let bypass = serde_json::json!({
        "metadata": {"name": "bypass"},
        "spec": {
            "nodeName": NODE,
            "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "main", "image": BUSYBOX, "command": ["sleep", "3600"],
                            "resources": {"limits": {"nvidia.com/gpu": 2}}}]
        }
    });
    cluster.create_pod(bypass).await?;
    cluster.wait_pod("bypass", "the kubelet to run the bypassing pod", AUDIT, is_running).await?;
    let named = format!("{}/bypass (2 GPUs)", cluster.namespace);
    wait_for("the Node reported overcommitted, naming the pod", AUDIT, || async {
        let metrics = cluster.metrics(host).await.ok()?;
        let (status, message) = pool_condition(&nodes).await?;
        (gpus_over(&metrics)? == 2 && status == "True" && message.contains(&named)).then_some(())
    })
    .await?;
    // The Event follows the condition.
    wait_for("a Warning Event on the Node naming the pod", AUDIT, || async {
        let events = cluster.events_in("default", NODE).await.ok()?;
        events.iter().any(|(reason, note)| reason == "PoolOvercommitted" && note.contains(&named)).then_some(())
    })
    .await?;

    cluster.delete_pod("bypass").await?;
    wait_for("the Node held once again", AUDIT, || async {
        let metrics = cluster.metrics(host).await.ok()?;
        let (status, _) = pool_condition(&nodes).await?;
        (gpus_over(&metrics)? == 0 && status == "False").then_some(())
    })
    .await?;
    Ok(())
}
