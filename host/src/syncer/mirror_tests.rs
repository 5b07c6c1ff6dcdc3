use k8s_openapi::api::core::v1::{NodeCondition, NodeStatus, PodCondition, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::*;

fn slurm_node(state: &[&str], reason: &str) -> slurm::Node {
    slurm::Node {
        name: "n1".into(),
        state: state.iter().map(|s| s.to_string()).collect(),
        reason: reason.into(),
        ..Default::default()
    }
}

fn pod_with(conditions: &[(&str, &str)]) -> Pod {
    Pod {
        status: Some(PodStatus {
            conditions: Some(
                conditions
                    .iter()
                    .map(|(t, m)| PodCondition {
                        type_: t.to_string(),
                        status: "True".into(),
                        message: Some(m.to_string()),
                        ..Default::default()
                    })
                    .collect(),
            ),
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[test]
fn conditions_name_the_base_state_and_the_flags_that_matter() {
    let wanted = pod_conditions(&slurm_node(&["IDLE", "DRAIN", "DYNAMIC_NORM", "NOT_RESPONDING"], "bad dimm"));
    let types: Vec<&str> = wanted.keys().map(String::as_str).collect();
    assert_eq!(types, ["SlurmNodeDrain", "SlurmNodeIdle", "SlurmNodeNotResponding"]);
    assert_eq!(wanted["SlurmNodeDrain"], "bad dimm");
}

#[test]
fn the_pod_patch_adds_new_conditions_and_deletes_stale_ones_only() {
    let wanted = pod_conditions(&slurm_node(&["IDLE", "DRAIN"], "x"));
    let pod = pod_with(&[("SlurmNodeAllocated", ""), ("SlurmNodeDrain", "x"), ("Ready", "")]);
    let patch = pod_status_patch(&pod, &wanted, "t").unwrap();
    let conditions = patch["status"]["conditions"].as_array().unwrap();
    assert_eq!(conditions.len(), 2, "{patch}");
    assert_eq!(conditions[0]["type"], "SlurmNodeIdle");
    assert_eq!(conditions[1], serde_json::json!({"type": "SlurmNodeAllocated", "$patch": "delete"}));
    let settled = pod_with(&[("SlurmNodeIdle", "x"), ("SlurmNodeDrain", "x")]);
    assert_eq!(pod_status_patch(&settled, &wanted, "t"), None);
}

#[test]
fn annotations_mirror_the_drain_under_both_names_and_change_only_what_differs() {
    let drained = pod_annotations(&slurm_node(&["IDLE", "DRAIN"], "bad dimm"));
    assert_eq!(drained[DRAIN_ANNOTATION].as_deref(), Some("bad dimm"));
    assert_eq!(drained[LEGACY_DRAIN_ANNOTATION].as_deref(), Some("bad dimm"));
    assert_eq!(drained[STATE_ANNOTATION].as_deref(), Some("IDLE+DRAIN"));
    let idle = pod_annotations(&slurm_node(&["IDLE"], "bad dimm"));
    assert_eq!(idle[DRAIN_ANNOTATION], None);

    let wanted: BTreeMap<String, Option<String>> = idle.into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
    let mut pod = Pod { metadata: ObjectMeta::default(), ..Default::default() };
    pod.metadata.annotations = Some(
        [(STATE_ANNOTATION.to_string(), "IDLE".to_string()), (DRAIN_ANNOTATION.to_string(), "old".to_string())].into(),
    );
    let patch = annotation_patch(&pod, &wanted).unwrap();
    assert_eq!(patch, serde_json::json!({"metadata": {"annotations": {DRAIN_ANNOTATION: null}}}));
}

#[test]
fn node_conditions_tell_drain_and_not_responding() {
    let kube_node = Node::default();
    let patch = node_status_patch(&kube_node, &slurm_node(&["IDLE", "DRAIN"], "bad dimm"), "t").unwrap();
    let conditions = patch["status"]["conditions"].as_array().unwrap();
    assert_eq!(conditions[0]["type"], "SlurmDrain");
    assert_eq!(conditions[0]["status"], "True");
    assert_eq!(conditions[0]["message"], "bad dimm");
    assert_eq!(conditions[1]["status"], "False");
    let shown = Node {
        status: Some(NodeStatus {
            conditions: Some(vec![
                NodeCondition {
                    type_: "SlurmDrain".into(),
                    status: "True".into(),
                    message: Some("bad dimm".into()),
                    ..Default::default()
                },
                NodeCondition {
                    type_: "SlurmNotResponding".into(),
                    status: "False".into(),
                    message: Some(String::new()),
                    ..Default::default()
                },
            ]),
            ..Default::default()
        }),
        ..Default::default()
    };
    assert_eq!(node_status_patch(&shown, &slurm_node(&["IDLE", "DRAIN"], "bad dimm"), "t"), None);
}
