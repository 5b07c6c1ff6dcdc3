//! The chart with its own Slurm, installed by the real `helm` into the local cluster: slurmctld,
//! slurmrestd, the host and a NodeSet's slurmd pods all run as pods from the project's images. This is
//! a second Slurm cluster, independent of the local cluster's own: its NodeSet selects only Nodes this
//! test labels (kube-node-3 and -4), and its host keeps only the NodeSets of the release namespace and
//! schedules only pods naming `<namespace>-<release>`.

use std::process::Output;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::{Api, ListParams};
use sunk::nodeset::NodeSet;
use sunk_e2e::{Cluster, NodeGuard, SUNK_IMAGE_REPOSITORY, SUNK_IMAGE_TAG, kubectl, node_name, pod, wait_for};

const CHART: &str = "charts/sunk";
const NODES: [&str; 2] = ["kube-node-3", "kube-node-4"];
/// The label that puts a Node into one test's pool (NodeGuard takes it off again).
const POOL: &str = "sunk.dev/e2e-pool";
const READY: Duration = Duration::from_secs(120);
/// The kubelet refreshes a ConfigMap volume on its periodic pod sync (about a minute), then the
/// slurmctld pod's sidecar runs `scontrol reconfigure`.
const CONFIG_APPLIED: Duration = Duration::from_secs(180);
/// Where the tests' prolog script writes, inside each slurmd container.
const PROLOG_TRACE: &str = "/tmp/sunk-e2e-prolog";

/// One install of the chart with Slurm enabled; uninstalled (best effort) when dropped, before the
/// namespace goes.
struct Release {
    name: String,
    cluster: Cluster,
    _nodes: NodeGuard,
}

impl Drop for Release {
    fn drop(&mut self) {
        // Already gone after a test's own uninstall; otherwise the hook removes the NodeSets first.
        let _ = self.cluster.helm(&["uninstall", &self.name, "--wait", "--timeout", "90s"]);
        let _ = self.cluster.helm(&["uninstall", &self.name, "--no-hooks", "--wait"]);
    }
}

/// The values of the tests' install: the local images, one host replica without leader election (the
/// host has none yet), and a NodeSet of 1-CPU, 1-GiB slurmd pods on this test's Nodes.
fn values(namespace: &str, kill_wait: u32, template_revision: &str) -> Vec<String> {
    let nodesets = serde_json::json!([{
        "name": "cpu",
        "nodeSelector": {POOL: namespace},
        "partitions": ["batch"],
        "drainTimeout": "10m",
        "slurmd": {
            "terminationGracePeriodSeconds": 5,
            "resources": {"limits": {"cpu": "1", "memory": "1Gi"}},
            "podAnnotations": {"e2e.sunk.dev/template": template_revision},
        },
    }]);
    let mut values = vec![
        format!("image.repository={SUNK_IMAGE_REPOSITORY}"),
        format!("image.tag={SUNK_IMAGE_TAG}"),
        "pollIntervalMs=200".into(),
        "slurmCluster.enabled=true".into(),
        format!("slurmCluster.config.killWait={kill_wait}"),
    ];
    for daemon in ["slurmctld", "slurmrestd", "slurmd"] {
        values.push(format!("slurmCluster.images.{daemon}.repository=localhost/sunk/{daemon}"));
        values.push(format!("slurmCluster.images.{daemon}.tag={}", sunk_e2e::slurm_version()));
    }
    let mut args = Vec::new();
    for value in values {
        args.extend(["--set".to_string(), value]);
    }
    args.extend(["--set-json".into(), format!("slurmCluster.nodesets={nodesets}")]);
    // A prolog that leaves a trace of each job on its node (run by slurmd through run-parts).
    let prolog = serde_json::json!({"00-trace": format!("#!/bin/sh\necho \"$SLURM_JOB_ID\" >>{PROLOG_TRACE}\n")});
    args.extend(["--set-json".into(), format!("slurmCluster.prolog.scripts={prolog}")]);
    args
}

/// `helm <verb> <release> charts/sunk <values> --wait`.
fn helm_deploy(release: &Release, verb: &str, values: &[String]) -> anyhow::Result<Duration> {
    let mut args: Vec<&str> = vec![verb, &release.name, CHART, "--wait", "--timeout", "180s"];
    args.extend(values.iter().map(String::as_str));
    let started = Instant::now();
    release.cluster.helm(&args)?;
    Ok(started.elapsed())
}

/// Installs the chart with its Slurm into a fresh namespace, and waits until every part is Ready and
/// Slurm has both NodeSet nodes idle. Prints how long that took.
async fn install(test: &str) -> anyhow::Result<Release> {
    let release = Release::new(test).await?;
    release.install(&[]).await?;
    Ok(release)
}

impl Release {
    /// A fresh namespace, and this test's Nodes labelled into its pool.
    async fn new(test: &str) -> anyhow::Result<Self> {
        let cluster = Cluster::connect(test).await?;
        let nodes = NodeGuard::new(&NODES);
        for node in NODES {
            nodes.label(node, (POOL, &cluster.namespace))?;
        }
        Ok(Release { name: "sunk".into(), cluster, _nodes: nodes })
    }

    /// `helm install` with the tests' values and `extra` ones (`key=value`), then waits for it all.
    async fn install(&self, extra: &[&str]) -> anyhow::Result<()> {
        let started = Instant::now();
        let mut values = values(self.namespace(), 30, "1");
        for value in extra {
            values.extend(["--set".to_string(), value.to_string()]);
        }
        let helm_wait = helm_deploy(self, "install", &values)?;
        // The chart's default host: two replicas, one leading.
        wait_ready(self, "host", 2).await?;
        for component in ["slurmctld", "slurmrestd"] {
            wait_ready(self, component, 1).await?;
        }
        wait_ready(self, "slurmd", NODES.len()).await?;
        wait_idle(self, &NODES).await?;
        println!(
            "install: `helm install --wait` {:.1} s; host, slurmctld, slurmrestd, slurmd pods Ready and both Slurm nodes idle after {:.1} s",
            helm_wait.as_secs_f64(),
            started.elapsed().as_secs_f64()
        );
        Ok(())
    }
}

impl Release {
    fn namespace(&self) -> &str {
        &self.cluster.namespace
    }

    /// `<namespace>-<release>`: the chart's default scheduler name.
    fn scheduler_name(&self) -> String {
        format!("{}-{}", self.namespace(), self.name)
    }

    /// A Slurm command run inside the slurmctld pod (Slurm's commands, auth/slurm, authenticate through the
    /// local daemon's socket); its standard output.
    fn slurm(&self, args: &[&str]) -> anyhow::Result<String> {
        let deployment = format!("deploy/{}-slurmctld", self.name);
        let mut command = vec!["-n", self.namespace(), "exec", &deployment, "-c", "slurmctld", "--"];
        command.extend_from_slice(args);
        let Output { status, stdout, stderr } = kubectl(&command).output()?;
        anyhow::ensure!(status.success(), "{args:?} in slurmctld: {}", String::from_utf8_lossy(&stderr));
        Ok(String::from_utf8_lossy(&stdout).into_owned())
    }

    /// Slurm's nodes as `name -> state` (`sinfo -N`), or nothing while slurmctld cannot answer.
    fn slurm_nodes(&self) -> Option<Vec<(String, String)>> {
        let listing = self.slurm(&["sinfo", "-h", "-N", "-o", "%N %T"]).ok()?;
        Some(
            listing
                .lines()
                .filter_map(|line| line.split_once(' '))
                .map(|(node, state)| (node.to_string(), state.to_string()))
                .collect(),
        )
    }

    /// A job's state (`squeue`), or None once Slurm no longer lists it.
    fn job_state(&self, job: &str) -> anyhow::Result<Option<String>> {
        let state = self.slurm(&["squeue", "-h", "-j", job, "-o", "%T"])?;
        Ok(Some(state.trim().to_string()).filter(|state| !state.is_empty()))
    }

    async fn pods_of(&self, component: &str) -> anyhow::Result<Vec<Pod>> {
        let selector = format!("app.kubernetes.io/instance={},app.kubernetes.io/component={component}", self.name);
        Ok(self.cluster.pods().list(&ListParams::default().labels(&selector)).await?.items)
    }
}

fn is_ready(pod: &Pod) -> bool {
    let conditions = pod.status.as_ref().and_then(|status| status.conditions.as_ref());
    pod.metadata.deletion_timestamp.is_none()
        && conditions.is_some_and(|all| all.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// Waits for `count` Ready pods of a component, and no others.
async fn wait_ready(release: &Release, component: &str, count: usize) -> anyhow::Result<Vec<Pod>> {
    wait_for(&format!("{count} Ready {component} pod(s) of the release"), READY, || async {
        let pods = release.pods_of(component).await.ok()?;
        (pods.len() == count && pods.iter().all(is_ready)).then_some(pods)
    })
    .await
}

async fn wait_idle(release: &Release, nodes: &[&str]) -> anyhow::Result<()> {
    wait_for(&format!("Slurm nodes {nodes:?} idle in the release's Slurm"), READY, || async {
        let listed = release.slurm_nodes()?;
        nodes.iter().all(|node| listed.iter().any(|(name, state)| name == node && state == "idle")).then_some(())
    })
    .await
}

/// A batch job (`sbatch` in slurmctld, as an HPC user would) sleeping on `node`, once RUNNING.
async fn sleep_job(release: &Release, node: &str) -> anyhow::Result<String> {
    let job =
        release.slurm(&["sbatch", "--parsable", "--chdir=/tmp", "--mem=100", "-w", node, "--wrap", "sleep 900"])?;
    let job = job.trim().to_string();
    wait_running(release, &job, &format!("RUNNING on {node}")).await?;
    Ok(job)
}

async fn wait_running(release: &Release, job: &str, what: &str) -> anyhow::Result<()> {
    wait_for(&format!("job {job} {what}"), READY, || async {
        (release.job_state(job).ok()?? == "RUNNING").then_some(())
    })
    .await
}

/// The generated key Secrets' data, as kubectl prints it.
fn key_secrets(release: &Release) -> anyhow::Result<String> {
    let names = [format!("{}-slurm-key", release.name), format!("{}-jwt-key", release.name)];
    let output =
        kubectl(&["-n", release.namespace(), "get", "secret", &names[0], &names[1], "-o", "jsonpath={.items[*].data}"])
            .output()?;
    anyhow::ensure!(output.status.success(), "reading the key Secrets: {}", String::from_utf8_lossy(&output.stderr));
    let data = String::from_utf8_lossy(&output.stdout).into_owned();
    anyhow::ensure!(data.contains("slurm.key") && data.contains("jwt.key"), "key Secrets without keys: {data}");
    Ok(data)
}

/// The slurmd pod on a Node.
async fn slurmd_on(release: &Release, node: &str) -> anyhow::Result<Option<Pod>> {
    Ok(release.pods_of("slurmd").await?.into_iter().find(|pod| node_name(pod) == Some(node)))
}

fn template_revision(pod: &Pod) -> Option<&str> {
    pod.metadata.annotations.as_ref()?.get("e2e.sunk.dev/template").map(String::as_str)
}

#[tokio::test]
async fn the_chart_installs_a_slurm_whose_nodesets_and_host_schedule_a_pod() -> anyhow::Result<()> {
    let release = install("chart-slurm").await?;
    let listed = release.slurm_nodes().unwrap_or_default();
    assert_eq!(listed.len(), NODES.len(), "sinfo in the release's slurmctld: {listed:?}");
    for pod in release.pods_of("slurmd").await? {
        assert!(NODES.contains(&node_name(&pod).unwrap_or_default()), "a slurmd pod outside the test's Nodes");
    }

    // A pod for this release's scheduler gets a job in this release's Slurm and runs where it says.
    let mut example = pod("example", "500m", "256Mi");
    example["spec"]["schedulerName"] = release.scheduler_name().into();
    let uid = release.cluster.create_pod(example).await?.uid().unwrap_or_default();
    let running = release
        .cluster
        .wait_pod("example", "the example pod to be bound through the release's Slurm and run", READY, |pod| {
            pod.status.as_ref().and_then(|status| status.phase.as_deref()) == Some("Running")
        })
        .await?;
    let jobs = release.slurm(&["scontrol", "-o", "show", "jobs"])?;
    let job = jobs.lines().find(|job| job.contains(&uid)).unwrap_or_default();
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
    Ok(())
}

#[tokio::test]
async fn helm_upgrade_reconfigures_slurm_and_rolls_slurmd_without_killing_a_running_job() -> anyhow::Result<()> {
    let release = install("chart-upgrade").await?;
    let (first, busy) = (NODES[0], NODES[1]);
    let job = sleep_job(&release, busy).await?;
    let busy_pod = slurmd_on(&release, busy).await?.and_then(|pod| pod.uid()).unwrap_or_default();

    // KillWait 30 -> 35 (slurm.conf, and the host's --slurm-kill-wait), and a new slurmd template.
    let keys = key_secrets(&release)?;
    helm_deploy(&release, "upgrade", &values(release.namespace(), 35, "2"))?;
    assert_eq!(key_secrets(&release)?, keys, "the generated keys changed with the upgrade");
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
    wait_idle(&release, &NODES).await?;
    Ok(())
}

#[tokio::test]
async fn helm_uninstall_leaves_nothing_of_the_release() -> anyhow::Result<()> {
    let release = install("chart-uninstall").await?;
    release.cluster.helm(&["test", &release.name, "--timeout", "60s"])?;
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

/// A hostPath PersistentVolume bound in advance to one claim (the local cluster has no provisioner;
/// its Nodes share this machine's disk); deleted with its directory when dropped.
struct StaticVolume {
    name: String,
    path: std::path::PathBuf,
}

impl StaticVolume {
    fn bound_to(namespace: &str, claim: &str) -> anyhow::Result<Self> {
        let name = format!("{namespace}-state");
        let path = std::env::temp_dir().join(&name);
        let volume = serde_json::json!({
            "apiVersion": "v1", "kind": "PersistentVolume",
            "metadata": {"name": name},
            "spec": {
                "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": "",
                "persistentVolumeReclaimPolicy": "Retain",
                "hostPath": {"path": path.to_string_lossy(), "type": "DirectoryOrCreate"},
                "claimRef": {"namespace": namespace, "name": claim},
            }
        });
        let mut apply = kubectl(&["apply", "-f", "-"]).stdin(std::process::Stdio::piped()).spawn()?;
        use std::io::Write as _;
        apply.stdin.take().expect("stdin").write_all(volume.to_string().as_bytes())?;
        anyhow::ensure!(apply.wait()?.success(), "creating PersistentVolume {name}");
        Ok(Self { name, path })
    }
}

impl Drop for StaticVolume {
    fn drop(&mut self) {
        let _ = kubectl(&["delete", "persistentvolume", &self.name, "--wait=false"]).output();
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

#[tokio::test]
async fn with_persistence_a_replaced_slurmctld_keeps_its_running_jobs() -> anyhow::Result<()> {
    // Declared first, dropped last: after the release is uninstalled.
    let _volume: StaticVolume;
    let release = Release::new("chart-state").await?;
    _volume = StaticVolume::bound_to(release.namespace(), &format!("{}-slurmctld-state", release.name))?;
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
