//! Slurm Nodes tainted against other schedulers: a Node that runs a Slurm node gets the NoSchedule
//! taint `sunk.dev/slurm-node`, so kube-scheduler places there only pods that tolerate it (what the
//! operator lets share the Node, which the ledger then counts), never a pod that merely fits what
//! Slurm also offers. sunk's own pods are placed through Slurm and do not need to tolerate it. The
//! taint goes once no slurmd pod is left on the Node.
//!
//! The decision is pure ([`taint_steps`]); the pass that acts on it runs with the audit, and like it
//! does nothing while Slurm's nodes cannot be read (an empty view would untaint every Node).

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{Node, Taint};
use kube::api::{Patch, PatchParams};
use kube::{Api, Client, ResourceExt};
use serde_json::json;

use crate::vocabulary::SLURM_NODE_TAINT;

/// A change to one Node's taints.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TaintStep {
    Add(String),
    Remove(String),
}

fn has_taint(node: &Node) -> bool {
    taints(node).iter().any(|taint| taint.key == SLURM_NODE_TAINT)
}

fn taints(node: &Node) -> &[Taint] {
    node.spec.as_ref().and_then(|spec| spec.taints.as_deref()).unwrap_or_default()
}

/// What to change: `hosting` are the Nodes running a believed Slurm node, `slurmd_on` those with any
/// slurmd pod at all (one just made is not believed yet, and its Node keeps the taint).
pub fn taint_steps(nodes: &[&Node], hosting: &BTreeSet<String>, slurmd_on: &BTreeSet<String>) -> Vec<TaintStep> {
    nodes
        .iter()
        .filter_map(|node| {
            let name = node.name_any();
            match (has_taint(node), hosting.contains(&name), slurmd_on.contains(&name)) {
                (false, true, _) => Some(TaintStep::Add(name)),
                (true, false, false) => Some(TaintStep::Remove(name)),
                _ => None,
            }
        })
        .collect()
}

/// Applies one step: the Node's taints written whole, on the version read (a Node changed meanwhile
/// refuses it, and the next pass looks again).
pub async fn apply(client: &Client, node: &Node, step: &TaintStep) -> kube::Result<()> {
    let mut taints: Vec<Taint> = taints(node).iter().filter(|taint| taint.key != SLURM_NODE_TAINT).cloned().collect();
    if let TaintStep::Add(_) = step {
        taints.push(Taint { key: SLURM_NODE_TAINT.into(), effect: "NoSchedule".into(), ..Default::default() });
    }
    let patch = json!({"metadata": {"resourceVersion": node.resource_version()}, "spec": {"taints": taints}});
    let nodes: Api<Node> = Api::all(client.clone());
    nodes.patch(&node.name_any(), &PatchParams::default(), &Patch::Merge(patch)).await.map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, tainted: bool) -> Node {
        let taints = if tainted {
            json!([{"key": "other", "effect": "NoExecute"}, {"key": SLURM_NODE_TAINT, "effect": "NoSchedule"}])
        } else {
            json!([{"key": "other", "effect": "NoExecute"}])
        };
        serde_json::from_value(json!({"metadata": {"name": name}, "spec": {"taints": taints}})).unwrap()
    }

    fn names(list: &[&str]) -> BTreeSet<String> {
        list.iter().map(|name| name.to_string()).collect()
    }

    #[test]
    fn a_node_running_slurm_is_tainted_until_no_slurmd_pod_is_left() {
        // (Node tainted, hosting a believed Slurm node, any slurmd pod on it, step)
        let cases = [
            (false, true, true, Some(TaintStep::Add("n".into()))),
            (true, true, true, None),
            (true, false, true, None),
            (true, false, false, Some(TaintStep::Remove("n".into()))),
            (false, false, false, None),
            (false, false, true, None),
        ];
        for (tainted, hosting, slurmd, expected) in cases {
            let node = node("n", tainted);
            let hosting = if hosting { names(&["n"]) } else { names(&[]) };
            let slurmd = if slurmd { names(&["n"]) } else { names(&[]) };
            let steps = taint_steps(&[&node], &hosting, &slurmd);
            assert_eq!(steps.first(), expected.as_ref(), "tainted {tainted}, hosting {hosting:?}, slurmd {slurmd:?}");
        }
    }
}
