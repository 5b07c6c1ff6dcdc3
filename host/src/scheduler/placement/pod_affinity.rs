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
//! Pods are read where they run ([`Neighbourhood`]); a rule's words are in `refusal`, a pod's own
//! facts in `pod_facts`, label selectors in `selector`.

use std::collections::{BTreeMap, HashMap, HashSet};

use k8s_openapi::api::core::v1::PodAffinityTerm;

use super::neighbourhood::{NamespaceLabels, Namespaces, Neighbourhood, Placed, Term};
use super::pod_facts::{name_of, namespace_of, pod_labels};
use super::refusal::{Domain, Ignored, POD_AFFINITY, POD_ANTI_AFFINITY, REQUIRED, Refusal, Unhonoured};
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

#[cfg(test)]
#[path = "pod_affinity_tests.rs"]
mod tests;
