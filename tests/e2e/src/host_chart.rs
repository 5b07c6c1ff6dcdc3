//! The chart's host alone, installed by the real `helm` into a test's namespace against the local
//! cluster's Slurm, and uninstalled so that no host of it outlives the test.

use std::time::Duration;

use kube::api::ListParams;

use crate::{Cluster, SCHEDULER, SUNK_IMAGE_REPOSITORY, SUNK_IMAGE_TAG, wait_for};

pub const CHART: &str = "charts/sunk";

/// Values for the chart's Slurm with a backup slurmctld, on a claim both controllers mount.
pub const BACKUP_SLURMCTLD: [&str; 6] = [
    "--set",
    "slurmCluster.controller.backup.enabled=true",
    "--set",
    "slurmCluster.controller.persistence.enabled=true",
    "--set",
    "slurmCluster.controller.persistence.accessModes={ReadWriteMany}",
];

/// The release name a test's host chart is installed under.
pub fn release(cluster: &Cluster) -> String {
    format!("sunk-{}", cluster.namespace)
}

impl Cluster {
    /// `helm install --wait` of the chart's host, one replica, with the JWT key Secret it reads, the
    /// tests' scheduler name, and `extra` values. The local cluster's NodeSet has a keeper already (a
    /// second one would roll its pods), so the NodeSet controller is off; its namespace is where the
    /// scheduler believes slurmd pods. The Slurm Node taint is off: it would outlive the release on the
    /// local cluster's Nodes (pool:: tests it, with a host of its own that takes it off again).
    pub async fn install_host_chart(&self, extra: &[&str]) -> anyhow::Result<String> {
        self.create_jwt_key_secret("slurm-jwt-key").await?;
        let release = release(self);
        let image = [format!("image.repository={SUNK_IMAGE_REPOSITORY}"), format!("image.tag={SUNK_IMAGE_TAG}")];
        let scheduler = format!("scheduler.name={SCHEDULER}");
        let mut install = vec!["install", &release, CHART, "--set", &image[0], "--set", &image[1], "--set", &scheduler];
        // One replica without leader election (the chart's Slurm test runs the default: two replicas
        // behind a Lease).
        for value in [
            "nodesetController.enabled=false",
            "nodesetController.namespace=slurm",
            "replicas=1",
            "leaderElection.enabled=false",
            "pool.taintNodes=false",
        ] {
            install.extend(["--set", value]);
        }
        install.extend_from_slice(extra);
        install.extend(["--wait", "--timeout", "120s"]);
        self.helm(&install)?;
        Ok(release)
    }

    /// `helm uninstall`, then waits for the host's pod to be gone: `--wait` covers the Deployment,
    /// not its pod, and until the kubelet has stopped it the host in it still schedules pods named
    /// for `sunk`, and would race the next test's host.
    pub async fn uninstall_host_chart(&self, release: &str) -> anyhow::Result<()> {
        self.helm(&["uninstall", release, "--wait"])?;
        let selector = format!("app.kubernetes.io/instance={release}");
        wait_for("the host's pod to be gone", Duration::from_secs(60), || async {
            let pods = self.pods().list(&ListParams::default().labels(&selector)).await.ok()?;
            pods.items.is_empty().then_some(())
        })
        .await
    }

    /// The log of the chart host's pod (its one container).
    pub fn host_chart_log(&self, release: &str) -> anyhow::Result<String> {
        let selector = format!("app.kubernetes.io/instance={release}");
        let output = crate::kubectl(&["logs", "-n", &self.namespace, "-l", &selector, "--tail=-1", "--all-containers"])
            .output()?;
        anyhow::ensure!(output.status.success(), "kubectl logs: {}", String::from_utf8_lossy(&output.stderr));
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    }
}
