//! Policies fail safe: a custom job-mapper that traps on a pod, or a PolicyModule that cannot go live
//! (its ConfigMap missing), leaves the pods it should have mapped Pending with `PolicyFailed`; the
//! bundled default, more permissive as a rule, never maps them instead.

use std::time::Duration;

use kube::api::{Api, DeleteParams};
use sunk::delivery::{PolicyModule, PolicyModuleSpec};
use sunk_e2e::{Cluster, example_policy, node_name, pod, scheduled_condition, wait_for};

const BIND: Duration = Duration::from_secs(30);

#[tokio::test]
async fn a_custom_job_mapper_that_fails_or_is_missing_leaves_pods_pending_not_mapped_by_the_default()
-> anyhow::Result<()> {
    let mut cluster = Cluster::connect("fail-safe").await?;
    cluster.start_host(&[])?;
    let modules: Api<PolicyModule> = Api::namespaced(cluster.kube.clone(), &cluster.namespace);

    // A PolicyModule whose bytes are missing: no job-mapper decision is made until it is live.
    let spec: PolicyModuleSpec = serde_json::from_value(serde_json::json!({
        "decision": "job-mapper",
        "sha256": "0".repeat(64),
        "source": {"configMap": {"name": "nowhere", "key": "module.wasm"}},
    }))?;
    modules.create(&Default::default(), &PolicyModule::new("missing", spec)).await?;
    wait_for("PolicyModule missing to be refused", BIND, || async {
        (modules.get("missing").await.ok()?.status?.phase.as_deref() == Some("Refused")).then_some(())
    })
    .await?;
    let withheld = cluster.create_pod(pod("withheld", "1", "64Mi")).await?;
    let pending = policy_failed(&cluster, "withheld").await?;
    assert!(pending.contains("PolicyModule missing is not live"), "{pending}");
    assert!(cluster.jobs_of(withheld.metadata.uid.as_deref().unwrap_or_default()).await?.is_empty());
    // Deleted, it no longer holds decisions back: the bundled default maps new pods again.
    modules.delete("missing", &DeleteParams::default()).await?;
    cluster.create_pod(pod("after", "1", "64Mi")).await?;
    cluster.wait_pod("after", "the pod to be bound", BIND, |pod| node_name(pod).is_some()).await?;
    cluster.delete_pod("after").await?;

    // A live job-mapper that traps on pods labelled `abuse`: those wait, the others are mapped by it.
    let config = std::env::temp_dir().join(format!("abuse-{}.config", cluster.namespace));
    std::fs::write(&config, "panic-when-labelled")?;
    let module = example_policy("abuse")?;
    let (module, config) = (module.to_string_lossy(), config.to_string_lossy());
    let args = ["policy", "push", &module, "--name", "abuse", "-n", &cluster.namespace, "--config-file", &config];
    let pushed = cluster.sunk_cli(&args)?;
    anyhow::ensure!(pushed.status.success(), "push: {}", String::from_utf8_lossy(&pushed.stderr));
    wait_for("PolicyModule abuse to be live", BIND, || async {
        (modules.get("abuse").await.ok()?.status?.phase.as_deref() == Some("Live")).then_some(())
    })
    .await?;
    cluster.create_pod(pod("fine", "1", "64Mi")).await?;
    cluster.wait_pod("fine", "the pod to be bound", BIND, |pod| node_name(pod).is_some()).await?;
    let mut trapped = pod("trapped", "1", "64Mi");
    trapped["metadata"]["labels"] = serde_json::json!({"abuse": "panic"});
    let trapped = cluster.create_pod(trapped).await?;
    let pending = policy_failed(&cluster, "trapped").await?;
    assert!(pending.contains("trapped"), "{pending}");
    assert!(cluster.jobs_of(trapped.metadata.uid.as_deref().unwrap_or_default()).await?.is_empty());
    Ok(())
}

/// Waits for the pod's `PolicyFailed` condition; returns its message.
async fn policy_failed(cluster: &Cluster, name: &str) -> anyhow::Result<String> {
    let pod = cluster
        .wait_pod(name, "a PolicyFailed condition", BIND, |pod| {
            scheduled_condition(pod).is_some_and(|(_, reason, _)| reason == "PolicyFailed")
        })
        .await?;
    Ok(scheduled_condition(&pod).map(|(_, _, message)| message).unwrap_or_default())
}
