//! What the bench loads Slurm and the API server with, each taken away again when dropped: thousands
//! of dynamic CLOUD nodes (powered down: listed, never run), filler jobs that hold every other Slurm
//! node, and thousands of pods for sunk that wait for room that never comes.

use std::time::Duration;

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use sunk::slurm::{JobState, JobsPage};
use sunk_e2e::{Cluster, SlurmJob, in_slurm_root, pod};

/// The CLOUD nodes' name prefix; the Slurm node names are `scale00001`...
const PREFIX: &str = "scale";
const FILLER_NAME: &str = "scale-bench-filler";
/// What each pod asks for: more than a CLOUD node has (1 CPU), so only the held nodes could run it.
const POD_CPU: &str = "2";
const POD_MEMORY: &str = "256Mi";
/// Pods created at once.
const CREATORS: usize = 16;

/// `count` dynamic CLOUD nodes, deleted when dropped.
pub struct CloudNodes {
    range: String,
}

impl CloudNodes {
    pub fn add(count: usize) -> anyhow::Result<Self> {
        let range = format!("{PREFIX}[{:05}-{count:05}]", 1);
        in_slurm_root(&["scontrol", "create", &format!("NodeName={range}"), "CPUs=1", "RealMemory=100", "State=CLOUD"])
            .map_err(|error| error.context("creating the CLOUD nodes (slurm.conf's MaxNodeCount must allow them)"))?;
        Ok(Self { range })
    }
}

impl Drop for CloudNodes {
    fn drop(&mut self) {
        if let Err(error) = in_slurm_root(&["scontrol", "delete", &format!("nodename={}", self.range)]) {
            eprintln!("deleting the CLOUD nodes {}: {error:#}", self.range);
        }
    }
}

/// A whole-node batch job on every Slurm node but the CLOUD ones, so that every pod waits in
/// Slurm's queue; cancelled when dropped.
pub struct Fillers {
    _jobs: Vec<SlurmJob>,
}

impl Fillers {
    pub fn hold_every_node() -> anyhow::Result<Self> {
        let listed = in_slurm_root(&["sinfo", "-h", "-N", "-o", "%N"])?;
        let mut nodes: Vec<&str> = listed.lines().map(str::trim).filter(|node| !node.starts_with(PREFIX)).collect();
        nodes.dedup();
        let mut jobs = Vec::new();
        for node in nodes {
            let held = ["-J", FILLER_NAME, "-w", node, "--exclusive", "--mem=256M", "-o", "/dev/null"];
            jobs.push(SlurmJob::submit(&[&held[..], &["--wrap", "sleep 7200"]].concat())?);
        }
        Ok(Self { _jobs: jobs })
    }
}

impl Drop for Fillers {
    fn drop(&mut self) {
        let _ = in_slurm_root(&["scancel", "-n", FILLER_NAME]);
    }
}

/// Creates `count` pods for sunk in the bench's namespace, [`CREATORS`] at a time.
pub async fn create_pods(cluster: &Cluster, count: usize) -> anyhow::Result<()> {
    let pods = cluster.pods();
    let created = futures::stream::iter(0..count)
        .map(|index| {
            let pods = pods.clone();
            async move {
                let pod: Pod = serde_json::from_value(pod(&format!("wait-{index:05}"), POD_CPU, POD_MEMORY))?;
                pods.create(&PostParams::default(), &pod).await?;
                anyhow::Ok(())
            }
        })
        .buffer_unordered(CREATORS)
        .collect::<Vec<_>>()
        .await;
    created.into_iter().collect()
}

/// The bench's pods: the namespace's pods for sunk, not the host's own replicas beside them.
fn bench_pods() -> ListParams {
    ListParams::default().fields(&format!("spec.schedulerName={}", sunk_e2e::SCHEDULER))
}

/// Deletes the bench's pods, in as few requests as the API server's answers allow.
pub async fn delete_pods(cluster: &Cluster) -> anyhow::Result<()> {
    let now = DeleteParams { grace_period_seconds: Some(0), ..Default::default() };
    for _ in 0..100 {
        match cluster.pods().delete_collection(&now, &bench_pods()).await {
            Ok(_) => return Ok(()),
            // Deleting 10,000 pods in one request outlasts the client's deadline on this machine, and
            // the API server stops where the client hung up: asked again until none is left.
            Err(kube::Error::Service(error)) if pods_listed(cluster).await? > 0 => {
                eprintln!("deleting the pods: {error}; {} left, asked again", pods_listed(cluster).await?);
            }
            Err(kube::Error::Service(_)) => return Ok(()),
            Err(error) => return Err(error.into()),
        }
    }
    anyhow::bail!("pods still listed after 100 deletions of the namespace's pods")
}

/// How many of the namespace's pods a live Slurm job (or array task) stands for, in one listing.
pub async fn pods_with_jobs(cluster: &Cluster) -> anyhow::Result<usize> {
    let JobsPage::All { jobs, .. } = cluster.slurm.jobs(None).await? else { return Ok(0) };
    Ok(jobs
        .iter()
        .filter(|job| job.state() != JobState::Ended)
        .flat_map(sunk::scheduler::linked_pods)
        .filter(|pod| pod.namespace == cluster.namespace)
        .count())
}

/// The bench's pods the API server still lists.
pub async fn pods_listed(cluster: &Cluster) -> anyhow::Result<usize> {
    let api: Api<Pod> = cluster.pods();
    let listed = api.list_metadata(&bench_pods()).await?;
    Ok(listed.items.len())
}

/// Polls `count` until it reads `wanted`, printing progress; returns how long it took.
pub async fn until_count<F, Fut>(what: &str, wanted: usize, timeout: Duration, mut count: F) -> anyhow::Result<Duration>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<usize>>,
{
    let start = std::time::Instant::now();
    let mut last = usize::MAX;
    loop {
        let now = count().await?;
        if now == wanted {
            return Ok(start.elapsed());
        }
        if now != last {
            eprintln!("[{:>5.0}s] {what}: {now} (waiting for {wanted})", start.elapsed().as_secs_f64());
            last = now;
        }
        anyhow::ensure!(start.elapsed() < timeout, "{what}: {now}, not {wanted}, after {timeout:?}");
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
}
