//! The Nodes and the pods they run, as one pending pod's pod-level rules read them
//! ([`Neighbourhood`]), and the required pod (anti-)affinity terms read against them ([`Term`]): a
//! Node's domain for a term is the value of the term's topology key among the Node's labels, and
//! every Node with that value is in the domain.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, PodAffinityTerm};

use super::pod_facts::{finished, labels, namespace_of, pod_labels};
use super::selector::{Operator, Selector};
use super::shared_neighbourhood::BoundPods;
use crate::scheduler::watched_pod::WatchedPod;

/// The Nodes and the pods their kubelets run, as one pending pod's judgement reads them: by
/// namespace, because a term reads the pods of the namespaces it names, and the pods with a required
/// anti-affinity apart, because those may refuse any pod. The bound pods come either from a
/// [`BoundPods`] built once per poll and shared by every pass ([`Self::sharing`]), or are given here
/// ([`Self::new`], [`Self::assume`]).
pub struct Neighbourhood<'a> {
    pub(super) nodes: Vec<&'a Node>,
    by_name: HashMap<&'a str, usize>,
    /// The shared pods, and where each Node name they are bound to is in `nodes` (`None`: no such Node).
    shared: Option<(&'a BoundPods, Vec<Option<usize>>)>,
    /// The pods given here, besides any shared ones.
    by_namespace: HashMap<&'a str, Vec<Placed<'a>>>,
    /// The pods with a required anti-affinity, and its terms: they may refuse any pod.
    pub(super) refusing: Vec<(Placed<'a>, Vec<Term<'a>>)>,
}

/// A pod and the index of its Node in [`Neighbourhood::nodes`].
#[derive(Clone, Copy)]
pub(super) struct Placed<'a> {
    pub pod: &'a WatchedPod,
    pub node: usize,
}

impl<'a> Neighbourhood<'a> {
    /// `nodes`: every Node, not only those hosting Slurm, since pods anywhere in a domain count;
    /// `pods`: pods bound to them, by any scheduler and in any namespace. Pods on a Node not listed
    /// have no topology and are left out, as kube-scheduler leaves them out.
    pub fn new(nodes: impl IntoIterator<Item = &'a Node>, pods: impl IntoIterator<Item = &'a WatchedPod>) -> Self {
        let nodes: Vec<&Node> = nodes.into_iter().collect();
        let by_name = nodes.iter().enumerate().filter_map(|(at, node)| Some((node.metadata.name.as_deref()?, at)));
        let mut neighbourhood = Self {
            by_name: by_name.collect(),
            nodes,
            shared: None,
            by_namespace: HashMap::new(),
            refusing: Vec::new(),
        };
        for pod in pods {
            if let Some(node) = pod.spec.as_ref().and_then(|spec| spec.node_name.as_deref()) {
                neighbourhood.assume(pod, node);
            }
        }
        neighbourhood
    }

    /// [`Self::new`] with the pods of `bound`, indexed already: O(N) for N Nodes, plus reading the
    /// terms of the pods with a required anti-affinity, whatever the number of pods. The Nodes are
    /// the caller's (current), the pods as they were when `bound` was built.
    pub fn sharing(nodes: impl IntoIterator<Item = &'a Node>, bound: &'a BoundPods) -> Self {
        let mut neighbourhood = Self::new(nodes, []);
        let at: Vec<Option<usize>> =
            bound.node_names.iter().map(|name| neighbourhood.by_name.get(name.as_str()).copied()).collect();
        for (pod, node) in &bound.refusing {
            let Some(node) = at[*node] else { continue };
            let terms = refusing_terms(pod);
            if !terms.is_empty() {
                neighbourhood.refusing.push((Placed { pod, node }, terms));
            }
        }
        neighbourhood.shared = Some((bound, at));
        neighbourhood
    }

    /// Counts `pod` as running on `node` before it is bound there (Slurm has given it the Node), as
    /// kube-scheduler counts the pods it has assumed: the next pod of a Deployment must see it. Not
    /// for a pod already among the bound ones, which would count twice.
    pub fn assume(&mut self, pod: &'a WatchedPod, node: &str) {
        let Some(&node) = self.by_name.get(node) else { return };
        if finished(pod) {
            return;
        }
        let placed = Placed { pod, node };
        self.by_namespace.entry(namespace_of(pod)).or_default().push(placed);
        let terms = refusing_terms(pod);
        if !terms.is_empty() {
            self.refusing.push((placed, terms));
        }
    }

    pub(super) fn node_labels(&self, node: usize) -> &'a BTreeMap<String, String> {
        labels(self.nodes[node].metadata.labels.as_ref())
    }

    /// The pods of `namespace` on the Nodes: the shared ones, then those given here.
    pub(super) fn pods_in<'n>(&'n self, namespace: &str) -> impl Iterator<Item = Placed<'a>> + 'n {
        let shared = self.shared.as_ref().and_then(|(bound, at)| Some((bound.by_namespace.get(namespace)?, at)));
        let shared = shared.into_iter().flat_map(|(pods, at)| placed(pods, at));
        shared.chain(self.by_namespace.get(namespace).into_iter().flatten().copied())
    }

    /// Every pod on the Nodes, in any namespace.
    fn every_pod<'n>(&'n self) -> impl Iterator<Item = Placed<'a>> + 'n {
        let shared =
            self.shared.iter().flat_map(|(bound, at)| bound.by_namespace.values().flat_map(|pods| placed(pods, at)));
        shared.chain(self.by_namespace.values().flatten().copied())
    }

    /// The namespaces with a pod on the Nodes (one may be named twice).
    fn namespaces<'n>(&'n self) -> impl Iterator<Item = &'a str> + 'n {
        let shared = self.shared.iter().flat_map(|(bound, _)| bound.by_namespace.keys().map(String::as_str));
        shared.chain(self.by_namespace.keys().copied())
    }
}

/// The shared `pods` that are on one of the Nodes, `at` giving where each Node name is.
fn placed<'a, 'n>(
    pods: &'a [(Arc<WatchedPod>, usize)],
    at: &'n [Option<usize>],
) -> impl Iterator<Item = Placed<'a>> + 'n
where
    'a: 'n,
{
    pods.iter().filter_map(|(pod, node)| Some(Placed { pod, node: at[*node]? }))
}

/// A bound pod's required anti-affinity terms; one kube-scheduler cannot read refuses nothing there
/// either.
fn refusing_terms(pod: &WatchedPod) -> Vec<Term<'_>> {
    let anti = pod.spec.as_ref().and_then(|spec| spec.affinity.as_ref()?.pod_anti_affinity.as_ref());
    let required = anti.and_then(|anti| anti.required_during_scheduling_ignored_during_execution.as_deref());
    required.unwrap_or_default().iter().filter_map(|term| Term::read(pod, term).ok()).collect()
}

pub(super) type NamespaceLabels<'f> = &'f dyn Fn(&str) -> Option<BTreeMap<String, String>>;

/// A required pod (anti-)affinity term, read as kube-scheduler reads it.
pub(super) struct Term<'a> {
    pub(super) topology_key: &'a str,
    pub(super) selector: Selector<'a>,
    /// Namespaces by name: those listed, or the pod's own when none are and no selector is given.
    namespace_names: Vec<&'a str>,
    /// Namespaces by label, besides those named (`Nothing` when no namespaceSelector is given).
    namespace_selector: Selector<'a>,
}

/// The namespaces whose pods a term of the pod being judged reads.
pub(super) enum Namespaces<'a> {
    Every,
    Only(HashSet<&'a str>),
}

impl<'a> Namespaces<'a> {
    pub(super) fn contains(&self, namespace: &str) -> bool {
        match self {
            Namespaces::Every => true,
            Namespaces::Only(names) => names.contains(namespace),
        }
    }

    pub(super) fn pods<'n>(
        &'n self,
        neighbourhood: &'n Neighbourhood<'a>,
    ) -> Box<dyn Iterator<Item = Placed<'a>> + 'n> {
        match self {
            Namespaces::Every => Box::new(neighbourhood.every_pod()),
            Namespaces::Only(names) => Box::new(names.iter().flat_map(|name| neighbourhood.pods_in(name))),
        }
    }
}

impl<'a> Term<'a> {
    /// The term of `pod`, or the field in the term that cannot be read and why.
    pub(super) fn read(pod: &'a WatchedPod, term: &'a PodAffinityTerm) -> Result<Self, (&'static str, String)> {
        let mut selector = Selector::read(term.label_selector.as_ref()).map_err(|why| ("labelSelector", why))?;
        // The API server writes these into the selector when it takes the pod (Kubernetes 1.31 on);
        // writing them again changes nothing, and honours them where it did not. A null selector
        // takes none: it matches nothing either way.
        if !matches!(selector, Selector::Nothing) {
            let labels = pod_labels(pod);
            for (keys, operator) in
                [(&term.match_label_keys, Operator::In), (&term.mismatch_label_keys, Operator::NotIn)]
            {
                for key in keys.iter().flatten() {
                    if let Some(value) = labels.get(key) {
                        selector.require(key, operator, value);
                    }
                }
            }
        }
        let namespace_selector =
            Selector::read(term.namespace_selector.as_ref()).map_err(|why| ("namespaceSelector", why))?;
        let listed = term.namespaces.iter().flatten().map(String::as_str);
        let mut namespace_names: Vec<&str> = listed.collect();
        if namespace_names.is_empty() && term.namespace_selector.is_none() {
            namespace_names.push(namespace_of(pod));
        }
        Ok(Self { topology_key: &term.topology_key, selector, namespace_names, namespace_selector })
    }

    /// The namespaces this term of the pod being judged reads. kube-scheduler lists the namespaces
    /// a selector picks, so one it does not know is never picked; an empty selector picks all.
    pub(super) fn namespaces_read(
        &self,
        pod: &'a WatchedPod,
        neighbourhood: &Neighbourhood<'a>,
        namespace_labels: NamespaceLabels,
    ) -> Namespaces<'a> {
        if self.namespace_selector.is_everything() {
            return Namespaces::Every;
        }
        let mut names: HashSet<&str> = self.namespace_names.iter().copied().collect();
        if !matches!(self.namespace_selector, Selector::Nothing) {
            let known = neighbourhood.namespaces().chain([namespace_of(pod)]);
            let picked =
                |name: &&str| namespace_labels(name).is_some_and(|labels| self.namespace_selector.matches(&labels));
            names.extend(known.filter(picked));
        }
        Namespaces::Only(names)
    }

    /// Whether this term of a bound pod refuses `pod`, whose namespace has `namespace_labels`.
    pub(super) fn refuses(&self, pod: &WatchedPod, namespace_labels: &BTreeMap<String, String>) -> bool {
        let namespace = namespace_of(pod);
        let in_namespaces =
            self.namespace_names.contains(&namespace) || self.namespace_selector.matches(namespace_labels);
        in_namespaces && self.selector.matches(pod_labels(pod))
    }
}
