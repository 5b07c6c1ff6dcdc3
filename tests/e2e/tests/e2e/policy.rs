//! Policies delivered through the cluster: a job-mapper pushed as a PolicyModule while pods are being
//! scheduled goes live without a restart and without a failed decision; bad modules are refused
//! with a reason on the PolicyModule; deleting the PolicyModule hands back to the bundled default.

use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use kube::api::{Api, DeleteParams, Patch, PatchParams};
use sunk::delivery::{PolicyModule, PolicyModuleSpec, PolicyModuleStatus};
use sunk_e2e::{Cluster, example_policy, node_name, pod, scheduled_condition, wait_for};

const BIND: Duration = Duration::from_secs(30);
/// The pod before which `sunk policy push` starts.
const PUSH_AT: usize = 3;
/// Pods created after the push finished, each of which must be mapped by v2.
const AFTER_SWAP: usize = 4;
/// Enough pods for a slow push to finish while they are scheduled.
const MAX_PODS: usize = 80;

/// Creates `name` (labelled team=ml), waits until it is bound, and returns its placeholder's comment.
async fn schedule(cluster: &Cluster, name: &str) -> anyhow::Result<String> {
    let mut spec = pod(name, "1", "128Mi");
    spec["metadata"]["labels"] = serde_json::json!({"team": "ml"});
    let created = cluster.create_pod(spec).await?;
    let bound = cluster.wait_pod(name, "the pod to be bound", BIND, |p| node_name(p).is_some()).await?;
    if let Some((_, reason, message)) = scheduled_condition(&bound) {
        assert_ne!(reason, "PolicyFailed", "no decision fails during a swap: {message}");
    }
    let jobs = cluster.jobs_of(created.metadata.uid.as_deref().unwrap()).await?;
    anyhow::ensure!(jobs.len() == 1, "pod {name} has one job: {jobs:?}");
    let comment = jobs[0].comment.clone();
    // Free the CPU for the next pods.
    cluster.delete_pod(name).await?;
    Ok(comment)
}

/// Waits until PolicyModule `name` reports `phase`, and returns its status.
async fn wait_phase(modules: &Api<PolicyModule>, name: &str, phase: &str) -> anyhow::Result<PolicyModuleStatus> {
    wait_for(&format!("PolicyModule {name} to be {phase}"), BIND, || async move {
        let status = modules.get(name).await.ok()?.status?;
        (status.phase.as_deref() == Some(phase)).then_some(status)
    })
    .await
}

/// A host whose namespace may be charged what team-accounts charges team ml (with and without its
/// example configuration).
fn start_team_host(cluster: &mut Cluster) -> anyhow::Result<usize> {
    let tenancy = cluster.grant(serde_json::json!({"accounts": ["ml", "gpu-ml"], "qos": ["normal", "high"]}))?;
    cluster.start_host(&[("SUNK_TENANCY", &tenancy)])
}

#[tokio::test]
async fn a_job_mapper_pushed_while_pods_are_scheduled_takes_over_without_a_failure() -> anyhow::Result<()> {
    let mut cluster = Cluster::connect("reload").await?;
    let host = start_team_host(&mut cluster)?;
    let module = example_policy("team-accounts")?;

    // v1 (the bundled default) sets no comment; v2 (team-accounts) sets `team=<team>`.
    let mut push: Option<(Child, Instant)> = None;
    let mut pushed_at: Option<Instant> = None;
    let mut results = Vec::new();
    // Pods keep coming, one after another, until AFTER_SWAP of them were created after the push finished.
    for index in 0.. {
        if index == PUSH_AT {
            let namespace = cluster.namespace.clone();
            let child = cluster
                .sunk_command(&["policy", "push", module.to_str().unwrap(), "--name", "team-accounts"])
                .args(["--namespace", &namespace])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()?;
            push = Some((child, Instant::now()));
        }
        if let Some((child, _)) = &mut push
            && pushed_at.is_none()
            && let Some(status) = child.try_wait()?
        {
            assert!(status.success(), "sunk policy push failed");
            pushed_at = Some(Instant::now());
        }
        let after_swap = results.iter().filter(|(_, at, _)| pushed_at.is_some_and(|pushed| *at > pushed)).count();
        if after_swap >= AFTER_SWAP {
            break;
        }
        assert!(index < MAX_PODS, "the push did not finish while {MAX_PODS} pods were scheduled");
        let created_at = Instant::now();
        let comment = schedule(&cluster, &format!("p{index}")).await?;
        results.push((index, created_at, comment));
    }
    let pushed_at = pushed_at.expect("the loop ends only after the push");
    let (_, push_started) = push.unwrap();
    eprintln!("{} pods scheduled; the push took {:?}", results.len(), pushed_at - push_started);
    for (index, created_at, comment) in &results {
        if *created_at > pushed_at {
            assert_eq!(comment, "team=ml", "pod p{index}, created after the swap, was mapped by v2");
        } else if *created_at < push_started {
            assert_eq!(comment, "", "pod p{index}, created before the push, was mapped by the bundled default");
        }
    }

    let modules: Api<PolicyModule> = Api::namespaced(cluster.kube.clone(), &cluster.namespace);
    let live = modules.get("team-accounts").await?.status.unwrap();
    assert_eq!(live.phase.as_deref(), Some("Live"));
    assert_eq!(live.live_digest.as_deref(), Some(sunk::policy::sha256_hex(&std::fs::read(&module)?).as_str()));

    let metrics = cluster.metrics(host).await?;
    let v2_decisions = metrics.lines().find(|line| {
        line.starts_with("sunk_policy_decisions_total{")
            && line.contains("policy=\"policymodule/team-accounts\"")
            && line.contains("outcome=\"ok\"")
    });
    assert!(v2_decisions.is_some(), "/metrics counts v2's decisions:\n{metrics}");
    for outcome in ["trap", "timeout", "out_of_fuel", "invalid", "fallback"] {
        assert!(!metrics.contains(&format!("outcome=\"{outcome}\"")), "no {outcome} during the swap:\n{metrics}");
    }
    assert!(metrics.contains("sunk_policy_decision_duration_seconds_bucket{"), "{metrics}");

    // Deleting the PolicyModule hands the decision point back to the bundled default.
    modules.delete("team-accounts", &DeleteParams::default()).await?;
    let cluster = &cluster;
    let mut attempt = 0;
    wait_for("the bundled job-mapper to be live again", BIND, || {
        attempt += 1;
        let name = format!("after-delete-{attempt}");
        async move { schedule(cluster, &name).await.ok().filter(|comment| comment.is_empty()) }
    })
    .await?;
    Ok(())
}

#[tokio::test]
async fn a_module_that_does_not_match_its_pin_is_refused_and_says_why() -> anyhow::Result<()> {
    let mut cluster = Cluster::connect("refuse").await?;
    start_team_host(&mut cluster)?;
    let module = example_policy("team-accounts")?;
    let push = cluster.sunk_cli(&[
        "policy",
        "push",
        module.to_str().unwrap(),
        "--name",
        "pinned",
        "--namespace",
        &cluster.namespace,
    ])?;
    assert!(push.status.success(), "{}", String::from_utf8_lossy(&push.stderr));

    // Pin other bytes: the host must refuse them, keep the live module, and say which field is wrong.
    let modules: Api<PolicyModule> = Api::namespaced(cluster.kube.clone(), &cluster.namespace);
    let wrong = "0".repeat(64);
    let patch = serde_json::json!({ "spec": { "sha256": wrong } });
    modules.patch("pinned", &PatchParams::default(), &Patch::Merge(patch)).await?;
    let status = wait_phase(&modules, "pinned", "Refused").await?;
    let message = status.message.unwrap_or_default();
    assert!(message.contains("spec.sha256"), "{message}");
    assert!(message.contains("stays on policymodule/pinned"), "the pushed module stays live: {message}");
    cluster.wait_event("pinned", "Refused", |reason, _| reason == "Refused").await?;
    assert_eq!(schedule(&cluster, "still-v2").await?, "team=ml");

    // A PolicyModule naming a missing ConfigMap is refused with the ConfigMap's name.
    let spec: PolicyModuleSpec = serde_json::from_value(serde_json::json!({
        "decision": "job-mapper",
        "sha256": wrong,
        "source": {"configMap": {"name": "nowhere", "key": "module.wasm"}},
    }))?;
    modules.create(&Default::default(), &PolicyModule::new("missing", spec)).await?;
    let status = wait_phase(&modules, "missing", "Refused").await?;
    assert!(status.message.unwrap_or_default().contains("nowhere"));

    // A module of the wrong world is refused by the CLI before it reaches the cluster.
    let drain = example_policy("drain-runbook")?;
    let push = cluster.sunk_cli(&[
        "policy",
        "push",
        drain.to_str().unwrap(),
        "--decision",
        "job-mapper",
        "--namespace",
        &cluster.namespace,
    ])?;
    assert!(!push.status.success());
    assert!(String::from_utf8_lossy(&push.stderr).contains("map-pod"), "{}", String::from_utf8_lossy(&push.stderr));
    Ok(())
}
