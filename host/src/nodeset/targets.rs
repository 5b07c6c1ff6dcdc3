//! Which Nodes a NodeSet gets, from every Node, NodeSet and slurmd pod the host knows.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::ResourceExt;

use super::claims::{Claim, NodeSetKey, winner};
use super::naming::{NODESET_LABEL, slurm_node_name};
use super::plan::{Departure, Target};
use super::resource::NodeSet;
use super::selection::Selection;
use super::settings::{Settings, settings};
use super::slurmd_conf::node_conf;
use super::slurmd_pod::slurmd_container;

/// What the cluster looks like from one NodeSet.
#[derive(Debug, Default)]
pub struct Assignment {
    pub targets: Vec<Target>,
    pub departures: BTreeMap<String, Departure>,
    /// Nodes running another NodeSet's slurmd pod.
    pub occupied: BTreeMap<String, NodeSetKey>,
    /// Nodes this NodeSet selects that another NodeSet got.
    pub conflicts: Vec<(String, NodeSetKey)>,
}

pub fn key_of(nodeset: &NodeSet) -> NodeSetKey {
    NodeSetKey { namespace: nodeset.namespace().unwrap_or_default(), name: nodeset.name_any() }
}

/// The NodeSet a slurmd pod belongs to.
pub fn pod_owner(pod: &Pod) -> Option<NodeSetKey> {
    let name = pod.labels().get(NODESET_LABEL)?.clone();
    Some(NodeSetKey { namespace: pod.namespace().unwrap_or_default(), name })
}

pub fn selection(settings: &Settings, nodeset: &NodeSet) -> Selection {
    let spec = &nodeset.spec;
    Selection::new(&spec.node_selector, spec.node_affinity.as_ref(), &spec.tolerations, settings.template.spec.as_ref())
}

/// Assigns Nodes to `me` (whose settings are valid). A deleted Node, or one being deleted, is no
/// target; a NodeSet being deleted has none.
pub fn assign(
    me: &NodeSet,
    my_settings: &Settings,
    nodesets: &[Arc<NodeSet>],
    nodes: &[Arc<Node>],
    pods: &[Arc<Pod>],
) -> Assignment {
    let my_key = key_of(me);
    let mut assignment = Assignment::default();
    // Where each NodeSet's live pods run.
    let mut holders: BTreeMap<&str, Vec<NodeSetKey>> = BTreeMap::new();
    for pod in pods {
        let (Some(owner), Some(node)) = (pod_owner(pod), pod.spec.as_ref().and_then(|s| s.node_name.as_deref())) else {
            continue;
        };
        if owner != my_key {
            assignment.occupied.insert(node.to_owned(), owner.clone());
        }
        if pod.metadata.deletion_timestamp.is_none() {
            holders.entry(node).or_default().push(owner);
        }
    }
    let rivals: Vec<(NodeSetKey, Option<_>, Selection)> = nodesets
        .iter()
        .filter(|other| key_of(other) != my_key && other.metadata.deletion_timestamp.is_none())
        .filter_map(|other| {
            let valid = settings(&other.name_any(), &other.spec).ok()?;
            Some((key_of(other), other.creation_timestamp().map(|t| t.0), selection(&valid, other)))
        })
        .collect();
    let mine = selection(my_settings, me);
    let slurmd = my_settings.template.spec.as_ref().and_then(slurmd_container).cloned().unwrap_or_default();
    for node in nodes {
        let name = node.name_any();
        if node.metadata.deletion_timestamp.is_some() || me.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let held_by = holders.get(name.as_str()).cloned().unwrap_or_default();
        // A NodeSet already running there only needs to be allowed to stay (DaemonSet rules).
        let fits = |key: &NodeSetKey, selection: &Selection| {
            if held_by.contains(key) { selection.keeps(node) } else { selection.admits(node) }
        };
        if !fits(&my_key, &mine) {
            assignment.departures.insert(name, Departure::Unmatched);
            continue;
        }
        let claim = |key: NodeSetKey, created| Claim { holds_pod: held_by.contains(&key), nodeset: key, created };
        let mut claims = vec![claim(my_key.clone(), me.creation_timestamp().map(|t| t.0))];
        claims.extend(
            rivals.iter().filter(|(key, _, s)| fits(key, s)).map(|(key, created, _)| claim(key.clone(), *created)),
        );
        match winner(&claims).map(|claim| claim.nodeset.clone()) {
            Some(won) if won != my_key => {
                assignment.departures.insert(name.clone(), Departure::ClaimedBy(won.clone()));
                assignment.conflicts.push((name, won));
            }
            _ => {
                let conf = node_conf(node, &slurmd, my_settings);
                assignment.targets.push(Target { slurm_node: slurm_node_name(&name), kube_node: name, conf });
            }
        }
    }
    assignment.targets.sort_by(|a, b| a.kube_node.cmp(&b.kube_node));
    assignment
}

#[cfg(test)]
#[path = "targets_tests.rs"]
mod tests;
