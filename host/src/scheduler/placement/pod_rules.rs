//! The pod-level placement rules in Slurm's terms: required pod (anti-)affinity and topology spread
//! judged against every pod where it runs (`pod_affinity`), and the reach of the pod's claimed
//! volumes (`volume_topology`); the Nodes they refuse made Slurm nodes the placeholder must not run
//! on. Pod rules need every bound pod of the cluster, not only sunk's: the host reads them when it audits
//! the pool (`--pool-audit`, the chart's default); volumes need the claims and volumes, which it reads
//! with `--volume-topology`. Without that read a pod with such a rule or claim waits `Unsupported`,
//! never placed as if it had none.
//!
//! The two questions a pass asks of placement about one pod are answered here, the Node's own rules
//! (`Placement`) and the pod-level ones together: where the pod may go ([`where_it_may_go`], for its
//! job's excluded nodes) and why it may not run where its job does ([`misplaced`], before it is bound).

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Node;
use kube::runtime::reflector::{ObjectRef, Store};

use super::Placement;
use super::assumed::Assumed;
use super::neighbourhood::Neighbourhood;
use super::pod_affinity::{PodRules, judge};
use super::shared_neighbourhood::{BoundPods, SharedNeighbourhood};
use super::verdict::Verdict;
use super::volume_stores::VolumeStores;
use super::volume_topology::{self, VolumeReach};
use crate::scheduler::conditions::WaitReason;
use crate::scheduler::grants::Grants;
use crate::scheduler::job_cache::JobCache;
use crate::scheduler::slurmd_pods::SlurmdPods;
use crate::scheduler::timing::UNHOSTED_PATIENCE;
use crate::scheduler::watched_pod::WatchedPod;
use crate::slurm::{Job, Unreadable, expand_hostlist};

/// What the pod-level rules read besides the pod, borrowed from the scheduler's context for one
/// judgement.
pub struct Views<'a> {
    pub nodes: &'a Store<Node>,
    pub slurmd: &'a SlurmdPods,
    /// This scheduler's pods.
    pub pods: &'a Store<WatchedPod>,
    pub jobs: &'a JobCache,
    pub grants: &'a Grants,
    /// Every pod bound to a Node, when the host reads them.
    pub bound_pods: Option<&'a Store<WatchedPod>>,
    pub refusers: &'a SharedNeighbourhood,
    /// The pods this host bound that the pod watch may not show bound yet.
    pub assumed: &'a Assumed,
    /// The claims, volumes and classes, when the host reads them.
    pub volumes: Option<&'a VolumeStores>,
}

/// Where a pod may go once its pod-level rules are counted.
pub enum PodPlacement {
    Verdict(Arc<Verdict>),
    /// The pod may go nowhere yet: why, and what its condition says.
    Waits(WaitReason, String),
}

impl PodPlacement {
    /// A rule the host cannot honour: the field and why.
    fn unsupported(why: String) -> Self {
        PodPlacement::Waits(WaitReason::Unsupported, format!("a placement rule sunk cannot honour: {why}"))
    }

    /// A claimed volume not ready for the pod yet (its claim missing or not bound): the field and why.
    fn volume_not_ready(why: String) -> Self {
        PodPlacement::Waits(WaitReason::VolumeNotReady, format!("waiting for a volume: {why}"))
    }
}

/// Whether pod-level rules concern `pod`: its own pod (anti-)affinity or spread, or any pod's required
/// anti-affinity, which may refuse it. Such a pod's place depends on where its neighbours go, which
/// this host learns of Slurm's placements from its listings: it is placed by Slurm's scheduling pass,
/// which one listing shows whole, not by an allocation bound before the listing shows its neighbours.
pub fn concern(pod: &WatchedPod, views: &Views) -> bool {
    first_rule(pod).is_some() || views.refusers.any()
}

/// The first pod-level rule the pod carries, by field, if any.
fn first_rule(pod: &WatchedPod) -> Option<&'static str> {
    let spec = pod.spec.as_ref()?;
    let affinity = spec.affinity.as_ref();
    if affinity.and_then(|affinity| affinity.pod_affinity.as_ref()).is_some() {
        return Some("spec.affinity.podAffinity");
    }
    if affinity.and_then(|affinity| affinity.pod_anti_affinity.as_ref()).is_some() {
        return Some("spec.affinity.podAntiAffinity");
    }
    spec.topology_spread_constraints.as_ref().filter(|constraints| !constraints.is_empty())?;
    Some("spec.topologySpreadConstraints")
}

/// Whether a required pod (anti-)affinity term of the pod selects namespaces by label.
fn selects_namespaces(pod: &WatchedPod) -> bool {
    let Some(affinity) = pod.spec.as_ref().and_then(|spec| spec.affinity.as_ref()) else { return false };
    let affinity_terms =
        affinity.pod_affinity.as_ref().and_then(|a| a.required_during_scheduling_ignored_during_execution.as_ref());
    let anti_terms = affinity
        .pod_anti_affinity
        .as_ref()
        .and_then(|a| a.required_during_scheduling_ignored_during_execution.as_ref());
    affinity_terms.into_iter().chain(anti_terms).flatten().any(|term| term.namespace_selector.is_some())
}

/// `verdict` with the Slurm nodes the pod's pod-level rules, and other pods' anti-affinity, refuse.
pub fn apply(verdict: Arc<Verdict>, pod: &WatchedPod, views: &Views) -> PodPlacement {
    judged(verdict, pod, views, u32::MAX)
}

/// [`apply`], counting the unbound pods whose placeholders Slurm started before job `before` only:
/// two pods Slurm put together against their rules must not both give way.
fn judged(verdict: Arc<Verdict>, pod: &WatchedPod, views: &Views, before: u32) -> PodPlacement {
    let verdict = match within_volume_reach(verdict, pod, views) {
        Ok(verdict) => verdict,
        Err(waits) => return waits,
    };
    let rule = first_rule(pod);
    if rule.is_none() && !views.refusers.any() {
        return PodPlacement::Verdict(verdict);
    }
    let Some(bound_pods) = views.bound_pods else {
        return match rule {
            Some(field) => PodPlacement::unsupported(format!(
                "{field}: this host reads only the pods it schedules (--pool-audit=false), not the pods the \
                 rule is about"
            )),
            None => PodPlacement::Verdict(verdict),
        };
    };
    if !views.grants.knows_namespace_labels() && selects_namespaces(pod) {
        return PodPlacement::unsupported(
            "namespaceSelector of a pod (anti-)affinity term: this host watches namespaces' labels only when a \
             tenancy grant selects namespaces by label"
                .into(),
        );
    }
    // Every pass shares one index of the bound pods, built at most once per poll; this scheduler's
    // own pods are added from its store as it is now (see `shared_neighbourhood`).
    let bound = views.refusers.read(bound_pods);
    let (nodes, own) = (views.nodes.state(), views.pods.state());
    let kube_node_of = views.slurmd.kube_nodes();
    let mut neighbourhood = Neighbourhood::sharing(nodes.iter().map(AsRef::as_ref), &bound);
    // A pod this host bound counts where it was bound, whatever its job's id.
    let assumed = |uid: &str| {
        let node = views.assumed.node_of(uid)?;
        nodes.iter().find_map(|kube| kube.metadata.name.as_deref().filter(|name| *name == node))
    };
    let placed_by_slurm = |other: &WatchedPod| {
        let uid = other.metadata.uid.as_deref()?;
        if let Some(node) = assumed(uid) {
            return Some(node);
        }
        let running = views.jobs.for_pod(uid).into_iter().find(|placeholder| {
            placeholder.job.state() == crate::slurm::JobState::Running && placeholder.job.job_id < before
        })?;
        let nodes = expand_hostlist(&running.job.nodes).ok()?;
        let [node] = nodes.as_slice() else { return None };
        kube_node_of.get(node).map(String::as_str)
    };
    for (other, node) in unseen(pod, &own, &bound, placed_by_slurm) {
        neighbourhood.assume(other, node);
    }
    let namespace_labels = |namespace: &str| views.grants.namespace_labels(namespace);
    match judge(pod, &neighbourhood, namespace_labels) {
        PodRules::Unsupported { field, why } => PodPlacement::unsupported(format!("{field}: {why}")),
        PodRules::Honoured { excluded, .. } if excluded.is_empty() => PodPlacement::Verdict(verdict),
        PodRules::Honoured { excluded, .. } => {
            let refused: BTreeMap<String, String> = kube_node_of
                .iter()
                .filter_map(|(slurm, kube)| {
                    let refusal = excluded.get(kube)?;
                    Some((slurm.clone(), format!("Kubernetes Node {kube}: {refusal}")))
                })
                .collect();
            PodPlacement::Verdict(Arc::new(excluding(&verdict, refused)))
        }
    }
}

/// This scheduler's pods that `bound` does not hold bound, and where they run, but never `pod`
/// itself: those bound since it was built (by this host, in this very poll most likely), and those
/// whose placeholder Slurm started and which are not bound yet (`placed_by_slurm` gives the Node, for
/// the jobs that count): the next replica of a Deployment must see the one before it. O(own pods),
/// with a lookup in `bound` for each bound one.
pub(super) fn unseen<'a>(
    pod: &WatchedPod,
    own: &'a [Arc<WatchedPod>],
    bound: &BoundPods,
    placed_by_slurm: impl Fn(&'a WatchedPod) -> Option<&'a str>,
) -> Vec<(&'a WatchedPod, &'a str)> {
    let uid = pod.metadata.uid.as_deref();
    let others = own.iter().map(AsRef::as_ref).filter(|other| other.metadata.uid.as_deref() != uid);
    others
        .filter_map(|other| {
            let other_uid = other.metadata.uid.as_deref()?;
            let node = match other.spec.as_ref()?.node_name.as_deref() {
                Some(node) => node,
                None => placed_by_slurm(other)?,
            };
            // Bound when the view was built (the two watches need not agree on when): counted there.
            (!bound.holds(other_uid)).then_some((other, node))
        })
        .collect()
}

/// `verdict` without the Slurm nodes whose Kubernetes Nodes cannot mount the pod's claimed volumes,
/// or why the pod cannot be placed by them yet.
fn within_volume_reach(verdict: Arc<Verdict>, pod: &WatchedPod, views: &Views) -> Result<Arc<Verdict>, PodPlacement> {
    let Some(volumes) = views.volumes else {
        return match volume_topology::first_claim(pod) {
            Some(field) => Err(PodPlacement::unsupported(format!(
                "{field}: this host does not read PersistentVolumeClaims (--volume-topology=false), so it cannot \
                 tell which Nodes the volume reaches"
            ))),
            None => Ok(verdict),
        };
    };
    let limits = match volume_topology::reach(pod, volumes) {
        VolumeReach::Anywhere => return Ok(verdict),
        VolumeReach::OnlyWhere(limits) => limits,
        VolumeReach::NotReady { field, why } => return Err(PodPlacement::volume_not_ready(format!("{field}: {why}"))),
        VolumeReach::Unsupported { field, why } => return Err(PodPlacement::unsupported(format!("{field}: {why}"))),
    };
    let kube_node_of = views.slurmd.kube_nodes();
    // Only the nodes still eligible: one excluded already keeps its first reason.
    let refused: BTreeMap<String, String> = verdict
        .eligible
        .iter()
        .filter_map(|slurm| {
            let kube = kube_node_of.get(slurm)?;
            let node = views.nodes.get(&ObjectRef::new(kube))?;
            let conflict = limits.iter().find_map(|limit| limit.conflict(&node))?;
            Some((slurm.clone(), format!("Kubernetes Node {kube}: {conflict}")))
        })
        .collect();
    Ok(if refused.is_empty() { verdict } else { Arc::new(excluding(&verdict, refused)) })
}

/// `verdict` with `refused` Slurm nodes excluded too (a node excluded already keeps its first reason).
fn excluding(verdict: &Verdict, refused: BTreeMap<String, String>) -> Verdict {
    let mut joined = verdict.clone();
    for (node, why) in refused {
        joined.eligible.remove(&node);
        joined.excluded.entry(node).or_insert(why);
    }
    joined
}

/// Where the pod may go: the Node-level verdict of its needs, narrowed by its pod-level rules and its
/// neighbours'.
pub fn where_it_may_go(placement: &Placement, pod: &WatchedPod, views: &Views) -> Result<PodPlacement, Unreadable> {
    placement.verdict(pod.needs()).map(|verdict| apply(verdict, pod, views))
}

/// Why the pod may not run on the nodes `job` holds, if it may not: no slurmd pod hosts one of them
/// long after the job started, or the Node's rules or the pod-level rules refuse one (a taint or label
/// that appeared after the job was submitted, a neighbour placed since).
pub fn misplaced(placement: &Placement, pod: &WatchedPod, job: &Job, views: &Views) -> Option<String> {
    let spec = pod.spec.as_ref()?;
    let nodes = expand_hostlist(&job.nodes).unwrap_or_else(|_| vec![job.nodes.clone()]);
    let running_for = job.seconds_running().unwrap_or_default();
    if running_for >= UNHOSTED_PATIENCE.as_secs()
        && let Some(node) = nodes.iter().find(|node| views.slurmd.kube_node_of(node).is_none())
    {
        return Some(format!("{node}: no slurmd pod hosts it, {running_for} s after the job started"));
    }
    nodes.iter().find_map(|node| {
        let why = placement.refusal(spec, node).or_else(|| refusal(pod, node, job.job_id, views))?;
        Some(format!("{node}: {why}"))
    })
}

/// Why the pod's pod-level rules refuse `slurm_node`, where Slurm started its job `job_id`, if they do
/// (checked before binding: a pod placed meanwhile may refuse it now).
pub fn refusal(pod: &WatchedPod, slurm_node: &str, job_id: u32, views: &Views) -> Option<String> {
    let verdict =
        Arc::new(Verdict { excluded: BTreeMap::new(), eligible: std::iter::once(slurm_node.to_owned()).collect() });
    match judged(verdict, pod, views, job_id) {
        PodPlacement::Verdict(verdict) => verdict.excluded.get(slurm_node).cloned(),
        PodPlacement::Waits(_, why) => Some(why),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_node_moves_from_eligible_to_excluded_and_keeps_an_earlier_reason() {
        let verdict = Verdict {
            excluded: BTreeMap::from([("n1".into(), "tainted".into())]),
            eligible: ["n2".to_string(), "n3".to_string()].into_iter().collect(),
        };
        let refused = BTreeMap::from([("n1".into(), "anti-affinity".into()), ("n2".into(), "anti-affinity".into())]);
        let joined = excluding(&verdict, refused);
        assert_eq!(joined.eligible.into_iter().collect::<Vec<_>>(), ["n3"]);
        assert_eq!(joined.excluded["n1"], "tainted");
        assert_eq!(joined.excluded["n2"], "anti-affinity");
    }

    #[test]
    fn the_first_rule_names_its_field() {
        let pod = |spec: serde_json::Value| -> WatchedPod {
            serde_json::from_value(serde_json::json!({"metadata": {"name": "p"}, "spec": spec})).unwrap()
        };
        let any = serde_json::json!([]);
        let cases = [
            (serde_json::json!({"containers": []}), None),
            (serde_json::json!({"affinity": {"podAntiAffinity": {}}}), Some("spec.affinity.podAntiAffinity")),
            (serde_json::json!({"affinity": {"podAffinity": {}}}), Some("spec.affinity.podAffinity")),
            (serde_json::json!({"topologySpreadConstraints": any}), None),
            (
                serde_json::json!({"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "k", "whenUnsatisfiable": "DoNotSchedule"}]}),
                Some("spec.topologySpreadConstraints"),
            ),
        ];
        for (spec, field) in cases {
            assert_eq!(first_rule(&pod(spec.clone())), field, "{spec}");
        }
    }

    #[test]
    fn the_own_pods_counted_besides_the_view_are_those_it_does_not_hold_bound() {
        let pod = |uid: &str, node: Option<&str>| -> Arc<WatchedPod> {
            let spec = serde_json::json!({"nodeName": node, "containers": []});
            Arc::new(
                serde_json::from_value(serde_json::json!({"metadata": {"name": uid, "uid": uid}, "spec": spec}))
                    .unwrap(),
            )
        };
        // The view was built when `old` and `lagging` were bound (this scheduler's watch has not seen
        // `lagging` bound yet).
        let bound =
            BoundPods::new(vec![pod("old", Some("n1")), pod("lagging", Some("n2")), pod("foreign", Some("n3"))]);
        let own = [
            pod("itself", None),
            pod("old", Some("n1")),
            pod("lagging", None),
            pod("bound-since", Some("n2")),
            pod("started", None),
            pod("queued", None),
        ];
        // Slurm started the placeholders of `started` and `lagging`, on kube node n3.
        let placed =
            |other: &WatchedPod| matches!(other.metadata.uid.as_deref(), Some("started" | "lagging")).then_some("n3");
        let unseen: Vec<(&str, &str)> = unseen(&own[0], &own, &bound, placed)
            .into_iter()
            .map(|(other, node)| (other.metadata.uid.as_deref().unwrap(), node))
            .collect();
        assert_eq!(unseen, [("bound-since", "n2"), ("started", "n3")]);
    }
}
