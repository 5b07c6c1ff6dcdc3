//! Gang scheduling end to end: the pods of one group become one multi-node Slurm job, bound only when
//! it runs, each to a different node; a group too big for the cluster stays Pending as a whole with no
//! allocation; deleting a member removes the gang's job. The local cluster has two Slurm nodes.

use std::time::Duration;

use sunk::slurm::{Job, JobState};
use sunk_e2e::{Cluster, node_name, pod, scheduled_condition, wait_for};

const BIND: Duration = Duration::from_secs(30);

/// A 1-CPU pod in group `group` of `size`, named by `label` (sunk's or the coscheduling plugin's).
fn member(name: &str, label: &str, group: &str, size: u32) -> serde_json::Value {
    let mut pod = pod(name, "1", "256Mi");
    pod["metadata"]["labels"] = serde_json::json!({label: group});
    pod["metadata"]["annotations"] = serde_json::json!({"sunk.dev/pod-group-size": size.to_string()});
    pod
}

async fn uid(cluster: &Cluster, name: &str) -> anyhow::Result<String> {
    Ok(cluster.pods().get(name).await?.metadata.uid.unwrap_or_default())
}

/// The one job every named pod links to.
async fn gang_job(cluster: &Cluster, names: &[&str]) -> anyhow::Result<Job> {
    let mut found: Option<Job> = None;
    for name in names {
        let jobs = cluster.jobs_of(&uid(cluster, name).await?).await?;
        anyhow::ensure!(jobs.len() == 1, "pod {name} links to exactly one job: {jobs:?}");
        if let Some(first) = &found {
            anyhow::ensure!(first.job_id == jobs[0].job_id, "one job for the whole gang: {first:?} / {:?}", jobs[0]);
        }
        found = Some(jobs[0].clone());
    }
    found.ok_or_else(|| anyhow::anyhow!("no pods"))
}

#[tokio::test]
async fn a_two_pod_gang_is_bound_at_once_to_two_different_nodes() -> anyhow::Result<()> {
    let mut cluster = Cluster::connect("gang-two").await?;
    cluster.start_host(&[])?;
    cluster.create_pod(member("worker-0", "sunk.dev/pod-group", "train", 2)).await?;
    let alone = cluster
        .wait_pod("worker-0", "PodGroupIncomplete while alone", BIND, |pod| {
            scheduled_condition(pod).is_some_and(|(_, reason, _)| reason == "PodGroupIncomplete")
        })
        .await?;
    assert!(node_name(&alone).is_none());
    assert!(cluster.jobs_of(&uid(&cluster, "worker-0").await?).await?.is_empty(), "no job for half a gang");

    cluster.create_pod(member("worker-1", "sunk.dev/pod-group", "train", 2)).await?;
    let mut nodes = Vec::new();
    for name in ["worker-0", "worker-1"] {
        let bound = cluster.wait_pod(name, "the member to be bound", BIND, |pod| node_name(pod).is_some()).await?;
        nodes.push(node_name(&bound).unwrap_or_default().to_string());
    }
    assert_ne!(nodes[0], nodes[1], "each member on its own node");
    let job = gang_job(&cluster, &["worker-0", "worker-1"]).await?;
    assert_eq!(job.state(), JobState::Running);
    let held = sunk::slurm::expand_hostlist(&job.nodes)?;
    assert_eq!(held.len(), 2, "one two-node job: {job:?}");
    for node in &nodes {
        let slurm = cluster.slurm_node_on(node).await?.unwrap_or_default();
        assert!(held.contains(&slurm), "{node} hosts one of the job's nodes {held:?}");
    }
    Ok(())
}

#[tokio::test]
async fn a_three_pod_gang_on_two_nodes_stays_pending_as_a_whole() -> anyhow::Result<()> {
    let mut cluster = Cluster::connect("gang-three").await?;
    cluster.start_host(&[])?;
    let names = ["big-0", "big-1", "big-2"];
    // The first member alone says so; when the rest arrive, every member (the first included, long
    // before its own recheck) says what the whole group waits for.
    cluster.create_pod(member(names[0], "sunk.dev/pod-group", "big", 3)).await?;
    cluster
        .wait_pod(names[0], "PodGroupIncomplete while alone", BIND, |pod| {
            scheduled_condition(pod).is_some_and(|(_, reason, message)| {
                reason == "PodGroupIncomplete" && message.contains("has 1 of its 3 pods")
            })
        })
        .await?;
    for name in &names[1..] {
        cluster.create_pod(member(name, "sunk.dev/pod-group", "big", 3)).await?;
    }
    for name in names {
        let waited = cluster
            .wait_pod(name, "Unschedulable, the group needing 3 nodes", BIND, |pod| {
                scheduled_condition(pod).is_some_and(|(status, reason, message)| {
                    status == "False" && reason == "Unschedulable" && message.contains("needs 3 Slurm nodes")
                })
            })
            .await;
        if let Err(error) = waited {
            let now = scheduled_condition(&cluster.pods().get(name).await?);
            anyhow::bail!("{error}; {name}'s PodScheduled condition: {now:?}");
        }
    }
    // Slurm would fail a 3-node job on 2 nodes: nothing is asked of it, nothing is allocated.
    for name in names {
        assert!(cluster.jobs_of(&uid(&cluster, name).await?).await?.is_empty(), "no job for {name}");
        assert!(node_name(&cluster.pods().get(name).await?).is_none(), "{name} is not bound");
    }
    Ok(())
}

#[tokio::test]
async fn deleting_a_member_tears_the_gang_down() -> anyhow::Result<()> {
    let mut cluster = Cluster::connect("gang-delete").await?;
    cluster.start_host(&[])?;
    // The coscheduling plugin's label; with no PodGroup CRD the size comes from the annotation.
    for name in ["ps-0", "ps-1"] {
        cluster.create_pod(member(name, "scheduling.x-k8s.io/pod-group", "ps", 2)).await?;
    }
    for name in ["ps-0", "ps-1"] {
        cluster.wait_pod(name, "the member to be bound", BIND, |pod| node_name(pod).is_some()).await?;
    }
    let job = gang_job(&cluster, &["ps-0", "ps-1"]).await?;
    let survivor = uid(&cluster, "ps-1").await?;

    cluster.delete_pod("ps-0").await?;
    let (slurm, survivor) = (&cluster, survivor.as_str());
    let state = wait_for("the gang's job to end", BIND, || async move {
        let jobs = slurm.jobs_of(survivor).await.ok()?;
        jobs.iter().find(|j| j.job_id == job.job_id && j.state() == JobState::Ended).map(|j| j.state_name())
    })
    .await?;
    // Ended as soon as cancelled, possibly still cleaning up (CANCELLED+COMPLETING).
    assert!(state.starts_with("CANCELLED"), "the gang's job was cancelled: {state}");
    let pods = cluster.pods();
    wait_for("the other member to be deleted", BIND, || async {
        match pods.get_opt("ps-1").await.ok()? {
            None => Some(()),
            Some(pod) => pod.metadata.deletion_timestamp.map(drop),
        }
    })
    .await?;
    cluster
        .wait_event("ps-1", "an Event saying the gang's job ended", |reason, note| {
            reason == "SlurmJobEnded" && note.contains(&job.job_id.to_string())
        })
        .await?;
    Ok(())
}

#[tokio::test]
async fn every_node_of_a_gang_of_different_sizes_holds_its_largest_member() -> anyhow::Result<()> {
    let mut cluster = Cluster::connect("gang-sizes").await?;
    cluster.start_host(&[])?;
    // Members that ask Slurm for different options cannot be one job: the group says which differs.
    let mut odd = member("odd-1", "sunk.dev/pod-group", "odd", 2);
    odd["metadata"]["annotations"]["sunk.dev/comment"] = "another run".into();
    cluster.create_pod(member("odd-0", "sunk.dev/pod-group", "odd", 2)).await?;
    cluster.create_pod(odd).await?;
    cluster
        .wait_pod("odd-0", "GroupInvalid naming the member and option that differ", BIND, |pod| {
            scheduled_condition(pod).is_some_and(|(_, reason, message)| {
                reason == "PodGroupInvalid" && message.contains("pod odd-1") && message.contains("another comment")
            })
        })
        .await?;
    assert!(cluster.jobs_of(&uid(&cluster, "odd-0").await?).await?.is_empty(), "no job for a group that differs");

    // A small launcher and a worker with the whole node: each node holds the worker's share, so the
    // kubelet admits the worker whichever node Slurm gives it.
    let launcher = member("launcher", "sunk.dev/pod-group", "mpi", 2);
    let mut worker = member("worker", "sunk.dev/pod-group", "mpi", 2);
    worker["spec"]["containers"][0]["resources"] =
        serde_json::json!({"requests": {"cpu": "2", "memory": "512Mi"}, "limits": {"nvidia.com/gpu": 2}});
    cluster.create_pod(launcher).await?;
    cluster.create_pod(worker).await?;
    for name in ["launcher", "worker"] {
        cluster.wait_pod(name, "the member to run", BIND, sunk_e2e::is_running).await?;
    }
    let job = gang_job(&cluster, &["launcher", "worker"]).await?;
    assert_eq!(job.tres_per_node, "gres/gpu:2", "every node holds the worker's GPUs: {job:?}");
    assert_eq!(job.memory_per_node.number, 512, "and its memory: {job:?}");
    Ok(())
}
