//! The NodeSet controller end to end, on Nodes the local cluster's own NodeSet leaves alone
//! (kube-node-3..5): slurmd pods in real containers, Slurm dynamic nodes registering from them, and
//! removals that never kill a running job, even while Slurm cannot be read.

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, PostParams};
use sunk::nodeset::NodeSet;
use sunk::slurm::JobState;
use sunk_e2e::{Cluster, NodeGuard, SlurmJob, in_slurm_root, slurm_node, slurmrestd_frozen, wait_for};

const REGISTER: Duration = Duration::from_secs(90);
/// The label that puts a Node into one test's pool.
const POOL: &str = "sunk.dev/e2e-pool";

/// Starts a host that keeps this test's NodeSets only (no pod scheduler), and gives the namespace
/// the cluster's Slurm auth key.
async fn nodeset_cluster(test: &str) -> anyhow::Result<Cluster> {
    let mut cluster = Cluster::connect(test).await?;
    cluster.create_slurm_key_secret("slurm-key").await?;
    cluster.start_nodeset_host()?;
    Ok(cluster)
}

/// A NodeSet named `name` selecting the Nodes labelled with this test's pool.
async fn create_nodeset(cluster: &Cluster, name: &str, pool_label: (&str, &str)) -> anyhow::Result<()> {
    create_nodeset_with(cluster, name, pool_label, serde_json::json!({})).await
}

/// The same, with `extra` merged into its spec (an update strategy, a drain timeout, ...).
async fn create_nodeset_with(
    cluster: &Cluster,
    name: &str,
    pool_label: (&str, &str),
    extra: serde_json::Value,
) -> anyhow::Result<()> {
    sunk_e2e::create_nodeset(cluster, name, pool_label, extra).await
}

/// Changes the slurmd container's CPU limit: a new revision, so every pod is to be replaced.
async fn set_cpus(cluster: &Cluster, name: &str, cpus: &str) -> anyhow::Result<()> {
    let nodesets: Api<NodeSet> = Api::namespaced(cluster.kube.clone(), &cluster.namespace);
    // The controller writes the NodeSet's status meanwhile: read, change, write, again on a conflict.
    wait_for(&format!("NodeSet {name} to take {cpus} CPUs"), Duration::from_secs(20), || async {
        let mut nodeset = nodesets.get(name).await.ok()?;
        let mut template = serde_json::to_value(&nodeset.spec.template).ok()?;
        template["spec"]["containers"][0]["resources"]["limits"]["cpu"] = cpus.into();
        nodeset.spec.template = serde_json::from_value(template).ok()?;
        nodesets.replace(name, &PostParams::default(), &nodeset).await.ok().map(drop)
    })
    .await
}

/// The Slurm node once it registered again with `cpus` CPUs (after its pod was replaced).
async fn wait_cpus(cluster: &Cluster, node: &str, cpus: u64) -> anyhow::Result<()> {
    wait_for(&format!("Slurm node {node} to register IDLE with {cpus} CPUs"), REGISTER, || async {
        let node = slurm_node(cluster, node).await.ok()??;
        (node.cpus == cpus && node.state.first().map(String::as_str) == Some("IDLE")).then_some(())
    })
    .await
}

fn revision(pod: &Pod) -> Option<String> {
    pod.metadata.labels.as_ref()?.get("sunk.dev/revision").cloned()
}

/// The Slurm node once it registered IDLE from this test's NodeSet and the host recorded its pod
/// in the node's comment.
async fn wait_idle(cluster: &Cluster, node: &str, feature: &str) -> anyhow::Result<sunk::slurm::Node> {
    let what = format!("Slurm node {node} to register IDLE with feature {feature}, its comment naming its pod");
    wait_for(&what, REGISTER, || async {
        let node = slurm_node(cluster, node).await.ok()??;
        (node.state.first().map(String::as_str) == Some("IDLE")
            && node.features.iter().any(|f| f == feature)
            && node.comment.contains(&cluster.namespace))
        .then_some(node)
    })
    .await
}

/// A host for NodeSets, `node` labelled into this test's pool, and a NodeSet `name` on it whose
/// Slurm node has registered.
async fn one_node_nodeset(test: &str, node: &str, name: &str) -> anyhow::Result<(Cluster, NodeGuard)> {
    let cluster = nodeset_cluster(test).await?;
    let nodes = NodeGuard::new(&[node]);
    nodes.label(node, (POOL, &cluster.namespace))?;
    create_nodeset(&cluster, name, (POOL, &cluster.namespace)).await?;
    wait_idle(&cluster, node, name).await?;
    Ok((cluster, nodes))
}

/// Starts a job on `node` from Slurm's side (as an HPC user would) and waits until it runs there.
async fn run_job_on(cluster: &Cluster, node: &str) -> anyhow::Result<String> {
    let job = in_slurm_root(&["sbatch", "--parsable", "-w", node, "--wrap", "sleep 600"])?.trim().to_string();
    wait_for(&format!("job {job} to run on {node}"), REGISTER, || async {
        let node = slurm_node(cluster, node).await.ok()??;
        matches!(node.state.first().map(String::as_str), Some("ALLOCATED" | "MIXED")).then_some(())
    })
    .await?;
    Ok(job)
}

/// Waits until the NodeSet let go of `node`: its slurmd pod gone, then its Slurm record.
async fn wait_released(cluster: &Cluster, node: &str, when: &str) -> anyhow::Result<()> {
    wait_for(&format!("the slurmd pod on {node} to go {when}"), REGISTER, || async {
        pod_on(cluster, node).await.ok()?.is_none().then_some(())
    })
    .await?;
    wait_gone(cluster, node).await
}

async fn wait_gone(cluster: &Cluster, node: &str) -> anyhow::Result<()> {
    wait_for(&format!("Slurm node {node} to be deleted"), REGISTER, || async {
        slurm_node(cluster, node).await.ok()?.is_none().then_some(())
    })
    .await
}

async fn pod_on(cluster: &Cluster, node: &str) -> anyhow::Result<Option<Pod>> {
    let pods = cluster.pods().list(&ListParams::default()).await?;
    Ok(pods.items.into_iter().find(|pod| pod.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node)))
}

#[tokio::test]
async fn a_nodeset_runs_one_slurmd_per_matching_node_and_removes_them_all_when_deleted() -> anyhow::Result<()> {
    let cluster = nodeset_cluster("nodeset-match").await?;
    let nodes = NodeGuard::new(&["kube-node-3", "kube-node-4", "kube-node-5"]);
    let pool = (POOL, cluster.namespace.as_str());
    nodes.label("kube-node-3", pool)?;
    nodes.label("kube-node-4", pool)?;
    // Selected, but tainted with a taint the NodeSet does not tolerate: no slurmd there.
    nodes.taint("kube-node-5", "sunk.dev/e2e", "NoSchedule")?;
    nodes.label("kube-node-5", pool)?;
    create_nodeset(&cluster, "cpu", pool).await?;

    for node in ["kube-node-3", "kube-node-4"] {
        let slurm = wait_idle(&cluster, node, "cpu").await?;
        assert_eq!((slurm.cpus, slurm.real_memory), (1, 1024), "CPUs and memory from the container's limits");
        assert!(slurm.comment.contains(&cluster.namespace), "the Slurm node maps back to its pod: {}", slurm.comment);
    }
    let nodesets: Api<NodeSet> = Api::namespaced(cluster.kube.clone(), &cluster.namespace);
    wait_for("the NodeSet to count 2 desired, 2 ready, 2 idle", REGISTER, || async {
        let status = nodesets.get("cpu").await.ok()?.status?;
        (status.desired == 2 && status.ready == 2 && status.idle == 2).then_some(())
    })
    .await?;
    assert!(pod_on(&cluster, "kube-node-5").await?.is_none(), "no slurmd on a Node whose taint is not tolerated");
    assert!(slurm_node(&cluster, "kube-node-5").await?.is_none());

    nodes.untaint("kube-node-5", "sunk.dev/e2e")?;
    wait_idle(&cluster, "kube-node-5", "cpu").await?;

    nodesets.delete("cpu", &Default::default()).await?;
    for node in ["kube-node-3", "kube-node-4", "kube-node-5"] {
        wait_gone(&cluster, node).await?;
    }
    wait_for("the NodeSet's pods to be gone", REGISTER, || async {
        cluster.pods().list(&ListParams::default()).await.ok()?.items.is_empty().then_some(())
    })
    .await?;
    in_slurm_root(&["scontrol", "ping"])?;
    Ok(())
}

#[tokio::test]
async fn a_node_that_stops_matching_is_drained_and_released_only_after_its_job_ends() -> anyhow::Result<()> {
    let (cluster, nodes) = one_node_nodeset("nodeset-drain", "kube-node-3", "drain").await?;
    let job = run_job_on(&cluster, "kube-node-3").await?;

    nodes.unlabel("kube-node-3", POOL)?;
    let drained = wait_for("the Slurm node to be drained with a k8s: reason", REGISTER, || async {
        let node = slurm_node(&cluster, "kube-node-3").await.ok()??;
        (node.state.iter().any(|flag| flag == "DRAIN") && node.reason.starts_with("k8s:")).then_some(node)
    })
    .await?;
    assert!(drained.state.iter().any(|s| s == "ALLOCATED" || s == "MIXED"), "the job still runs: {:?}", drained.state);
    let pod = pod_on(&cluster, "kube-node-3").await?.expect("the slurmd pod stays while its job runs");
    assert!(pod.metadata.deletion_timestamp.is_none(), "not even being deleted");

    in_slurm_root(&["scancel", &job])?;
    wait_released(&cluster, "kube-node-3", "once the job ended").await
}

/// Found by the chaos run: a job that ends after its slurmd pod was deleted stays COMPLETING on a
/// node whose slurmd is gone, which only slurmctld's SlurmdTimeout (5 minutes) would end, and the
/// Node had no slurmd meanwhile. Nothing runs there, so the NodeSet marks the node DOWN, its record
/// goes, and a new slurmd pod registers it again at once.
#[tokio::test]
async fn a_node_left_completing_by_a_deleted_slurmd_pod_gets_a_new_one_at_once() -> anyhow::Result<()> {
    let (cluster, _nodes) = one_node_nodeset("nodeset-lost", "kube-node-5", "lost").await?;
    let job = run_job_on(&cluster, "kube-node-5").await?;
    let old = pod_on(&cluster, "kube-node-5").await?.expect("the slurmd pod");
    let old_uid = old.metadata.uid.clone().unwrap_or_default();
    cluster.delete_pod(&old.metadata.name.clone().unwrap_or_default()).await?;
    wait_for("the deleted slurmd pod to be gone", REGISTER, || async {
        let pod = pod_on(&cluster, "kube-node-5").await.ok()?;
        pod.is_none_or(|pod| pod.metadata.uid.as_deref() != Some(old_uid.as_str())).then_some(())
    })
    .await?;
    // Its end cannot complete: the slurmd that would run the epilog and report back is gone.
    in_slurm_root(&["scancel", &job])?;
    // Registered again by a new pod, and owned (so that the test's cleanup finds it).
    wait_for("a new slurmd pod to register the node IDLE again", REGISTER, || async {
        let pod = pod_on(&cluster, "kube-node-5").await.ok()??;
        let node = slurm_node(&cluster, "kube-node-5").await.ok()??;
        let idle = node.state.first().map(String::as_str) == Some("IDLE") && !node.flags().is_busy();
        let owned = node.comment.contains(pod.metadata.uid.as_deref().unwrap_or("-"));
        (pod.metadata.uid.as_deref() != Some(old_uid.as_str()) && idle && owned).then_some(())
    })
    .await?;
    let events = cluster.events_of("lost").await?;
    assert!(events.iter().any(|(reason, _)| reason == "CompletingJobsReleased"), "{events:?}");
    Ok(())
}

#[tokio::test]
async fn nothing_is_removed_while_slurm_cannot_be_read() -> anyhow::Result<()> {
    let (cluster, nodes) = one_node_nodeset("nodeset-closed", "kube-node-4", "closed").await?;

    {
        let _frozen = slurmrestd_frozen()?;
        nodes.unlabel("kube-node-4", POOL)?;
        // The host's view of Slurm goes stale within a few polls (about 6 s here): watch for longer
        // than that. Nothing may be deleted meanwhile.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
        while tokio::time::Instant::now() < deadline {
            let pod = pod_on(&cluster, "kube-node-4").await?.expect("the slurmd pod stays while Slurm is unreadable");
            assert!(pod.metadata.deletion_timestamp.is_none(), "no deletion while Slurm cannot be read");
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }
    // Slurm answers again: the removal completes.
    wait_released(&cluster, "kube-node-4", "once Slurm answers").await
}

#[tokio::test]
async fn a_rolling_update_replaces_idle_nodes_waits_for_a_busy_one_and_survives_a_host_restart() -> anyhow::Result<()> {
    let mut cluster = nodeset_cluster("nodeset-roll").await?;
    let nodes = NodeGuard::new(&["kube-node-3", "kube-node-4"]);
    let pool = (POOL, cluster.namespace.as_str());
    nodes.label("kube-node-3", pool)?;
    nodes.label("kube-node-4", pool)?;
    let strategy = serde_json::json!({
        "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}},
        "drainTimeout": "5s"
    });
    create_nodeset_with(&cluster, "roll", pool, strategy).await?;
    wait_idle(&cluster, "kube-node-3", "roll").await?;
    wait_idle(&cluster, "kube-node-4", "roll").await?;

    let job = run_job_on(&cluster, "kube-node-3").await?;
    let busy_pod = pod_on(&cluster, "kube-node-3").await?.expect("a slurmd pod on kube-node-3");

    // Twice the CPUs: the idle node is replaced and Slurm sees the new size (its old dynamic record
    // was deleted first); the busy one is drained and waits for its job.
    set_cpus(&cluster, "roll", "2").await?;
    wait_cpus(&cluster, "kube-node-4", 2).await?;
    let nodesets: Api<NodeSet> = Api::namespaced(cluster.kube.clone(), &cluster.namespace);
    let blocked = wait_for("UpdateBlocked naming the job", REGISTER, || async {
        let status = nodesets.get("roll").await.ok()?.status?;
        let condition = status.conditions.into_iter().find(|c| c.type_ == "UpdateBlocked" && c.status == "True")?;
        condition.message.contains(&job).then_some(condition.message)
    })
    .await?;
    assert!(blocked.contains("kube-node-3"), "names the node: {blocked}");
    wait_for("an UpdateBlocked Event naming the job", REGISTER, || async {
        let events = cluster.events_of("roll").await.ok()?;
        events.iter().any(|(reason, note)| reason == "UpdateBlocked" && note.contains(&job)).then_some(())
    })
    .await?;

    // The host dies in the middle of the update; its successor must not finish it by force.
    cluster.kill_host(0)?;
    let successor = cluster.start_nodeset_host()?;
    wait_for("the new host to finish a pass over the NodeSet", REGISTER, || async {
        let metrics = cluster.metrics(successor).await.ok()?;
        metrics
            .lines()
            .any(|line| line.starts_with(r#"sunk_reconcile_passes_total{controller="nodeset",result="ok"}"#))
            .then_some(())
    })
    .await?;
    let still = pod_on(&cluster, "kube-node-3").await?.expect("the busy slurmd pod stays");
    assert_eq!(still.metadata.uid, busy_pod.metadata.uid, "the same pod, never replaced while its job runs");
    assert!(still.metadata.deletion_timestamp.is_none());
    let node = slurm_node(&cluster, "kube-node-3").await?.expect("kube-node-3 in Slurm");
    assert!(node.state.iter().any(|flag| flag == "DRAIN"), "drained, waiting: {:?}", node.state);
    assert_eq!(in_slurm_root(&["squeue", "-h", "-j", &job, "-o", "%T"])?.trim(), "RUNNING");

    in_slurm_root(&["scancel", &job])?;
    wait_cpus(&cluster, "kube-node-3", 2).await?;
    wait_for("the NodeSet to report both pods updated and ready", REGISTER, || async {
        let status = nodesets.get("roll").await.ok()?.status?;
        (status.updated == 2 && status.ready == 2).then_some(())
    })
    .await?;
    Ok(())
}

#[tokio::test]
async fn a_canary_partition_updates_only_the_nodes_at_or_above_it() -> anyhow::Result<()> {
    let cluster = nodeset_cluster("nodeset-canary").await?;
    let names = ["kube-node-3", "kube-node-4", "kube-node-5"];
    let nodes = NodeGuard::new(&names);
    let pool = (POOL, cluster.namespace.as_str());
    for node in names {
        nodes.label(node, pool)?;
    }
    // Ordinals follow the Nodes' names: kube-node-5 is ordinal 2, the only one at or above 2.
    let strategy = serde_json::json!({
        "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "partition": 2}}
    });
    create_nodeset_with(&cluster, "canary", pool, strategy).await?;
    for node in names {
        wait_idle(&cluster, node, "canary").await?;
    }
    let before = pod_on(&cluster, "kube-node-3").await?.and_then(|pod| revision(&pod));

    set_cpus(&cluster, "canary", "2").await?;
    wait_cpus(&cluster, "kube-node-5", 2).await?;
    let nodesets: Api<NodeSet> = Api::namespaced(cluster.kube.clone(), &cluster.namespace);
    wait_for("the NodeSet to count one updated pod of three ready", REGISTER, || async {
        let status = nodesets.get("canary").await.ok()?.status?;
        (status.updated == 1 && status.ready == 3).then_some(())
    })
    .await?;
    for node in ["kube-node-3", "kube-node-4"] {
        let pod = pod_on(&cluster, node).await?.expect("its slurmd pod");
        assert_eq!(revision(&pod), before, "{node} stays at the old revision");
        let slurm = slurm_node(&cluster, node).await?.expect("in Slurm");
        assert_eq!(slurm.cpus, 1, "{node} keeps its old size");
        assert!(!slurm.state.iter().any(|flag| flag == "DRAIN"), "{node} is not drained: {:?}", slurm.state);
    }
    Ok(())
}

/// The label naming a Node's leaf switch in the topology test.
const LEAF: &str = "sunk.dev/e2e-leaf";

/// slurmctld's topology.yaml for as long as it lives: one tree, `top` over two empty leaf switches
/// that dynamic nodes join as they register. Removed (and slurmctld reconfigured) when dropped, as
/// the other tests' multi-node jobs span nodes that belong to no switch.
struct TwoLeafTopology;

impl TwoLeafTopology {
    const FILE: &str = ".cluster/slurm-etc/topology.yaml";

    fn install() -> anyhow::Result<Self> {
        let yaml = "- topology: default\n  cluster_default: true\n  tree:\n    switches:\n      \
                    - switch: top\n        children: leaf[1-2]\n      - switch: leaf1\n      - switch: leaf2\n";
        std::fs::write(sunk_e2e::repo_root().join(Self::FILE), yaml)?;
        in_slurm_root(&["scontrol", "reconfigure"])?;
        Ok(Self)
    }
}

impl Drop for TwoLeafTopology {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(sunk_e2e::repo_root().join(Self::FILE));
        let _ = in_slurm_root(&["scontrol", "reconfigure"]);
    }
}

/// The NodeSet's `topology`: each slurmd registers in the unit its Node's label names
/// (`Topology=default:<leaf>`), and a two-node job asking for one switch gets the two nodes of one
/// leaf, though Slurm's own order (by name) would pair kube-node-3 with kube-node-4.
#[tokio::test]
async fn a_job_asking_for_one_switch_lands_inside_one_topology_unit() -> anyhow::Result<()> {
    if sunk_e2e::slurm_version() == "24.11" {
        // topology.yaml and a dynamic node's `Topology=` came with Slurm 25.05.
        eprintln!("skipped: Slurm 24.11 has no topology.yaml");
        return Ok(());
    }
    let _topology = TwoLeafTopology::install()?;
    let cluster = nodeset_cluster("nodeset-topology").await?;
    let leaves = [("kube-node-3", "leaf1"), ("kube-node-4", "leaf2"), ("kube-node-5", "leaf1")];
    let nodes = NodeGuard::new(&leaves.map(|(node, _)| node));
    for (node, leaf) in leaves {
        nodes.label(node, (POOL, &cluster.namespace))?;
        nodes.label(node, (LEAF, leaf))?;
    }
    let topology = serde_json::json!({"topology": {"label": LEAF}});
    create_nodeset_with(&cluster, "topo", (POOL, &cluster.namespace), topology).await?;
    for (node, _) in leaves {
        wait_idle(&cluster, node, "topo").await?;
    }
    // Slurm lists a host list in the order the nodes registered: compared as sets.
    let leaf1_pair = BTreeSet::from(["kube-node-3".to_string(), "kube-node-5".to_string()]);
    let topology = in_slurm_root(&["scontrol", "show", "topology"])?;
    let leaf1 = topology.lines().find(|line| line.starts_with("SwitchName=leaf1 ")).unwrap_or_default();
    let joined = leaf1.split_whitespace().find_map(|field| field.strip_prefix("Nodes=")).unwrap_or_default();
    assert_eq!(hosts(joined), leaf1_pair, "the nodes joined their leaf: {topology}");

    let job = SlurmJob::submit(&["-N", "2", "--switches=1", "-C", "topo", "--wrap", "sleep 600"])?;
    let running = wait_for("the two-node job to run", REGISTER, || async {
        let job = cluster.slurm.job(job.id()).await.ok()??;
        (job.state() == JobState::Running).then_some(job)
    })
    .await?;
    assert_eq!(hosts(&running.nodes), leaf1_pair, "inside leaf1: {running:?}");
    Ok(())
}

/// The names a Slurm host list stands for.
fn hosts(list: &str) -> BTreeSet<String> {
    sunk::slurm::expand_hostlist(list).unwrap_or_default().into_iter().collect()
}
