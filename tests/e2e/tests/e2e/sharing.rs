//! Sharing a Node: a pod's placeholder holds what the kubelet will count for the pod (sidecars'
//! requests with the containers', pod-level resources in place of theirs), and `sunk.dev/exclusive`
//! means what the SUNK annotation table says (`none`: nobody shares the node; `ok`: anyone may).
//!
//! The local cluster's Slurm nodes are its GPU NodeSet's two, of 2 CPUs and 2 GPUs each.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use sunk::slurm::{Job, JobState};
use sunk_e2e::{BUSYBOX, Cluster, is_running, node_name, pod, wait_for};

const BIND: Duration = Duration::from_secs(60);

/// The pod's one live placeholder, once Slurm has started it.
async fn running_job(cluster: &Cluster, pod: &Pod) -> anyhow::Result<Job> {
    let uid = pod.metadata.uid.clone().unwrap_or_default();
    wait_for("the pod's placeholder to run", BIND, || async {
        let jobs = cluster.jobs_of(&uid).await.ok()?;
        jobs.into_iter().find(|job| job.state() == JobState::Running)
    })
    .await
}

#[tokio::test]
async fn a_sidecars_gpu_and_pod_level_cpus_are_held_by_the_placeholder() -> anyhow::Result<()> {
    let mut cluster = Cluster::connect("sizing").await?;
    cluster.start_host(&[])?;

    // One GPU in the main container, one in a native sidecar: the kubelet gives the pod both.
    let mut with_sidecar = pod("sidecar", "100m", "64Mi");
    with_sidecar["spec"]["containers"][0]["resources"]["limits"] = serde_json::json!({"nvidia.com/gpu": 1});
    with_sidecar["spec"]["initContainers"] = serde_json::json!([{
        "name": "sidecar", "image": BUSYBOX, "restartPolicy": "Always",
        "command": ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1; done"],
        "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"nvidia.com/gpu": 1}}
    }]);
    let created = cluster.create_pod(with_sidecar).await?;
    let job = running_job(&cluster, &created).await?;
    assert_eq!(job.tres_per_node, "gres/gpu:2", "the sidecar's GPU is held too: {job:?}");
    cluster.wait_pod("sidecar", "the pod to run", BIND, is_running).await?;

    // Pod-level requests replace the containers' (which ask for nothing here).
    let mut pod_level = pod("pod-level", "0", "0");
    pod_level["spec"]["containers"][0]["resources"] = serde_json::json!({});
    pod_level["spec"]["resources"] = serde_json::json!({"requests": {"cpu": "2", "memory": "256Mi"}});
    let created = cluster.create_pod(pod_level).await?;
    assert!(
        created.spec.as_ref().and_then(|spec| spec.resources.as_ref()).is_some(),
        "the API server kept the pod-level resources (PodLevelResources is on from Kubernetes 1.34)"
    );
    let job = running_job(&cluster, &created).await?;
    assert_eq!((job.cpus.number, job.memory_per_node.number), (2, 256), "pod-level CPUs and memory held: {job:?}");
    cluster.wait_pod("pod-level", "the pod to run", BIND, is_running).await?;
    Ok(())
}

fn with_exclusive(name: &str, mode: &str) -> serde_json::Value {
    let mut pod = pod(name, "100m", "64Mi");
    pod["metadata"]["annotations"] = serde_json::json!({"sunk.dev/exclusive": mode});
    pod
}

#[tokio::test]
async fn exclusive_none_takes_a_whole_node_and_ok_shares_one() -> anyhow::Result<()> {
    let mut cluster = Cluster::connect("exclusive").await?;
    cluster.start_host(&[])?;

    // `none`: one pod per node, whatever room is left on it. Two nodes: the third waits.
    for name in ["alone-0", "alone-1", "alone-2"] {
        cluster.create_pod(with_exclusive(name, "none")).await?;
    }
    let bound = |names: &'static [&'static str]| {
        let cluster = &cluster;
        async move {
            let pods = cluster.pods().list(&Default::default()).await.ok()?;
            let nodes: Vec<String> = pods
                .items
                .iter()
                .filter(|pod| names.contains(&pod.metadata.name.as_deref().unwrap_or_default()))
                .filter_map(|pod| node_name(pod).map(str::to_owned))
                .collect();
            Some(nodes)
        }
    };
    let nodes = wait_for("two of the three to be bound", BIND, || async {
        bound(&["alone-0", "alone-1", "alone-2"]).await.filter(|nodes| nodes.len() == 2)
    })
    .await?;
    assert_ne!(nodes[0], nodes[1], "two pods that share with nobody are on one node");
    let waiting = cluster.pods().list(&Default::default()).await?;
    let waiting = waiting.items.iter().find(|pod| node_name(pod).is_none()).expect("one waits");
    let jobs = cluster.jobs_of(waiting.metadata.uid.as_deref().unwrap_or_default()).await?;
    assert!(jobs.iter().all(|job| job.state() == JobState::Pending), "the third waits in Slurm: {jobs:?}");
    for name in ["alone-0", "alone-1", "alone-2"] {
        cluster.delete_pod(name).await?;
    }

    // `ok`: three small pods on two nodes, so at least two share one.
    for name in ["open-0", "open-1", "open-2"] {
        cluster.create_pod(with_exclusive(name, "ok")).await?;
    }
    wait_for("all three to be bound", BIND, || async {
        bound(&["open-0", "open-1", "open-2"]).await.filter(|nodes| nodes.len() == 3)
    })
    .await?;
    Ok(())
}
