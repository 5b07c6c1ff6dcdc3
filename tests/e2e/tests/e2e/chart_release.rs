//! The chart installed with its own Slurm by the real `helm`, as the chart tests share it: a release in
//! a fresh namespace on Nodes the test labels, Slurm commands run in its slurmctld pod, and waits for
//! its parts to be Ready.

use std::process::Output;
use std::sync::LazyLock;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::api::ListParams;
use sunk_e2e::{CHART, Cluster, NodeGuard, SUNK_IMAGE_REPOSITORY, SUNK_IMAGE_TAG, kubectl, node_name, wait_for};

/// The two Nodes a release's pods run on: `SUNK_E2E_CHART_NODES` (`a,b`), which scripts/e2e.sh sets
/// so that each lane of chart modules has a pair of its own, or kube-node-3 and -4.
pub(crate) static NODES: LazyLock<[&'static str; 2]> = LazyLock::new(|| {
    let given = std::env::var("SUNK_E2E_CHART_NODES").unwrap_or_else(|_| "kube-node-3,kube-node-4".into());
    let nodes: Vec<&'static str> = given.leak().split(',').collect();
    nodes.try_into().expect("SUNK_E2E_CHART_NODES names two Nodes: a,b")
});
/// The label that puts a Node into one test's pool (NodeGuard takes it off again).
pub(crate) const POOL: &str = "sunk.dev/e2e-pool";
pub(crate) const READY: Duration = Duration::from_secs(120);
/// The kubelet refreshes a ConfigMap volume on its periodic pod sync (about a minute), then the
/// slurmctld pod's sidecar runs `scontrol reconfigure`.
pub(crate) const CONFIG_APPLIED: Duration = Duration::from_secs(180);
/// The local cluster's MariaDB and OpenLDAP images (tests/cluster/env.sh MARIADB_IMAGE, OPENLDAP_IMAGE).
const MARIADB_TAG: &str = "11.8";
const OPENLDAP_TAG: &str = "2.6";
/// Where the tests' prolog script writes, inside each slurmd container.
pub(crate) const PROLOG_TRACE: &str = "/tmp/sunk-e2e-prolog";

/// One install of the chart with Slurm enabled; uninstalled (best effort) when dropped, before the
/// namespace goes.
pub(crate) struct Release {
    pub(crate) name: String,
    pub(crate) cluster: Cluster,
    pub(crate) _nodes: NodeGuard,
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
pub(crate) fn values(namespace: &str, kill_wait: u32, template_revision: &str) -> Vec<String> {
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
        // The lane's two Nodes hold the release's controllers as well as its slurmd pods: tainted,
        // every controller pod made after the first slurmd (a restart, an upgrade) would wait.
        "pool.taintNodes=false".into(),
    ];
    for daemon in ["slurmctld", "slurmrestd", "slurmd", "slurmdbd", "login"] {
        values.push(format!("slurmCluster.images.{daemon}.repository=localhost/sunk/{daemon}"));
        values.push(format!("slurmCluster.images.{daemon}.tag={}", sunk_e2e::slurm_version()));
    }
    values.push("slurmCluster.images.mariadb.repository=localhost/sunk/mariadb".into());
    values.push(format!("slurmCluster.images.mariadb.tag={MARIADB_TAG}"));
    values.push("slurmCluster.images.openldap.repository=localhost/sunk/openldap".into());
    values.push(format!("slurmCluster.images.openldap.tag={OPENLDAP_TAG}"));
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

/// `helm <verb> <release> charts/sunk <values> --wait`, every pod of the release kept on the test's
/// Nodes (set last, so that no value given whole, such as `slurmCluster.login={...}`, drops it).
pub(crate) fn helm_deploy(release: &Release, verb: &str, values: &[String]) -> anyhow::Result<Duration> {
    let mut args: Vec<&str> = vec![verb, &release.name, CHART, "--wait", "--timeout", "180s"];
    args.extend(values.iter().map(String::as_str));
    let pool = serde_json::json!({POOL: release.namespace()});
    let placement: Vec<String> = [
        "",
        "slurmCluster.controller.",
        "slurmCluster.restapi.",
        "slurmCluster.identity.ldap.slapd.",
        "slurmCluster.login.",
        "slurmCluster.accounting.",
    ]
    .iter()
    .flat_map(|component| ["--set-json".to_string(), format!("{component}nodeSelector={pool}")])
    .collect();
    args.extend(placement.iter().map(String::as_str));
    let started = Instant::now();
    release.cluster.helm(&args)?;
    Ok(started.elapsed())
}

/// Installs the chart with its Slurm into a fresh namespace, and waits until every part is Ready and
/// Slurm has both NodeSet nodes idle. Prints how long that took.
pub(crate) async fn install(test: &str) -> anyhow::Result<Release> {
    let release = Release::new(test).await?;
    release.install(&[]).await?;
    Ok(release)
}

impl Release {
    /// A fresh namespace, and this test's Nodes labelled into its pool.
    pub(crate) async fn new(test: &str) -> anyhow::Result<Self> {
        let cluster = Cluster::connect(test).await?;
        let nodes = NodeGuard::new(&*NODES);
        for node in *NODES {
            nodes.label(node, (POOL, &cluster.namespace))?;
        }
        Ok(Release { name: "sunk".into(), cluster, _nodes: nodes })
    }

    /// `helm install` with the tests' values and `extra` ones (`key=value`), then waits for it all.
    pub(crate) async fn install(&self, extra: &[&str]) -> anyhow::Result<()> {
        let extra: Vec<String> = extra.iter().flat_map(|value| ["--set".to_string(), value.to_string()]).collect();
        self.install_with(&extra, &[]).await
    }

    /// `helm install` with the tests' values and `extra` arguments (`--set-json`, ...), then waits for
    /// it all: the pods of each of `components` too, as many as it says (one slurmctld and one
    /// slurmrestd unless it says otherwise).
    pub(crate) async fn install_with(&self, extra: &[String], components: &[(&str, usize)]) -> anyhow::Result<()> {
        let started = Instant::now();
        let mut values = values(self.namespace(), 30, "1");
        values.extend_from_slice(extra);
        let helm_wait = helm_deploy(self, "install", &values)?;
        // The chart's default host: two replicas, one leading.
        wait_ready(self, "host", 2).await?;
        let defaults = [("slurmctld", 1), ("slurmrestd", 1)];
        let defaults = defaults.iter().filter(|(name, _)| components.iter().all(|(given, _)| given != name));
        for (component, count) in defaults.chain(components) {
            wait_ready(self, component, *count).await?;
        }
        wait_ready(self, "slurmd", NODES.len()).await?;
        wait_idle(self, &*NODES).await?;
        println!(
            "install: `helm install --wait` {:.1} s; host, slurmctld, slurmrestd, slurmd pods Ready and both Slurm nodes idle after {:.1} s",
            helm_wait.as_secs_f64(),
            started.elapsed().as_secs_f64()
        );
        Ok(())
    }
}

impl Release {
    pub(crate) fn namespace(&self) -> &str {
        &self.cluster.namespace
    }

    /// `<namespace>-<release>`: the chart's default scheduler name.
    pub(crate) fn scheduler_name(&self) -> String {
        format!("{}-{}", self.namespace(), self.name)
    }

    /// A Slurm command run inside the slurmctld pod (Slurm's commands, auth/slurm, authenticate through the
    /// local daemon's socket); its standard output.
    pub(crate) fn slurm(&self, args: &[&str]) -> anyhow::Result<String> {
        self.slurm_in(&format!("deploy/{}-slurmctld", self.name), args)
    }

    /// A Slurm command run in the slurmctld container of `pod` (`deploy/...`, or a pod's name).
    pub(crate) fn slurm_in(&self, pod: &str, args: &[&str]) -> anyhow::Result<String> {
        let mut command = vec!["-n", self.namespace(), "exec", pod, "-c", "slurmctld", "--"];
        command.extend_from_slice(args);
        let Output { status, stdout, stderr } = kubectl(&command).output()?;
        anyhow::ensure!(status.success(), "{args:?} in {pod}: {}", String::from_utf8_lossy(&stderr));
        Ok(String::from_utf8_lossy(&stdout).into_owned())
    }

    /// Slurm's nodes as `name -> state` (`sinfo -N`), or nothing while slurmctld cannot answer.
    pub(crate) fn slurm_nodes(&self) -> Option<Vec<(String, String)>> {
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
    pub(crate) fn job_state(&self, job: &str) -> anyhow::Result<Option<String>> {
        let state = self.slurm(&["squeue", "-h", "-j", job, "-o", "%T"])?;
        Ok(Some(state.trim().to_string()).filter(|state| !state.is_empty()))
    }

    /// `kubectl scale` of the release's Deployment of `component`.
    pub(crate) fn scale(&self, component: &str, replicas: u32) -> anyhow::Result<()> {
        let deployment = format!("deploy/{}-{component}", self.name);
        let replicas = format!("--replicas={replicas}");
        let Output { status, stderr, .. } =
            kubectl(&["-n", self.namespace(), "scale", &deployment, &replicas]).output()?;
        anyhow::ensure!(status.success(), "scaling {deployment}: {}", String::from_utf8_lossy(&stderr));
        Ok(())
    }

    pub(crate) async fn pods_of(&self, component: &str) -> anyhow::Result<Vec<Pod>> {
        let selector = format!("app.kubernetes.io/instance={},app.kubernetes.io/component={component}", self.name);
        Ok(self.cluster.pods().list(&ListParams::default().labels(&selector)).await?.items)
    }
}

pub(crate) fn is_ready(pod: &Pod) -> bool {
    let conditions = pod.status.as_ref().and_then(|status| status.conditions.as_ref());
    pod.metadata.deletion_timestamp.is_none()
        && conditions.is_some_and(|all| all.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// Waits for `count` Ready pods of a component, and no others.
pub(crate) async fn wait_ready(release: &Release, component: &str, count: usize) -> anyhow::Result<Vec<Pod>> {
    wait_for(&format!("{count} Ready {component} pod(s) of the release"), READY, || async {
        let pods = release.pods_of(component).await.ok()?;
        (pods.len() == count && pods.iter().all(is_ready)).then_some(pods)
    })
    .await
}

pub(crate) async fn wait_idle(release: &Release, nodes: &[&str]) -> anyhow::Result<()> {
    wait_for(&format!("Slurm nodes {nodes:?} idle in the release's Slurm"), READY, || async {
        let listed = release.slurm_nodes()?;
        nodes.iter().all(|node| listed.iter().any(|(name, state)| name == node && state == "idle")).then_some(())
    })
    .await
}

/// A batch job (`sbatch` in slurmctld, as an HPC user would) sleeping on `node`, once RUNNING.
pub(crate) async fn sleep_job(release: &Release, node: &str) -> anyhow::Result<String> {
    let job =
        release.slurm(&["sbatch", "--parsable", "--chdir=/tmp", "--mem=100", "-w", node, "--wrap", "sleep 900"])?;
    let job = job.trim().to_string();
    wait_running(release, &job, &format!("RUNNING on {node}")).await?;
    Ok(job)
}

pub(crate) async fn wait_running(release: &Release, job: &str, what: &str) -> anyhow::Result<()> {
    wait_for(&format!("job {job} {what}"), READY, || async {
        (release.job_state(job).ok()?? == "RUNNING").then_some(())
    })
    .await
}

/// The generated key Secrets' data, as kubectl prints it.
pub(crate) fn key_secrets(release: &Release) -> anyhow::Result<String> {
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
pub(crate) async fn slurmd_on(release: &Release, node: &str) -> anyhow::Result<Option<Pod>> {
    Ok(release.pods_of("slurmd").await?.into_iter().find(|pod| node_name(pod) == Some(node)))
}

pub(crate) fn template_revision(pod: &Pod) -> Option<&str> {
    pod.metadata.annotations.as_ref()?.get("e2e.sunk.dev/template").map(String::as_str)
}

/// A hostPath PersistentVolume bound in advance to one claim (the local cluster has no provisioner;
/// its Nodes share this machine's disk, so a hostPath serves as a volume they share); deleted with
/// its directory when dropped.
pub(crate) struct StaticVolume {
    name: String,
    path: std::path::PathBuf,
}

impl StaticVolume {
    pub(crate) fn bound_to(namespace: &str, claim: &str, access_mode: &str) -> anyhow::Result<Self> {
        let name = format!("{namespace}-{claim}");
        let path = std::env::temp_dir().join(&name);
        let volume = serde_json::json!({
            "apiVersion": "v1", "kind": "PersistentVolume",
            "metadata": {"name": name},
            "spec": {
                "capacity": {"storage": "1Gi"}, "accessModes": [access_mode], "storageClassName": "",
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
