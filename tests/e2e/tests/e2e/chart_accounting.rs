//! The chart's Slurm with accounting, installed by the real `helm`: slurmdbd and the chart's MariaDB.
//! A pod's placeholder is recorded for `sacct` under the account its namespace is granted, as the
//! granted user (resolved through the chart's static identity); a QOS the values declare holds that
//! user's second job; an upgrade that adds an account applies it without restarting slurmctld, and
//! the database password stays what it was; with `preempt/qos`, a batch job of a higher QOS takes the
//! node of a pod of the QOS it may preempt.

use kube::ResourceExt;
use serde_json::json;
use sunk_e2e::{is_running, kubectl, pod, scheduled_condition, wait_for};

use super::chart_release::*;

/// The values of this test's accounting, with `accounts`.
fn accounting_values(release: &Release, accounts: serde_json::Value) -> Vec<String> {
    let accounting = json!({
        "enabled": true,
        "enforce": ["associations", "limits", "qos"],
        "qos": [{"name": "one", "set": "MaxJobsPerUser=1"}, {"name": "low"}, {"name": "high", "set": "Preempt=low"}],
        "accounts": accounts,
        "users": [
            {"name": "alice", "accounts": ["ml"], "defaultAccount": "ml", "qos": ["normal", "one", "low"]},
            // The test's Slurm commands run as SlurmUser in slurmctld's pod.
            {"name": "slurm", "accounts": ["ml"], "defaultAccount": "ml", "qos": ["normal", "high"]},
        ],
        "database": {"persistence": {"enabled": false}},
    });
    let identity =
        json!({"users": [{"name": "alice", "uid": 1000, "gid": 1000}], "groups": [{"name": "alice", "gid": 1000}]});
    let grants = json!([{"namespaces": [release.namespace()], "user": 1000, "group": 1000, "accounts": ["ml"],
                         "qos": ["one", "low"]}]);
    let preemption = json!({"type": "preempt/qos", "mode": "REQUEUE"});
    [
        ("slurmCluster.accounting", accounting),
        ("slurmCluster.identity", identity),
        ("tenancy.grants", grants),
        ("slurmCluster.config.preemption", preemption),
    ]
    .into_iter()
    .flat_map(|(key, value)| ["--set-json".to_string(), format!("{key}={value}")])
    .collect()
}

/// The generated database password, as stored in its Secret.
fn database_password(release: &Release) -> anyhow::Result<String> {
    let secret = format!("{}-database", release.name);
    let output =
        kubectl(&["-n", release.namespace(), "get", "secret", &secret, "-o", "jsonpath={.data.password}"]).output()?;
    anyhow::ensure!(output.status.success(), "reading {secret}: {}", String::from_utf8_lossy(&output.stderr));
    let password = String::from_utf8_lossy(&output.stdout).into_owned();
    anyhow::ensure!(!password.is_empty(), "{secret} holds no password");
    Ok(password)
}

/// `sacct` lines `job name|user|account|qos|state` of every job (slurmctld's user is an administrator).
fn sacct(release: &Release) -> anyhow::Result<String> {
    release.slurm(&["sacct", "-a", "-X", "-n", "-P", "-o", "JobName,User,Account,QOS,State"])
}

#[tokio::test]
async fn pods_are_accounted_to_their_granted_account_and_a_qos_holds_a_users_second_job() -> anyhow::Result<()> {
    let release = Release::new("chart-acct").await?;
    let ml = json!([{"name": "ml", "description": "machine learning"}]);
    release.install_with(&accounting_values(&release, ml), &[("slurmdbd", 1), ("mariadb", 1)]).await?;
    let password = database_password(&release)?;

    // Two pods asking for QOS `one`, one after the other: the first runs, as alice under ml; the
    // second waits for the QOS.
    let asking = |name: &str, qos: &str| {
        let mut asking = pod(name, "500m", "128Mi");
        asking["metadata"]["annotations"] = json!({"sunk.dev/qos": qos});
        asking["spec"]["schedulerName"] = release.scheduler_name().into();
        asking
    };
    release.cluster.create_pod(asking("first", "one")).await?;
    release.cluster.wait_pod("first", "the first pod to run", READY, is_running).await?;
    release.cluster.create_pod(asking("second", "one")).await?;
    let held = release
        .cluster
        .wait_pod("second", "the second pod held by the QOS", READY, |pod| {
            scheduled_condition(pod).is_some_and(|(_, _, message)| message.contains("QOSMaxJobsPerUserLimit"))
        })
        .await?;
    assert!(held.spec.as_ref().and_then(|spec| spec.node_name.as_ref()).is_none(), "the held pod is not bound");
    let namespace = release.namespace().to_string();
    wait_for("sacct to list both placeholders as alice's, under ml with QOS one", READY, || async {
        let listed = sacct(&release).ok()?;
        let has = |line: String| listed.lines().any(|listed| listed == line);
        (has(format!("{namespace}/first|alice|ml|one|RUNNING"))
            && has(format!("{namespace}/second|alice|ml|one|PENDING")))
        .then_some(())
    })
    .await
    .map_err(|error| anyhow::anyhow!("{error}: {}", sacct(&release).unwrap_or_default()))?;

    // An upgrade adds an account: applied by the sidecar, slurmctld untouched, the password kept.
    let slurmctld = release.pods_of("slurmctld").await?.first().map(|pod| pod.uid()).unwrap_or_default();
    let mut upgraded = values(release.namespace(), 30, "1");
    let with_vision = json!([{"name": "ml", "description": "machine learning"}, {"name": "vision"}]);
    upgraded.extend(accounting_values(&release, with_vision));
    helm_deploy(&release, "upgrade", &upgraded)?;
    wait_for("the account vision in slurmdbd", CONFIG_APPLIED, || async {
        let accounts = release.slurm(&["sacctmgr", "-n", "-P", "show", "account", "format=account"]).ok()?;
        accounts.lines().any(|account| account == "vision").then_some(())
    })
    .await?;
    let now = release.pods_of("slurmctld").await?;
    assert_eq!(now.iter().map(|pod| pod.uid()).collect::<Vec<_>>(), vec![slurmctld], "slurmctld was replaced");
    assert_eq!(database_password(&release)?, password, "the database password changed");
    assert!(
        sacct(&release)?.contains(&format!("{namespace}/first|alice|ml|one|RUNNING")),
        "the first pod's job runs on"
    );
    for name in ["first", "second"] {
        release.cluster.delete_pod(name).await?;
    }
    wait_for("the QOS one pods' placeholders to end", READY, || async {
        release.slurm(&["squeue", "-h", "-t", "PD,R,CG"]).ok()?.trim().is_empty().then_some(())
    })
    .await?;

    // preempt/qos: with both nodes taken by pods of QOS low, a batch job of QOS high (Preempt=low)
    // gets one of their nodes: Slurm requeues one low placeholder and the host deletes its pod,
    // naming the job. (A pod of QOS high would get the node too, but its kubelet can refuse it while
    // the preempted pod is still stopping: see docs/scheduler.md.)
    for name in ["low-1", "low-2"] {
        release.cluster.create_pod(asking(name, "low")).await?;
    }
    for name in ["low-1", "low-2"] {
        release.cluster.wait_pod(name, "the low pod to run", READY, is_running).await?;
    }
    let urgent = release.slurm(&[
        "sbatch",
        "--parsable",
        "--chdir=/tmp",
        "-A",
        "ml",
        "--qos=high",
        "-c",
        "1",
        "--mem=100",
        "--wrap",
        "sleep 600",
    ])?;
    let urgent = urgent.trim();
    wait_running(&release, urgent, "RUNNING in place of a low pod").await?;
    let preempted = release
        .cluster
        .pod_with_event(&["low-1", "low-2"], READY, |reason, note| {
            reason == "SlurmJobPreempted" && note.contains(&format!("Slurm job {urgent} "))
        })
        .await?;
    let kept = if preempted == "low-1" { "low-2" } else { "low-1" };
    let kept = release.cluster.pods().get(kept).await?;
    assert!(kept.metadata.deletion_timestamp.is_none() && is_running(&kept), "one preemption was enough");

    // Their jobs end with them: the uninstall's drain of the NodeSet has nothing to wait for.
    release.slurm(&["scancel", urgent])?;
    for name in ["low-1", "low-2"] {
        let _ = release.cluster.delete_pod(name).await;
    }
    Ok(())
}
