//! The Syncer end to end, on kube-node-1 (a slurmd pod of the local cluster's NodeSet): cordons and
//! node problems drain the Slurm node with a `k8s:` reason and clearing them resumes it; an
//! administrator's drain is never touched; Slurm's state shows on the pod and the Node.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, Patch, PatchParams};
use sunk_e2e::{Cluster, Frozen, in_slurm_root, kubectl, slurm_node, slurmrestd_frozen, wait_for};

const NODE: &str = "kube-node-1";
const SLURMD_POD: &str = "gpu-kube-node-1";
const SYNC: Duration = Duration::from_secs(20);

/// Puts kube-node-1 back as it was, before the test and after it (once the test's host is gone):
/// uncordoned, no test condition or label, Ready, and its Slurm node undrained.
struct NodeRestored;

impl NodeRestored {
    fn new() -> Self {
        restore();
        NodeRestored
    }
}

impl Drop for NodeRestored {
    fn drop(&mut self) {
        restore();
    }
}

fn restore() {
    let _ = kubectl(&["uncordon", NODE]).output();
    let _ = kubectl(&["label", "node", NODE, "sunk.dev/drain-"]).output();
    let now = k8s_openapi::jiff::Timestamp::now().to_string();
    let conditions = serde_json::json!({"status": {"conditions": [
        {"type": "GpuUnhealthy", "$patch": "delete"},
        {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status",
         "lastTransitionTime": now, "lastHeartbeatTime": now},
    ]}});
    let patch = conditions.to_string();
    let _ = kubectl(&["patch", "node", NODE, "--subresource=status", "--type=strategic", "-p", &patch]).output();
    let _ = in_slurm_root(&["scontrol", "update", &format!("nodename={NODE}"), "state=undrain"]);
}

/// Sets (or with None removes) a condition on kube-node-1's status, as node-problem-detector would.
async fn set_condition(type_: &str, status: Option<(&str, &str)>) -> anyhow::Result<()> {
    let kube = Cluster::client().await?;
    let now = k8s_openapi::jiff::Timestamp::now().to_string();
    let condition = match status {
        Some((status, message)) => serde_json::json!({"type": type_, "status": status, "reason": "E2E",
            "message": message, "lastTransitionTime": now, "lastHeartbeatTime": now}),
        None => serde_json::json!({"type": type_, "$patch": "delete"}),
    };
    let patch = serde_json::json!({"status": {"conditions": [condition]}});
    Api::<Node>::all(kube).patch_status(NODE, &PatchParams::default(), &Patch::Strategic(patch)).await?;
    Ok(())
}

/// A host running only the Syncer, watching the `GpuUnhealthy` condition too.
async fn syncer_cluster(test: &str) -> anyhow::Result<Cluster> {
    let mut cluster = Cluster::connect(test).await?;
    cluster.start_host(&[
        ("SUNK_SYNCER", "true"),
        ("SUNK_SCHEDULER", "false"),
        ("SUNK_DRAIN_CONDITIONS", "GpuUnhealthy"),
    ])?;
    Ok(cluster)
}

fn run(args: &[&str]) -> anyhow::Result<()> {
    let output = kubectl(args).output()?;
    anyhow::ensure!(output.status.success(), "kubectl {args:?}: {}", String::from_utf8_lossy(&output.stderr));
    Ok(())
}

/// Waits until kube-node-1's Slurm node is drained (`Some(reason)` matching) or not (`None`).
async fn wait_drain(cluster: &Cluster, what: &str, matches: impl Fn(Option<&str>) -> bool) -> anyhow::Result<String> {
    wait_for(what, SYNC, || async {
        let node = slurm_node(cluster, NODE).await.ok()??;
        let drained = node.state.iter().any(|s| s == "DRAIN");
        matches(drained.then_some(node.reason.as_str())).then(|| node.reason.clone())
    })
    .await
}

async fn slurmd_pod(cluster: &Cluster) -> anyhow::Result<Pod> {
    Ok(Api::<Pod>::namespaced(cluster.kube.clone(), "slurm").get(SLURMD_POD).await?)
}

#[tokio::test]
async fn a_cordon_drains_the_slurm_node_and_an_uncordon_resumes_it() -> anyhow::Result<()> {
    let _restored = NodeRestored::new();
    let cluster = syncer_cluster("sync-cordon").await?;
    run(&["cordon", NODE])?;
    let reason = wait_drain(&cluster, "the cordon to drain the Slurm node", |r| r.is_some()).await?;
    assert!(reason.starts_with("k8s: cordoned"), "names the cordon: {reason}");
    // Slurm's view shows on the slurmd pod and the Node.
    wait_for("the drain on the slurmd pod and the Node", SYNC, || async {
        let pod = slurmd_pod(&cluster).await.ok()?;
        let annotated = pod.metadata.annotations.as_ref()?.get("sunk.dev/drain") == Some(&reason);
        let condition = pod.status.as_ref()?.conditions.as_ref()?.iter().any(|c| c.type_ == "SlurmNodeDrain");
        let node = Api::<Node>::all(cluster.kube.clone()).get(NODE).await.ok()?;
        let node_says = node.status?.conditions?.iter().any(|c| c.type_ == "SlurmDrain" && c.status == "True");
        (annotated && condition && node_says).then_some(())
    })
    .await?;
    run(&["uncordon", NODE])?;
    wait_drain(&cluster, "the uncordon to resume the Slurm node", |r| r.is_none()).await?;
    Ok(())
}

#[tokio::test]
async fn an_administrators_drain_survives_a_cordon_and_an_uncordon() -> anyhow::Result<()> {
    let _restored = NodeRestored::new();
    let cluster = syncer_cluster("sync-admin").await?;
    in_slurm_root(&["scontrol", "update", &format!("nodename={NODE}"), "state=drain", "reason=bad dimm"])?;
    wait_for("the admin's drain on the pod and the Node", SYNC, || async {
        let pod = slurmd_pod(&cluster).await.ok()?;
        let annotations = pod.metadata.annotations?;
        let node = Api::<Node>::all(cluster.kube.clone()).get(NODE).await.ok()?;
        let node_says = node
            .status?
            .conditions?
            .iter()
            .any(|c| c.type_ == "SlurmDrain" && c.message.as_deref() == Some("bad dimm"));
        (annotations.get("sunk.coreweave.com/drain").map(String::as_str) == Some("bad dimm") && node_says).then_some(())
    })
    .await?;
    run(&["cordon", NODE])?;
    run(&["uncordon", NODE])?;
    // The Syncer has seen both (its pass after the uncordon wrote nothing to Slurm): the reason stands.
    let passes_after = |text: String| {
        text.lines()
            .find(|l| l.starts_with(r#"sunk_reconcile_passes_total{controller="syncer",result="ok"}"#))
            .and_then(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
    };
    let before = passes_after(cluster.metrics(0).await?).unwrap_or(0);
    wait_for("two more Syncer passes", SYNC, || async {
        (passes_after(cluster.metrics(0).await.ok()?)? >= before + 2).then_some(())
    })
    .await?;
    let node = slurm_node(&cluster, NODE).await?.expect("kube-node-1 in Slurm");
    assert!(node.state.iter().any(|s| s == "DRAIN"), "still drained: {:?}", node.state);
    assert_eq!(node.reason, "bad dimm", "never re-worded");
    Ok(())
}

#[tokio::test]
async fn a_drain_resumed_in_slurm_while_cordoned_is_applied_again() -> anyhow::Result<()> {
    let _restored = NodeRestored::new();
    let cluster = syncer_cluster("sync-reapply").await?;
    run(&["cordon", NODE])?;
    wait_drain(&cluster, "the cordon to drain", |r| r.is_some_and(|r| r.starts_with("k8s: cordoned"))).await?;
    in_slurm_root(&["scontrol", "update", &format!("nodename={NODE}"), "state=resume"])?;
    wait_for("an Event saying the drain was applied again", SYNC, || async {
        let events = cluster.events_in("default", NODE).await.ok()?;
        events.iter().any(|(reason, _)| reason == "SlurmDrainReapplied").then_some(())
    })
    .await?;
    wait_drain(&cluster, "the drain again", |r| r.is_some_and(|r| r.starts_with("k8s: cordoned"))).await?;
    Ok(())
}

#[tokio::test]
async fn node_problems_drain_with_their_message_and_clearing_one_resumes_only_without_another_cause()
-> anyhow::Result<()> {
    let _restored = NodeRestored::new();
    let cluster = syncer_cluster("sync-problem").await?;
    {
        // The kubelet posts its own Ready every 10 s, which would undo a test's Ready=False before the
        // Syncer (or this test) saw it: it stays stopped while the Node is NotReady, as a hung kubelet.
        let _kubelet = Frozen::component(&format!("kubelet-{NODE}"))?;
        set_condition("Ready", Some(("False", "kubelet stopped: e2e"))).await?;
        let reason = wait_drain(&cluster, "NotReady to drain", |r| r.is_some()).await?;
        assert!(reason.contains("Ready=False") && reason.contains("kubelet stopped: e2e"), "{reason}");
    }
    // The running kubelet reports Ready=True by itself.
    wait_drain(&cluster, "Ready again to resume", |r| r.is_none()).await?;

    set_condition("GpuUnhealthy", Some(("True", "xid 79 on GPU 1"))).await?;
    run(&["cordon", NODE])?;
    let reason = wait_drain(&cluster, "the GPU problem to drain", |r| r.is_some()).await?;
    assert!(reason.contains("xid 79 on GPU 1"), "{reason}");
    set_condition("GpuUnhealthy", Some(("False", "healthy"))).await?;
    // Cleared, but the Node is still cordoned: drained for that instead, never resumed.
    let reason =
        wait_drain(&cluster, "the cordon to hold the drain", |r| r.is_some_and(|r| r.contains("cordoned"))).await?;
    assert!(reason.starts_with("k8s: cordoned"), "{reason}");
    run(&["uncordon", NODE])?;
    wait_drain(&cluster, "no cause left to resume", |r| r.is_none()).await?;
    Ok(())
}

#[tokio::test]
async fn a_cordon_while_slurmrestd_is_stopped_drains_when_it_returns() -> anyhow::Result<()> {
    let _restored = NodeRestored::new();
    let cluster = syncer_cluster("sync-outage").await?;
    wait_for("the Syncer's first pass", SYNC, || async {
        let metrics = cluster.metrics(0).await.ok()?;
        metrics.contains(r#"sunk_reconcile_passes_total{controller="syncer",result="ok"}"#).then_some(())
    })
    .await?;
    let frozen = slurmrestd_frozen()?;
    run(&["cordon", NODE])?;
    drop(frozen);
    let reason = wait_drain(&cluster, "the cordon to drain once slurmrestd is back", |r| r.is_some()).await?;
    assert!(reason.starts_with("k8s: cordoned"), "{reason}");
    Ok(())
}

#[tokio::test]
async fn a_drain_policy_pushed_while_running_words_the_next_drain() -> anyhow::Result<()> {
    let _restored = NodeRestored::new();
    let cluster = syncer_cluster("sync-policy").await?;
    cluster.push_example_policy("drain-runbook")?;
    run(&["cordon", NODE])?;
    let reason = wait_drain(&cluster, "a drain with a runbook", |r| r.is_some_and(|r| r.contains("runbook"))).await?;
    assert!(reason.contains("https://runbooks.example.com/node/maintenance"), "{reason}");
    Ok(())
}
