//! Kubernetes placement rules honoured by the pod scheduler, end to end: taints, nodeSelector and
//! required node affinity become the placeholder's excluded nodes; a taint added later updates the
//! pending job; a job Slurm placed on a node the pod may no longer use is replaced, not bound; and
//! a deleted node named in a job's excluded nodes does not cost the job across a slurmctld restart
//! (slurm-bridge #43).
//!
//! Taints and labels go on kube-node-3 and kube-node-4, whose Slurm nodes come from this test's own
//! NodeSet (it tolerates the test taint): tainting the local cluster's GPU Nodes would make its
//! NodeSet remove their slurmd pods.

use std::time::Duration;

use sunk::slurm::{Job, JobState};
use sunk_e2e::{
    Cluster, NodeGuard, create_nodeset, in_slurm_root, node_name, pod, slurm_node, wait_for, wait_launched,
};

const BIND: Duration = Duration::from_secs(30);
const REGISTER: Duration = Duration::from_secs(90);
const POOL: &str = "sunk.dev/e2e-pool";
const TAINT: &str = "sunk.dev/e2e";
const NODES: [&str; 2] = ["kube-node-3", "kube-node-4"];

/// Host 0 keeps this test's NodeSet, host 1 schedules pods (so a test can stop one without the
/// other); Nodes 3 and 4 are in the test's pool (after `before` labelled them) and their Slurm nodes
/// registered. The NodeSet tolerates the test taint as NoSchedule only: NoExecute removes its slurmd.
async fn pool(
    test: &str,
    before: impl FnOnce(&NodeGuard) -> anyhow::Result<()>,
) -> anyhow::Result<(Cluster, NodeGuard)> {
    let mut cluster = Cluster::connect(test).await?;
    cluster.create_slurm_key_secret("slurm-key").await?;
    cluster.start_nodeset_host()?;
    cluster.start_host(&[])?;
    let nodes = NodeGuard::new(&NODES);
    before(&nodes)?;
    for node in NODES {
        nodes.label(node, (POOL, &cluster.namespace))?;
    }
    // slurmd requests no CPU from the kubelet (its 1-CPU limit is what Slurm gets): a pod bound while
    // the one before it on the Node still terminates is not refused for CPU.
    let extra = serde_json::json!({
        "tolerations": [{"key": TAINT, "operator": "Exists", "effect": "NoSchedule"}],
        "template": {"spec": {
            "terminationGracePeriodSeconds": 5,
            "containers": [{"name": "slurmd", "image": sunk_e2e::slurmd_image(), "securityContext": {"privileged": true},
                            "resources": {"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "0"}}}]
        }}
    });
    create_nodeset(&cluster, "pool", (POOL, &cluster.namespace), extra).await?;
    for node in NODES {
        wait_for(&format!("Slurm node {node} to register IDLE from the test's NodeSet"), REGISTER, || async {
            let found = slurm_node(&cluster, node).await.ok()??;
            (found.state.first().map(String::as_str) == Some("IDLE") && found.comment.contains(&cluster.namespace))
                .then_some(())
        })
        .await?;
    }
    Ok((cluster, nodes))
}

/// The host that schedules pods, as [`pool`] started it.
const SCHEDULER: usize = 1;

/// A 1-CPU pod (a whole Slurm node of the pool) kept to the test's pool by its nodeSelector, with
/// `extra` merged into its spec.
fn pool_pod(cluster: &Cluster, name: &str, extra: serde_json::Value) -> serde_json::Value {
    let mut pod = pod(name, "1", "256Mi");
    pod["spec"]["nodeSelector"] = serde_json::json!({POOL: cluster.namespace});
    for (key, value) in extra.as_object().into_iter().flatten() {
        pod["spec"][key] = value.clone();
    }
    pod
}

fn tolerating() -> serde_json::Value {
    serde_json::json!({"tolerations": [{"key": TAINT, "operator": "Exists", "effect": "NoSchedule"}]})
}

async fn bound_to(cluster: &Cluster, name: &str) -> anyhow::Result<String> {
    let bound =
        cluster.wait_pod(name, &format!("pod {name} to be bound"), BIND, |pod| node_name(pod).is_some()).await?;
    Ok(node_name(&bound).unwrap_or_default().to_string())
}

async fn uid(cluster: &Cluster, name: &str) -> anyhow::Result<String> {
    Ok(cluster.pods().get(name).await?.metadata.uid.unwrap_or_default())
}

/// The pod's one live placeholder once `check` accepts it.
async fn live_job(cluster: &Cluster, name: &str, what: &str, check: impl Fn(&Job) -> bool) -> anyhow::Result<Job> {
    let uid = uid(cluster, name).await?;
    let check = &check;
    let uid = uid.as_str();
    wait_for(&format!("pod {name}'s job: {what}"), BIND, || async move {
        let jobs = cluster.jobs_of(uid).await.ok()?;
        let live: Vec<_> = jobs.into_iter().filter(|job| job.state() != JobState::Ended).collect();
        (live.len() == 1 && check(&live[0])).then(|| live[0].clone())
    })
    .await
}

fn excludes(job: &Job, node: &str) -> bool {
    sunk::slurm::expand_hostlist(&job.excluded_nodes).is_ok_and(|names| names.iter().any(|name| name == node))
}

#[tokio::test]
async fn a_tainted_node_gets_no_untolerating_pod_and_a_tolerating_pod_may_land_there() -> anyhow::Result<()> {
    let (cluster, nodes) = pool("taint", |nodes| nodes.taint("kube-node-3", TAINT, "NoSchedule")).await?;
    cluster.create_pod(pool_pod(&cluster, "plain-1", serde_json::json!({}))).await?;
    assert_eq!(bound_to(&cluster, "plain-1").await?, "kube-node-4");
    let job = live_job(&cluster, "plain-1", "running", |job| job.state() == JobState::Running).await?;
    assert!(excludes(&job, "kube-node-3"), "the tainted node is excluded: {:?}", job.excluded_nodes);
    assert!(excludes(&job, "kube-node-1"), "so is a Node outside the pod's nodeSelector: {:?}", job.excluded_nodes);

    // kube-node-3 stays idle, yet the second untolerating pod waits for kube-node-4.
    cluster.create_pod(pool_pod(&cluster, "plain-2", serde_json::json!({}))).await?;
    live_job(&cluster, "plain-2", "pending for resources, kube-node-3 excluded", |job| {
        job.state() == JobState::Pending && excludes(job, "kube-node-3")
    })
    .await?;
    cluster.create_pod(pool_pod(&cluster, "tolerant", tolerating())).await?;
    assert_eq!(bound_to(&cluster, "tolerant").await?, "kube-node-3");
    assert!(node_name(&cluster.pods().get("plain-2").await?).is_none(), "the untolerating pod is still waiting");
    drop(nodes);
    Ok(())
}

#[tokio::test]
async fn a_pod_whose_affinity_names_a_label_only_one_node_has_lands_there() -> anyhow::Result<()> {
    // Labelled before the NodeSet registers the nodes, so kube-node-4's Slurm node has the GPU
    // model feature the job-mapper turns gpu.nvidia.com/class into.
    let (cluster, nodes) = pool("affinity", |nodes| {
        nodes.label("kube-node-4", ("gpu.nvidia.com/class", "E2E-L4"))?;
        nodes.label("kube-node-3", ("sunk.dev/e2e-rack", "only-here"))
    })
    .await?;
    let affinity = |key: &str, value: &str| {
        serde_json::json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": key, "operator": "In", "values": [value]}]}]
        }}}})
    };
    cluster.create_pod(pool_pod(&cluster, "rack", affinity("sunk.dev/e2e-rack", "only-here"))).await?;
    cluster.create_pod(pool_pod(&cluster, "gpu-class", affinity("gpu.nvidia.com/class", "E2E-L4"))).await?;
    assert_eq!(bound_to(&cluster, "rack").await?, "kube-node-3");
    assert_eq!(bound_to(&cluster, "gpu-class").await?, "kube-node-4");
    drop(nodes);
    Ok(())
}

#[tokio::test]
async fn a_taint_added_later_updates_the_pending_job_and_a_misplaced_job_is_replaced() -> anyhow::Result<()> {
    let (mut cluster, nodes) = pool("retaint", |_| Ok(())).await?;
    for name in ["filler-a", "filler-b"] {
        cluster.create_pod(pool_pod(&cluster, name, tolerating())).await?;
    }
    let mut filler_on = std::collections::HashMap::new();
    for name in ["filler-a", "filler-b"] {
        filler_on.insert(bound_to(&cluster, name).await?, name);
    }
    cluster.create_pod(pool_pod(&cluster, "waiter", serde_json::json!({}))).await?;
    live_job(&cluster, "waiter", "pending", |job| job.state() == JobState::Pending && !excludes(job, "kube-node-3"))
        .await?;

    // A taint while the job waits: the job is updated to exclude the node, and back when it goes.
    nodes.taint("kube-node-3", TAINT, "NoSchedule")?;
    live_job(&cluster, "waiter", "updated to exclude kube-node-3", |job| excludes(job, "kube-node-3")).await?;
    nodes.untaint("kube-node-3", TAINT)?;
    let first = live_job(&cluster, "waiter", "kube-node-3 allowed again", |job| !excludes(job, "kube-node-3")).await?;

    // A taint while the host is down: Slurm allocates the node the job still allows.
    cluster.kill_host(SCHEDULER)?;
    nodes.taint("kube-node-4", TAINT, "NoSchedule")?;
    let filler_4 = filler_on["kube-node-4"];
    let filler_job = cluster.jobs_of(&uid(&cluster, filler_4).await?).await?[0].job_id;
    in_slurm_root(&["scancel", &filler_job.to_string()])?;
    live_job(&cluster, "waiter", "to run on kube-node-4", |job| {
        job.job_id == first.job_id && job.state() == JobState::Running && job.nodes == "kube-node-4"
    })
    .await?;

    cluster.start_host(&[])?;
    cluster
        .wait_event("waiter", "SlurmJobReplaced naming the taint", |reason, note| {
            reason == "SlurmJobReplaced" && note.contains(&first.job_id.to_string()) && note.contains(TAINT)
        })
        .await?;
    let second = live_job(&cluster, "waiter", "a new job excluding kube-node-4", |job| {
        job.job_id != first.job_id && excludes(job, "kube-node-4")
    })
    .await?;
    assert!(node_name(&cluster.pods().get("waiter").await?).is_none(), "never bound to the tainted node");
    let jobs = cluster.jobs_of(&uid(&cluster, "waiter").await?).await?;
    let old = jobs.iter().find(|job| job.job_id == first.job_id).expect("the replaced job is listed");
    assert_eq!(old.state(), JobState::Ended, "the replaced job was cancelled: {old:?}");

    takes_the_freed_node(&cluster, filler_on["kube-node-3"], "kube-node-3", second.job_id).await?;
    drop(nodes);
    Ok(())
}

/// Deletes the pod filling `node` and checks the waiter is then bound there by job `job_id`.
async fn takes_the_freed_node(cluster: &Cluster, filler: &str, node: &str, job_id: u32) -> anyhow::Result<()> {
    cluster.delete_pod(filler).await?;
    assert_eq!(bound_to(cluster, "waiter").await?, node);
    let job = live_job(cluster, "waiter", "running", |job| job.state() == JobState::Running).await?;
    assert_eq!(job.job_id, job_id);
    Ok(())
}

/// slurm-bridge #43: a node named in a pending job's excluded nodes is deleted (its Node tainted
/// NoExecute, the NodeSet removes its slurmd and its Slurm record) while no scheduler runs to take it
/// out of the job, slurmctld restarts (`scontrol reconfigure` re-executes it in place, recovering every
/// job from its state files), and the job is still there, then runs.
#[tokio::test]
async fn deleting_an_excluded_node_and_restarting_slurmctld_keeps_the_job() -> anyhow::Result<()> {
    let (mut cluster, nodes) = pool("exc-delete", |_| Ok(())).await?;
    let mut filler_on = std::collections::HashMap::new();
    for name in ["filler-a", "filler-b"] {
        cluster.create_pod(pool_pod(&cluster, name, tolerating())).await?;
        filler_on.insert(bound_to(&cluster, name).await?, name);
    }
    cluster.create_pod(pool_pod(&cluster, "waiter", serde_json::json!({}))).await?;
    nodes.taint("kube-node-3", TAINT, "NoSchedule")?;
    let before = live_job(&cluster, "waiter", "pending, excluding kube-node-3", |job| {
        job.state() == JobState::Pending && excludes(job, "kube-node-3")
    })
    .await?;

    // No scheduler from here on, so nothing takes the node out of the job before slurmctld restarts.
    cluster.kill_host(SCHEDULER)?;
    let filler_3 = cluster.jobs_of(&uid(&cluster, filler_on["kube-node-3"]).await?).await?[0].job_id.to_string();
    wait_launched(&filler_3).await?;
    in_slurm_root(&["scancel", &filler_3])?;
    nodes.taint("kube-node-3", TAINT, "NoExecute")?;
    wait_for("the NodeSet to delete Slurm node kube-node-3", REGISTER, || async {
        slurm_node(&cluster, "kube-node-3").await.ok()?.is_none().then_some(())
    })
    .await?;
    let still =
        live_job(&cluster, "waiter", "still excluding the deleted node", |job| excludes(job, "kube-node-3")).await?;
    assert_eq!(still.job_id, before.job_id);

    in_slurm_root(&["scontrol", "reconfigure"])?;
    wait_for("slurmctld to answer after its restart", REGISTER, || async {
        in_slurm_root(&["scontrol", "ping"]).ok().filter(|out| out.contains("UP")).map(drop)
    })
    .await?;
    let after =
        live_job(&cluster, "waiter", "pending after the restart", |job| job.state() == JobState::Pending).await?;
    assert_eq!(after.job_id, before.job_id, "the same job survived the restart");

    // slurmctld now refuses any update of the job (its excluded nodes name a deleted node), so the
    // host leaves it as it is: the name means nothing, and the job runs on the node it may use.
    cluster.start_host(&[])?;
    takes_the_freed_node(&cluster, filler_on["kube-node-4"], "kube-node-4", before.job_id).await?;
    drop(nodes);
    Ok(())
}
