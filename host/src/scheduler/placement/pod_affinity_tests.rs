use std::sync::Arc;

use k8s_openapi::api::core::v1::Node;
use serde_json::{Value, json};

use super::*;
use crate::scheduler::placement::shared_neighbourhood::BoundPods;

/// A Node from "name key=value ...", labelled with its hostname as every kubelet labels it.
fn node(spec: &str) -> Node {
    let mut words = spec.split_whitespace();
    let name = words.next().unwrap();
    let mut labels = json!({"kubernetes.io/hostname": name});
    let mut taints = vec![];
    for word in words {
        match word.strip_prefix("taint:") {
            Some(key) => taints.push(json!({"key": key, "effect": "NoSchedule"})),
            None => {
                let (key, value) = word.split_once('=').unwrap();
                labels[key] = json!(value);
            }
        }
    }
    serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}, "spec": {"taints": taints}})).unwrap()
}

fn pod(json: Value) -> WatchedPod {
    serde_json::from_value(json).unwrap()
}

/// A pod bound to `node`; `extra` is merged into its JSON (`status`, `spec.affinity`, ...).
fn bound(name: &str, namespace: &str, node: &str, labels: Value, extra: Value) -> WatchedPod {
    let mut json = json!({
        "metadata": {"name": name, "namespace": namespace, "uid": name, "labels": labels},
        "spec": {"nodeName": node, "containers": []},
        "status": {"phase": "Running"}
    });
    merge(&mut json, extra);
    pod(json)
}

/// The pod being judged, named "p"; `spec` is merged into its spec.
fn pending(namespace: &str, labels: Value, spec: Value) -> WatchedPod {
    let mut json = json!({
        "metadata": {"name": "p", "namespace": namespace, "uid": "p", "labels": labels},
        "spec": {"containers": []}
    });
    merge(&mut json, json!({"spec": spec}));
    pod(json)
}

fn in_spec(spec: Value) -> Value {
    json!({"spec": spec})
}

fn merge(into: &mut Value, from: Value) {
    match (into, from) {
        (Value::Object(into), Value::Object(from)) => {
            for (key, value) in from {
                merge(into.entry(key).or_insert(Value::Null), value);
            }
        }
        (into, from) => *into = from,
    }
}

fn web() -> Value {
    json!({"app": "web"})
}

fn term(topology_key: &str, selector: Value) -> Value {
    json!({"topologyKey": topology_key, "labelSelector": selector})
}

fn app(name: &str) -> Value {
    json!({"matchLabels": {"app": name}})
}

fn anti(terms: Value) -> Value {
    json!({"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": terms}}})
}

fn affinity(terms: Value) -> Value {
    json!({"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": terms}}})
}

fn spread(topology_key: &str, max_skew: i32, extra: Value) -> Value {
    let mut constraint = json!({
        "maxSkew": max_skew, "topologyKey": topology_key, "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": app("web")
    });
    merge(&mut constraint, extra);
    json!({"topologySpreadConstraints": [constraint]})
}

const HOSTNAME: &str = "kubernetes.io/hostname";
const ZONE: &str = "topology.kubernetes.io/zone";

fn namespace_labels(namespace: &str) -> Option<BTreeMap<String, String>> {
    let labels = match namespace {
        "default" => json!({}),
        "team-a" => json!({"team": "a"}),
        "team-b" => json!({"team": "b"}),
        _ => return None,
    };
    Some(serde_json::from_value(labels).unwrap())
}

fn judged(nodes: &[&str], others: &[WatchedPod], pod: &WatchedPod) -> PodRules {
    let nodes: Vec<Node> = nodes.iter().map(|spec| node(spec)).collect();
    let neighbourhood = Neighbourhood::new(&nodes, others);
    judge(pod, &neighbourhood, namespace_labels)
}

fn excluded(rules: &PodRules) -> Vec<&str> {
    match rules {
        PodRules::Honoured { excluded, .. } => excluded.keys().map(String::as_str).collect(),
        PodRules::Unsupported { field, why } => panic!("unsupported {field}: {why}"),
    }
}

struct Case {
    name: &'static str,
    nodes: &'static [&'static str],
    others: Vec<WatchedPod>,
    pod: WatchedPod,
    excluded: &'static [&'static str],
}

fn check(cases: Vec<Case>) {
    let mut failed = Vec::new();
    for case in cases {
        let rules = judged(case.nodes, &case.others, &case.pod);
        if excluded(&rules) != case.excluded {
            failed.push(format!("{}: excluded {:?}, expected {:?}", case.name, excluded(&rules), case.excluded));
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

const TWO_HOSTS: &[&str] = &["kube-node-1", "kube-node-2"];
const ZONES: &[&str] =
    &["n1 topology.kubernetes.io/zone=a", "n2 topology.kubernetes.io/zone=a", "n3 topology.kubernetes.io/zone=b"];
const ZONES_AND_BARE: &[&str] =
    &["n1 topology.kubernetes.io/zone=a", "n2 topology.kubernetes.io/zone=a", "n3 topology.kubernetes.io/zone=b", "n4"];
const THREE: &[&str] = &["n1", "n2", "n3"];

#[test]
fn required_pod_anti_affinity() {
    let replica = |name: &str, node: &str| {
        bound(name, "default", node, web(), in_spec(anti(json!([term(HOSTNAME, app("web"))]))))
    };
    let web_on = |name: &str, namespace: &str, node: &str| bound(name, namespace, node, web(), json!({}));
    check(vec![
        Case {
            name: "a Deployment's second replica avoids the first's Node",
            nodes: TWO_HOSTS,
            others: vec![replica("web-1", "kube-node-1")],
            pod: pending("default", web(), anti(json!([term(HOSTNAME, app("web"))]))),
            excluded: &["kube-node-1"],
        },
        Case {
            name: "the first replica goes anywhere",
            nodes: TWO_HOSTS,
            others: vec![],
            pod: pending("default", web(), anti(json!([term(HOSTNAME, app("web"))]))),
            excluded: &[],
        },
        Case {
            name: "a zone term refuses the whole zone; a Node without the key is in no zone",
            nodes: ZONES_AND_BARE,
            others: vec![web_on("web-1", "default", "n1")],
            pod: pending("default", web(), anti(json!([term(ZONE, app("web"))]))),
            excluded: &["n1", "n2"],
        },
        Case {
            name: "the terms are ANDed: each refuses its own domains",
            nodes: ZONES,
            others: vec![
                web_on("web-1", "default", "n1"),
                bound("db-1", "default", "n3", json!({"app": "db"}), json!({})),
            ],
            pod: pending("default", web(), anti(json!([term(HOSTNAME, app("web")), term(ZONE, app("db"))]))),
            excluded: &["n1", "n3"],
        },
        Case {
            name: "a finished pod does not count",
            nodes: THREE,
            others: vec![
                bound("done", "default", "n1", web(), json!({"status": {"phase": "Succeeded"}})),
                bound("failed", "default", "n2", web(), json!({"status": {"phase": "Failed"}})),
            ],
            pod: pending("default", web(), anti(json!([term(HOSTNAME, app("web"))]))),
            excluded: &[],
        },
        Case {
            name: "a pod being deleted still counts",
            nodes: THREE,
            others: vec![bound(
                "leaving",
                "default",
                "n1",
                web(),
                json!({"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"}}),
            )],
            pod: pending("default", web(), anti(json!([term(HOSTNAME, app("web"))]))),
            excluded: &["n1"],
        },
        Case {
            name: "a pod on a Node not listed has no domain",
            nodes: THREE,
            others: vec![web_on("web-1", "default", "elsewhere")],
            pod: pending("default", web(), anti(json!([term(HOSTNAME, app("web"))]))),
            excluded: &[],
        },
        Case {
            name: "matchLabelKeys narrows the term to the pod's own values",
            nodes: THREE,
            others: vec![
                bound("old", "default", "n1", json!({"app": "web", "hash": "old"}), json!({})),
                bound("new", "default", "n2", json!({"app": "web", "hash": "new"}), json!({})),
            ],
            pod: pending(
                "default",
                json!({"app": "web", "hash": "new"}),
                anti(json!([{"topologyKey": HOSTNAME, "labelSelector": app("web"), "matchLabelKeys": ["hash"]}])),
            ),
            excluded: &["n2"],
        },
        Case {
            name: "mismatchLabelKeys refuses only pods with other values",
            nodes: THREE,
            others: vec![
                bound("mine", "default", "n1", json!({"app": "web", "tenant": "x"}), json!({})),
                bound("theirs", "default", "n2", json!({"app": "web", "tenant": "y"}), json!({})),
            ],
            pod: pending(
                "default",
                json!({"app": "web", "tenant": "x"}),
                anti(json!([{"topologyKey": HOSTNAME, "labelSelector": app("web"), "mismatchLabelKeys": ["tenant"]}])),
            ),
            excluded: &["n2"],
        },
        Case {
            name: "matchExpressions: NotIn and DoesNotExist",
            nodes: THREE,
            others: vec![
                bound("canary", "default", "n1", json!({"app": "web", "track": "canary"}), json!({})),
                bound("stable", "default", "n2", json!({"app": "web", "track": "stable"}), json!({})),
                web_on("plain", "default", "n3"),
            ],
            pod: pending(
                "default",
                web(),
                anti(json!([
                    term(
                        HOSTNAME,
                        json!({"matchExpressions": [
                            {"key": "app", "operator": "Exists"},
                            {"key": "track", "operator": "NotIn", "values": ["canary"]}
                        ]})
                    ),
                    term(HOSTNAME, json!({"matchExpressions": [{"key": "track", "operator": "DoesNotExist"}]}))
                ])),
            ),
            excluded: &["n2", "n3"],
        },
        Case {
            name: "a null labelSelector matches no pod",
            nodes: THREE,
            others: vec![bound("any", "default", "n1", json!({"x": "y"}), json!({}))],
            pod: pending("default", web(), anti(json!([{"topologyKey": HOSTNAME}]))),
            excluded: &[],
        },
        Case {
            name: "an empty labelSelector matches every pod",
            nodes: THREE,
            others: vec![bound("any", "default", "n2", json!({"x": "y"}), json!({}))],
            pod: pending("default", web(), anti(json!([term(HOSTNAME, json!({}))]))),
            excluded: &["n2"],
        },
    ]);
}

#[test]
fn namespaces_of_a_term() {
    let others = || {
        vec![
            bound("web-a", "team-a", "n1", web(), json!({})),
            bound("web-b", "team-b", "n2", web(), json!({})),
            bound("web-default", "default", "n3", web(), json!({})),
        ]
    };
    let anti_in = |namespaces: Value| {
        let mut term = term(HOSTNAME, app("web"));
        merge(&mut term, namespaces);
        anti(json!([term]))
    };
    check(vec![
        Case {
            name: "no namespaces and no selector: the pod's own",
            nodes: THREE,
            others: others(),
            pod: pending("team-a", json!({}), anti_in(json!({}))),
            excluded: &["n1"],
        },
        Case {
            name: "namespaces listed: only those",
            nodes: THREE,
            others: others(),
            pod: pending("team-a", json!({}), anti_in(json!({"namespaces": ["team-b", "default"]}))),
            excluded: &["n2", "n3"],
        },
        Case {
            name: "namespaceSelector: by the namespace's labels, with those listed",
            nodes: THREE,
            others: others(),
            pod: pending(
                "default",
                json!({}),
                anti_in(json!({"namespaces": ["default"], "namespaceSelector": {"matchLabels": {"team": "b"}}})),
            ),
            excluded: &["n2", "n3"],
        },
        Case {
            name: "an empty namespaceSelector: every namespace",
            nodes: THREE,
            others: others(),
            pod: pending("default", json!({}), anti_in(json!({"namespaceSelector": {}}))),
            excluded: &["n1", "n2", "n3"],
        },
        Case {
            name: "a namespace whose labels are not known is not picked",
            nodes: THREE,
            others: vec![bound("web-x", "unknown", "n1", web(), json!({}))],
            pod: pending(
                "default",
                json!({}),
                anti_in(
                    json!({"namespaceSelector": {"matchExpressions": [{"key": "team", "operator": "DoesNotExist"}]}}),
                ),
            ),
            excluded: &[],
        },
    ]);
}

#[test]
fn bound_pods_anti_affinity_refuses_the_pod() {
    let guard = |namespace: &str, node: &str, term: Value| {
        bound("guard", namespace, node, json!({"app": "guard"}), in_spec(anti(json!([term]))))
    };
    let with_namespace_selector = |selector: Value| {
        let mut term = term(HOSTNAME, app("web"));
        merge(&mut term, json!({"namespaceSelector": selector}));
        term
    };
    check(vec![
        Case {
            name: "its hostname term refuses its Node",
            nodes: THREE,
            others: vec![guard("default", "n2", term(HOSTNAME, app("web")))],
            pod: pending("default", web(), json!({})),
            excluded: &["n2"],
        },
        Case {
            name: "its zone term refuses its zone",
            nodes: ZONES_AND_BARE,
            others: vec![guard("default", "n3", term(ZONE, app("web")))],
            pod: pending("default", web(), json!({})),
            excluded: &["n3"],
        },
        Case {
            name: "its term reads its own namespace by default",
            nodes: THREE,
            others: vec![guard("team-a", "n2", term(HOSTNAME, app("web")))],
            pod: pending("default", web(), json!({})),
            excluded: &[],
        },
        Case {
            name: "its namespaceSelector is matched against the pod's namespace's labels",
            nodes: THREE,
            others: vec![guard("team-b", "n1", with_namespace_selector(json!({"matchLabels": {"team": "a"}})))],
            pod: pending("team-a", web(), json!({})),
            excluded: &["n1"],
        },
        Case {
            name: "an unknown namespace has no labels to it",
            nodes: THREE,
            others: vec![guard(
                "team-b",
                "n1",
                with_namespace_selector(json!({"matchExpressions": [{"key": "team", "operator": "DoesNotExist"}]})),
            )],
            pod: pending("unknown", web(), json!({})),
            excluded: &["n1"],
        },
        Case {
            name: "a pod its selector does not match is let be",
            nodes: THREE,
            others: vec![guard("default", "n2", term(HOSTNAME, app("web")))],
            pod: pending("default", json!({"app": "db"}), json!({})),
            excluded: &[],
        },
    ]);
}

#[test]
fn required_pod_affinity() {
    let cache_on = |node: &str| bound("cache", "default", node, json!({"app": "cache"}), json!({}));
    check(vec![
        Case {
            name: "only the domains holding a match; a Node without the key is refused",
            nodes: ZONES_AND_BARE,
            others: vec![cache_on("n3")],
            pod: pending("default", web(), affinity(json!([term(ZONE, app("cache"))]))),
            excluded: &["n1", "n2", "n4"],
        },
        Case {
            name: "the first of a group that matches its own terms goes anywhere with the key",
            nodes: ZONES_AND_BARE,
            others: vec![],
            pod: pending("default", web(), affinity(json!([term(ZONE, app("web"))]))),
            excluded: &["n4"],
        },
        Case {
            name: "no match anywhere and not matching its own terms: nowhere",
            nodes: ZONES,
            others: vec![],
            pod: pending("default", web(), affinity(json!([term(ZONE, app("cache"))]))),
            excluded: &["n1", "n2", "n3"],
        },
        Case {
            name: "a pod counts only when it matches every term",
            nodes: ZONES,
            others: vec![
                cache_on("n1"),
                bound("db", "default", "n2", json!({"tier": "db"}), json!({})),
                bound("both", "default", "n3", json!({"app": "cache", "tier": "db"}), json!({})),
            ],
            pod: pending(
                "default",
                web(),
                affinity(json!([term(ZONE, app("cache")), term(HOSTNAME, json!({"matchLabels": {"tier": "db"}}))])),
            ),
            excluded: &["n1", "n2"],
        },
        Case {
            name: "a match in another namespace does not count",
            nodes: ZONES,
            others: vec![bound("cache", "team-a", "n3", json!({"app": "cache"}), json!({}))],
            pod: pending("default", web(), affinity(json!([term(ZONE, app("cache"))]))),
            excluded: &["n1", "n2", "n3"],
        },
        Case {
            name: "a group's later pods join the domain of the first",
            nodes: ZONES,
            others: vec![bound("web-1", "default", "n1", web(), json!({}))],
            pod: pending("default", web(), affinity(json!([term(ZONE, app("web"))]))),
            excluded: &["n3"],
        },
    ]);
}

#[test]
fn topology_spread_with_do_not_schedule() {
    let web_on = |name: &str, node: &str| bound(name, "default", node, web(), json!({}));
    check(vec![
        Case {
            name: "maxSkew 1 over two Nodes: the one ahead is refused",
            nodes: TWO_HOSTS,
            others: vec![web_on("web-1", "kube-node-1")],
            pod: pending("default", web(), spread(HOSTNAME, 1, json!({}))),
            excluded: &["kube-node-1"],
        },
        Case {
            name: "maxSkew 1 over two Nodes in balance: both",
            nodes: TWO_HOSTS,
            others: vec![web_on("web-1", "kube-node-1"), web_on("web-2", "kube-node-2")],
            pod: pending("default", web(), spread(HOSTNAME, 1, json!({}))),
            excluded: &[],
        },
        Case {
            name: "maxSkew 1 over three Nodes: only the empty one",
            nodes: THREE,
            others: vec![web_on("web-1", "n1"), web_on("web-2", "n2")],
            pod: pending("default", web(), spread(HOSTNAME, 1, json!({}))),
            excluded: &["n1", "n2"],
        },
        Case {
            name: "maxSkew 2 over three Nodes lets one Node be two ahead",
            nodes: THREE,
            others: vec![web_on("web-1", "n1"), web_on("web-2", "n1"), web_on("web-3", "n2")],
            pod: pending("default", web(), spread(HOSTNAME, 2, json!({}))),
            excluded: &["n1"],
        },
        Case {
            name: "zones: the zone ahead is refused; a Node without the key is refused",
            nodes: ZONES_AND_BARE,
            others: vec![web_on("web-1", "n2")],
            pod: pending("default", web(), spread(ZONE, 1, json!({}))),
            excluded: &["n1", "n2", "n4"],
        },
        Case {
            name: "fewer domains than minDomains: the fewest counts as 0",
            nodes: TWO_HOSTS,
            others: vec![web_on("web-1", "kube-node-1"), web_on("web-2", "kube-node-2")],
            pod: pending("default", web(), spread(HOSTNAME, 1, json!({"minDomains": 3}))),
            excluded: &["kube-node-1", "kube-node-2"],
        },
        Case {
            name: "only the pod's namespace, and not pods being deleted, are counted",
            nodes: TWO_HOSTS,
            others: vec![
                bound("other-team", "team-a", "kube-node-1", web(), json!({})),
                bound(
                    "leaving",
                    "default",
                    "kube-node-1",
                    web(),
                    json!({"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"}}),
                ),
            ],
            pod: pending("default", web(), spread(HOSTNAME, 1, json!({}))),
            excluded: &[],
        },
        Case {
            name: "a pod the constraint does not count is not counted on its Node",
            nodes: TWO_HOSTS,
            others: vec![web_on("web-1", "kube-node-1")],
            pod: pending("default", json!({"app": "db"}), spread(HOSTNAME, 1, json!({}))),
            excluded: &[],
        },
        Case {
            name: "nodeAffinityPolicy Honor (the default): Nodes the pod may not use are no domain",
            nodes: &["n1 pool=gpu", "n2 pool=gpu", "n3 pool=cpu"],
            others: vec![web_on("web-1", "n1"), web_on("web-2", "n2")],
            pod: pending("default", web(), {
                let mut spec = spread(HOSTNAME, 1, json!({}));
                merge(&mut spec, json!({"nodeSelector": {"pool": "gpu"}}));
                spec
            }),
            excluded: &[],
        },
        Case {
            name: "nodeAffinityPolicy Ignore: every Node is a domain",
            nodes: &["n1 pool=gpu", "n2 pool=gpu", "n3 pool=cpu"],
            others: vec![web_on("web-1", "n1"), web_on("web-2", "n2")],
            pod: pending("default", web(), {
                let mut spec = spread(HOSTNAME, 1, json!({"nodeAffinityPolicy": "Ignore"}));
                merge(&mut spec, json!({"nodeSelector": {"pool": "gpu"}}));
                spec
            }),
            excluded: &["n1", "n2"],
        },
        Case {
            name: "nodeTaintsPolicy Ignore (the default): a tainted Node is a domain",
            nodes: &["n1", "n2", "n3 taint:dedicated"],
            others: vec![web_on("web-1", "n1"), web_on("web-2", "n2")],
            pod: pending("default", web(), spread(HOSTNAME, 1, json!({}))),
            excluded: &["n1", "n2"],
        },
        Case {
            name: "nodeTaintsPolicy Honor: an untolerated Node is no domain",
            nodes: &["n1", "n2", "n3 taint:dedicated"],
            others: vec![web_on("web-1", "n1"), web_on("web-2", "n2")],
            pod: pending("default", web(), spread(HOSTNAME, 1, json!({"nodeTaintsPolicy": "Honor"}))),
            excluded: &[],
        },
        Case {
            name: "matchLabelKeys counts only pods with the pod's own values",
            nodes: TWO_HOSTS,
            others: vec![bound("old", "default", "kube-node-1", json!({"app": "web", "hash": "old"}), json!({}))],
            pod: pending(
                "default",
                json!({"app": "web", "hash": "new"}),
                spread(HOSTNAME, 1, json!({"matchLabelKeys": ["hash"]})),
            ),
            excluded: &[],
        },
    ]);
}

#[test]
fn refusals_name_the_rule_the_domain_and_the_pod() {
    let nodes = ["kube-node-1", "kube-node-2"];
    let replica = bound("web-1", "default", "kube-node-1", web(), in_spec(anti(json!([term(HOSTNAME, app("web"))]))));
    let first = |rules: &PodRules| match rules {
        PodRules::Honoured { excluded, .. } => excluded.values().next().cloned().unwrap(),
        PodRules::Unsupported { field, .. } => panic!("{field}"),
    };
    let domain = Domain { key: HOSTNAME.into(), value: "kube-node-1".into() };

    let own_rule = first(&judged(
        &nodes,
        std::slice::from_ref(&replica),
        &pending("default", web(), anti(json!([term(HOSTNAME, app("web"))]))),
    ));
    assert_eq!(own_rule, Refusal::AntiAffinity { term: 0, domain: domain.clone(), pod: "default/web-1".into() });
    assert_eq!(
        own_rule.to_string(),
        "didn't match pod anti-affinity rules: default/web-1 runs in kubernetes.io/hostname=kube-node-1 (required term 0)"
    );

    let its_rule = first(&judged(&nodes, &[replica], &pending("default", web(), json!({}))));
    assert_eq!(its_rule, Refusal::ExistingAntiAffinity { domain: domain.clone(), pod: "default/web-1".into() });

    let web_1 = bound("web-1", "default", "kube-node-1", web(), json!({}));
    let skewed = first(&judged(&nodes, &[web_1], &pending("default", web(), spread(HOSTNAME, 1, json!({})))));
    assert_eq!(skewed, Refusal::Skew { constraint: 0, domain, skew: 2, max_skew: 1 });
}

#[test]
fn a_pod_assumed_on_a_node_counts_before_it_is_bound() {
    let nodes: Vec<Node> = TWO_HOSTS.iter().map(|spec| node(spec)).collect();
    let mut first = pending("default", web(), anti(json!([term(HOSTNAME, app("web"))])));
    first.metadata.uid = Some("first".into());
    let second = pending("default", web(), anti(json!([term(HOSTNAME, app("web"))])));
    let mut neighbourhood = Neighbourhood::new(&nodes, []);
    neighbourhood.assume(&first, "kube-node-2");
    assert_eq!(excluded(&judge(&second, &neighbourhood, namespace_labels)), ["kube-node-2"]);
    assert_eq!(
        excluded(&judge(&first, &neighbourhood, namespace_labels)),
        [] as [&str; 0],
        "a pod is not its own neighbour"
    );
}

#[test]
fn preferred_rules_are_ignored_and_named() {
    let weighted = json!([{"weight": 10, "podAffinityTerm": term(HOSTNAME, app("web"))}]);
    let mut spec = json!({
        "affinity": {
            "podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": weighted.clone()},
            "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": weighted}
        }
    });
    let anyway =
        json!({"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "ScheduleAnyway", "labelSelector": app("web")});
    let hard = json!({"maxSkew": 1, "topologyKey": HOSTNAME, "whenUnsatisfiable": "DoNotSchedule", "labelSelector": app("web")});
    merge(&mut spec, json!({"topologySpreadConstraints": [hard, anyway]}));
    let others = [bound("web-1", "default", "n1", web(), json!({}))];
    let rules = judged(ZONES, &others, &pending("default", web(), spec));
    let PodRules::Honoured { excluded, ignored } = rules else { panic!("{rules:?}") };
    assert_eq!(excluded.keys().collect::<Vec<_>>(), ["n1"], "the DoNotSchedule constraint still holds");
    assert_eq!(
        ignored,
        [Ignored::PreferredPodAffinity, Ignored::PreferredPodAntiAffinity, Ignored::ScheduleAnyway { constraint: 1 }]
    );
    let named: Vec<String> = ignored.iter().map(Ignored::to_string).collect();
    assert_eq!(
        named,
        [
            "spec.affinity.podAffinity.preferredDuringSchedulingIgnoredDuringExecution",
            "spec.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution",
            "spec.topologySpreadConstraints[1] (whenUnsatisfiable: ScheduleAnyway)",
        ]
    );
}

#[test]
fn what_is_not_honoured_exactly_is_refused_naming_the_field() {
    let gt = json!({"matchExpressions": [{"key": "cpus", "operator": "Gt", "values": ["8"]}]});
    let cases = [
        (
            anti(json!([term(HOSTNAME, app("web")), term(HOSTNAME, gt)])),
            "spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[1].labelSelector",
        ),
        (
            affinity(json!([{"topologyKey": ZONE, "labelSelector": app("web"),
                "namespaceSelector": {"matchExpressions": [{"key": "team", "operator": "In"}]}}])),
            "spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].namespaceSelector",
        ),
        (
            json!({"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "Sometimes"}]}),
            "spec.topologySpreadConstraints[0].whenUnsatisfiable",
        ),
        (spread(ZONE, 1, json!({"nodeTaintsPolicy": "Mostly"})), "spec.topologySpreadConstraints[0].nodeTaintsPolicy"),
        (spread(ZONE, 0, json!({})), "spec.topologySpreadConstraints[0].maxSkew"),
        (spread(ZONE, 1, json!({"minDomains": 0})), "spec.topologySpreadConstraints[0].minDomains"),
    ];
    for (spec, expected) in cases {
        match judged(ZONES, &[], &pending("default", web(), spec)) {
            PodRules::Unsupported { field, why } => assert_eq!(field, expected, "{why}"),
            honoured => panic!("{expected}: {honoured:?}"),
        }
    }
}

#[test]
fn a_shared_view_judges_as_the_pods_given_directly() {
    let guard = |name: &str, namespace: &str, node: &str| {
        bound(name, namespace, node, json!({"app": "guard"}), in_spec(anti(json!([term(HOSTNAME, app("web"))]))))
    };
    let web_on = |name: &str, namespace: &str, node: &str| bound(name, namespace, node, web(), json!({}));
    let finished = bound("done", "default", "n1", web(), json!({"status": {"phase": "Succeeded"}}));
    let selecting = |selector: Value| {
        let mut term = term(ZONE, app("web"));
        merge(&mut term, json!({"namespaceSelector": selector}));
        term
    };
    let others = vec![
        web_on("web-1", "default", "n1"),
        web_on("web-2", "team-a", "n3"),
        web_on("web-3", "default", "gone"),
        guard("guard-1", "default", "n2"),
        guard("guard-2", "team-b", "n3"),
        finished,
    ];
    let pods = [
        ("no rule", pending("default", web(), json!({}))),
        ("anti-affinity by zone", pending("default", web(), anti(json!([term(ZONE, app("web"))])))),
        ("affinity by hostname", pending("default", web(), affinity(json!([term(HOSTNAME, app("web"))])))),
        ("every namespace", pending("default", web(), anti(json!([selecting(json!({}))])))),
        (
            "namespaces by label",
            pending("default", web(), anti(json!([selecting(json!({"matchLabels": {"team": "a"}}))]))),
        ),
        ("spread by hostname", pending("default", web(), spread(HOSTNAME, 1, json!({})))),
        ("spread by zone", pending("team-a", web(), spread(ZONE, 1, json!({})))),
    ];
    let nodes: Vec<Node> = ZONES_AND_BARE.iter().map(|spec| node(spec)).collect();
    let direct = Neighbourhood::new(&nodes, &others);
    let bound_pods = BoundPods::new(others.iter().cloned().map(Arc::new).collect());
    let shared = Neighbourhood::sharing(&nodes, &bound_pods);
    // Some shared, the rest given on top (bound since the view was built).
    let (before, since) = others.split_at(3);
    let half = BoundPods::new(before.iter().cloned().map(Arc::new).collect());
    let mut partly = Neighbourhood::sharing(&nodes, &half);
    for pod in since {
        partly.assume(pod, pod.spec.as_ref().unwrap().node_name.as_deref().unwrap());
    }
    for (name, pod) in &pods {
        let expected = judge(pod, &direct, namespace_labels);
        assert_eq!(judge(pod, &shared, namespace_labels), expected, "{name}: shared");
        assert_eq!(judge(pod, &partly, namespace_labels), expected, "{name}: partly shared");
    }
    assert!(excluded(&judge(&pods[0].1, &shared, namespace_labels)).contains(&"n2"), "guard-1 refuses n2");
}
