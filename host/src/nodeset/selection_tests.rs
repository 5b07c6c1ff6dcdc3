use k8s_openapi::api::core::v1::{Affinity, NodeAffinity, NodeSelectorRequirement, NodeSelectorTerm, NodeSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::*;

fn node(name: &str, labels: &[(&str, &str)], taints: &[(&str, &str, &str)]) -> Node {
    let labels = labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    let taints = taints
        .iter()
        .map(|(key, value, effect)| Taint {
            key: key.to_string(),
            value: Some(value.to_string()).filter(|v| !v.is_empty()),
            effect: effect.to_string(),
            ..Default::default()
        })
        .collect();
    Node {
        metadata: ObjectMeta { name: Some(name.into()), labels: Some(labels), ..Default::default() },
        spec: Some(NodeSpec { taints: Some(taints), ..Default::default() }),
        ..Default::default()
    }
}

fn requirement(key: &str, operator: &str, values: &[&str]) -> NodeSelectorRequirement {
    NodeSelectorRequirement {
        key: key.into(),
        operator: operator.into(),
        values: Some(values.iter().map(|v| v.to_string()).collect()),
    }
}

fn affinity(expressions: Vec<NodeSelectorRequirement>, fields: Vec<NodeSelectorRequirement>) -> NodeSelector {
    NodeSelector {
        node_selector_terms: vec![NodeSelectorTerm {
            match_expressions: Some(expressions),
            match_fields: Some(fields),
        }],
    }
}

fn selecting(labels: &[(&str, &str)]) -> Selection {
    let labels = labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    Selection::new(&labels, None, &[], None)
}

fn with_affinity(selector: NodeSelector) -> Selection {
    Selection::new(&BTreeMap::new(), Some(&selector), &[], None)
}

#[test]
fn node_selector_needs_every_label() {
    let selection = selecting(&[("pool", "gpu"), ("zone", "a")]);
    assert!(selection.admits(&node("n", &[("pool", "gpu"), ("zone", "a"), ("x", "y")], &[])));
    assert!(!selection.admits(&node("n", &[("pool", "gpu")], &[])));
    assert!(!selection.admits(&node("n", &[("pool", "cpu"), ("zone", "a")], &[])));
    assert!(selecting(&[]).admits(&node("n", &[], &[])));
}

#[test]
fn affinity_operators_behave_as_in_kubernetes() {
    let labelled = node("n", &[("gpus", "8"), ("pool", "gpu")], &[]);
    let bare = node("n", &[], &[]);
    let cases = [
        (requirement("pool", "In", &["gpu", "x"]), true, false),
        (requirement("pool", "NotIn", &["cpu"]), true, true),
        (requirement("pool", "NotIn", &["gpu"]), false, true),
        (requirement("pool", "Exists", &[]), true, false),
        (requirement("pool", "DoesNotExist", &[]), false, true),
        (requirement("gpus", "Gt", &["4"]), true, false),
        (requirement("gpus", "Gt", &["8"]), false, false),
        (requirement("gpus", "Lt", &["9"]), true, false),
        (requirement("pool", "Gt", &["1"]), false, false),
        (requirement("gpus", "Gt", &["1", "2"]), false, false),
        (requirement("gpus", "Gt", &["many"]), false, false),
        (requirement("pool", "Sometimes", &["gpu"]), false, false),
    ];
    for (requirement, on_labelled, on_bare) in cases {
        let selection = with_affinity(affinity(vec![requirement.clone()], vec![]));
        assert_eq!(selection.admits(&labelled), on_labelled, "{requirement:?} on labelled");
        assert_eq!(selection.admits(&bare), on_bare, "{requirement:?} on bare");
    }
}

#[test]
fn match_fields_compare_the_node_name() {
    let selection = with_affinity(affinity(vec![], vec![requirement("metadata.name", "In", &["a", "b"])]));
    assert!(selection.admits(&node("a", &[], &[])));
    assert!(!selection.admits(&node("c", &[], &[])));
    let not_in = with_affinity(affinity(vec![], vec![requirement("metadata.name", "NotIn", &["a"])]));
    assert!(!not_in.admits(&node("a", &[], &[])));
    assert!(not_in.admits(&node("c", &[], &[])));
    let other_field = with_affinity(affinity(vec![], vec![requirement("metadata.uid", "In", &["a"])]));
    assert!(!other_field.admits(&node("a", &[], &[])));
}

#[test]
fn terms_are_ored_and_an_empty_term_matches_nothing() {
    let mut selector = affinity(vec![requirement("pool", "In", &["gpu"])], vec![]);
    selector.node_selector_terms.push(NodeSelectorTerm {
        match_expressions: Some(vec![requirement("pool", "In", &["cpu"])]),
        match_fields: None,
    });
    let selection = with_affinity(selector);
    assert!(selection.admits(&node("n", &[("pool", "cpu")], &[])));
    assert!(!selection.admits(&node("n", &[("pool", "mem")], &[])));
    let empty = with_affinity(NodeSelector { node_selector_terms: vec![NodeSelectorTerm::default()] });
    assert!(!empty.admits(&node("n", &[], &[])));
    assert!(!with_affinity(NodeSelector::default()).admits(&node("n", &[], &[])));
}

#[test]
fn untolerated_noschedule_and_noexecute_taints_keep_the_pod_away() {
    let selection = selecting(&[]);
    assert!(!selection.admits(&node("n", &[], &[("dedicated", "infer", "NoSchedule")])));
    assert!(!selection.admits(&node("n", &[], &[("dedicated", "infer", "NoExecute")])));
    assert!(selection.admits(&node("n", &[], &[("dedicated", "infer", "PreferNoSchedule")])));
}

#[test]
fn tolerations_match_key_value_and_effect() {
    let tolerate = |key: Option<&str>, operator: &str, value: Option<&str>, effect: Option<&str>| {
        let toleration = Toleration {
            key: key.map(Into::into),
            operator: Some(operator.into()),
            value: value.map(Into::into),
            effect: effect.map(Into::into),
            ..Default::default()
        };
        Selection::new(&BTreeMap::new(), None, &[toleration], None)
    };
    let tainted = node("n", &[], &[("dedicated", "infer", "NoSchedule")]);
    assert!(tolerate(Some("dedicated"), "Equal", Some("infer"), Some("NoSchedule")).admits(&tainted));
    assert!(tolerate(Some("dedicated"), "Equal", Some("infer"), None).admits(&tainted));
    assert!(tolerate(Some("dedicated"), "Exists", None, None).admits(&tainted));
    assert!(tolerate(None, "Exists", None, None).admits(&tainted));
    assert!(!tolerate(Some("dedicated"), "Equal", Some("train"), None).admits(&tainted));
    assert!(!tolerate(Some("dedicated"), "Equal", Some("infer"), Some("NoExecute")).admits(&tainted));
    assert!(!tolerate(Some("other"), "Exists", None, None).admits(&tainted));
}

#[test]
fn cordoned_and_not_ready_nodes_keep_their_slurmd_like_a_daemonset() {
    let selection = selecting(&[]);
    let cordoned = node("n", &[], &[("node.kubernetes.io/unschedulable", "", "NoSchedule")]);
    let not_ready = node("n", &[], &[("node.kubernetes.io/not-ready", "", "NoExecute")]);
    assert!(selection.admits(&cordoned));
    assert!(selection.admits(&not_ready));
    assert!(!selection.admits(&node("n", &[], &[("node.kubernetes.io/network-unavailable", "", "NoSchedule")])));
    // NotReady also brings `not-ready:NoSchedule`: no new pod, but the running one stays.
    let not_ready_no_schedule = node("n", &[], &[("node.kubernetes.io/not-ready", "", "NoSchedule")]);
    assert!(!selection.admits(&not_ready_no_schedule));
    assert!(selection.keeps(&not_ready_no_schedule));
    assert!(!selection.keeps(&node("n", &[], &[("dedicated", "infer", "NoExecute")])));
}

#[test]
fn the_templates_own_terms_are_anded_in() {
    let template = PodSpec {
        node_selector: Some([("zone".to_string(), "a".to_string())].into()),
        affinity: Some(Affinity {
            node_affinity: Some(NodeAffinity {
                required_during_scheduling_ignored_during_execution: Some(affinity(
                    vec![requirement("gpu", "Exists", &[])],
                    vec![],
                )),
                ..Default::default()
            }),
            ..Default::default()
        }),
        tolerations: Some(vec![Toleration { operator: Some("Exists".into()), ..Default::default() }]),
        host_network: Some(true),
        ..Default::default()
    };
    let labels = [("pool".to_string(), "gpu".to_string())].into();
    let selection = Selection::new(&labels, None, &[], Some(&template));
    let fits = node("n", &[("pool", "gpu"), ("zone", "a"), ("gpu", "h100")], &[("any", "x", "NoExecute")]);
    assert!(selection.admits(&fits));
    assert!(!selection.admits(&node("n", &[("pool", "gpu"), ("zone", "a")], &[])));
    assert!(!selection.admits(&node("n", &[("zone", "a"), ("gpu", "h100")], &[])));
    let keys: Vec<_> = selection.tolerations().iter().filter_map(|t| t.key.as_deref()).collect();
    assert!(keys.contains(&"node.kubernetes.io/network-unavailable"));
}
