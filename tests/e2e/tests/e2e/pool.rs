//! One pool, held once, audited: a pod that bypasses sunk onto a Slurm Node holds what Slurm still
//! offers there, and the host says so (`sunk_pool_overcommitted`, the Node's `SlurmPoolOvercommitted`
//! condition, an Event naming the pod) until the pod is gone.
//!
//! Nodes running Slurm nodes are tainted against other schedulers; sunk's own pods still land there.
//!
//! The local cluster's Slurm nodes are its GPU NodeSet's two, of 2 CPUs and 2 GPUs each; their
//! slurmd pods request nothing of the kubelet, so with no other pod there the pool is held once.

use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::Api;
use sunk_e2e::{BUSYBOX, Cluster, is_running, kubectl, node_name, pod, scheduled_condition, wait_for};

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

const TAINT: &str = "sunk.dev/slurm-node";

/// Takes the Slurm Node taint off both Nodes when the test ends: the host that put it there is gone,
/// and the tests after this one place other schedulers' pods anywhere.
struct Untainted;

impl Drop for Untainted {
    fn drop(&mut self) {
        for node in ["kube-node-1", "kube-node-2"] {
            let _ = kubectl(&["taint", "nodes", node, &format!("{TAINT}-")]).output();
        }
    }
}

async fn tainted(nodes: &Api<Node>, name: &str) -> Option<bool> {
    let node = nodes.get(name).await.ok()?;
    let taints = node.spec?.taints.unwrap_or_default();
    Some(taints.iter().any(|taint| taint.key == TAINT && taint.effect == "NoSchedule"))
}

#[tokio::test]
async fn nodes_running_slurm_are_tainted_against_other_schedulers_but_not_sunk() -> anyhow::Result<()> {
    let _untainted = Untainted;
    let mut cluster = Cluster::connect("pool-taint").await?;
    cluster.start_host(&[
        ("SUNK_POOL_AUDIT", "true"),
        ("SUNK_TAINT_SLURM_NODES", "true"),
        ("SUNK_NODESET_NAMESPACE", "slurm"),
    ])?;
    let nodes: Api<Node> = Api::all(Cluster::client().await?);
    wait_for("both Slurm Nodes tainted", AUDIT, || async {
        (tainted(&nodes, "kube-node-1").await? && tainted(&nodes, "kube-node-2").await?).then_some(())
    })
    .await?;

    // kube-scheduler keeps a pod that does not tolerate the taint off the Node it asks for.
    let hostname = serde_json::json!({"kubernetes.io/hostname": NODE});
    let mut other = pod("other-scheduler", "100m", "64Mi");
    other["spec"]["schedulerName"] = "default-scheduler".into();
    other["spec"]["nodeSelector"] = hostname.clone();
    cluster.create_pod(other).await?;
    cluster
        .wait_pod("other-scheduler", "kube-scheduler to refuse it for the taint", AUDIT, |pod| {
            // kube-scheduler counts Nodes, it does not name the taint: both were checked tainted above.
            scheduled_condition(pod)
                .is_some_and(|(status, _, message)| status == "False" && message.contains("untolerated taint"))
        })
        .await?;

    // sunk's pods go through Slurm, which holds what they need: the taint is not theirs to tolerate.
    let mut ours = pod("through-slurm", "100m", "64Mi");
    ours["spec"]["nodeSelector"] = hostname;
    cluster.create_pod(ours).await?;
    let bound = cluster.wait_pod("through-slurm", "sunk to bind it", AUDIT, |pod| node_name(pod).is_some()).await?;
    assert_eq!(node_name(&bound), Some(NODE));
    Ok(())
}
