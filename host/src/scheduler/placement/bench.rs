//! The placement rules' cost for one pending pod, for `host/benches/placement_rules.rs`: the pass
//! as it was, indexing every pod of the cluster first, and as it is, reading the shared view. Both
//! read the stores' states as a pass does (clones of their lists) and judge the same pod.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Node;
use kube::ResourceExt;

use super::neighbourhood::Neighbourhood;
use super::pod_affinity::{PodRules, judge};
use super::pod_rules::unseen;
use super::shared_neighbourhood::BoundPods;
use crate::scheduler::watched_pod::WatchedPod;

/// Nodes, the bound-pod store, this scheduler's store, and the pod being judged.
pub struct Cluster {
    nodes: Vec<Arc<Node>>,
    bound_pods: Vec<Arc<WatchedPod>>,
    own: Vec<Arc<WatchedPod>>,
    pending: WatchedPod,
    shared: Arc<BoundPods>,
}

impl Cluster {
    /// `pods` (as the API gives them) are bound already; with `own`, they are this scheduler's too.
    pub fn new(nodes: Vec<Node>, pods: Vec<serde_json::Value>, own: bool, pending: serde_json::Value) -> Self {
        let read = |pod| Arc::new(serde_json::from_value::<WatchedPod>(pod).expect("a pod"));
        let bound_pods: Vec<Arc<WatchedPod>> = pods.into_iter().map(read).collect();
        let own = if own { bound_pods.clone() } else { Vec::new() };
        let pending = serde_json::from_value(pending).expect("a pod");
        let shared = Arc::new(BoundPods::new(bound_pods.clone()));
        Self { nodes: nodes.into_iter().map(Arc::new).collect(), bound_pods, own, pending, shared }
    }

    /// A pass as it was: every pod indexed for this pod. Returns the Nodes refused.
    pub fn rebuilt_per_pass(&self) -> usize {
        let (nodes, pods, own) = (self.nodes.clone(), self.bound_pods.clone(), self.own.clone());
        let mut neighbourhood = Neighbourhood::new(nodes.iter().map(AsRef::as_ref), pods.iter().map(AsRef::as_ref));
        // This scheduler's pods not bound yet, whose placeholders Slurm started (none here).
        let assumed: Vec<(&WatchedPod, &str)> = own
            .iter()
            .filter(|other| other.uid() != self.pending.uid())
            .filter(|other| other.spec.as_ref().is_some_and(|spec| spec.node_name.is_none()))
            .filter_map(|other| Some((other.as_ref(), placed_by_slurm(other)?)))
            .collect();
        for (other, node) in assumed {
            neighbourhood.assume(other, node);
        }
        refused(judge(&self.pending, &neighbourhood, |_| None))
    }

    /// A pass as it is: the shared view read, this scheduler's pods it does not hold added.
    pub fn shared(&self) -> usize {
        let (bound, nodes, own) = (self.shared.clone(), self.nodes.clone(), self.own.clone());
        let mut neighbourhood = Neighbourhood::sharing(nodes.iter().map(AsRef::as_ref), &bound);
        for (other, node) in unseen(&self.pending, &own, &bound, placed_by_slurm) {
            neighbourhood.assume(other, node);
        }
        refused(judge(&self.pending, &neighbourhood, |_| None))
    }

    /// The poll's build of the view, once per poll interval when the pods changed.
    pub fn build_view(&self) -> usize {
        BoundPods::new(self.bound_pods.clone()).node_names.len()
    }
}

/// Where Slurm started the placeholder of a pod not bound yet: nowhere, here.
fn placed_by_slurm(_: &WatchedPod) -> Option<&str> {
    None
}

fn refused(rules: PodRules) -> usize {
    match rules {
        PodRules::Honoured { excluded, .. } => excluded.len(),
        PodRules::Unsupported { field, why } => panic!("{field}: {why}"),
    }
}
