//! A long Slurm queue: jobs pending for resources that are not the bench nodes' (two whole-node
//! fillers hold the cluster's own Slurm nodes, and every queued job waits for one of those, excluding
//! the bench nodes), so slurmctld weighs them at every scheduling pass and lists them to every
//! `GET /jobs`, while the pods' nodes stay free.

use futures::{StreamExt, TryStreamExt};
use sunk::slurm::{JobDescription, NoValue, SlurmClient};
use sunk_e2e::{SlurmJob, in_slurm_root};

const QUEUED_NAME: &str = "sched-bench-queued";

/// The queue, cancelled when dropped.
pub struct Queue {
    _fillers: Vec<SlurmJob>,
}

impl Queue {
    pub async fn fill(slurm: &SlurmClient, jobs: usize, bench_nodes: &[String]) -> anyhow::Result<Self> {
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
        let job = JobDescription {
            name: QUEUED_NAME.into(),
            script: "#!/bin/sh\nexec sleep 60\n".into(),
            current_working_directory: "/tmp".into(),
            environment: vec!["PATH=/bin:/usr/bin".into()],
            excluded_nodes: bench_nodes.to_vec(),
            cpus_per_task: 2,
            memory_per_node: NoValue::of(256),
            ..Default::default()
        };
        // One at a time: slurmctld 24.11.5 sometimes leaves a new connection unaccepted for 5 s, and
        // the more connections overlap the more often (see the README's benchmark section).
        futures::stream::iter(0..jobs)
            .map(|_| slurm.submit(&job))
            .buffer_unordered(1)
            .try_for_each(|_| async { Ok(()) })
            .await?;
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
