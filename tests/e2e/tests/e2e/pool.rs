//! One pool, held once, audited: a pod that bypasses sunk onto a Slurm Node holds what Slurm still
//! offers there, and the host says so (`sunk_pool_overcommitted`, the Node's `SlurmPoolOvercommitted`
//! condition, an Event naming the pod) until the pod is gone. Beside the scheduler, the host holds it
//! in Slurm with a hold job instead, so no sunk pod is bound to a kubelet that would refuse it.
//!
//! Nodes running Slurm nodes are tainted against other schedulers; sunk's own pods still land there.
//!
//! The local cluster's Slurm nodes are its GPU NodeSet's two, of 2 CPUs and 2 GPUs each; their
//! slurmd pods request nothing of the kubelet, so with no other pod there the pool is held once.

use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::Api;
use sunk::slurm::{Job, JobsPage};
use sunk_e2e::{BUSYBOX, Cluster, is_running, kubectl, node_name, pod, scheduled_condition, wait_for};

const AUDIT: Duration = Duration::from_secs(60);
const NODE: &str = "kube-node-1";

fn gpus_over(metrics: &str) -> Option<u64> {
    let series = format!(r#"sunk_pool_overcommitted{{node="{NODE}",resource="gpus"}} "#);
    metrics.lines().find_map(|line| line.strip_prefix(&series)?.trim().parse().ok())
}

/// The Node's pool condition as (status, message).
async fn pool_condition(nodes: &Api<Node>) -> Option<(String, String)> {
    let node = nodes.get(NODE).await.ok()?;
    let conditions = node.status?.conditions?;
    let condition = conditions.into_iter().find(|condition| condition.type_ == "SlurmPoolOvercommitted")?;
    Some((condition.status, condition.message.unwrap_or_default()))
}

#[tokio::test]
async fn a_pod_that_bypasses_sunk_onto_a_slurm_node_is_reported_until_it_leaves() -> anyhow::Result<()> {
    let mut cluster = Cluster::connect("pool").await?;
    let host = cluster.start_host(&[
        ("SUNK_POOL_AUDIT", "true"),
        ("SUNK_SCHEDULER", "false"),
        ("SUNK_NODESET_NAMESPACE", "slurm"),
    ])?;
    let nodes: Api<Node> = Api::all(Cluster::client().await?);
    wait_for("the Node audited as held once", AUDIT, || async {
        let metrics = cluster.metrics(host).await.ok()?;
        let (status, _) = pool_condition(&nodes).await?;
        (gpus_over(&metrics)? == 0 && status == "False").then_some(())
    })
    .await?;

    cluster.create_pod(bypass_pod()).await?;
    cluster.wait_pod("bypass", "the kubelet to run the bypassing pod", AUDIT, is_running).await?;
    let named = format!("{}/bypass (2 GPUs)", cluster.namespace);
    wait_for("the Node reported overcommitted, naming the pod", AUDIT, || async {
        let metrics = cluster.metrics(host).await.ok()?;
        let (status, message) = pool_condition(&nodes).await?;
        (gpus_over(&metrics)? == 2 && status == "True" && message.contains(&named)).then_some(())
    })
    .await?;
    // The Event follows the condition.
    wait_for("a Warning Event on the Node naming the pod", AUDIT, || async {
        let events = cluster.events_in("default", NODE).await.ok()?;
        events.iter().any(|(reason, note)| reason == "PoolOvercommitted" && note.contains(&named)).then_some(())
    })
    .await?;

    cluster.delete_pod("bypass").await?;
    wait_for("the Node held once again", AUDIT, || async {
        let metrics = cluster.metrics(host).await.ok()?;
        let (status, _) = pool_condition(&nodes).await?;
        (gpus_over(&metrics)? == 0 && status == "False").then_some(())
    })
    .await?;
    Ok(())
}

/// Bound by name, past any scheduler: the kubelet admits it and gives it both GPUs of [`NODE`].
fn bypass_pod() -> serde_json::Value {
    serde_json::json!({
        "metadata": {"name": "bypass"},
        "spec": {
            "nodeName": NODE,
            "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "main", "image": BUSYBOX, "command": ["sleep", "3600"],
                            "resources": {"limits": {"nvidia.com/gpu": 2}}}]
        }
    })
}

/// The hold jobs on `slurm_node` that have not ended.
async fn hold_jobs(cluster: &Cluster, slurm_node: &str) -> Option<Vec<Job>> {
    let JobsPage::All { jobs, .. } = cluster.slurm.jobs(None).await.ok()? else { return None };
    let held_here = |job: &Job| sunk::scheduler::held_node(&job.admin_comment) == Some(slurm_node);
    Some(jobs.into_iter().filter(|job| held_here(job) && job.state() != sunk::slurm::JobState::Ended).collect())
}

#[tokio::test]
async fn beside_the_scheduler_a_hold_job_holds_what_a_bypassing_pod_uses() -> anyhow::Result<()> {
    let mut cluster = Cluster::connect("pool-hold").await?;
    sunk_e2e::wait_no_node_completing(&cluster).await?;
    let host = cluster.start_host(&[("SUNK_POOL_AUDIT", "true"), ("SUNK_NODESET_NAMESPACE", "slurm")])?;
    let nodes: Api<Node> = Api::all(Cluster::client().await?);
    let slurm_node = cluster.slurm_node_on(NODE).await?.ok_or_else(|| anyhow::anyhow!("no Slurm node on {NODE}"))?;
    wait_for("the Node audited as held once", AUDIT, || async {
        let (status, _) = pool_condition(&nodes).await?;
        (status == "False" && hold_jobs(&cluster, &slurm_node).await?.is_empty()).then_some(())
    })
    .await?;

    cluster.create_pod(bypass_pod()).await?;
    cluster.wait_pod("bypass", "the kubelet to run the bypassing pod", AUDIT, is_running).await?;
    let hold = wait_for("a running hold job of both GPUs on the Node's Slurm node", AUDIT, || async {
        let jobs = hold_jobs(&cluster, &slurm_node).await?;
        let [job] = jobs.as_slice() else { return None };
        (job.state() == sunk::slurm::JobState::Running && job.asked_per_node().gpus == 2).then(|| job.clone())
    })
    .await?;
    wait_for("the Node held once, the hold job named", AUDIT, || async {
        let metrics = cluster.metrics(host).await.ok()?;
        let (status, message) = pool_condition(&nodes).await?;
        (gpus_over(&metrics)? == 0 && status == "False" && message.contains("2 GPUs of it for pods outside Slurm"))
            .then_some(())
    })
    .await?;
    let said = format!("hold job {} holds", hold.job_id);
    wait_for("an Event on the Node naming the hold job", AUDIT, || async {
        let events = cluster.events_in("default", NODE).await.ok()?;
        events.iter().any(|(reason, note)| reason == "HoldJob" && note.contains(&said)).then_some(())
    })
    .await?;

    // A sunk pod asking for a GPU of that Node waits in Slurm instead of being refused by its kubelet.
    let mut gpu_pod = pod("wants-a-gpu", "100m", "64Mi");
    gpu_pod["spec"]["nodeSelector"] = serde_json::json!({"kubernetes.io/hostname": NODE});
    gpu_pod["spec"]["containers"][0]["resources"]["limits"] = serde_json::json!({"nvidia.com/gpu": 1});
    let created = cluster.create_pod(gpu_pod).await?;
    let uid = created.metadata.uid.clone().unwrap_or_default();
    wait_for("its placeholder pending in Slurm", AUDIT, || async {
        let jobs = cluster.jobs_of(&uid).await.ok()?;
        jobs.iter().any(|job| job.state() == sunk::slurm::JobState::Pending).then_some(())
    })
    .await?;
    let waiting = cluster.pods().get("wants-a-gpu").await?;
    assert_eq!(node_name(&waiting), None, "bound while a pod outside Slurm holds the GPUs");

    // The pod outside Slurm leaves: its hold job ends, and the sunk pod gets the GPU.
    cluster.delete_pod("bypass").await?;
    let bound = cluster.wait_pod("wants-a-gpu", "sunk to bind it", AUDIT, |pod| node_name(pod).is_some()).await?;
    assert_eq!(node_name(&bound), Some(NODE));
    wait_for("no hold job left on the Node", AUDIT, || async {
        hold_jobs(&cluster, &slurm_node).await?.is_empty().then_some(())
    })
    .await?;
    Ok(())
}

const TAINT: &str = "sunk.dev/slurm-node";

/// Takes the Slurm Node taint off both Nodes when the test ends: the host that put it there is gone,
/// and the tests after this one place other schedulers' pods anywhere.
struct Untainted;

impl Drop for Untainted {
    fn drop(&mut self) {
        for node in ["kube-node-1", "kube-node-2"] {
            let _ = kubectl(&["taint", "nodes", node, &format!("{TAINT}-")]).output();
        }
    }
}

async fn tainted(nodes: &Api<Node>, name: &str) -> Option<bool> {
    let node = nodes.get(name).await.ok()?;
    let taints = node.spec?.taints.unwrap_or_default();
    Some(taints.iter().any(|taint| taint.key == TAINT && taint.effect == "NoSchedule"))
}

#[tokio::test]
async fn nodes_running_slurm_are_tainted_against_other_schedulers_but_not_sunk() -> anyhow::Result<()> {
    let _untainted = Untainted;
    let mut cluster = Cluster::connect("pool-taint").await?;
    cluster.start_host(&[
        ("SUNK_POOL_AUDIT", "true"),
        ("SUNK_TAINT_SLURM_NODES", "true"),
        ("SUNK_NODESET_NAMESPACE", "slurm"),
    ])?;
    let nodes: Api<Node> = Api::all(Cluster::client().await?);
    wait_for("both Slurm Nodes tainted", AUDIT, || async {
        (tainted(&nodes, "kube-node-1").await? && tainted(&nodes, "kube-node-2").await?).then_some(())
    })
    .await?;

    // kube-scheduler keeps a pod that does not tolerate the taint off the Node it asks for.
    let hostname = serde_json::json!({"kubernetes.io/hostname": NODE});
    let mut other = pod("other-scheduler", "100m", "64Mi");
    other["spec"]["schedulerName"] = "default-scheduler".into();
    other["spec"]["nodeSelector"] = hostname.clone();
    cluster.create_pod(other).await?;
    cluster
        .wait_pod("other-scheduler", "kube-scheduler to refuse it for the taint", AUDIT, |pod| {
            // kube-scheduler counts Nodes, it does not name the taint: both were checked tainted above.
            scheduled_condition(pod)
                .is_some_and(|(status, _, message)| status == "False" && message.contains("untolerated taint"))
        })
        .await?;

    // sunk's pods go through Slurm, which holds what they need: the taint is not theirs to tolerate.
    let mut ours = pod("through-slurm", "100m", "64Mi");
    ours["spec"]["nodeSelector"] = hostname;
    cluster.create_pod(ours).await?;
    let bound = cluster.wait_pod("through-slurm", "sunk to bind it", AUDIT, |pod| node_name(pod).is_some()).await?;
    assert_eq!(node_name(&bound), Some(NODE));
    Ok(())
}
