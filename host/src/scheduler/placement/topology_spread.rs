//! `spec.topologySpreadConstraints` with `whenUnsatisfiable: DoNotSchedule` as Nodes refused, by
//! kube-scheduler's PodTopologySpread filter: a Node is refused when the pods the constraint counts
//! in its domain, plus the pod itself if the constraint counts it, would exceed the fewest in any
//! domain by more than `maxSkew`.
//!
//! As kube-scheduler does: domains are those of the Nodes carrying every constraint's topology key
//! and passing the constraint's node inclusion policies (`nodeAffinityPolicy` Honor and
//! `nodeTaintsPolicy` Ignore by default); the fewest is 0 while there are fewer domains than
//! `minDomains` (1 by default); only pods of the pod's own namespace that are not being deleted are
//! counted. The constraints a cluster's scheduler configuration adds to pods that set none are not
//! the pod's and are not known here.

use std::collections::{BTreeMap, HashMap};

use k8s_openapi::api::core::v1::Node;

use super::neighbourhood::Neighbourhood;
use super::pod_facts::{namespace_of, pod_labels};
use super::refusal::{Domain, Ignored, Refusal, TOPOLOGY_SPREAD, Unhonoured};
use super::selector::{Operator, Selector};
use crate::kube::node_match::{selector_matches, tolerates};
use crate::scheduler::watched_pod::{PodNeeds, WatchedPod};

/// A DoNotSchedule constraint, read as kube-scheduler reads it.
pub(super) struct Constraint<'a> {
    /// Its index in `spec.topologySpreadConstraints`.
    at: usize,
    max_skew: i32,
    topology_key: &'a str,
    selector: Selector<'a>,
    min_domains: usize,
    honours_node_affinity: bool,
    honours_node_taints: bool,
}

/// How a constraint finds the pods it counts spread now.
pub(super) struct Measured<'a> {
    constraint: Constraint<'a>,
    /// Pods counted per domain, 0 for a domain holding none.
    counts: HashMap<&'a str, u32>,
    /// The fewest pods counted in a domain, as the skew is measured from.
    fewest: u32,
    /// Whether the constraint counts the pod itself (1) or not (0).
    counts_itself: u32,
}

/// The pod's DoNotSchedule constraints; ScheduleAnyway ones go to `ignored`. A value the API server
/// would have refused is not guessed at.
pub(super) fn read<'a>(pod: &'a WatchedPod, ignored: &mut Vec<Ignored>) -> Result<Vec<Constraint<'a>>, Unhonoured> {
    let constraints = pod.spec.as_ref().and_then(|spec| spec.topology_spread_constraints.as_deref());
    let mut read = Vec::new();
    for (at, constraint) in constraints.unwrap_or_default().iter().enumerate() {
        let unhonoured =
            |field: &str, why: String| Unhonoured { field: format!("{TOPOLOGY_SPREAD}[{at}].{field}"), why };
        match constraint.when_unsatisfiable.as_str() {
            "DoNotSchedule" => {}
            "ScheduleAnyway" => {
                ignored.push(Ignored::ScheduleAnyway { constraint: at });
                continue;
            }
            other => {
                return Err(unhonoured(
                    "whenUnsatisfiable",
                    format!("{other:?} is neither DoNotSchedule nor ScheduleAnyway"),
                ));
            }
        }
        if constraint.max_skew < 1 {
            return Err(unhonoured("maxSkew", format!("{} is not at least 1", constraint.max_skew)));
        }
        let min_domains = match constraint.min_domains {
            None => 1,
            Some(count) if count >= 1 => count as usize,
            Some(count) => return Err(unhonoured("minDomains", format!("{count} is not at least 1"))),
        };
        let honours = |policy: Option<&String>, field: &str, default: bool| match policy.map(String::as_str) {
            None => Ok(default),
            Some("Honor") => Ok(true),
            Some("Ignore") => Ok(false),
            Some(other) => Err(unhonoured(field, format!("{other:?} is neither Honor nor Ignore"))),
        };
        let honours_node_affinity = honours(constraint.node_affinity_policy.as_ref(), "nodeAffinityPolicy", true)?;
        let honours_node_taints = honours(constraint.node_taints_policy.as_ref(), "nodeTaintsPolicy", false)?;
        let mut selector =
            Selector::read(constraint.label_selector.as_ref()).map_err(|why| unhonoured("labelSelector", why))?;
        // kube-scheduler narrows the selector to the pod's own values of these keys, a null selector too.
        let labels = pod_labels(pod);
        for key in constraint.match_label_keys.iter().flatten() {
            if let Some(value) = labels.get(key) {
                selector.require(key, Operator::In, value);
            }
        }
        read.push(Constraint {
            at,
            max_skew: constraint.max_skew,
            topology_key: &constraint.topology_key,
            selector,
            min_domains,
            honours_node_affinity,
            honours_node_taints,
        });
    }
    Ok(read)
}

/// Counts, per constraint, the pods it finds in each domain: O(N * C + P * C) for N Nodes, P pods
/// in the pod's namespace and C constraints.
pub(super) fn measure<'a>(
    pod: &'a WatchedPod,
    constraints: Vec<Constraint<'a>>,
    neighbourhood: &Neighbourhood<'a>,
) -> Vec<Measured<'a>> {
    let Some(spec) = pod.spec.as_ref().filter(|_| !constraints.is_empty()) else { return Vec::new() };
    let nodes = neighbourhood.nodes.len();
    // Per constraint, whether each Node's domain is one of the constraint's.
    let mut counted = vec![vec![false; nodes]; constraints.len()];
    let mut measured: Vec<Measured> = constraints
        .into_iter()
        .map(|constraint| Measured { constraint, counts: HashMap::new(), fewest: 0, counts_itself: 0 })
        .collect();
    let needs_node_affinity = measured.iter().any(|measured| measured.constraint.honours_node_affinity);
    let needs_taints = measured.iter().any(|measured| measured.constraint.honours_node_taints);
    for (at, node) in neighbourhood.nodes.iter().enumerate() {
        let labels = neighbourhood.node_labels(at);
        if !measured.iter().all(|measured| labels.contains_key(measured.constraint.topology_key)) {
            continue;
        }
        let fits = needs_node_affinity && fits_node_affinity(spec, node, labels);
        let tolerated = needs_taints && tolerates_taints(spec, node);
        for (measured, counted) in measured.iter_mut().zip(&mut counted) {
            let constraint = &measured.constraint;
            if (constraint.honours_node_affinity && !fits) || (constraint.honours_node_taints && !tolerated) {
                continue;
            }
            counted[at] = true;
            measured.counts.entry(labels[constraint.topology_key].as_str()).or_insert(0);
        }
    }
    let uid = pod.metadata.uid.as_deref();
    // A pod being deleted is not counted (kubernetes#87621), though (anti-)affinity counts it.
    let counted_pods = neighbourhood.pods_in(namespace_of(pod)).filter(|placed| {
        placed.pod.metadata.deletion_timestamp.is_none() && (uid.is_none() || placed.pod.metadata.uid.as_deref() != uid)
    });
    for placed in counted_pods {
        for (measured, counted) in measured.iter_mut().zip(&counted) {
            if counted[placed.node] && measured.constraint.selector.matches(pod_labels(placed.pod)) {
                let value = neighbourhood.node_labels(placed.node)[measured.constraint.topology_key].as_str();
                *measured.counts.entry(value).or_insert(0) += 1;
            }
        }
    }
    for measured in &mut measured {
        let enough_domains = measured.counts.len() >= measured.constraint.min_domains;
        measured.fewest = if enough_domains { measured.counts.values().copied().min().unwrap_or(0) } else { 0 };
        measured.counts_itself = u32::from(measured.constraint.selector.matches(pod_labels(pod)));
    }
    measured
}

/// The first constraint the Node with `labels` breaks, if any.
pub(super) fn refusal(measured: &[Measured], labels: &BTreeMap<String, String>) -> Option<Refusal> {
    measured.iter().find_map(|measured| {
        let constraint = &measured.constraint;
        let Some(value) = labels.get(constraint.topology_key) else {
            let topology_key = constraint.topology_key.to_owned();
            return Some(Refusal::SpreadKeyMissing { constraint: constraint.at, topology_key });
        };
        let there = measured.counts.get(value.as_str()).copied().unwrap_or(0);
        let skew = i64::from(there) + i64::from(measured.counts_itself) - i64::from(measured.fewest);
        (skew > i64::from(constraint.max_skew)).then(|| Refusal::Skew {
            constraint: constraint.at,
            domain: Domain { key: constraint.topology_key.to_owned(), value: value.clone() },
            skew,
            max_skew: constraint.max_skew,
        })
    })
}

/// The pod's nodeSelector and required node affinity, as `nodeAffinityPolicy: Honor` reads them.
fn fits_node_affinity(spec: &PodNeeds, node: &Node, labels: &BTreeMap<String, String>) -> bool {
    let name = node.metadata.name.as_deref().unwrap_or_default();
    let node_affinity = spec.affinity.as_ref().and_then(|affinity| affinity.node_affinity.as_ref());
    let required =
        node_affinity.and_then(|affinity| affinity.required_during_scheduling_ignored_during_execution.as_ref());
    spec.node_selector.iter().flatten().all(|(key, value)| labels.get(key) == Some(value))
        && required.is_none_or(|selector| selector_matches(selector, labels, name))
}

/// Whether the pod tolerates every NoSchedule and NoExecute taint, as `nodeTaintsPolicy: Honor`
/// reads them: the taints for a Node's state too, unlike `node_fit`, which leaves those to the drain.
fn tolerates_taints(spec: &PodNeeds, node: &Node) -> bool {
    let taints = node.spec.as_ref().and_then(|spec| spec.taints.as_deref()).unwrap_or_default();
    let tolerations = spec.tolerations.as_deref().unwrap_or_default();
    taints
        .iter()
        .filter(|taint| matches!(taint.effect.as_str(), "NoSchedule" | "NoExecute"))
        .all(|taint| tolerations.iter().any(|toleration| tolerates(toleration, taint)))
}
