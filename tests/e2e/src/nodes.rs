//! The shared Kubernetes Nodes a test borrows: NodeSets of slurmd pods on them, and the labels and
//! taints a test puts on them for its own duration.

use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, Patch, PatchParams, PostParams};

use crate::{Cluster, kubectl};

/// The slurmd image of the local cluster's Slurm version (images/slurm, target slurmd).
pub fn slurmd_image() -> String {
    format!("localhost/sunk/slurmd:{}", crate::slurm::slurm_version())
}

/// Creates a NodeSet `name` in the test's namespace selecting the Nodes labelled `pool_label`, its
/// slurmd limited to 1 CPU and 1 GiB, with `extra` merged into its spec (an update strategy,
/// tolerations, ...).
pub async fn create_nodeset(
    cluster: &Cluster,
    name: &str,
    pool_label: (&str, &str),
    extra: serde_json::Value,
) -> anyhow::Result<()> {
    let mut spec = serde_json::json!({
        "nodeSelector": {pool_label.0: pool_label.1},
        "partitions": ["batch"],
        "template": {"spec": {
            "terminationGracePeriodSeconds": 5,
            "containers": [{"name": "slurmd", "image": slurmd_image(), "securityContext": {"privileged": true},
                            "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}]
        }}
    });
    for (key, value) in extra.as_object().into_iter().flatten() {
        spec[key] = value.clone();
    }
    let nodeset: sunk::nodeset::NodeSet = serde_json::from_value(serde_json::json!({
        "apiVersion": "sunk.dev/v1alpha1", "kind": "NodeSet",
        "metadata": {"name": name, "namespace": cluster.namespace},
        "spec": spec
    }))?;
    Api::<sunk::nodeset::NodeSet>::namespaced(cluster.kube.clone(), &cluster.namespace)
        .create(&PostParams::default(), &nodeset)
        .await?;
    Ok(())
}

/// Labels and taints a test puts on shared Nodes, all taken off again when the guard is dropped
/// (whether the test passed or not), so the next test finds the Nodes as they were.
pub struct NodeGuard {
    nodes: Vec<String>,
    /// Other label keys the test set, removed too.
    labels: std::sync::Mutex<Vec<String>>,
}

const E2E_LABEL: &str = "sunk.dev/e2e-pool";
const E2E_TAINT: &str = "sunk.dev/e2e";

impl NodeGuard {
    pub fn new(nodes: &[&str]) -> Self {
        Self { nodes: nodes.iter().map(|node| node.to_string()).collect(), labels: Default::default() }
    }

    pub fn label(&self, node: &str, (key, value): (&str, &str)) -> anyhow::Result<()> {
        let mut labels = self.labels.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if !labels.iter().any(|known| known == key) {
            labels.push(key.to_string());
        }
        drop(labels);
        self.kubectl(&["label", "node", node, "--overwrite", &format!("{key}={value}")])
    }

    pub fn unlabel(&self, node: &str, key: &str) -> anyhow::Result<()> {
        self.kubectl(&["label", "node", node, &format!("{key}-")])
    }

    pub fn taint(&self, node: &str, key: &str, effect: &str) -> anyhow::Result<()> {
        self.kubectl(&["taint", "node", node, "--overwrite", &format!("{key}=e2e:{effect}")])
    }

    pub fn untaint(&self, node: &str, key: &str) -> anyhow::Result<()> {
        self.kubectl(&["taint", "node", node, &format!("{key}-")])
    }

    fn kubectl(&self, args: &[&str]) -> anyhow::Result<()> {
        anyhow::ensure!(self.nodes.iter().any(|node| args.contains(&node.as_str())), "{args:?}: not a guarded Node");
        let output = kubectl(args).output()?;
        anyhow::ensure!(output.status.success(), "kubectl {args:?}: {}", String::from_utf8_lossy(&output.stderr));
        Ok(())
    }
}

impl Drop for NodeGuard {
    fn drop(&mut self) {
        let labels = self.labels.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).clone();
        for node in &self.nodes {
            let _ = kubectl(&["label", "node", node, &format!("{E2E_LABEL}-")]).output();
            for key in labels.iter().filter(|key| key.as_str() != E2E_LABEL) {
                let _ = kubectl(&["label", "node", node, &format!("{key}-")]).output();
            }
            let _ = kubectl(&["taint", "node", node, &format!("{E2E_TAINT}-")]).output();
        }
    }
}

/// Cordons (`on`) or uncordons the Node, as `kubectl cordon` does.
pub async fn set_unschedulable(kube: &kube::Client, node: &str, on: bool) -> anyhow::Result<()> {
    let patch = serde_json::json!({"spec": {"unschedulable": on}});
    Api::<Node>::all(kube.clone()).patch(node, &PatchParams::default(), &Patch::Merge(patch)).await?;
    Ok(())
}
