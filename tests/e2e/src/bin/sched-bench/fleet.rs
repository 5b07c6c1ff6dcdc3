//! The benchmark's capacity: fake Kubernetes Nodes (no kubelet: the test agent heartbeats them and
//! plays their pods) each running a REAL slurmd, a Slurm dynamic node of many CPUs, through a slurmd
//! pod the agent starts in the Slurm root. Everything is taken away again when the fleet is dropped.
//!
//! The host believes a slurmd pod only when a NodeSet controls it and its Slurm node records it, so
//! the fleet plays the NodeSet controller's part: a NodeSet `bench` (no controller keeps it: the
//! bench's host runs none, and the cluster's keeps namespace `slurm`) owns the pods, and each Slurm
//! node's comment names its pod once the node has registered.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::{Client, Resource, ResourceExt};
use sunk::nodeset::{NodeSet, SlurmNodeOwner};
use sunk_e2e::{repo_root, wait_for};

/// The label both schedulers' pods select their Nodes by.
pub const BENCH_LABEL: (&str, &str) = ("sunk.dev/bench", "true");
/// CPUs of each fake Node and its Slurm node.
pub const CPUS: u32 = 64;
const MEMORY_MIB: u64 = 256 * 1024;
const SLURMD_PORT_BASE: &str = "17100";
const NODESET: &str = "bench";

pub struct Fleet {
    kube: Client,
    namespace: String,
    pub nodes: Vec<String>,
    agent: Child,
}

impl Fleet {
    /// `count` fake Nodes with a slurmd pod each, their Slurm nodes idle.
    pub async fn start(kube: &Client, namespace: &str, count: usize) -> anyhow::Result<Self> {
        let nodes: Vec<String> = (1..=count).map(|index| format!("bench-node-{index}")).collect();
        let agent = start_agent()?;
        let fleet = Fleet { kube: kube.clone(), namespace: namespace.to_owned(), nodes, agent };
        let api: Api<Node> = Api::all(kube.clone());
        for name in &fleet.nodes {
            let node: Node = serde_json::from_value(serde_json::json!({
                "metadata": {"name": name, "labels": {
                    "sunk.dev/fake-node": "true", BENCH_LABEL.0: BENCH_LABEL.1, "kubernetes.io/hostname": name,
                }},
            }))?;
            api.create(&PostParams::default(), &node).await?;
            let capacity =
                serde_json::json!({"cpu": CPUS.to_string(), "memory": format!("{MEMORY_MIB}Mi"), "pods": "1000"});
            let status = serde_json::json!({"status": {"capacity": capacity, "allocatable": capacity}});
            api.patch_status(name, &PatchParams::default(), &Patch::Merge(status)).await?;
        }
        let nodeset = create_nodeset(kube, namespace).await?;
        let pods: Api<Pod> = Api::namespaced(kube.clone(), namespace);
        let mut created = Vec::new();
        for name in &fleet.nodes {
            created.push(pods.create(&PostParams::default(), &slurmd_pod(name, &nodeset)?).await?);
        }
        fleet.wait_ready().await?;
        for pod in created {
            record_on_slurm_node(&pod, &nodeset)?;
        }
        Ok(fleet)
    }

    /// Until every fake Node is Ready and untainted, and every Slurm node idle.
    async fn wait_ready(&self) -> anyhow::Result<()> {
        let api: Api<Node> = Api::all(self.kube.clone());
        wait_for("the fake Nodes to be Ready without taints", Duration::from_secs(120), || async {
            for name in &self.nodes {
                let node = api.get(name).await.ok()?;
                let ready =
                    node.status.as_ref()?.conditions.as_ref()?.iter().any(|c| c.type_ == "Ready" && c.status == "True");
                let tainted = node.spec.as_ref().and_then(|spec| spec.taints.as_ref()).is_some_and(|t| !t.is_empty());
                if !ready || tainted {
                    return None;
                }
            }
            Some(())
        })
        .await?;
        wait_for("the bench Slurm nodes to be idle", Duration::from_secs(120), || async {
            let listed = sunk_e2e::in_slurm_root(&["sinfo", "-h", "-N", "-o", "%N %T"]).ok()?;
            let idle = listed.lines().filter(|line| line.starts_with("bench-node-") && line.ends_with(" idle")).count();
            // Each node is listed once per partition.
            (idle >= self.nodes.len()).then_some(())
        })
        .await
    }
}

fn start_agent() -> anyhow::Result<Child> {
    let root = repo_root();
    let binary = std::env::var_os("SUNK_AGENT_BINARY")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| root.join("target/release/sunk-test-agent"));
    anyhow::ensure!(binary.exists(), "{} is missing: cargo build --release -p sunk-test-agent", binary.display());
    let log = std::fs::File::create(root.join(".cluster/logs/sched-bench-agent.log"))?;
    Ok(Command::new(binary)
        .args(["--slurm-root", ".cluster/slurm-root", "--state-dir", ".cluster", "--kubeconfig", ".cluster/kubeconfig"])
        .args(["--slurmd-port-base", SLURMD_PORT_BASE, "--heartbeat-seconds", "5"])
        .current_dir(root)
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()?)
}

/// The NodeSet the fleet's slurmd pods belong to; it selects no Node.
async fn create_nodeset(kube: &Client, namespace: &str) -> anyhow::Result<NodeSet> {
    let nodeset: NodeSet = serde_json::from_value(serde_json::json!({
        "apiVersion": "sunk.dev/v1alpha1", "kind": "NodeSet",
        "metadata": {"name": NODESET, "namespace": namespace},
        "spec": {"nodeSelector": {BENCH_LABEL.0: "no-node"}, "template": {"spec": {"containers": []}}},
    }))?;
    Ok(Api::<NodeSet>::namespaced(kube.clone(), namespace).create(&PostParams::default(), &nodeset).await?)
}

/// Records `pod` on its Slurm node, as the NodeSet controller does once a node has registered.
fn record_on_slurm_node(pod: &Pod, nodeset: &NodeSet) -> anyhow::Result<()> {
    let node = pod.spec.as_ref().and_then(|spec| spec.node_name.clone()).unwrap_or_default();
    let owner = SlurmNodeOwner {
        namespace: pod.namespace().unwrap_or_default(),
        pod: pod.name_any(),
        node: node.clone(),
        nodeset: NODESET.into(),
        uid: pod.uid().unwrap_or_default(),
        nodeset_uid: nodeset.uid().unwrap_or_default(),
    };
    let comment = format!("comment={}", owner.to_comment());
    sunk_e2e::in_slurm_root(&["scontrol", "update", &format!("nodename={node}"), &comment])?;
    Ok(())
}

/// A slurmd pod on the fake Node `node`: the agent runs `slurmd -Z -N <node> --conf <conf>` for it.
fn slurmd_pod(node: &str, nodeset: &NodeSet) -> anyhow::Result<Pod> {
    let conf = format!("CPUs={CPUS} RealMemory={MEMORY_MIB} Features=bench");
    Ok(serde_json::from_value(serde_json::json!({
        "metadata": {"name": format!("slurmd-{node}"), "labels": {sunk::scheduler::SLURM_NODE_LABEL: node},
                     "ownerReferences": [nodeset.controller_owner_ref(&())]},
        "spec": {
            "nodeName": node,
            "containers": [{"name": "slurmd", "image": sunk_e2e::slurmd_image(), "args": ["-Z", "--conf", conf]}],
        }
    }))?)
}

impl Drop for Fleet {
    fn drop(&mut self) {
        // Drop cannot await: kubectl and scontrol do the cleaning, then the agent stops its slurmd.
        // DOWN first: Slurm then ends whatever still runs or completes there (a run cut short leaves
        // jobs behind), which a node must be rid of before `scontrol delete` takes it.
        let down = format!("nodename={}", self.nodes.join(","));
        let _ = sunk_e2e::in_slurm_root(&["scontrol", "update", &down, "state=down", "reason=sched-bench finished"]);
        let pods: Vec<String> = self.nodes.iter().map(|node| format!("slurmd-{node}")).collect();
        let mut delete_pods =
            vec!["delete", "pod", "-n", &self.namespace, "--grace-period=0", "--force", "--wait=false"];
        delete_pods.extend(pods.iter().map(String::as_str));
        let _ = sunk_e2e::kubectl(&delete_pods).output();
        let mut delete_nodes = vec!["delete", "node", "--wait=false"];
        delete_nodes.extend(self.nodes.iter().map(String::as_str));
        let _ = sunk_e2e::kubectl(&delete_nodes).output();
        let _ = Command::new("kill").arg("-TERM").arg(self.agent.id().to_string()).status();
        let _ = self.agent.wait();
        for node in &self.nodes {
            let _ = sunk_e2e::in_slurm_root(&["scontrol", "delete", &format!("nodename={node}")]);
        }
    }
}
