//! The Syncer end to end, on kube-node-1 (a slurmd pod of the local cluster's NodeSet): cordons and
//! node problems drain the Slurm node with a `k8s:` reason and clearing them resumes it; an
//! administrator's drain is never touched; Slurm's state shows on the pod and the Node.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, Patch, PatchParams};
use sunk_e2e::{
    Answer, Cluster, Frozen, HostileProxy, in_slurm_root, kubectl, metric_value, slurm_node, slurmrestd_address,
    slurmrestd_frozen, wait_for,
};

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
    // The record of a drain the Syncer made: a test's Syncer is gone before it could clear its own.
    let _ = kubectl(&["-n", "slurm", "annotate", "pod", SLURMD_POD, "sunk.dev/drained-for-"]).output();
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

/// A host running only the Syncer, watching the `GpuUnhealthy` condition too, and logging every pass
/// over a Node as JSON (read by [`passes_over_node`]).
const SYNCER_HOST: [(&str, &str); 5] = [
    ("SUNK_SYNCER", "true"),
    ("SUNK_SCHEDULER", "false"),
    ("SUNK_DRAIN_CONDITIONS", "GpuUnhealthy"),
    ("SUNK_LOG_FORMAT", "json"),
    ("RUST_LOG", "info,kube_runtime=warn,sunk::syncer=debug"),
];

async fn syncer_cluster(test: &str) -> anyhow::Result<Cluster> {
    let mut cluster = Cluster::connect(test).await?;
    cluster.start_host(&SYNCER_HOST)?;
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
    let withheld = wait_withheld_drain(&cluster).await?;
    assert!(!withheld.reread, "decided on a listing that shows the drain: nothing to read again");
    assert_admins_drain(&cluster, "bad dimm", "after the cordon").await?;
    let before_uncordon = passes_over_node(&cluster)?.len();
    run(&["uncordon", NODE])?;
    wait_pass_uncordoned(&cluster, before_uncordon).await?;
    assert_admins_drain(&cluster, "bad dimm", "after the uncordon").await?;
    Ok(())
}

/// Seen on a real cluster, one run in two: an administrator drained kube-node-1 0.4 s before it was
/// cordoned; the Syncer, deciding on a listing from before that drain, drained it again as its own
/// and resumed it on the uncordon. Here every listing the host gets after its first says "nothing
/// changed" (a proxy answers 304), so every pass decides on a listing from before the
/// administrator's drain: the race, every time.
#[tokio::test]
async fn an_administrators_drain_the_listing_predates_survives_a_cordon_and_an_uncordon() -> anyhow::Result<()> {
    let _restored = NodeRestored::new();
    let proxy = HostileProxy::start(&slurmrestd_address()).await?;
    let mut cluster = Cluster::connect("sync-race").await?;
    cluster.start_host_via(proxy.url(), &SYNCER_HOST)?;
    wait_for("a Syncer pass over kube-node-1, on a listing of it undrained", SYNC, || async {
        (!passes_over_node(&cluster).ok()?.is_empty()).then_some(())
    })
    .await?;
    proxy.answer(Answer::NodesUnchanged);
    // Node listings are asked one at a time: once one is answered "unchanged", none asked before is
    // still to come.
    wait_for("a node listing answered unchanged", SYNC, || async {
        (proxy.served(Answer::NodesUnchanged) > 0).then_some(())
    })
    .await?;

    in_slurm_root(&["scontrol", "update", &format!("nodename={NODE}"), "state=drain", "reason=admin: bad dimm"])?;
    run(&["cordon", NODE])?;
    let withheld = wait_withheld_drain(&cluster).await?;
    assert!(withheld.reread, "a drain decided on the old listing, then withheld on the node read again");
    let series = r#"sunk_syncer_withheld_total{action="drain",cause="cordon"}"#;
    assert!(metric_value(&cluster.metrics(0).await?, series).is_some_and(|count| count > 0), "{series}");
    assert_admins_drain(&cluster, "admin: bad dimm", "after the cordon").await?;

    let before_uncordon = passes_over_node(&cluster)?.len();
    run(&["uncordon", NODE])?;
    wait_pass_uncordoned(&cluster, before_uncordon).await?;
    assert_admins_drain(&cluster, "admin: bad dimm", "after the uncordon").await?;
    let pod = slurmd_pod(&cluster).await?;
    let drained_for = pod.metadata.annotations.unwrap_or_default().remove("sunk.dev/drained-for");
    assert_eq!(drained_for, None, "the Syncer recorded no drain of its own");
    Ok(())
}

/// One pass of the Syncer over kube-node-1, as the host logged it.
struct Pass {
    cordoned: bool,
    /// The node was read again before a write.
    reread: bool,
    action: String,
}

/// The Syncer's passes over kube-node-1 so far, from the host's JSON log, in order.
fn passes_over_node(cluster: &Cluster) -> anyhow::Result<Vec<Pass>> {
    let log = std::fs::read_to_string(cluster.host_log())?;
    let lines = log.lines().filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok());
    let fields = lines.map(|mut line| line["fields"].take());
    let passes = fields.filter(|fields| fields["message"] == "synced" && fields["node"] == NODE);
    Ok(passes
        .map(|fields| Pass {
            cordoned: fields["cordoned"].as_bool().unwrap_or_default(),
            reread: fields["reread"].as_bool().unwrap_or_default(),
            action: fields["action"].as_str().unwrap_or_default().to_owned(),
        })
        .collect())
}

/// Waits for the Syncer's pass over the cordoned kube-node-1 that withheld the cordon's drain.
async fn wait_withheld_drain(cluster: &Cluster) -> anyhow::Result<Pass> {
    wait_for("the Syncer to withhold the cordon's drain", SYNC, || async {
        let passes = passes_over_node(cluster).ok()?;
        passes.into_iter().find(|pass| pass.cordoned && pass.action == r#"Withheld(Drain { cause: "cordon" })"#)
    })
    .await
}

/// Waits for a pass over kube-node-1 that saw it uncordoned, after its first `before` passes (a
/// pass sees the Node as it was when the pass began, and passes over one Node never overlap).
async fn wait_pass_uncordoned(cluster: &Cluster, before: usize) -> anyhow::Result<()> {
    wait_for("a Syncer pass over kube-node-1 uncordoned", SYNC, || async {
        let passes = passes_over_node(cluster).ok()?;
        passes.get(before..)?.iter().any(|pass| !pass.cordoned).then_some(())
    })
    .await
}

/// kube-node-1's Slurm node is drained still, for the administrator's `reason`.
async fn assert_admins_drain(cluster: &Cluster, reason: &str, when: &str) -> anyhow::Result<()> {
    let node = slurm_node(cluster, NODE).await?.expect("kube-node-1 in Slurm");
    assert!(node.state.iter().any(|s| s == "DRAIN"), "{when}: still drained: {:?}", node.state);
    assert_eq!(node.reason, reason, "{when}: the administrator's reason, never re-worded");
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
