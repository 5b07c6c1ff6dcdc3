use super::*;
use crate::policy::{Cordon, NodeEvent};
use crate::syncer::causes::Cause;

fn node(state: &[&str], reason: &str) -> slurm::Node {
    slurm::Node {
        name: "n1".into(),
        state: state.iter().map(|s| s.to_string()).collect(),
        reason: reason.into(),
        ..Default::default()
    }
}

fn cordon() -> Cause {
    Cause { key: "cordon".into(), event: NodeEvent::Cordoned(Cordon { by: None }) }
}

/// A policy that drains for a cordon with `k8s: cordoned`, and resumes on an uncordon.
fn policy(event: &NodeEvent) -> Result<DrainDecision, PolicyError> {
    let action = match event {
        NodeEvent::Cordoned(_) => NodeAction::Drain("k8s: cordoned".into()),
        NodeEvent::Uncordoned => NodeAction::Resume,
        _ => NodeAction::Keep,
    };
    Ok(DrainDecision { action, annotations: vec![] })
}

fn run(causes: &[Cause], slurm: &slurm::Node, drained_for: Option<&str>, cleared: Option<NodeEvent>) -> SyncStep {
    let input = DecideInput { causes, slurm, view: View::Fresh, drained_for, cleared, nodeset_owned: false };
    decide(&input, policy).unwrap().action
}

#[test]
fn a_cordon_drains_once() {
    let drain = SyncStep::Drain { reason: "k8s: cordoned".into(), cause: "cordon".into(), reapplied: false };
    assert_eq!(run(&[cordon()], &node(&["IDLE"], ""), None, None), drain);
    assert_eq!(run(&[cordon()], &node(&["IDLE", "DRAIN"], "k8s: cordoned"), Some("cordon"), None), SyncStep::Nothing);
}

fn withheld_drain() -> SyncStep {
    SyncStep::Withheld(Withheld::Drain { cause: "cordon".into() })
}

#[test]
fn a_node_someone_else_holds_is_never_written_over() {
    let drain = SyncStep::Drain { reason: "k8s: cordoned".into(), cause: "cordon".into(), reapplied: false };
    let uncordoned = || Some(NodeEvent::Uncordoned);
    #[rustfmt::skip]
    let cases = [
        ("a cordon over an administrator's drain",
         vec![cordon()], node(&["IDLE", "DRAIN"], "admin: bad dimm"), None, None, withheld_drain()),
        ("a cordon over an administrator's drain of a busy node",
         vec![cordon()], node(&["MIXED", "DRAIN"], "admin: bad dimm"), None, None, withheld_drain()),
        ("a cordon over an administrator's down",
         vec![cordon()], node(&["DOWN"], "admin: bad psu"), None, None, withheld_drain()),
        ("a cordon over Slurm's own down",
         vec![cordon()], node(&["DOWN", "NOT_RESPONDING"], "Not responding"), None, None, withheld_drain()),
        ("a cordon over a down node with no reason to overwrite",
         vec![cordon()], node(&["DOWN"], ""), None, None, drain),
        ("a cordon over sunk's own drain of a down node",
         vec![cordon()], node(&["DOWN", "DRAIN"], "k8s: cordoned"), Some("cordon"), None, SyncStep::Nothing),
        ("an uncordon after an administrator replaced sunk's drain",
         vec![], node(&["IDLE", "DRAIN"], "admin: bad dimm"), Some("cordon"), uncordoned(),
         SyncStep::Withheld(Withheld::Resume { cause: "cordon".into() })),
        ("an uncordon of a node an administrator drained before the cordon",
         vec![], node(&["IDLE", "DRAIN"], "admin: bad dimm"), None, None, SyncStep::Nothing),
        ("an administrator's down with no cause at all",
         vec![], node(&["DOWN"], "admin: bad psu"), None, None, SyncStep::Nothing),
        ("an uncordon of sunk's own drain",
         vec![], node(&["IDLE", "DRAIN"], "k8s: cordoned"), Some("cordon"), uncordoned(),
         SyncStep::Resume { cause: Some("cordon".into()) }),
    ];
    for (case, causes, slurm, drained_for, cleared, expected) in cases {
        assert_eq!(run(&causes, &slurm, drained_for, cleared), expected, "{case}");
    }
}

#[test]
fn only_a_drain_or_a_resume_is_decided_again_before_it_is_written() {
    let written = [
        SyncStep::Drain { reason: "k8s: cordoned".into(), cause: "cordon".into(), reapplied: false },
        SyncStep::Resume { cause: None },
    ];
    assert!(written.iter().all(writes));
    assert!(![SyncStep::Nothing, withheld_drain()].iter().any(writes));
}

#[test]
fn a_resume_undoes_only_the_recorded_cause_when_the_policy_agrees() {
    let drained = node(&["IDLE", "DRAIN"], "k8s: cordoned");
    assert_eq!(
        run(&[], &drained, Some("cordon"), Some(NodeEvent::Uncordoned)),
        SyncStep::Resume { cause: Some("cordon".into()) }
    );
    // The policy keeps the drain for a cleared label: nothing happens.
    let label = NodeEvent::LabelChanged(crate::policy::LabelChange { key: "x".into(), before: None, after: None });
    assert_eq!(run(&[], &drained, Some("label/x"), Some(label)), SyncStep::Nothing);
}

#[test]
fn a_drain_resumed_in_slurm_while_its_cause_persists_is_reapplied() {
    let again = SyncStep::Drain { reason: "k8s: cordoned".into(), cause: "cordon".into(), reapplied: true };
    // Right after the resume Slurm keeps the reason; once the slurmd registers again it is gone.
    assert_eq!(run(&[cordon()], &node(&["IDLE"], "k8s: cordoned"), Some("cordon"), None), again);
    assert_eq!(run(&[cordon()], &node(&["IDLE"], ""), Some("cordon"), None), again);
    // Drained before for another cause: this one is a fresh drain.
    let fresh = SyncStep::Drain { reason: "k8s: cordoned".into(), cause: "cordon".into(), reapplied: false };
    assert_eq!(run(&[cordon()], &node(&["IDLE"], ""), Some("label/x"), None), fresh);
}

#[test]
fn the_nodesets_drain_is_left_to_it_and_reasons_are_always_owned() {
    let input = DecideInput {
        causes: &[cordon()],
        slurm: &node(&["IDLE"], ""),
        view: View::Fresh,
        drained_for: None,
        cleared: None,
        nodeset_owned: true,
    };
    assert_eq!(decide(&input, policy).unwrap().action, SyncStep::Nothing);
    let unowned =
        |_: &NodeEvent| Ok(DrainDecision { action: NodeAction::Drain("maintenance".into()), annotations: vec![] });
    let input = DecideInput { nodeset_owned: false, ..input };
    let SyncStep::Drain { reason, .. } = decide(&input, unowned).unwrap().action else { panic!("drains") };
    assert_eq!(reason, "k8s: maintenance");
}

#[test]
fn a_policy_failure_decides_nothing() {
    let input = DecideInput {
        causes: &[cordon()],
        slurm: &node(&["IDLE"], ""),
        view: View::Fresh,
        drained_for: None,
        cleared: None,
        nodeset_owned: false,
    };
    assert!(decide(&input, |_| Err(PolicyError::Timeout)).is_err());
}

#[test]
fn a_drain_policy_never_writes_the_hosts_own_annotations() {
    let writes_everything = |_: &NodeEvent| {
        let annotations = ["sunk.dev/slurm-reason", "sunk.dev/drained-for", "sunk.dev/drain", "sunk.dev/slurmd-conf"]
            .map(|key| KeyValue { key: key.into(), value: "x".into() });
        Ok(DrainDecision { action: NodeAction::Keep, annotations: annotations.into() })
    };
    let input = DecideInput {
        causes: &[cordon()],
        slurm: &node(&["IDLE"], ""),
        view: View::Fresh,
        drained_for: None,
        cleared: None,
        nodeset_owned: false,
    };
    let decided = decide(&input, writes_everything).unwrap();
    let written: Vec<&str> = decided.annotations.iter().map(|kv| kv.key.as_str()).collect();
    assert_eq!(written, ["sunk.dev/slurm-reason"]);
    assert_eq!(decided.refused_annotations, ["sunk.dev/drained-for", "sunk.dev/drain", "sunk.dev/slurmd-conf"]);
}

#[test]
fn on_a_stale_view_writes_go_ahead_and_a_withheld_resume_waits() {
    let on_stale = |causes: &[Cause], slurm: &slurm::Node, drained_for: Option<&str>, cleared: Option<NodeEvent>| {
        let input = DecideInput { causes, slurm, view: View::Stale, drained_for, cleared, nodeset_owned: false };
        decide(&input, policy).unwrap().action
    };
    let drain = SyncStep::Drain { reason: "k8s: cordoned".into(), cause: "cordon".into(), reapplied: false };
    assert_eq!(on_stale(&[cordon()], &node(&["IDLE"], ""), None, None), drain);
    let admin = node(&["IDLE", "DRAIN"], "bad dimm");
    assert_eq!(on_stale(&[cordon()], &admin, None, None), withheld_drain());
    assert_eq!(on_stale(&[], &admin, Some("cordon"), Some(NodeEvent::Uncordoned)), SyncStep::Nothing, "as a resume");
    let drained = node(&["IDLE", "DRAIN"], "k8s: cordoned");
    let resume = SyncStep::Resume { cause: Some("cordon".into()) };
    assert_eq!(on_stale(&[], &drained, Some("cordon"), Some(NodeEvent::Uncordoned)), resume);
    assert_eq!(on_stale(&[], &drained, None, None), SyncStep::Resume { cause: None });
}
