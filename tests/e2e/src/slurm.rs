//! Slurm as the tests drive it: commands in the Slurm root (as an HPC user on a login node), jobs
//! submitted by hand, slurmrestd's view of a node, and slurmrestd frozen.

use std::process::Command;

use anyhow::bail;

use crate::{Cluster, Frozen, repo_root};

/// Runs a Slurm command (`sbatch`, `scontrol`, ...) as root in the local cluster's Slurm root, as
/// an HPC user on a login node would; returns its standard output.
pub fn in_slurm_root(args: &[&str]) -> anyhow::Result<String> {
    let output = Command::new("chroot").arg(slurm_root()).args(args).output()?;
    anyhow::ensure!(output.status.success(), "{args:?} failed: {}", String::from_utf8_lossy(&output.stderr));
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// The Debian root holding the local cluster's Slurm, whichever version it runs (tests/cluster/up.sh).
pub fn slurm_root() -> std::path::PathBuf {
    repo_root().join(".cluster/slurm-root")
}

/// The Slurm version the local cluster runs, `26.05` or `24.11` (`SUNK_SLURM` when it was brought up).
pub fn slurm_version() -> String {
    let file = repo_root().join(".cluster/slurm-version");
    match std::fs::read_to_string(&file) {
        Ok(version) => version.trim().to_string(),
        Err(error) => panic!("{} unreadable ({error}): is the local cluster up?", file.display()),
    }
}

/// Every Slurm node as slurmrestd lists it.
async fn slurm_nodes(cluster: &Cluster) -> anyhow::Result<Vec<sunk::slurm::Node>> {
    match cluster.slurm.nodes(None).await? {
        sunk::slurm::NodesPage::All { nodes, .. } => Ok(nodes),
        sunk::slurm::NodesPage::Unchanged => bail!("a full node listing came back unchanged"),
    }
}

/// The Slurm node of this name as slurmrestd lists it, if Slurm has it.
pub async fn slurm_node(cluster: &Cluster, name: &str) -> anyhow::Result<Option<sunk::slurm::Node>> {
    Ok(slurm_nodes(cluster).await?.into_iter().find(|node| node.name == name))
}

/// Waits until no node of the local cluster's Slurm is COMPLETING, for a test that needs whole nodes.
/// A job cancelled soon after its launch can hold its node COMPLETING for 60-100 s on 26.05.5, even
/// once its batch step is listed ([`wait_launched`]): slurmctld's first terminate request is
/// lost and only its resend ends the job (`completion process took 63 seconds`). The previous test
/// may have left such a node.
pub async fn wait_no_node_completing(cluster: &Cluster) -> anyhow::Result<()> {
    let settled = std::time::Duration::from_secs(150);
    crate::wait_for("no Slurm node COMPLETING a job a previous test cancelled", settled, || async {
        let nodes = slurm_nodes(cluster).await.ok()?;
        nodes.iter().all(|node| !node.flags().has("COMPLETING")).then_some(())
    })
    .await
}

/// slurmrestd stopped in its tracks (SIGSTOP) until the guard is dropped (SIGCONT): Slurm cannot be
/// read, and requests hang as they would behind a dead network.
pub fn slurmrestd_frozen() -> anyhow::Result<Frozen> {
    Frozen::component("slurmrestd")
}

/// The lines of `scontrol -o show jobs` output that name `uid` (a pod's, in its job's comments) and
/// have not ended: a pod's placeholder, without the FAILED record an immediate allocation Slurm
/// refused leaves behind.
pub fn jobs_not_ended<'a>(jobs: &'a str, uid: &str) -> Vec<&'a str> {
    const ENDED: [&str; 3] = ["JobState=FAILED", "JobState=CANCELLED", "JobState=COMPLETED"];
    jobs.lines().filter(|job| job.contains(uid) && !ENDED.iter().any(|state| job.contains(state))).collect()
}

/// Waits until slurmd has launched the job `job` (`123`, or an array task `123_4`): a batch job's
/// batch step is listed; an allocation (no script: the fast path's) launches nothing and is ready as
/// it is. A job cancelled while its launch is under way can stay COMPLETING on its node for about
/// 90 s (26.05.5: slurmd's "epilog complete" message failed to connect, and slurmctld only learnt the
/// job was over when it resent the terminate request), holding the node's CPUs; a test that frees a
/// node by cancelling its job waits for this first.
pub async fn wait_launched(job: &str) -> anyhow::Result<()> {
    let record = in_slurm_root(&["scontrol", "show", "job", "-o", job])?;
    if record.split_whitespace().any(|field| field == "BatchFlag=0") {
        return Ok(());
    }
    let batch = format!("{job}.batch");
    crate::wait_for(&format!("job {job}'s batch step to be launched"), std::time::Duration::from_secs(60), || async {
        let steps = in_slurm_root(&["squeue", "-h", "-s", "-j", job, "-o", "%i"]).ok()?;
        steps.lines().any(|step| step.trim() == batch).then_some(())
    })
    .await
}

/// A job submitted with sbatch, cancelled when dropped.
pub struct SlurmJob(pub String);

impl SlurmJob {
    /// `sbatch --parsable <args>`.
    pub fn submit(args: &[&str]) -> anyhow::Result<Self> {
        let mut all = vec!["sbatch", "--parsable"];
        all.extend_from_slice(args);
        Ok(Self(in_slurm_root(&all)?.trim().to_string()))
    }

    pub fn id(&self) -> u32 {
        self.0.parse().unwrap_or_default()
    }
}

impl Drop for SlurmJob {
    fn drop(&mut self) {
        let _ = in_slurm_root(&["scancel", &self.0]);
    }
}
