//! A long Slurm queue: jobs pending for resources that are not the bench nodes' (two whole-node
//! fillers hold the cluster's own Slurm nodes, and every queued job waits for one of those, excluding
//! the bench nodes), so slurmctld weighs them at every scheduling pass and lists them to every
//! `GET /jobs`, while the pods' nodes stay free.

use sunk_e2e::{SlurmJob, in_slurm_root};

const QUEUED_NAME: &str = "sched-bench-queued";

/// The queue, cancelled when dropped.
pub struct Queue {
    _fillers: Vec<SlurmJob>,
}

impl Queue {
    pub fn fill(jobs: usize, bench_nodes: &[String]) -> anyhow::Result<Self> {
        let mut fillers = Vec::new();
        for node in ["kube-node-1", "kube-node-2"] {
            fillers.push(SlurmJob::submit(&[
                "-J",
                QUEUED_NAME,
                "-w",
                node,
                "--exclusive",
                "--mem=256M",
                "--wrap",
                "sleep 3600",
            ])?);
        }
        // sbatch one job at a time, in one shell inside the Slurm root: slurmctld 24.11.5 takes ~20
        // submissions a second from one client without its 5 s connection stalls (docs/benchmarks.md), several times what it takes through slurmrestd here.
        let script = format!(
            "for i in $(seq 1 {jobs}); do sbatch -Q -J {QUEUED_NAME} -x {excluded} -c 2 --mem=256M \
             -o /dev/null --wrap 'sleep 60' || exit 1; done",
            excluded = bench_nodes.join(","),
        );
        in_slurm_root(&["sh", "-c", &script])?;
        Ok(Queue { _fillers: fillers })
    }

    /// Jobs Slurm lists as pending under the queue's name.
    pub fn pending() -> anyhow::Result<usize> {
        let listed = in_slurm_root(&["squeue", "-h", "-n", QUEUED_NAME, "-t", "PD", "-o", "%i"])?;
        Ok(listed.lines().count())
    }
}

impl Drop for Queue {
    fn drop(&mut self) {
        let _ = in_slurm_root(&["scancel", "-n", QUEUED_NAME]);
    }
}
