//! What only a real Node can show: pods bound by sunk run in real containers, and a kubelet that
//! refuses a pod Slurm placed (it does not fit what the Node has left) does not strand its job.

use std::time::Duration;

use sunk::slurm::JobState;
use sunk_e2e::{BUSYBOX, Cluster, kubectl, node_name, pod, wait_for};

const BIND: Duration = Duration::from_secs(30);
const START: Duration = Duration::from_secs(60);

fn phase(pod: &k8s_openapi::api::core::v1::Pod) -> Option<&str> {
    pod.status.as_ref()?.phase.as_deref()
}

#[tokio::test]
async fn a_pod_bound_by_sunk_runs_and_its_log_is_readable() -> anyhow::Result<()> {
    let mut cluster = Cluster::connect("runs").await?;
    cluster.start_host(&[])?;
    cluster.create_pod(pod("hello", "1", "128Mi")).await?;
    let running = cluster.wait_pod("hello", "the pod to run", START, |pod| phase(pod) == Some("Running")).await?;
    let status = running.status.as_ref().expect("status");
    let container = &status.container_statuses.as_ref().expect("container statuses")[0];
    assert!(
        container.container_id.as_deref().is_some_and(|id| id.starts_with("containerd://")),
        "a real container: {container:?}"
    );
    assert!(status.pod_ip.as_deref().is_some_and(|ip| ip.starts_with("10.244.")), "a pod IP on the cluster bridge");

    let namespace = cluster.namespace.clone();
    let logs = || kubectl(&["logs", "-n", &namespace, "hello"]).output();
    let log = wait_for("the container's log", BIND, || async {
        let output = logs().ok()?;
        let text = String::from_utf8_lossy(&output.stdout).into_owned();
        (output.status.success() && text.contains("hello from")).then_some(text)
    })
    .await;
    let log = match log {
        Ok(log) => log,
        Err(error) => {
            let output = logs()?;
            anyhow::bail!(
                "{error}; kubectl logs says: {}{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            )
        }
    };
    assert_eq!(log.trim(), "hello from hello", "kubectl logs reads the container's output");
    Ok(())
}

#[tokio::test]
async fn a_pod_the_kubelet_rejects_leaves_no_slurm_job_and_says_why() -> anyhow::Result<()> {
    let mut cluster = Cluster::connect("rejected").await?;
    let node = "kube-node-1".to_string();
    let slurm_node = cluster.slurm_node_on(&node).await?.expect("kube-node-1 runs a slurmd pod");
    let slurm_node = slurm_node.as_str();

    // An ordinary pod (kube-scheduler places it) takes most of that Node's memory for pods. Slurm
    // does not know: to it the node is idle.
    let hog = serde_json::json!({
        "metadata": {"name": "hog"},
        "spec": {
            "nodeSelector": {"kubernetes.io/hostname": node},
            "terminationGracePeriodSeconds": 0,
            "containers": [{"name": "main", "image": BUSYBOX, "command": ["sleep", "3600"],
                            "resources": {"requests": {"cpu": "100m", "memory": "6Gi"}}}]
        }
    });
    cluster.create_pod(hog).await?;
    cluster.wait_pod("hog", "the memory hog to run", START, |pod| phase(pod) == Some("Running")).await?;

    let tenancy = cluster.grant(serde_json::json!({"requiredNodes": true}))?;
    cluster.start_host(&[("SUNK_TENANCY", &tenancy)])?;
    let mut spec = pod("big", "1", "4Gi");
    spec["metadata"]["annotations"] = serde_json::json!({"sunk.dev/required-nodes": slurm_node});
    let created = cluster.create_pod(spec).await?;
    let uid = created.metadata.uid.clone().expect("uid");

    let failed =
        cluster.wait_pod("big", "the kubelet to reject the pod", START, |pod| phase(pod) == Some("Failed")).await?;
    assert_eq!(node_name(&failed), Some(node.as_str()), "sunk bound it where Slurm placed it");
    let status = failed.status.as_ref().expect("status");
    assert_eq!(status.reason.as_deref(), Some("OutOfmemory"), "the pod says why: {status:?}");

    let (slurm, uid) = (&cluster, uid.as_str());
    let jobs = wait_for("the pod's Slurm job to end", BIND, || async move {
        let jobs = slurm.jobs_of(uid).await.ok()?;
        jobs.iter().all(|job| job.state() == JobState::Ended).then_some(jobs)
    })
    .await?;
    assert_eq!(jobs.len(), 1, "one placeholder, no resubmission: {jobs:?}");
    assert!(jobs[0].state_name().starts_with("CANCELLED"), "cancelled (perhaps still completing): {jobs:?}");
    cluster
        .wait_event("big", "SlurmJobCancelled naming the kubelet's reason", |reason, note| {
            reason == "SlurmJobCancelled" && note.contains("OutOfmemory")
        })
        .await?;
    Ok(())
}
