use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use super::*;
use crate::nodeset::observed::DrainMark;
use crate::nodeset::settings::{MaxUnavailable, Strategy};
use crate::slurm::{Node, NodeSnapshot};

const REVISION: &str = "new";

fn key(name: &str) -> NodeSetKey {
    NodeSetKey { namespace: "slurm".into(), name: name.into() }
}

fn t0() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000)
}

/// The world one planning pass sees, with owned parts.
struct World {
    owner: NodeSetKey,
    deleting: bool,
    strategy: Strategy,
    drain_timeout: Duration,
    force: bool,
    targets: Vec<Target>,
    departures: BTreeMap<String, Departure>,
    occupied: BTreeMap<String, NodeSetKey>,
    pods: Vec<ObservedPod>,
    slurm: Option<NodeSnapshot>,
    now: SystemTime,
}

impl World {
    /// Targets `nodes`; Slurm readable and empty.
    fn new(nodes: &[&str]) -> Self {
        World {
            owner: key("cpu"),
            deleting: false,
            strategy: Strategy::RollingUpdate { max_unavailable: MaxUnavailable::Count(1), partition: 0 },
            drain_timeout: Duration::from_secs(600),
            force: false,
            targets: nodes.iter().map(|node| target(node)).collect(),
            departures: BTreeMap::new(),
            occupied: BTreeMap::new(),
            pods: Vec::new(),
            slurm: Some(NodeSnapshot::new([], t0())),
            now: t0(),
        }
    }

    fn with_pods(mut self, pods: impl IntoIterator<Item = ObservedPod>) -> Self {
        self.pods.extend(pods);
        self
    }

    fn with_slurm(mut self, nodes: impl IntoIterator<Item = Node>) -> Self {
        self.slurm = Some(NodeSnapshot::new(nodes, t0()));
        self
    }

    fn plan(&self) -> Plan {
        plan(&PlanInput {
            owner: &self.owner,
            owner_uid: "nodeset-uid",
            revision: REVISION,
            deleting: self.deleting,
            strategy: self.strategy,
            drain_timeout: self.drain_timeout,
            force: self.force,
            targets: &self.targets,
            departures: &self.departures,
            occupied: &self.occupied,
            pods: &self.pods,
            slurm: self.slurm.as_ref(),
            now: self.now,
        })
    }

    fn owner_comment(&self, pod: &ObservedPod) -> String {
        SlurmNodeOwner {
            namespace: "slurm".into(),
            pod: pod.name.clone(),
            node: pod.kube_node.clone().unwrap_or_default(),
            nodeset: self.owner.name.clone(),
            uid: pod.uid.clone(),
            nodeset_uid: "nodeset-uid".into(),
        }
        .to_comment()
    }

    /// The Slurm node of `pod`, owned by it.
    fn registered(&self, pod: &ObservedPod, state: &[&str]) -> Node {
        let mut node = slurm_node(&pod.slurm_node, state);
        node.comment = self.owner_comment(pod);
        node
    }
}

fn target(node: &str) -> Target {
    Target { kube_node: node.into(), slurm_node: node.into(), conf: format!("conf-{node}") }
}

/// A ready, up-to-date pod whose slurmd has run for an hour.
fn pod(node: &str) -> ObservedPod {
    ObservedPod {
        name: format!("cpu-{node}"),
        uid: format!("uid-{node}"),
        kube_node: Some(node.into()),
        slurm_node: node.into(),
        revision: REVISION.into(),
        conf: format!("conf-{node}"),
        ready: true,
        terminating: false,
        finished: None,
        created: Some(t0() - Duration::from_secs(3600)),
        ip: Some(format!("ip-{node}")),
        slurmd_started: Some(t0() - Duration::from_secs(3600)),
        drain: None,
    }
}

fn outdated(node: &str) -> ObservedPod {
    ObservedPod { revision: "old".into(), ..pod(node) }
}

fn marked(mut pod: ObservedPod, ago: Duration, reason: Option<&str>) -> ObservedPod {
    pod.drain = Some(DrainMark { since: t0() - ago, reason: reason.map(Into::into) });
    pod
}

fn slurm_node(name: &str, state: &[&str]) -> Node {
    let mut state: Vec<String> = state.iter().map(|s| s.to_string()).collect();
    state.push("DYNAMIC_NORM".into());
    Node { name: name.into(), state, address: format!("ip-{name}"), ..Default::default() }
}

fn drain_reason(mut node: Node, reason: &str) -> Node {
    node.reason = reason.into();
    node
}

/// The steps other than SetOwner, in a compact form.
fn steps(plan: &Plan) -> Vec<String> {
    plan.steps
        .iter()
        .filter_map(|step| match step {
            Step::CreatePod { kube_node, .. } => Some(format!("create {kube_node}")),
            Step::Drain { slurm_node, in_slurm, .. } => {
                Some(format!("{} {slurm_node}", if *in_slurm { "drain" } else { "mark" }))
            }
            Step::Undrain { slurm_node, in_slurm, .. } => {
                Some(format!("{} {slurm_node}", if *in_slurm { "undrain" } else { "unmark" }))
            }
            Step::DeletePod { pod, forced: true, .. } => Some(format!("force-delete {pod}")),
            Step::DeletePod { pod, .. } => Some(format!("delete {pod}")),
            Step::DeleteSlurmNode { slurm_node } => Some(format!("forget {slurm_node}")),
            Step::ReleaseCompleting { slurm_node } => Some(format!("release {slurm_node}")),
            Step::SetOwner { .. } => None,
        })
        .collect()
}

#[test]
fn creates_a_pod_on_every_target_node() {
    let world = World::new(&["a", "b"]);
    let plan = world.plan();
    assert_eq!(steps(&plan), ["create a", "create b"]);
    assert!(!plan.settled());
}

#[test]
fn a_settled_nodeset_does_nothing() {
    let world = World::new(&["a"]).with_pods([pod("a")]);
    let world = World { slurm: Some(NodeSnapshot::new([world.registered(&pod("a"), &["IDLE"])], t0())), ..world };
    let plan = world.plan();
    assert!(plan.settled(), "{plan:?}");
    assert_eq!(plan.requeue_after, None);
}

#[test]
fn records_the_owner_in_the_slurm_comment() {
    let world = World::new(&["a"]).with_pods([pod("a")]).with_slurm([slurm_node("a", &["IDLE"])]);
    let plan = world.plan();
    let expected = world.owner_comment(&pod("a"));
    assert_eq!(plan.steps, [Step::SetOwner { slurm_node: "a".into(), comment: expected }]);
}

#[test]
fn creation_waits_for_slurm_and_for_another_nodesets_pod() {
    let mut world = World::new(&["a", "b"]);
    world.slurm = None;
    assert!(steps(&world.plan()).is_empty());
    let mut world = World::new(&["a", "b"]);
    world.occupied.insert("a".into(), key("gpu"));
    let plan = world.plan();
    assert_eq!(steps(&plan), ["create b"]);
    assert!(plan.waiting.iter().any(|w| w.contains("NodeSet slurm/gpu")), "{:?}", plan.waiting);
}

#[test]
fn an_unmatched_node_is_drained_and_its_pod_kept_while_a_job_runs() {
    let mut world = World::new(&[]).with_pods([pod("a")]);
    world.departures.insert("a".into(), Departure::Unmatched);
    let world = World { slurm: Some(NodeSnapshot::new([world.registered(&pod("a"), &["ALLOCATED"])], t0())), ..world };
    let plan = world.plan();
    assert_eq!(steps(&plan), ["drain a"]);
    assert!(matches!(&plan.steps[0], Step::Drain { cause: Cause::NodeUnmatched, .. }));
    // Drained but the job still runs: wait.
    let world = World { pods: vec![marked(pod("a"), Duration::from_secs(60), Some("k8s: x"))], ..world };
    let world = World {
        slurm: Some(NodeSnapshot::new(
            [drain_reason(world.registered(&pod("a"), &["ALLOCATED", "DRAIN"]), "k8s: x")],
            t0(),
        )),
        ..world
    };
    let plan = world.plan();
    assert!(steps(&plan).is_empty(), "{plan:?}");
    assert!(plan.requeue_after.is_some());
    // The job ended: the pod goes.
    let world = World {
        slurm: Some(NodeSnapshot::new([drain_reason(world.registered(&pod("a"), &["IDLE", "DRAIN"]), "k8s: x")], t0())),
        ..world
    };
    assert_eq!(steps(&world.plan()), ["delete cpu-a"]);
}

#[test]
fn completing_and_mixed_nodes_are_busy() {
    for busy in [&["IDLE", "DRAIN", "COMPLETING"][..], &["MIXED", "DRAIN"]] {
        let mut world = World::new(&[]).with_pods([marked(pod("a"), Duration::from_secs(5), None)]);
        world.departures.insert("a".into(), Departure::Unmatched);
        let world = World { slurm: Some(NodeSnapshot::new([world.registered(&pod("a"), busy)], t0())), ..world };
        assert!(steps(&world.plan()).is_empty(), "{busy:?}");
    }
}

#[test]
fn nothing_is_deleted_while_slurm_cannot_be_read() {
    let mut world = World::new(&[]).with_pods([marked(pod("a"), Duration::from_secs(7200), None)]);
    world.slurm = None;
    world.force = true;
    world.deleting = true;
    let plan = world.plan();
    assert!(plan.steps.is_empty(), "{plan:?}");
    assert!(!plan.settled());
}

#[test]
fn absent_means_no_job_only_once_slurmd_had_time_to_register() {
    let mut world = World::new(&[]);
    world.departures.insert("a".into(), Departure::Unmatched);
    let not_running = ObservedPod { slurmd_started: None, ready: false, ..pod("a") };
    assert_eq!(steps(&world.clone_with_pods([not_running])), ["delete cpu-a"]);
    let long_running = pod("a");
    assert_eq!(steps(&world.clone_with_pods([long_running])), ["delete cpu-a"]);
    let just_started = ObservedPod { slurmd_started: Some(t0() - Duration::from_secs(5)), ..pod("a") };
    let world = World { pods: vec![just_started], ..world };
    let plan = world.plan();
    assert!(steps(&plan).is_empty());
    assert_eq!(plan.requeue_after, Some(Duration::from_secs(25)));
}

impl World {
    fn clone_with_pods(&self, pods: impl IntoIterator<Item = ObservedPod>) -> Plan {
        let world = World {
            owner: self.owner.clone(),
            targets: self.targets.clone(),
            departures: self.departures.clone(),
            occupied: self.occupied.clone(),
            pods: pods.into_iter().collect(),
            slurm: self.slurm.clone(),
            ..World::new(&[])
        };
        world.plan()
    }
}

#[test]
fn a_drain_past_its_timeout_is_reported_and_forced_only_when_asked() {
    let mut world = World::new(&[]).with_pods([marked(pod("a"), Duration::from_secs(601), Some("k8s: x"))]);
    world.departures.insert("a".into(), Departure::Unmatched);
    let busy = drain_reason(world.registered(&pod("a"), &["ALLOCATED", "DRAIN"]), "k8s: x");
    let world = World { slurm: Some(NodeSnapshot::new([busy], t0())), ..world };
    let plan = world.plan();
    assert!(steps(&plan).is_empty());
    assert_eq!(plan.blocked.len(), 1);
    assert_eq!(plan.blocked[0].slurm_node, "a");
    assert_eq!(plan.blocked[0].since, t0() - Duration::from_secs(601));
    let forced = World { force: true, ..world };
    assert_eq!(steps(&forced.plan()), ["force-delete cpu-a"]);
}

#[test]
fn an_administrators_drain_is_never_overwritten_or_undone() {
    let mut world = World::new(&[]).with_pods([pod("a")]);
    world.departures.insert("a".into(), Departure::Unmatched);
    let admin = drain_reason(world.registered(&pod("a"), &["ALLOCATED", "DRAIN"]), "bad dimm");
    let world = World { slurm: Some(NodeSnapshot::new([admin.clone()], t0())), ..world };
    assert_eq!(steps(&world.plan()), ["mark a"]);
    // The Node matches again: the pod stays and only the mark goes.
    let world = World {
        targets: vec![target("a")],
        departures: BTreeMap::new(),
        pods: vec![marked(pod("a"), Duration::from_secs(10), None)],
        ..world
    };
    assert_eq!(steps(&world.plan()), ["unmark a"]);
    // Our own drain is undone only while its reason is still ours.
    let world = World { pods: vec![marked(pod("a"), Duration::from_secs(10), Some("k8s: ours"))], ..world };
    assert_eq!(steps(&world.plan()), ["unmark a"]);
    let ours = drain_reason(admin, "k8s: ours");
    let world = World { slurm: Some(NodeSnapshot::new([ours], t0())), ..world };
    assert_eq!(steps(&world.plan()), ["undrain a"]);
    // While Slurm cannot be read the mark stays: it is the only record of whose drain it is.
    let world = World { slurm: None, ..world };
    let plan = world.plan();
    assert!(plan.steps.is_empty() && !plan.settled(), "{plan:?}");
}

#[test]
fn a_finished_pod_is_deleted_without_a_drain() {
    let finished = Some("Failed: OutOfcpu".to_owned());
    let world = World::new(&["a"]).with_pods([ObservedPod { finished, ..pod("a") }]);
    let world = World { slurm: None, ..world };
    assert_eq!(steps(&world.plan()), ["delete cpu-a"]);
}

#[test]
fn a_pod_refused_at_once_is_replaced_only_after_a_backoff() {
    let refused = ObservedPod { finished: Some("Failed: OutOfcpu".into()), created: Some(t0()), ..pod("a") };
    let world = World::new(&["a"]).with_pods([refused]);
    let plan = world.plan();
    assert!(steps(&plan).is_empty(), "{plan:?}");
    assert!(plan.waiting.iter().any(|w| w.contains("finished (Failed: OutOfcpu)")), "{:?}", plan.waiting);
    assert_eq!(plan.requeue_after, Some(FINISHED_POD_BACKOFF));
}

#[test]
fn a_second_pod_on_a_node_goes_only_if_its_slurmd_never_ran() {
    let newer = ObservedPod { name: "cpu-a-2".into(), uid: "u2".into(), ..pod("a") };
    let stale = ObservedPod { name: "cpu-a-1".into(), uid: "u1".into(), revision: "old".into(), ..pod("a") };
    let world = World::new(&["a"]).with_pods([stale.clone(), newer.clone()]);
    let plan = world.plan();
    assert!(steps(&plan).is_empty(), "{plan:?}");
    assert!(plan.waiting.iter().any(|w| w.contains("cpu-a-2 and cpu-a-1 both run slurmd")), "{:?}", plan.waiting);
    let never_ran = ObservedPod { slurmd_started: None, ready: false, ..stale };
    let world = World::new(&["a"]).with_pods([never_ran, newer]);
    assert_eq!(steps(&world.plan()), ["delete cpu-a-1"]);
}

#[test]
fn the_old_record_goes_before_a_replacement_starts() {
    let world = World::new(&["a"]);
    let old = {
        let mut node = slurm_node("a", &["IDLE"]);
        node.comment = world.owner_comment(&outdated("a"));
        node
    };
    let world = world.with_slurm([old.clone()]);
    assert_eq!(steps(&world.plan()), ["forget a"]);
    let busy = World::new(&["a"]).with_slurm([Node { state: vec!["ALLOCATED".into(), "DYNAMIC_NORM".into()], ..old }]);
    let plan = busy.plan();
    assert!(steps(&plan).is_empty());
    assert!(plan.waiting.iter().any(|w| w.contains("job still holds it")));
}

/// A slurmd pod deleted under a running job leaves its node COMPLETING, which only its (gone) slurmd
/// can end: unless the record is marked down, the Node has no slurmd until slurmctld's SlurmdTimeout.
#[test]
fn a_record_left_completing_by_a_gone_slurmd_is_marked_down_and_only_that() {
    let world = World::new(&["a"]);
    let comment = world.owner_comment(&pod("a"));
    let record = |state: &[&str]| Node {
        name: "a".into(),
        state: state.iter().map(|flag| flag.to_string()).collect(),
        comment: comment.clone(),
        ..Default::default()
    };
    let cases: [(&[&str], &str); 7] = [
        (&["IDLE", "DRAIN", "COMPLETING", "NOT_RESPONDING", "DYNAMIC_NORM"], "release a"),
        (&["IDLE", "COMPLETING", "NOT_RESPONDING", "DYNAMIC_NORM"], "release a"),
        // Drained (by the NodeSet or the Syncer as the pod went): slurmctld has not noticed yet that
        // slurmd is gone (it pings every SlurmdTimeout/3), but no job can start there.
        (&["IDLE", "DRAIN", "COMPLETING", "DYNAMIC_NORM"], "release a"),
        // Neither: its slurmd may still answer (a pod deleted without a grace period) and take a job.
        (&["IDLE", "COMPLETING", "DYNAMIC_NORM"], ""),
        // A job still runs there: never.
        (&["MIXED", "COMPLETING", "NOT_RESPONDING", "DYNAMIC_NORM"], ""),
        (&["ALLOCATED", "NOT_RESPONDING", "DYNAMIC_NORM"], ""),
        // A static node is not ours to mark.
        (&["IDLE", "COMPLETING", "NOT_RESPONDING"], ""),
    ];
    for (state, expected) in cases {
        let plan = World::new(&["a"]).with_slurm([record(state)]).plan();
        assert_eq!(steps(&plan).join(","), expected, "{state:?}: {plan:?}");
    }
}

#[test]
fn records_of_other_nodesets_and_static_nodes_are_left_alone() {
    let mut world = World::new(&["a", "b"]);
    world.occupied.insert("a".into(), key("gpu"));
    let theirs = slurm_node("a", &["IDLE"]);
    let mut foreign = slurm_node("z", &["IDLE"]);
    foreign.comment = SlurmNodeOwner {
        namespace: "slurm".into(),
        pod: "gpu-z".into(),
        node: "z".into(),
        nodeset: "gpu".into(),
        uid: "u".into(),
        nodeset_uid: "g".into(),
    }
    .to_comment();
    let static_b = Node { name: "b".into(), state: vec!["IDLE".into()], ..Default::default() };
    let world = world.with_slurm([theirs, foreign, static_b]);
    let plan = world.plan();
    assert!(steps(&plan).is_empty(), "{plan:?}");
    assert!(plan.waiting.iter().any(|w| w.contains("not a dynamic node")));
}

#[test]
fn deleting_the_nodeset_drains_everything_and_settles_only_when_slurm_is_clean() {
    let mut world = World::new(&[]).with_pods([pod("a")]);
    world.deleting = true;
    let world = World { slurm: Some(NodeSnapshot::new([world.registered(&pod("a"), &["IDLE"])], t0())), ..world };
    let plan = world.plan();
    assert_eq!(steps(&plan), ["drain a"]);
    assert!(matches!(&plan.steps[0], Step::Drain { cause: Cause::NodeSetDeleted, .. }));
    // Pod gone, record left: it goes, then the NodeSet is settled.
    let record = world.registered(&pod("a"), &["IDLE", "DRAIN"]);
    let world = World { pods: vec![], slurm: Some(NodeSnapshot::new([record], t0())), ..world };
    assert_eq!(steps(&world.plan()), ["forget a"]);
    let world = World { slurm: Some(NodeSnapshot::new([], t0())), ..world };
    assert!(world.plan().settled());
    let world = World { slurm: None, ..world };
    assert!(!world.plan().settled());
}

/// Three Nodes, all outdated and registered; `busy` ones run a job.
fn rollout_world(busy: &[&str]) -> World {
    let world = World::new(&["a", "b", "c"]).with_pods([outdated("a"), outdated("b"), outdated("c")]);
    let nodes: Vec<Node> = ["a", "b", "c"]
        .iter()
        .map(|n| world.registered(&outdated(n), if busy.contains(n) { &["ALLOCATED"] } else { &["IDLE"] }))
        .collect();
    world.with_slurm(nodes)
}

#[test]
fn a_rolling_update_takes_one_node_at_a_time_idle_first() {
    let world = rollout_world(&["c"]);
    let plan = world.plan();
    assert_eq!(steps(&plan), ["drain b"]);
    assert!(matches!(&plan.steps[0], Step::Drain { cause: Cause::Outdated, .. }));
    let two = World {
        strategy: Strategy::RollingUpdate { max_unavailable: MaxUnavailable::Count(2), partition: 0 },
        ..rollout_world(&["c"])
    };
    assert_eq!(steps(&two.plan()), ["drain b", "drain a"]);
}

#[test]
fn a_replacement_in_progress_holds_the_next_one() {
    let mut world = rollout_world(&[]);
    world.pods[2] = marked(outdated("c"), Duration::from_secs(5), Some("k8s: r"));
    let drained = drain_reason(world.registered(&outdated("c"), &["IDLE", "DRAIN"]), "k8s: r");
    let mut nodes: Vec<Node> = world.slurm.as_ref().unwrap().nodes().filter(|n| n.name != "c").cloned().collect();
    nodes.push(drained);
    let world = world.with_slurm(nodes);
    assert_eq!(steps(&world.plan()), ["delete cpu-c"]);
}

#[test]
fn a_new_pod_that_is_not_ready_counts_as_unavailable() {
    let mut world = rollout_world(&[]);
    world.pods[2] = ObservedPod { ready: false, ..pod("c") };
    let plan = world.plan();
    assert!(steps(&plan).is_empty(), "{plan:?}");
    assert!(plan.waiting.iter().any(|w| w.contains("wait for their turn")));
    // Ready, but its Slurm node has not registered yet: still unavailable.
    world.pods[2] = pod("c");
    let nodes: Vec<Node> = world.slurm.as_ref().unwrap().nodes().filter(|n| n.name != "c").cloned().collect();
    let world = world.with_slurm(nodes);
    assert!(steps(&world.plan()).is_empty());
}

#[test]
fn the_partition_limits_the_update_to_the_canaries() {
    let world = World {
        strategy: Strategy::RollingUpdate { max_unavailable: MaxUnavailable::Count(3), partition: 2 },
        ..rollout_world(&[])
    };
    assert_eq!(steps(&world.plan()), ["drain c"]);
}

#[test]
fn on_delete_leaves_outdated_pods_alone() {
    let world = World { strategy: Strategy::OnDelete, ..rollout_world(&[]) };
    let plan = world.plan();
    assert!(plan.steps.is_empty());
    assert!(plan.settled());
}

#[test]
fn a_changed_node_conf_is_an_update_too() {
    let world = World::new(&["a"]).with_pods([ObservedPod { conf: "CPUs=1".into(), ..pod("a") }]);
    let world = World { slurm: Some(NodeSnapshot::new([world.registered(&pod("a"), &["IDLE"])], t0())), ..world };
    assert_eq!(steps(&world.plan()), ["drain a"]);
}

#[test]
fn slurm_unreadable_stops_the_update() {
    let world = World { slurm: None, ..rollout_world(&[]) };
    let plan = world.plan();
    assert!(plan.steps.is_empty());
}

#[test]
fn steps_come_in_a_safe_order() {
    let mut world = World::new(&["a", "b"]).with_pods([pod("x"), outdated("a")]);
    // b has no pod yet, so it counts as unavailable: leave room for a.
    world.strategy = Strategy::RollingUpdate { max_unavailable: MaxUnavailable::Count(2), partition: 0 };
    world.departures.insert("x".into(), Departure::Unmatched);
    let mut leftover = slurm_node("b", &["IDLE"]);
    leftover.comment = world.owner_comment(&pod("b"));
    let world = World {
        slurm: Some(NodeSnapshot::new(
            [world.registered(&pod("x"), &["IDLE", "DRAIN"]), world.registered(&outdated("a"), &["IDLE"]), leftover],
            t0(),
        )),
        ..world
    };
    assert_eq!(steps(&world.plan()), ["forget b", "delete cpu-x", "drain a"]);
}

#[test]
fn a_record_registered_from_another_address_is_not_taken_for_the_pods() {
    let stale = Node { address: "ip-of-a-pod-shutting-down".into(), ..slurm_node("a", &["IDLE"]) };
    let world = World::new(&["a"]).with_pods([pod("a")]).with_slurm([stale]);
    let plan = world.plan();
    assert!(plan.steps.is_empty(), "no owner recorded on a record the pod did not register: {plan:?}");
}

#[test]
fn a_record_left_by_a_pod_gone_before_its_owner_was_recorded_is_removed() {
    // The Node stopped matching right after its slurmd registered: no comment, not a target.
    let left = Node { hostname: "cpu-gone".into(), ..slurm_node("gone", &["IDLE"]) };
    let world = World::new(&["a"]).with_pods([pod("a")]).with_slurm([world_record("a"), left]);
    assert_eq!(steps(&world.plan()), ["forget gone"]);
    let foreign = Node { hostname: "other-gone".into(), ..slurm_node("gone", &["IDLE"]) };
    let world = World::new(&["a"]).with_pods([pod("a")]).with_slurm([world_record("a"), foreign]);
    assert!(steps(&world.plan()).is_empty());
}

fn world_record(node: &str) -> Node {
    World::new(&[node]).registered(&pod(node), &["IDLE"])
}
