use k8s_openapi::api::core::v1::{NodeSpec, PodSpec, Taint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;

use super::*;
use crate::nodeset::resource::{NodeSetSpec, PodTemplate};

fn nodeset(name: &str, created: i64, pool: &str) -> Arc<NodeSet> {
    Arc::new(NodeSet {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("slurm".into()),
            creation_timestamp: Some(Time(Timestamp::from_second(created).unwrap())),
            ..Default::default()
        },
        spec: NodeSetSpec {
            node_selector: [("pool".to_string(), pool.to_string())].into(),
            template: PodTemplate(serde_json::json!({"spec": {"containers": [{"name": "slurmd"}]}})),
            ..Default::default()
        },
        status: None,
    })
}

fn node(name: &str, pool: &str, tainted: bool) -> Arc<Node> {
    let taints =
        tainted.then(|| vec![Taint { key: "dedicated".into(), effect: "NoSchedule".into(), ..Default::default() }]);
    Arc::new(Node {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some([("pool".to_string(), pool.to_string())].into()),
            ..Default::default()
        },
        spec: Some(NodeSpec { taints, ..Default::default() }),
        status: None,
    })
}

fn slurmd_pod(nodeset: &str, node: &str) -> Arc<Pod> {
    Arc::new(Pod {
        metadata: ObjectMeta {
            name: Some(format!("{nodeset}-{node}")),
            namespace: Some("slurm".into()),
            labels: Some([(NODESET_LABEL.to_string(), nodeset.to_string())].into()),
            ..Default::default()
        },
        spec: Some(PodSpec { node_name: Some(node.into()), ..Default::default() }),
        status: None,
    })
}

fn assign_for(me: &Arc<NodeSet>, nodesets: &[Arc<NodeSet>], nodes: &[Arc<Node>], pods: &[Arc<Pod>]) -> Assignment {
    let settings = settings(&me.name_any(), &me.spec).unwrap();
    assign(me, &settings, nodesets, nodes, pods)
}

fn names(targets: &[Target]) -> Vec<&str> {
    targets.iter().map(|t| t.kube_node.as_str()).collect()
}

#[test]
fn selects_matching_untainted_nodes() {
    let me = nodeset("cpu", 1, "cpu");
    let nodes = [node("b", "cpu", false), node("a", "cpu", false), node("c", "gpu", false), node("d", "cpu", true)];
    let assignment = assign_for(&me, std::slice::from_ref(&me), &nodes, &[]);
    assert_eq!(names(&assignment.targets), ["a", "b"]);
    assert_eq!(assignment.targets[0].conf, "Features=cpu NodeAddr=$(POD_IP)");
    assert_eq!(assignment.departures["c"], Departure::Unmatched);
    assert_eq!(assignment.departures["d"], Departure::Unmatched);
    assert!(assignment.conflicts.is_empty());
}

#[test]
fn a_node_claimed_twice_goes_to_one_nodeset_and_the_other_says_so() {
    let old = nodeset("old", 1, "cpu");
    let young = nodeset("young", 2, "cpu");
    let nodes = [node("a", "cpu", false)];
    let all = [old.clone(), young.clone()];
    assert_eq!(names(&assign_for(&old, &all, &nodes, &[]).targets), ["a"]);
    let lost = assign_for(&young, &all, &nodes, &[]);
    assert!(lost.targets.is_empty());
    assert_eq!(lost.conflicts, [("a".to_string(), key_of(&old))]);
    // The younger NodeSet's pod already runs there: it keeps the Node, and the older one waits.
    let pods = [slurmd_pod("young", "a")];
    assert_eq!(names(&assign_for(&young, &all, &nodes, &pods).targets), ["a"]);
    let waiting = assign_for(&old, &all, &nodes, &pods);
    assert_eq!(waiting.departures["a"], Departure::ClaimedBy(key_of(&young)));
    assert_eq!(waiting.occupied["a"], key_of(&young));
}

#[test]
fn invalid_or_deleted_rivals_claim_nothing_and_a_deleted_nodeset_has_no_targets() {
    let me = nodeset("young", 2, "cpu");
    let mut broken = (*nodeset("old", 1, "cpu")).clone();
    broken.spec.drain_timeout = Some("soon".into());
    let nodes = [node("a", "cpu", false)];
    let all = [me.clone(), Arc::new(broken)];
    assert_eq!(names(&assign_for(&me, &all, &nodes, &[]).targets), ["a"]);
    let mut deleting = (*me).clone();
    deleting.metadata.deletion_timestamp = Some(Time(Timestamp::from_second(5).unwrap()));
    let deleting = Arc::new(deleting);
    assert!(assign_for(&deleting, std::slice::from_ref(&deleting), &nodes, &[]).targets.is_empty());
}

#[test]
fn a_noschedule_taint_keeps_a_running_pod_but_gets_no_new_one() {
    // NotReady Nodes are tainted `not-ready:NoSchedule`: the running slurmd stays, like a DaemonSet's.
    let me = nodeset("cpu", 1, "cpu");
    let nodes = [node("a", "cpu", true), node("b", "cpu", true)];
    let assignment = assign_for(&me, std::slice::from_ref(&me), &nodes, &[slurmd_pod("cpu", "a")]);
    assert_eq!(names(&assignment.targets), ["a"]);
    assert_eq!(assignment.departures["b"], Departure::Unmatched);
}
