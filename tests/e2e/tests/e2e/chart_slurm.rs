//! The chart with its own Slurm, installed by the real `helm` into the local cluster: slurmctld,
//! slurmrestd, the host and a NodeSet's slurmd pods all run as pods from the project's images. This is
//! a second Slurm cluster, independent of the local cluster's own: its NodeSet selects only Nodes this
//! test labels (chart_release::NODES), and its host keeps only the NodeSets of the release namespace and
//! schedules only pods naming `<namespace>-<release>`.

use std::time::Instant;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::ResourceExt;
use kube::api::{Api, ListParams};
use sunk::nodeset::NodeSet;
use sunk_e2e::{kubectl, node_name, pod, wait_for};

use super::chart_release::*;

/// One release from install to uninstall (an install is most of a chart test's minute).
#[tokio::test]
async fn the_chart_installs_a_slurm_whose_nodesets_and_host_schedule_a_pod_and_uninstall_leaves_nothing()
-> anyhow::Result<()> {
    let release = install("chart-slurm").await?;
    let listed = release.slurm_nodes().unwrap_or_default();
    assert_eq!(listed.len(), NODES.len(), "sinfo in the release's slurmctld: {listed:?}");
    for pod in release.pods_of("slurmd").await? {
        assert!(NODES.contains(&node_name(&pod).unwrap_or_default()), "a slurmd pod outside the test's Nodes");
    }
    slurmctld_serves_slurms_own_metrics_on_26_05(&release)?;

    // A pod for this release's scheduler gets a job in this release's Slurm and runs where it says.
    let mut example = pod("example", "500m", "256Mi");
    example["spec"]["schedulerName"] = release.scheduler_name().into();
    let uid = release.cluster.create_pod(example).await?.uid().unwrap_or_default();
    let running = release
        .cluster
        .wait_pod(
            "example",
            "the example pod to be bound through the release's Slurm and run",
            READY,
            sunk_e2e::is_running,
        )
        .await?;
    let jobs = release.slurm(&["scontrol", "-o", "show", "jobs"])?;
    let job = sunk_e2e::jobs_not_ended(&jobs, &uid).first().copied().unwrap_or_default();
    assert!(job.contains("JobState=RUNNING"), "no running job of the pod in the release's Slurm: {jobs}");
    let node = node_name(&running).unwrap_or_default();
    assert!(job.contains(&format!(" NodeList={node} ")), "the pod runs on {node}, its job: {job}");
    assert!(release.cluster.jobs_of(&uid).await?.is_empty(), "a job in the local cluster's own Slurm");
    let job_id = job.split_whitespace().next().and_then(|id| id.strip_prefix("JobId=")).unwrap_or_default();
    let slurmd = slurmd_on(&release, node).await?.map(|pod| pod.name_any()).unwrap_or_default();
    let trace = kubectl(&["-n", release.namespace(), "exec", &slurmd, "--", "cat", PROLOG_TRACE]).output()?;
    let trace = String::from_utf8_lossy(&trace.stdout).into_owned();
    assert!(trace.lines().any(|line| line == job_id), "the prolog did not run for job {job_id}: {trace:?}");

    release.cluster.helm(&["test", &release.name, "--timeout", "60s"])?;
    release.cluster.delete_pod("example").await?;
    uninstall_leaves_nothing(&release).await
}

#[tokio::test]
async fn helm_upgrade_applies_the_crds_reconfigures_slurm_and_rolls_slurmd_without_killing_a_running_job()
-> anyhow::Result<()> {
    let release = install("chart-upgrade").await?;
    let (first, busy) = (NODES[0], NODES[1]);
    let job = sleep_job(&release, busy).await?;
    let busy_pod = slurmd_on(&release, busy).await?.and_then(|pod| pod.uid()).unwrap_or_default();

    // The NodeSet CRD as a previous version left it: one field differs from what this build serves.
    // Other lanes share the CRD, so the field changed is a description, which nothing reads.
    let stale = r#"[{"op":"replace","path":"/spec/versions/0/schema/openAPIV3Schema/description","value":"stale"}]"#;
    let patched = kubectl(&["patch", "crd", NODESET_CRD, "--type=json", "-p", stale]).output()?;
    anyhow::ensure!(patched.status.success(), "staling the CRD: {}", String::from_utf8_lossy(&patched.stderr));

    // KillWait 30 -> 35 (slurm.conf, and the host's --slurm-kill-wait), and a new slurmd template.
    let keys = key_secrets(&release)?;
    helm_deploy(&release, "upgrade", &values(release.namespace(), 35, "2"))?;
    assert_eq!(key_secrets(&release)?, keys, "the generated keys changed with the upgrade");
    assert_eq!(nodeset_crd_description(&release).await?, served_nodeset_description(), "the CRD after the upgrade");
    // The hook's right to change the CRDs went with it.
    let hook_role = format!("{}-{}-crd-upgrade", release.name, release.namespace());
    let role = kubectl(&["get", "clusterrole", &hook_role, "--ignore-not-found", "-o", "name"]).output()?;
    assert_eq!(String::from_utf8_lossy(&role.stdout).trim(), "", "the hook's ClusterRole after the upgrade");
    wait_for("KillWait=35 in the running slurmctld", CONFIG_APPLIED, || async {
        let config = release.slurm(&["scontrol", "show", "config"]).ok()?;
        config.lines().any(|line| line.starts_with("KillWait") && line.contains("35 sec")).then_some(())
    })
    .await?;
    let kill_wait = r#"jsonpath={.spec.template.spec.containers[0].env[?(@.name=="SUNK_SLURM_KILL_WAIT")].value}"#;
    let host = kubectl(&["-n", release.namespace(), "get", "deployment", &release.name, "-o", kill_wait]).output()?;
    assert_eq!(String::from_utf8_lossy(&host.stdout), "35", "the host's KillWait after the upgrade");

    // The idle node rolls; the busy one is drained and keeps its pod while the job runs.
    wait_for(&format!("{first}'s slurmd replaced from the new template, and idle again"), READY, || async {
        let pod = slurmd_on(&release, first).await.ok()??;
        let listed = release.slurm_nodes()?;
        let idle = listed.iter().any(|(node, state)| node == first && state == "idle");
        (template_revision(&pod) == Some("2") && is_ready(&pod) && idle).then_some(())
    })
    .await?;
    let draining = release.slurm_nodes().unwrap_or_default();
    assert!(draining.iter().any(|(node, state)| node == busy && state.starts_with("drain")), "{draining:?}");
    let still = slurmd_on(&release, busy).await?.expect("the busy Node's slurmd pod");
    assert_eq!(still.uid().unwrap_or_default(), busy_pod, "the busy Node's slurmd pod was replaced");
    assert!(still.metadata.deletion_timestamp.is_none(), "the busy Node's slurmd pod is being deleted");
    assert_eq!(release.job_state(&job)?.as_deref(), Some("RUNNING"), "job {job} after the upgrade");

    // Once the job ends, the busy Node rolls too.
    release.slurm(&["scancel", &job])?;
    wait_for(&format!("{busy}'s slurmd replaced from the new template"), READY, || async {
        let pod = slurmd_on(&release, busy).await.ok()??;
        (template_revision(&pod) == Some("2") && is_ready(&pod)).then_some(())
    })
    .await?;
    wait_idle(&release, &*NODES).await?;
    Ok(())
}

const NODESET_CRD: &str = "nodesets.sunk.dev";

/// The description at the root of the NodeSet CRD's schema, as the API server serves it.
async fn nodeset_crd_description(release: &Release) -> anyhow::Result<Option<String>> {
    let crds = Api::<CustomResourceDefinition>::all(release.cluster.kube.clone());
    Ok(root_description(&crds.get(NODESET_CRD).await?))
}

/// The same, as this build of sunk serves it.
fn served_nodeset_description() -> Option<String> {
    sunk::cli::custom_resources().iter().find(|crd| crd.name_any() == NODESET_CRD).and_then(root_description)
}

fn root_description(crd: &CustomResourceDefinition) -> Option<String> {
    let version = crd.spec.versions.first()?;
    version.schema.as_ref()?.open_api_v3_schema.as_ref()?.description.clone()
}

/// Slurm's own metrics (`slurmCluster.metrics.enabled: auto`): on 26.05, slurm.conf asks for them and
/// slurmctld serves every path the chart's ServiceMonitor scrapes through its Service, both NodeSet
/// nodes in them; 24.11's slurm.conf does not ask (its slurmctld would refuse `MetricsType`).
/// Checked in the install test's release (an install is most of a chart test's time), before any
/// job: only the nodes' gauges are compared.
fn slurmctld_serves_slurms_own_metrics_on_26_05(release: &Release) -> anyhow::Result<()> {
    let config = release.slurm(&["scontrol", "show", "config"])?;
    let metrics_type = config.lines().find(|line| line.starts_with("MetricsType")).map(str::to_string);
    if sunk_e2e::slurm_version() == "24.11" {
        assert_eq!(metrics_type, None, "24.11 has no metrics plugin to ask for");
        return Ok(());
    }
    let metrics_type = metrics_type.unwrap_or_default();
    assert!(metrics_type.ends_with("metrics/openmetrics"), "scontrol show config: {metrics_type:?}");
    // The Service's name, not slurmctld's host name (inside its pod, that is the pod itself).
    let base = format!("http://{}-slurmctld.{}.svc.cluster.local:6817", release.name, release.namespace());
    let get = |path: &str| release.slurm(&["curl", "-sSf", "--max-time", "10", &format!("{base}{path}")]);
    let nodes = get("/metrics/nodes")?;
    assert_eq!(gauge(&nodes, "slurm_nodes"), Some(NODES.len() as f64), "/metrics/nodes:\n{nodes}");
    for node in *NODES {
        // The NodeSet's slurmd pods are limited to 1 CPU: CPUs=1.
        let cpus = gauge(&nodes, &format!("slurm_node_cpus{{node=\"{node}\"}}"));
        assert_eq!(cpus, Some(1.0), "{node}'s CPUs in /metrics/nodes:\n{nodes}");
    }
    let partitions = get("/metrics/partitions")?;
    let batch = gauge(&partitions, "slurm_partition_nodes{partition=\"batch\"}");
    assert_eq!(batch, Some(NODES.len() as f64), "/metrics/partitions:\n{partitions}");
    let jobs = get("/metrics/jobs")?;
    assert!(gauge(&jobs, "slurm_jobs").is_some(), "/metrics/jobs:\n{jobs}");
    let scheduler = get("/metrics/scheduler")?;
    assert!(gauge(&scheduler, "slurm_schedule_cycle_cnt").is_some(), "/metrics/scheduler:\n{scheduler}");
    Ok(())
}

/// The value of one series (`name` or `name{label="value"}`, as Slurm writes it) in a scrape.
fn gauge(scrape: &str, series: &str) -> Option<f64> {
    scrape.lines().find_map(|line| {
        let (name, value) = line.rsplit_once(' ')?;
        (name.trim() == series).then(|| value.trim().parse().ok()).flatten()
    })
}

/// `helm uninstall` of a release whose pods for sunk are gone: nothing of it is left.
async fn uninstall_leaves_nothing(release: &Release) -> anyhow::Result<()> {
    let started = Instant::now();
    // The pre-delete hook deletes the NodeSets and waits until their host has removed every slurmd
    // pod and Slurm node record; only then does helm delete the host and Slurm.
    release.cluster.helm(&["uninstall", &release.name, "--wait", "--timeout", "120s"])?;
    println!("uninstall: `helm uninstall --wait` {:.1} s", started.elapsed().as_secs_f64());

    let namespace = release.namespace().to_string();
    wait_for("every pod of the namespace to be gone", READY, || async {
        release.cluster.pods().list(&ListParams::default()).await.ok()?.items.is_empty().then_some(())
    })
    .await?;
    let nodesets = Api::<NodeSet>::namespaced(release.cluster.kube.clone(), &namespace);
    assert!(nodesets.list(&ListParams::default()).await?.items.is_empty(), "NodeSets left");
    let kinds = "secrets,configmaps,services,deployments,persistentvolumeclaims,serviceaccounts,roles,rolebindings,\
                 poddisruptionbudgets,leases";
    let left = kubectl(&["-n", &namespace, "get", kinds, "-o", "name"]).output()?;
    let left: Vec<String> = String::from_utf8_lossy(&left.stdout)
        .lines()
        .filter(|name| !matches!(*name, "configmap/kube-root-ca.crt" | "serviceaccount/default"))
        .map(str::to_string)
        .collect();
    assert!(left.is_empty(), "left in the namespace: {left:?}");
    let selector = format!("app.kubernetes.io/instance={}", release.name);
    let cluster_wide = kubectl(&["get", "clusterroles,clusterrolebindings", "-l", &selector, "-o", "name"]).output()?;
    let cluster_wide = String::from_utf8_lossy(&cluster_wide.stdout).into_owned();
    assert!(cluster_wide.lines().all(|name| !name.contains(&namespace)), "left cluster-wide: {cluster_wide}");
    let releases = release.cluster.helm(&["list", "--all", "--short"])?;
    assert!(releases.trim().is_empty(), "releases left: {releases}");
    Ok(())
}

#[tokio::test]
async fn with_persistence_a_replaced_slurmctld_keeps_its_running_jobs() -> anyhow::Result<()> {
    // Declared first, dropped last: after the release is uninstalled.
    let _volume: StaticVolume;
    let release = Release::new("chart-state").await?;
    _volume =
        StaticVolume::bound_to(release.namespace(), &format!("{}-slurmctld-state", release.name), "ReadWriteOnce")?;
    release.install(&["slurmCluster.controller.persistence.enabled=true"]).await?;
    let busy = NODES[1];
    let job = sleep_job(&release, busy).await?;

    // A new slurmctld pod (a Node failure, a new image): the state on the claim carries the job over.
    let old = release.pods_of("slurmctld").await?.first().and_then(|pod| pod.uid()).unwrap_or_default();
    let selector = format!("app.kubernetes.io/instance={},app.kubernetes.io/component=slurmctld", release.name);
    let deleted = kubectl(&["-n", release.namespace(), "delete", "pod", "-l", &selector, "--wait=true"]).output()?;
    anyhow::ensure!(deleted.status.success(), "deleting slurmctld: {}", String::from_utf8_lossy(&deleted.stderr));
    let new = wait_ready(&release, "slurmctld", 1).await?;
    assert_ne!(new[0].uid().unwrap_or_default(), old, "slurmctld's pod was not replaced");
    wait_running(&release, &job, "still RUNNING in the new slurmctld").await?;
    release.slurm(&["scancel", &job])?;
    Ok(())
}
