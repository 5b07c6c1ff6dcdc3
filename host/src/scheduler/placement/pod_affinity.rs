//! The placement rules that are about other pods, not the Node alone: required pod affinity and
//! anti-affinity, and topology spread constraints (`topology_spread`). They become Kubernetes Nodes
//! the pod must not go to, by kube-scheduler's own semantics (its InterPodAffinity and
//! PodTopologySpread filters), so a pod lands only where kube-scheduler would have let it land.
//!
//! Preferred terms and `ScheduleAnyway` constraints only rank Nodes in kube-scheduler; Slurm picks
//! among the Nodes left here, so they are ignored, and named so the pod's condition can say so. A
//! rule read in a way kube-scheduler does not define is refused with the field it is in, never
//! guessed at.
//!
//! Pods are read where they run ([`Neighbourhood`]): a Node's domain for a term is the value of the
//! term's topology key among the Node's labels, and every Node with that value is in the domain.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, PodAffinityTerm};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use super::shared_neighbourhood::BoundPods;
use super::topology_spread;
use crate::scheduler::watched_pod::WatchedPod;

/// What the pod's pod-level placement rules say of each Node of a [`Neighbourhood`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PodRules {
    /// Every rule honoured: the Nodes the pod must not go to, by name, and the rules left to rank.
    Honoured { excluded: BTreeMap<String, Refusal>, ignored: Vec<Ignored> },
    /// A rule that is not honoured exactly: the pod must wait, naming it.
    Unsupported { field: String, why: String },
}

/// Why a Node is refused, in the words of kube-scheduler's filters where they have some.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// The Node has no label for the topology key of the pod's required affinity term `term`.
    AffinityKeyMissing { term: usize, topology_key: String },
    /// No pod that every required affinity term asks for runs in the Node's domain of term `term`.
    NoAffinityMatch { term: usize, domain: Domain },
    /// `pod` runs in the Node's domain and the pod's required anti-affinity term `term` refuses it.
    AntiAffinity { term: usize, domain: Domain, pod: String },
    /// `pod` runs in the Node's domain and its own required anti-affinity refuses this pod.
    ExistingAntiAffinity { domain: Domain, pod: String },
    /// The Node has no label for the topology key of the pod's spread constraint `constraint`.
    SpreadKeyMissing { constraint: usize, topology_key: String },
    /// Placing the pod in the Node's domain would spread it wider than the constraint's maxSkew.
    Skew { constraint: usize, domain: Domain, skew: i64, max_skew: i32 },
}

/// A topology domain: a topology key and the value Nodes in the domain carry for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Domain {
    pub key: String,
    pub value: String,
}

/// A rule that only ranks Nodes, ignored: Slurm picks among the Nodes the required rules leave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ignored {
    PreferredPodAffinity,
    PreferredPodAntiAffinity,
    /// A spread constraint with `whenUnsatisfiable: ScheduleAnyway`.
    ScheduleAnyway {
        constraint: usize,
    },
}

impl Ignored {
    /// The field the ignored rule is in, as a condition names it.
    pub fn field(&self) -> String {
        match self {
            Ignored::PreferredPodAffinity => format!("{POD_AFFINITY}.preferredDuringSchedulingIgnoredDuringExecution"),
            Ignored::PreferredPodAntiAffinity => {
                format!("{POD_ANTI_AFFINITY}.preferredDuringSchedulingIgnoredDuringExecution")
            }
            Ignored::ScheduleAnyway { constraint } => format!("{}[{constraint}]", topology_spread::FIELD),
        }
    }
}

const POD_AFFINITY: &str = "spec.affinity.podAffinity";
const POD_ANTI_AFFINITY: &str = "spec.affinity.podAntiAffinity";
const REQUIRED: &str = "requiredDuringSchedulingIgnoredDuringExecution";

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::AffinityKeyMissing { term, topology_key } => {
                write!(f, "didn't match pod affinity rules: no {topology_key} label (required term {term})")
            }
            Refusal::NoAffinityMatch { term, domain } => {
                write!(f, "didn't match pod affinity rules: no matching pod in {domain} (required term {term})")
            }
            Refusal::AntiAffinity { term, domain, pod } => {
                write!(f, "didn't match pod anti-affinity rules: {pod} runs in {domain} (required term {term})")
            }
            Refusal::ExistingAntiAffinity { domain, pod } => {
                write!(f, "didn't satisfy existing pods anti-affinity rules: {pod} refuses the pod in {domain}")
            }
            Refusal::SpreadKeyMissing { constraint, topology_key } => {
                write!(
                    f,
                    "didn't match pod topology spread constraints: no {topology_key} label (constraint {constraint})"
                )
            }
            Refusal::Skew { constraint, domain, skew, max_skew } => write!(
                f,
                "didn't match pod topology spread constraints: skew {skew} in {domain} over maxSkew {max_skew} (constraint {constraint})"
            ),
        }
    }
}

impl fmt::Display for Domain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}={}", self.key, self.value)
    }
}

impl fmt::Display for Ignored {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Ignored::ScheduleAnyway { .. } => write!(f, "{} (whenUnsatisfiable: ScheduleAnyway)", self.field()),
            _ => f.write_str(&self.field()),
        }
    }
}

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
    refusing: Vec<(Placed<'a>, Vec<Term<'a>>)>,
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

/// Whether the pod has finished: the scheduler's informer leaves such pods out, their kubelet runs
/// them no more.
pub(super) fn finished(pod: &WatchedPod) -> bool {
    let phase = pod.status.as_ref().and_then(|status| status.phase.as_deref());
    matches!(phase, Some("Succeeded" | "Failed"))
}

/// Whether the pod carries a required pod anti-affinity (one that may refuse other pods).
pub(super) fn refuses_others(pod: &WatchedPod) -> bool {
    let anti = pod.spec.as_ref().and_then(|spec| spec.affinity.as_ref()?.pod_anti_affinity.as_ref());
    anti.is_some_and(|anti| anti.required_during_scheduling_ignored_during_execution.is_some())
}

/// A bound pod's required anti-affinity terms; one kube-scheduler cannot read refuses nothing there
/// either.
fn refusing_terms(pod: &WatchedPod) -> Vec<Term<'_>> {
    let anti = pod.spec.as_ref().and_then(|spec| spec.affinity.as_ref()?.pod_anti_affinity.as_ref());
    let required = anti.and_then(|anti| anti.required_during_scheduling_ignored_during_execution.as_deref());
    required.unwrap_or_default().iter().filter_map(|term| Term::read(pod, term).ok()).collect()
}

/// What `pod`'s required pod (anti-)affinity and spread constraints, and the bound pods' required
/// anti-affinity, say of each Node of `neighbourhood`. `namespace_labels` gives a namespace's labels
/// (`None`: no such namespace), for namespaceSelectors.
///
/// Cost, for N Nodes, P pods in the namespaces the pod's terms name, R pods with a required
/// anti-affinity and T terms and constraints: O((N + P) * T + R), as kube-scheduler's filters; no
/// pod is compared with another pod. A pod without any such rule costs O(R) and, when a bound pod
/// refuses it, O(N * labels per Node).
pub fn judge(
    pod: &WatchedPod,
    neighbourhood: &Neighbourhood,
    namespace_labels: impl Fn(&str) -> Option<BTreeMap<String, String>>,
) -> PodRules {
    match judged(pod, neighbourhood, &namespace_labels) {
        Ok(rules) => rules,
        Err(Unhonoured { field, why }) => PodRules::Unsupported { field, why },
    }
}

/// A rule not honoured exactly, and the field it is in.
pub(super) struct Unhonoured {
    pub field: String,
    pub why: String,
}

type NamespaceLabels<'f> = &'f dyn Fn(&str) -> Option<BTreeMap<String, String>>;

fn judged<'a>(
    pod: &'a WatchedPod,
    neighbourhood: &Neighbourhood<'a>,
    namespace_labels: NamespaceLabels,
) -> Result<PodRules, Unhonoured> {
    let mut ignored = Vec::new();
    let spec = pod.spec.as_ref();
    let affinity = spec.and_then(|spec| spec.affinity.as_ref());
    let pod_affinity = affinity.and_then(|affinity| affinity.pod_affinity.as_ref());
    let pod_anti_affinity = affinity.and_then(|affinity| affinity.pod_anti_affinity.as_ref());
    if pod_affinity.is_some_and(|terms| terms.preferred_during_scheduling_ignored_during_execution.is_some()) {
        ignored.push(Ignored::PreferredPodAffinity);
    }
    if pod_anti_affinity.is_some_and(|terms| terms.preferred_during_scheduling_ignored_during_execution.is_some()) {
        ignored.push(Ignored::PreferredPodAntiAffinity);
    }
    let affinity_terms =
        pod_affinity.and_then(|terms| terms.required_during_scheduling_ignored_during_execution.as_deref());
    let anti_terms =
        pod_anti_affinity.and_then(|terms| terms.required_during_scheduling_ignored_during_execution.as_deref());
    let affinity = read_terms(pod, affinity_terms, POD_AFFINITY)?;
    let anti = read_terms(pod, anti_terms, POD_ANTI_AFFINITY)?;
    let constraints = topology_spread::read(pod, &mut ignored)?;

    let seen = Seen::new(pod, neighbourhood, namespace_labels, &affinity, &anti);
    if affinity.is_empty() && anti.is_empty() && constraints.is_empty() && seen.refused_by_others.is_empty() {
        return Ok(PodRules::Honoured { excluded: BTreeMap::new(), ignored });
    }
    let spread = topology_spread::measure(pod, constraints, neighbourhood);
    let mut excluded = BTreeMap::new();
    for (at, node) in neighbourhood.nodes.iter().enumerate() {
        let labels = neighbourhood.node_labels(at);
        let refusal = seen.refusal(&affinity, &anti, labels).or_else(|| topology_spread::refusal(&spread, labels));
        if let (Some(refusal), Some(name)) = (refusal, node.metadata.name.as_ref()) {
            excluded.insert(name.clone(), refusal);
        }
    }
    Ok(PodRules::Honoured { excluded, ignored })
}

/// What the bound pods are, as the pod's terms and their own anti-affinity see them: the domains
/// (topology values) holding pods that matter, each with one such pod to name.
struct Seen<'a> {
    /// Per required affinity term, the values of its key on Nodes running a pod every term matches.
    affinity_domains: Vec<HashSet<&'a str>>,
    /// No pod anywhere matches, and the pod matches its own terms: it may start the group anywhere.
    first_of_its_group: bool,
    /// Per required anti-affinity term, its key's values on Nodes running a pod it refuses.
    anti_domains: Vec<HashMap<&'a str, &'a WatchedPod>>,
    /// Domains (key, value) where a bound pod's required anti-affinity refuses the pod.
    refused_by_others: HashMap<(&'a str, &'a str), &'a WatchedPod>,
}

impl<'a> Seen<'a> {
    fn new(
        pod: &'a WatchedPod,
        neighbourhood: &Neighbourhood<'a>,
        namespace_labels: NamespaceLabels,
        affinity: &[Term<'a>],
        anti: &[Term<'a>],
    ) -> Self {
        let uid = pod.metadata.uid.as_deref();
        let itself = |placed: &Placed| uid.is_some() && placed.pod.metadata.uid.as_deref() == uid;
        let read = |terms: &[Term<'a>]| -> Vec<Namespaces<'a>> {
            terms.iter().map(|term| term.namespaces_read(pod, neighbourhood, namespace_labels)).collect()
        };
        let (affinity_namespaces, anti_namespaces) = (read(affinity), read(anti));

        let mut affinity_domains = vec![HashSet::new(); affinity.len()];
        // A pod every term matches is in the first term's namespaces: only those are read.
        for placed in affinity_namespaces.first().into_iter().flat_map(|first| first.pods(neighbourhood)) {
            let matches_every_term = affinity.iter().zip(&affinity_namespaces).all(|(term, namespaces)| {
                namespaces.contains(namespace_of(placed.pod)) && term.selector.matches(pod_labels(placed.pod))
            });
            if matches_every_term && !itself(&placed) {
                let node_labels = neighbourhood.node_labels(placed.node);
                for (term, domains) in affinity.iter().zip(&mut affinity_domains) {
                    domains.extend(node_labels.get(term.topology_key).map(String::as_str));
                }
            }
        }
        let first_of_its_group = affinity_domains.iter().all(HashSet::is_empty)
            && affinity.iter().zip(&affinity_namespaces).all(|(term, namespaces)| {
                namespaces.contains(namespace_of(pod)) && term.selector.matches(pod_labels(pod))
            });

        let mut anti_domains = vec![HashMap::new(); anti.len()];
        for ((term, namespaces), domains) in anti.iter().zip(&anti_namespaces).zip(&mut anti_domains) {
            for placed in namespaces.pods(neighbourhood) {
                if term.selector.matches(pod_labels(placed.pod)) && !itself(&placed) {
                    let value = neighbourhood.node_labels(placed.node).get(term.topology_key);
                    if let Some(value) = value {
                        domains.entry(value.as_str()).or_insert(placed.pod);
                    }
                }
            }
        }

        let mut refused_by_others = HashMap::new();
        if !neighbourhood.refusing.is_empty() {
            // kube-scheduler reads an unknown namespace as one without labels here.
            let own_labels = namespace_labels(namespace_of(pod)).unwrap_or_default();
            for (placed, terms) in neighbourhood.refusing.iter().filter(|(placed, _)| !itself(placed)) {
                for term in terms.iter().filter(|term| term.refuses(pod, &own_labels)) {
                    if let Some(value) = neighbourhood.node_labels(placed.node).get(term.topology_key) {
                        refused_by_others.entry((term.topology_key, value.as_str())).or_insert(placed.pod);
                    }
                }
            }
        }
        Self { affinity_domains, first_of_its_group, anti_domains, refused_by_others }
    }

    /// The first of kube-scheduler's InterPodAffinity checks the Node with `labels` fails, if any.
    fn refusal(&self, affinity: &[Term], anti: &[Term], labels: &BTreeMap<String, String>) -> Option<Refusal> {
        let domain = |key: &str, value: &str| Domain { key: key.to_owned(), value: value.to_owned() };
        let mut unmatched = None;
        for (term, (at, domains)) in affinity.iter().zip(self.affinity_domains.iter().enumerate()) {
            let Some(value) = labels.get(term.topology_key) else {
                // Even the first of a group needs every topology key on the Node.
                return Some(Refusal::AffinityKeyMissing { term: at, topology_key: term.topology_key.to_owned() });
            };
            if unmatched.is_none() && !domains.contains(value.as_str()) {
                unmatched = Some(Refusal::NoAffinityMatch { term: at, domain: domain(term.topology_key, value) });
            }
        }
        if unmatched.is_some() && !self.first_of_its_group {
            return unmatched;
        }
        for (term, (at, domains)) in anti.iter().zip(self.anti_domains.iter().enumerate()) {
            // A Node without the key is in no domain of the term: nothing there is refused.
            let Some(value) = labels.get(term.topology_key) else { continue };
            if let Some(pod) = domains.get(value.as_str()) {
                let (domain, pod) = (domain(term.topology_key, value), name_of(pod));
                return Some(Refusal::AntiAffinity { term: at, domain, pod });
            }
        }
        if self.refused_by_others.is_empty() {
            return None;
        }
        labels.iter().find_map(|(key, value)| {
            let pod = self.refused_by_others.get(&(key.as_str(), value.as_str()))?;
            Some(Refusal::ExistingAntiAffinity { domain: domain(key, value), pod: name_of(pod) })
        })
    }
}

fn read_terms<'a>(
    pod: &'a WatchedPod,
    terms: Option<&'a [PodAffinityTerm]>,
    rule: &str,
) -> Result<Vec<Term<'a>>, Unhonoured> {
    let read = |(at, term)| {
        Term::read(pod, term)
            .map_err(|(field, why)| Unhonoured { field: format!("{rule}.{REQUIRED}[{at}].{field}"), why })
    };
    terms.unwrap_or_default().iter().enumerate().map(read).collect()
}

/// A required pod (anti-)affinity term, read as kube-scheduler reads it.
pub(super) struct Term<'a> {
    topology_key: &'a str,
    selector: Selector<'a>,
    /// Namespaces by name: those listed, or the pod's own when none are and no selector is given.
    namespace_names: Vec<&'a str>,
    /// Namespaces by label, besides those named (`Nothing` when no namespaceSelector is given).
    namespace_selector: Selector<'a>,
}

/// The namespaces whose pods a term of the pod being judged reads.
enum Namespaces<'a> {
    Every,
    Only(HashSet<&'a str>),
}

impl<'a> Namespaces<'a> {
    fn contains(&self, namespace: &str) -> bool {
        match self {
            Namespaces::Every => true,
            Namespaces::Only(names) => names.contains(namespace),
        }
    }

    fn pods<'n>(&'n self, neighbourhood: &'n Neighbourhood<'a>) -> Box<dyn Iterator<Item = Placed<'a>> + 'n> {
        match self {
            Namespaces::Every => Box::new(neighbourhood.every_pod()),
            Namespaces::Only(names) => Box::new(names.iter().flat_map(|name| neighbourhood.pods_in(name))),
        }
    }
}

impl<'a> Term<'a> {
    /// The term of `pod`, or the field in the term that cannot be read and why.
    fn read(pod: &'a WatchedPod, term: &'a PodAffinityTerm) -> Result<Self, (&'static str, String)> {
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
    fn namespaces_read(
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
    fn refuses(&self, pod: &WatchedPod, namespace_labels: &BTreeMap<String, String>) -> bool {
        let namespace = namespace_of(pod);
        let in_namespaces =
            self.namespace_names.contains(&namespace) || self.namespace_selector.matches(namespace_labels);
        in_namespaces && self.selector.matches(pod_labels(pod))
    }
}

/// A Kubernetes label selector: a null one matches nothing, an empty one everything.
#[derive(Debug, Clone)]
pub(super) enum Selector<'a> {
    Nothing,
    /// Every requirement holds (none: everything matches).
    Requiring(Vec<Requirement<'a>>),
}

#[derive(Debug, Clone)]
pub(super) struct Requirement<'a> {
    key: &'a str,
    operator: Operator,
    values: Vec<&'a str>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Operator {
    In,
    NotIn,
    Exists,
    DoesNotExist,
}

impl<'a> Selector<'a> {
    /// The selector as Kubernetes reads it, or why it cannot be (the API server refuses such a
    /// selector, so only an object that bypassed its validation has one).
    pub(super) fn read(selector: Option<&'a LabelSelector>) -> Result<Self, String> {
        let Some(selector) = selector else { return Ok(Selector::Nothing) };
        let pairs = selector.match_labels.iter().flatten();
        let mut requirements: Vec<Requirement> =
            pairs.map(|(key, value)| Requirement { key, operator: Operator::In, values: vec![value] }).collect();
        for (at, expression) in selector.match_expressions.iter().flatten().enumerate() {
            let values: Vec<&str> = expression.values.iter().flatten().map(String::as_str).collect();
            let operator = match expression.operator.as_str() {
                "In" => Operator::In,
                "NotIn" => Operator::NotIn,
                "Exists" => Operator::Exists,
                "DoesNotExist" => Operator::DoesNotExist,
                other => return Err(format!("matchExpressions[{at}]: operator {other:?} is not a label selector's")),
            };
            let needs_values = matches!(operator, Operator::In | Operator::NotIn);
            if needs_values == values.is_empty() {
                let why = if needs_values { "needs values" } else { "takes no values" };
                return Err(format!("matchExpressions[{at}]: {} {why}", expression.operator));
            }
            requirements.push(Requirement { key: &expression.key, operator, values });
        }
        Ok(Selector::Requiring(requirements))
    }

    pub(super) fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        let Selector::Requiring(requirements) = self else { return false };
        requirements.iter().all(|requirement| {
            let value = labels.get(requirement.key).map(String::as_str);
            let listed = value.is_some_and(|value| requirement.values.contains(&value));
            match requirement.operator {
                Operator::In => listed,
                Operator::NotIn => !listed,
                Operator::Exists => value.is_some(),
                Operator::DoesNotExist => value.is_none(),
            }
        })
    }

    pub(super) fn is_everything(&self) -> bool {
        matches!(self, Selector::Requiring(requirements) if requirements.is_empty())
    }

    /// Adds a requirement on one value; a null selector becomes one of that requirement alone.
    pub(super) fn require(&mut self, key: &'a str, operator: Operator, value: &'a str) {
        let requirement = Requirement { key, operator, values: vec![value] };
        match self {
            Selector::Nothing => *self = Selector::Requiring(vec![requirement]),
            Selector::Requiring(requirements) => requirements.push(requirement),
        }
    }
}

static NO_LABELS: BTreeMap<String, String> = BTreeMap::new();

fn labels(labels: Option<&BTreeMap<String, String>>) -> &BTreeMap<String, String> {
    labels.unwrap_or(&NO_LABELS)
}

pub(super) fn pod_labels(pod: &WatchedPod) -> &BTreeMap<String, String> {
    labels(pod.metadata.labels.as_ref())
}

pub(super) fn namespace_of(pod: &WatchedPod) -> &str {
    pod.metadata.namespace.as_deref().unwrap_or_default()
}

fn name_of(pod: &WatchedPod) -> String {
    format!("{}/{}", namespace_of(pod), pod.metadata.name.as_deref().unwrap_or_default())
}

#[cfg(test)]
#[path = "pod_affinity_tests.rs"]
mod tests;
