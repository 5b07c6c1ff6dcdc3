use super::*;
use crate::nodeset::plan::{Cause, Step};
use crate::slurm::Node;

fn target(node: &str) -> Target {
    Target { kube_node: node.into(), slurm_node: node.into(), conf: "c".into() }
}

fn pod(node: &str, revision: &str, ready: bool) -> ObservedPod {
    ObservedPod {
        name: format!("cpu-{node}"),
        uid: node.into(),
        kube_node: Some(node.into()),
        slurm_node: node.into(),
        revision: revision.into(),
        conf: "c".into(),
        ready,
        terminating: false,
        finished: None,
        created: None,
        ip: None,
        slurmd_started: None,
        drain: None,
    }
}

fn node(name: &str, state: &[&str]) -> Node {
    Node { name: name.into(), state: state.iter().map(|s| s.to_string()).collect(), ..Default::default() }
}

fn now() -> Timestamp {
    Timestamp::from_second(1_700_000_000).unwrap()
}

fn compose_with(plan: &Plan, slurm: Result<&NodeSnapshot, &Unreadable>, previous: &NodeSetStatus) -> NodeSetStatus {
    let targets = [target("a"), target("b"), target("c")];
    let pods = [pod("a", "r2", true), pod("b", "r1", true), pod("c", "r1", false), pod("x", "r1", true)];
    compose(&StatusInput {
        previous,
        generation: Some(4),
        revision: "r2",
        targets: &targets,
        pods: &pods,
        slurm,
        plan,
        conflicts: &[("d".into(), NodeSetKey { namespace: "slurm".into(), name: "gpu".into() })],
        blocking_jobs: &BTreeMap::new(),
        now: now(),
    })
}

fn condition<'a>(status: &'a NodeSetStatus, type_: &str) -> &'a Condition {
    status.conditions.iter().find(|c| c.type_ == type_).unwrap()
}

#[test]
fn counts_pods_and_slurm_states() {
    let slurm = NodeSnapshot::new(
        [node("a", &["IDLE"]), node("b", &["MIXED", "DRAIN"]), node("c", &["DOWN"]), node("x", &["ALLOCATED"])],
        SystemTime::now(),
    );
    let status = compose_with(&Plan::default(), Ok(&slurm), &NodeSetStatus::default());
    assert_eq!((status.desired, status.current, status.ready, status.updated), (3, 3, 2, 1));
    assert_eq!((status.idle, status.allocated, status.mixed, status.drained, status.down), (1, 1, 1, 1, 1));
    assert_eq!(status.observed_generation, Some(4));
    assert_eq!(status.update_revision.as_deref(), Some("r2"));
    assert_eq!(status.current_revision.as_deref(), Some("r1"));
    let available = condition(&status, "Available");
    assert_eq!(
        (available.status.as_str(), available.message.as_str()),
        ("False", "2/3 selected Nodes have a ready slurmd registered in Slurm")
    );
    let conflict = condition(&status, "NodeConflict");
    assert_eq!((conflict.status.as_str(), conflict.message.as_str()), ("True", "Node d goes to NodeSet slurm/gpu"));
    assert_eq!(condition(&status, "Progressing").status, "False");
}

#[test]
fn keeps_slurm_counters_while_slurm_cannot_be_read() {
    let previous = NodeSetStatus { idle: 7, down: 1, ..Default::default() };
    let status = compose_with(&Plan::default(), Err(&Unreadable::NeverListed), &previous);
    assert_eq!((status.idle, status.down), (7, 1));
    assert_eq!(condition(&status, "Available").status, "Unknown");
}

#[test]
fn keeps_transition_times_while_a_condition_holds() {
    let plan =
        Plan { steps: vec![Step::CreatePod { kube_node: "a".into(), slurm_node: "a".into() }], ..Default::default() };
    let slurm = NodeSnapshot::new([], SystemTime::now());
    let first = compose_with(&plan, Ok(&slurm), &NodeSetStatus::default());
    let progressing = condition(&first, "Progressing");
    assert_eq!(progressing.status, "True");
    assert_eq!(progressing.message, "create the slurmd pod of Node a");
    let mut aged = first.clone();
    for c in &mut aged.conditions {
        c.last_transition_time = Time(Timestamp::from_second(1).unwrap());
    }
    let second = compose_with(&plan, Ok(&slurm), &aged);
    assert_eq!(condition(&second, "Progressing").last_transition_time.0, Timestamp::from_second(1).unwrap());
    let settled = compose_with(&Plan::default(), Ok(&slurm), &aged);
    assert_eq!(condition(&settled, "Progressing").last_transition_time.0, now());
}

#[test]
fn a_blocked_drain_names_its_jobs() {
    let blocked = Blocked {
        pod: "cpu-a".into(),
        slurm_node: "a".into(),
        since: SystemTime::from(now()) - Duration::from_secs(3720),
        cause: Cause::Outdated,
    };
    let jobs = BTreeMap::from([("a".to_string(), vec![12, 13])]);
    let text = describe_blocked(&blocked, &jobs, SystemTime::from(now()));
    assert_eq!(text, "Slurm node a (pod cpu-a, rolling update): jobs 12, 13 still run; drained for 1h2m");
    let plan = Plan { blocked: vec![blocked], ..Default::default() };
    let slurm = NodeSnapshot::new([], SystemTime::now());
    let status = compose_with(&plan, Ok(&slurm), &NodeSetStatus::default());
    assert_eq!(condition(&status, "UpdateBlocked").status, "True");
}

#[test]
fn an_invalid_spec_says_why_in_progressing() {
    let previous = NodeSetStatus { ready: 2, ..Default::default() };
    let errors = SpecErrors(vec![("spec.drainTimeout".into(), "\"soon\" is not a duration".into())]);
    let status = invalid(&previous, Some(3), &errors, now());
    assert_eq!(status.ready, 2);
    let progressing = condition(&status, "Progressing");
    assert_eq!(progressing.reason, "InvalidSpec");
    assert_eq!(progressing.message, "spec.drainTimeout: \"soon\" is not a duration");
}
