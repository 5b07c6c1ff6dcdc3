//! Rounds of restarts of the parts the host depends on, while pods are created and deleted: the API
//! server killed three times (SIGKILL, a control-plane crash), then slurmctld and slurmrestd restarted
//! (SIGTERM, as an upgrade does; slurmctld killed outright loses the jobs it had not yet saved, and a
//! pod whose job Slurm lost is deleted like any pod whose job ended).

use std::time::{Duration, Instant};

use kube::ResourceExt;
use sunk::slurm::JobState;

use crate::{Cluster, node_name, pod, restart_component, wait_for};

/// How long after a restarted component answers again every pod may take to be bound: a bound on
/// liveness, not the figure (that is returned, printed and kept in docs/install.md); a busy machine's
/// Slurm may leave a job pending for a scheduling cycle or two after its daemons come back.
pub const BOUND_AFTER_RESTART: Duration = Duration::from_secs(120);
/// How long a deleted pod's job may outlive it.
const JOB_GONE: Duration = Duration::from_secs(30);
/// How long the kubelets may take to finish deleting the pods of a round, the API server's restart
/// included (their 5 s grace period, and the kubelet's own reconnection).
const PODS_GONE: Duration = Duration::from_secs(90);

const ROUNDS: [(&str, &str); 5] = [
    ("kube-apiserver", "KILL"),
    ("kube-apiserver", "KILL"),
    ("kube-apiserver", "KILL"),
    ("slurmctld", "TERM"),
    ("slurmrestd", "TERM"),
];

/// Plays the rounds against whatever host schedules `cluster`'s pods: four 1-CPU pods (what the two
/// Slurm nodes hold) created, the component restarted as they are being scheduled, every pod bound
/// after the component answers again (within [`BOUND_AFTER_RESTART`]) with exactly one live job, then
/// deleted and its job gone within 30 s. Returns how long binding took after each restart.
pub async fn ride_out_restarts(cluster: &Cluster) -> anyhow::Result<Vec<(&'static str, Duration)>> {
    let mut figures = Vec::new();
    for (round, (component, signal)) in ROUNDS.into_iter().enumerate() {
        let names: Vec<String> = (0..4).map(|i| format!("r{round}-{i}")).collect();
        for name in &names {
            cluster.create_pod(pod(name, "1", "64Mi")).await?;
        }
        restart_component(component, signal).await?;
        let answered = answering(cluster, component).await?;
        for name in &names {
            let left = BOUND_AFTER_RESTART.saturating_sub(answered.elapsed());
            let what = format!("{name} to be bound after {component} restarted");
            cluster.wait_pod(name, &what, left, |pod| node_name(pod).is_some()).await?;
        }
        figures.push((component, answered.elapsed()));
        for name in &names {
            let uid = cluster.pods().get(name).await?.uid().unwrap_or_default();
            let live = cluster.jobs_of(&uid).await?.into_iter().filter(|job| job.state() != JobState::Ended).count();
            anyhow::ensure!(live == 1, "{name} has {live} live jobs after {component} restarted");
            cluster.delete_pod(name).await?;
        }
        wait_for(&format!("the jobs of round {round}'s deleted pods to end"), JOB_GONE, || async {
            let jobs = cluster.jobs_in_namespace().await.ok()?;
            jobs.iter().all(|(_, job)| job.state() == JobState::Ended).then_some(())
        })
        .await?;
        // And the pods gone from their kubelets: a kubelet counts a deleted pod's CPU until then, and
        // refuses a new pod Slurm placed in that room (OutOfcpu), which is not what this test is about.
        wait_for(&format!("round {round}'s deleted pods to be gone"), PODS_GONE, || async {
            let pods = cluster.pods().list(&Default::default()).await.ok()?;
            (!pods.items.iter().any(|pod| pod.name_any().starts_with(&format!("r{round}-")))).then_some(())
        })
        .await?;
    }
    Ok(figures)
}

/// Waits until the restarted `component` answers; returns when it did.
async fn answering(cluster: &Cluster, component: &str) -> anyhow::Result<Instant> {
    wait_for(&format!("{component} to answer again"), Duration::from_secs(60), || async {
        let answers = match component {
            "kube-apiserver" => cluster.kube.apiserver_version().await.is_ok(),
            _ => cluster.slurm.ping().await.is_ok(),
        };
        answers.then(Instant::now)
    })
    .await
}
