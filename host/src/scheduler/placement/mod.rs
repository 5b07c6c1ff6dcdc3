//! Kubernetes placement rules in Slurm's terms: the Slurm nodes a pod's placeholder must not run on.
//!
//! A Slurm node is excluded when the Kubernetes Node hosting its slurmd has a taint the pod does not
//! tolerate or labels its nodeSelector / required node affinity refuse, and also when no slurmd pod
//! hosts it at all (the pod could not be bound there). A cordoned, not-ready or unreachable Node is
//! not excluded: its drain keeps Slurm off it (`node_fit::NODE_STATE_TAINTS`). Only names Slurm lists
//! right now are ever given to Slurm: it refuses a submission that names an unknown node, and a
//! deleted node left in a job's list is what cost slurm-bridge its jobs (#43). A verdict is shared by
//! the pods of the same rules until what it was drawn from changes (`shared_verdicts`).
//!
//! The Node's own rules are judged here ([`Placement`], by `node_fit`); the rules about other pods
//! (`pod_affinity`, `topology_spread`, over a `neighbourhood` drawn from `shared_neighbourhood`) and
//! about claimed volumes (`volume_topology`, over `volume_stores`) narrow that verdict in `pod_rules`;
//! `exclusions` makes a verdict the job's excluded nodes, `placement_checks` remembers which
//! waiting jobs are in line, and `assumed` holds the pods this host bound until the watch shows them.
//! No module here imports one that imports it back, nor the scheduler's `Context`: `pod_rules` is
//! handed the views it reads ([`pod_rules::Views`]).

pub mod assumed;
#[doc(hidden)]
pub mod bench;
pub mod exclusions;
mod neighbourhood;
mod node_fit;
pub mod placement_checks;
mod pod_affinity;
mod pod_facts;
pub mod pod_rules;
mod refusal;
mod selector;
pub mod shared_neighbourhood;
mod shared_verdicts;
mod topology_spread;
mod verdict;
pub mod volume_stores;
mod volume_topology;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures::Stream;
use k8s_openapi::api::core::v1::Node;
use kube::ResourceExt;
use kube::runtime::reflector::{ObjectRef, Store};

pub use verdict::Verdict;

use super::slurmd_pods::SlurmdPods;
use crate::scheduler::watched_pod::PodNeeds;
use crate::slurm::{NodeCache, NodeSnapshot, Unreadable};
use node_fit::{is_node_state, misfit};
use shared_verdicts::SharedVerdicts;

/// The cached views a verdict is drawn from.
#[derive(Clone)]
pub struct Placement {
    pub nodes: Store<Node>,
    pub slurmd: SlurmdPods,
    pub slurm_nodes: NodeCache,
    /// The fingerprint last published (see [`Self::publish`]); 0 before the first.
    published: Arc<AtomicU64>,
    /// How many changes the watches of Nodes and slurmd pods have seen (see [`Self::saw_change`]).
    watched: Arc<AtomicU64>,
    verdicts: SharedVerdicts,
}

impl Placement {
    pub fn new(nodes: Store<Node>, slurmd: SlurmdPods, slurm_nodes: NodeCache) -> Self {
        Self {
            nodes,
            slurmd,
            slurm_nodes,
            published: Arc::default(),
            watched: Arc::default(),
            verdicts: Default::default(),
        }
    }

    /// The watch of Nodes or of slurmd pods saw a change (after its store took it): verdicts drawn
    /// before are not given out again.
    pub fn saw_change(&self) {
        self.watched.fetch_add(1, Ordering::AcqRel);
    }

    /// The verdict for a pod, or `Unreadable` when Slurm's node list is not known to be current.
    /// Shared with every pod of the same placement rules while nothing it was drawn from changes.
    pub fn verdict(&self, spec: &PodNeeds) -> Result<Arc<Verdict>, Unreadable> {
        // Read before the views: a change that lands while the verdict is drawn is not missed.
        let watched = self.watched.load(Ordering::Acquire);
        let snapshot = self.slurm_nodes.snapshot()?;
        Ok(self.verdicts.get_or_judge(spec, watched, &snapshot, || {
            let hosts = self.slurmd.kube_nodes();
            judge(spec, &snapshot, &hosts, |name| self.nodes.get(&ObjectRef::new(name)))
        }))
    }

    /// Why the pod may not run on `slurm_node`, if it may not (this needs no Slurm listing: a job that
    /// already holds the node names it).
    /// A node whose slurmd pod or Kubernetes Node is not known is not refused here: binding waits for it.
    pub fn refusal(&self, spec: &PodNeeds, slurm_node: &str) -> Option<String> {
        let kube_node = self.slurmd.kube_node_of(slurm_node)?;
        let node = self.nodes.get(&ObjectRef::new(&kube_node))?;
        misfit(spec, &node).map(|misfit| format!("Kubernetes Node {kube_node}: {misfit}"))
    }

    /// A fingerprint of everything a verdict depends on: Nodes' labels and taints, where slurmd pods
    /// run, which Slurm nodes exist. It changes when a pending pod may need its job updated.
    pub fn fingerprint(&self) -> u64 {
        let mut hasher = DefaultHasher::new();
        let mut nodes: Vec<_> = self
            .nodes
            .state()
            .iter()
            .map(|node| {
                let taints = node.spec.as_ref().and_then(|spec| spec.taints.clone()).unwrap_or_default();
                // What the verdict counts: a cordon passes no pod over again.
                let taints: Vec<_> =
                    taints.into_iter().filter(|t| !is_node_state(t)).map(|t| (t.key, t.value, t.effect)).collect();
                (node.name_any(), node.labels().clone(), taints)
            })
            .collect();
        nodes.sort();
        nodes.hash(&mut hasher);
        let hosts: BTreeMap<_, _> = self.slurmd.kube_nodes().into_iter().collect();
        hosts.hash(&mut hasher);
        if let Ok(snapshot) = self.slurm_nodes.snapshot() {
            let names: BTreeSet<_> = snapshot.nodes().map(|node| node.name.clone()).collect();
            names.hash(&mut hasher);
        }
        hasher.finish()
    }

    /// Takes the fingerprint as it is now as the one every pod is passed over again for; returns
    /// whether it changed. Whoever publishes must then pass every pending pod again.
    pub fn publish(&self) -> bool {
        let now = self.fingerprint();
        self.published.swap(now, Ordering::AcqRel) != now
    }

    /// The fingerprint last published: a check of a pod's job made under it need not be made again
    /// until it changes (the pass that follows a change makes it).
    pub fn published(&self) -> u64 {
        self.published.load(Ordering::Acquire)
    }

    /// Publishes the fingerprint every `interval`, yielding whenever it changed.
    pub fn changes(self, interval: Duration) -> impl Stream<Item = ()> + Send {
        futures::stream::unfold(self, move |placement| async move {
            loop {
                tokio::time::sleep(interval).await;
                if placement.publish() {
                    return Some(((), placement));
                }
            }
        })
    }
}

/// The verdict for one pod from one Slurm listing, the slurmd hosts and a Node lookup.
fn judge(
    spec: &PodNeeds,
    snapshot: &NodeSnapshot,
    hosts: &HashMap<String, String>,
    node: impl Fn(&str) -> Option<std::sync::Arc<Node>>,
) -> Verdict {
    let mut verdict = Verdict::default();
    for slurm_node in snapshot.nodes().map(|node| node.name.clone()) {
        match why_not(spec, &slurm_node, hosts, &node) {
            Some(why) => {
                verdict.excluded.insert(slurm_node, why);
            }
            None => {
                verdict.eligible.insert(slurm_node);
            }
        }
    }
    verdict
}

/// Why the pod may not run on one Slurm node, if it may not.
fn why_not(
    spec: &PodNeeds,
    slurm_node: &str,
    hosts: &HashMap<String, String>,
    node: impl Fn(&str) -> Option<std::sync::Arc<Node>>,
) -> Option<String> {
    let Some(kube_node) = hosts.get(slurm_node) else {
        return Some("no running slurmd pod hosts it on a Kubernetes Node".to_string());
    };
    match node(kube_node) {
        None => Some(format!("its Kubernetes Node {kube_node} is not known")),
        Some(node) => misfit(spec, &node).map(|misfit| format!("Kubernetes Node {kube_node}: {misfit}")),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::SystemTime;

    use super::*;

    fn slurm_node(name: &str) -> crate::slurm::Node {
        serde_json::from_value(serde_json::json!({"name": name})).unwrap()
    }

    fn kube_node(name: &str, taint: Option<&str>) -> Arc<Node> {
        let taints: Vec<_> =
            taint.map(|key| serde_json::json!({"key": key, "effect": "NoSchedule"})).into_iter().collect();
        Arc::new(
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
                "spec": {"taints": taints}
            }))
            .unwrap(),
        )
    }

    fn judged(spec: serde_json::Value) -> Verdict {
        let mut spec = spec;
        spec["containers"] = serde_json::json!([{"name": "a"}]);
        let spec: PodNeeds = serde_json::from_value(spec).unwrap();
        let snapshot = NodeSnapshot::new(["s1", "s2", "s3", "static"].map(slurm_node), SystemTime::now());
        let hosts: HashMap<String, String> =
            [("s1", "k1"), ("s2", "k2"), ("s3", "gone")].map(|(s, k)| (s.to_string(), k.to_string())).into();
        let nodes = [kube_node("k1", None), kube_node("k2", Some("dedicated"))];
        judge(&spec, &snapshot, &hosts, |name| nodes.iter().find(|n| n.name_any() == name).cloned())
    }

    #[test]
    fn excludes_untolerated_unhosted_and_unknown_nodes() {
        let verdict = judged(serde_json::json!({}));
        assert_eq!(verdict.eligible, BTreeSet::from(["s1".to_string()]));
        assert_eq!(verdict.excluded.keys().collect::<Vec<_>>(), ["s2", "s3", "static"]);
        assert!(verdict.excluded["s2"].contains("untolerated taint {dedicated:NoSchedule}"), "{verdict:?}");
        let tolerating = judged(serde_json::json!({"tolerations": [{"key": "dedicated", "operator": "Exists"}]}));
        assert!(tolerating.eligible.contains("s2"));
    }

    #[test]
    fn affinity_to_one_hostname_leaves_one_node() {
        let affinity = serde_json::json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": ["k2"]}]}]
        }}});
        let verdict = judged(serde_json::json!({"affinity": affinity, "tolerations": [{"operator": "Exists"}]}));
        assert_eq!(verdict.eligible, BTreeSet::from(["s2".to_string()]));
        let nothing = judged(serde_json::json!({"nodeSelector": {"zone": "mars"}}));
        assert!(nothing.eligible.is_empty());
        assert!(nothing.nothing_fits().starts_with("0/4 Slurm nodes fit"), "{}", nothing.nothing_fits());
    }
}
