//! Bursts of pods: pods that arrive while a submission is in flight go to Slurm together, one job
//! array for pods of one shape, each task its own pod's placeholder. Slurm places each task on its
//! own; a pod deleted while its task waits cancels that task alone.

use std::collections::BTreeSet;
use std::time::Duration;

use sunk::slurm::JobState;
use sunk_e2e::{Cluster, metric_value, node_name, pod, slurmrestd_frozen, wait_for, wait_launched};

const BIND: Duration = Duration::from_secs(60);
const PODS: usize = 6;

fn pending_pods(metrics: &str) -> Option<u64> {
    metric_value(metrics, "sunk_scheduler_pending_pods")
}

#[tokio::test]
async fn a_burst_goes_as_job_arrays_and_each_task_is_its_pods_alone() -> anyhow::Result<()> {
    let mut cluster = Cluster::connect("burst").await?;
    cluster.start_host(&[("SUNK_FAST_PATH", "true")])?;
    // The series exist from the host's start; a first orphan sweep means the scheduler runs and has
    // listed Slurm's partitions and jobs. Frozen before that, it would not start, and no pod would wait.
    wait_for("the scheduler's first orphan sweep", BIND, || async {
        (metric_value(&cluster.metrics(0).await.ok()?, "sunk_scheduler_orphan_sweeps_total")? > 0).then_some(())
    })
    .await?;

    // While slurmrestd is stopped the first submission hangs, and the pods that arrive during its
    // turn (250 ms at most) wait for the next one together. Created one after another on a busy
    // machine, they could arrive further apart than that and each go alone: they are created at once.
    let names: Vec<String> = (0..PODS).map(|index| format!("burst-{index}")).collect();
    {
        let _frozen = slurmrestd_frozen()?;
        futures::future::try_join_all(names.iter().map(|name| cluster.create_pod(pod(name, "1", "256Mi")))).await?;
        wait_for("the host to see every pod", BIND, || async {
            (pending_pods(&cluster.metrics(0).await.ok()?)? == PODS as u64).then_some(())
        })
        .await?;
    }

    // Two Slurm nodes of 2 CPUs: four pods run, two wait.
    let bound = || async {
        let pods = cluster.pods().list(&Default::default()).await.ok()?;
        Some(pods.items.iter().filter(|pod| node_name(pod).is_some()).count())
    };
    if let Err(error) = wait_for("four pods bound", BIND, || async { (bound().await? == 4).then_some(()) }).await {
        let jobs = cluster.jobs_in_namespace().await?;
        let jobs: Vec<_> =
            jobs.iter().map(|(pod, job)| (&pod.name, job.target(), &job.job_state, &job.state_reason)).collect();
        anyhow::bail!("{error}: {:?} bound; jobs {jobs:?}", bound().await);
    }

    let jobs = cluster.jobs_in_namespace().await?;
    let live: Vec<_> = jobs.iter().filter(|(_, job)| job.state() != JobState::Ended).collect();
    let pods: BTreeSet<&str> = live.iter().map(|(pod, _)| pod.name.as_str()).collect();
    assert_eq!((live.len(), pods.len()), (PODS, PODS), "one live job per pod: {live:?}");
    let arrays: BTreeSet<u32> = live.iter().filter_map(|(_, job)| job.array_task().map(|(array, _)| array)).collect();
    let tasks = live.iter().filter(|(_, job)| job.array_task().is_some()).count();
    assert!(arrays.len() < tasks, "the burst went as arrays of several tasks: {live:?}");
    for (key, job) in &live {
        let pod = cluster.pods().get(&key.name).await?;
        match job.state() {
            JobState::Running => assert_eq!(node_name(&pod), cluster.kube_node_of(&job.nodes).await?.as_deref()),
            _ => assert_eq!(node_name(&pod), None, "{} waits with its task {}", key.name, job.target()),
        }
    }

    // A waiting pod deleted: its task alone is cancelled. Slurm starts jobs in the order they came,
    // so the pods that wait are of the last array.
    let (waiting, task) = live
        .iter()
        .find(|(_, job)| job.state() == JobState::Pending && job.array_task().is_some())
        .map(|(pod, job)| (pod.name.clone(), job.target()))
        .expect("two pods wait, each its array's task");
    cluster.delete_pod(&waiting).await?;
    wait_for("the deleted pod's task to be cancelled", BIND, || async {
        let jobs = cluster.jobs_in_namespace().await.ok()?;
        // Slurm drops a pending task it cancels from its array's record: it is no longer listed.
        let live = |(_, job): &&(sunk::scheduler::PodKey, sunk::slurm::Job)| job.state() != JobState::Ended;
        let gone = !jobs.iter().filter(live).any(|(pod, _)| pod.name == waiting);
        let others = jobs.iter().filter(live).filter(|(pod, _)| pod.name != waiting).count();
        (gone && others == PODS - 1).then_some(())
    })
    .await
    .map_err(|error| anyhow::anyhow!("{error} (task {task})"))?;

    // A running pod deleted: the last waiting task gets its room, and its pod is bound there.
    let (running, task) = live
        .iter()
        .find(|(_, job)| job.state() == JobState::Running)
        .map(|(pod, job)| (pod.name.clone(), job.target()))
        .expect("four run");
    wait_launched(&task).await?;
    cluster.delete_pod(&running).await?;
    wait_for("the last waiting pod to be bound", BIND, || async {
        let pods = cluster.pods().list(&Default::default()).await.ok()?;
        let bound =
            pods.items.iter().filter(|pod| node_name(pod).is_some() && pod.metadata.deletion_timestamp.is_none());
        (bound.count() == 4).then_some(())
    })
    .await?;
    Ok(())
}
