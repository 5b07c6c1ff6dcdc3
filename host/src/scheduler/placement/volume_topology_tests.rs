use std::collections::HashMap;

use serde_json::{Value, json};

use super::*;

/// Claims of namespace `ml`, volumes and classes, by name.
#[derive(Default)]
struct Listed {
    claims: HashMap<String, Arc<PersistentVolumeClaim>>,
    volumes: HashMap<String, Arc<PersistentVolume>>,
    classes: HashMap<String, Arc<StorageClass>>,
}

impl Claims for Listed {
    fn claim(&self, namespace: &str, name: &str) -> Option<Arc<PersistentVolumeClaim>> {
        self.claims.get(name).filter(|_| namespace == "ml").cloned()
    }
    fn volume(&self, name: &str) -> Option<Arc<PersistentVolume>> {
        self.volumes.get(name).cloned()
    }
    fn class(&self, name: &str) -> Option<Arc<StorageClass>> {
        self.classes.get(name).cloned()
    }
}

/// `metadata` with the annotation of a claim whose binding the PersistentVolume controller completed.
fn bound_metadata(mut metadata: Value) -> Value {
    metadata["annotations"] = json!({BIND_COMPLETED: "yes"});
    metadata
}

fn from<T: serde::de::DeserializeOwned>(json: Value) -> Arc<T> {
    Arc::new(serde_json::from_value(json).unwrap())
}

impl Listed {
    /// A claim `name`, with `extra` as its metadata and spec.
    fn claim(mut self, name: &str, metadata: Value, spec: Value) -> Self {
        let mut json = json!({"metadata": metadata, "spec": spec});
        json["metadata"]["name"] = json!(name);
        self.claims.insert(name.into(), from(json));
        self
    }

    /// A claim the PersistentVolume controller has bound to `pv`.
    fn bound(self, name: &str, pv: &str) -> Self {
        self.claim(name, bound_metadata(json!({})), json!({"volumeName": pv}))
    }

    /// A volume `name` with `spec.nodeAffinity.required.nodeSelectorTerms` (none: `null`) and labels.
    fn volume(mut self, name: &str, terms: Value, labels: Value) -> Self {
        let affinity = if terms.is_null() { Value::Null } else { json!({"required": {"nodeSelectorTerms": terms}}) };
        let json = json!({"metadata": {"name": name, "labels": labels}, "spec": {"nodeAffinity": affinity}});
        self.volumes.insert(name.into(), from(json));
        self
    }

    fn class(mut self, name: &str, mode: &str) -> Self {
        let json = json!({"metadata": {"name": name}, "provisioner": "p", "volumeBindingMode": mode});
        self.classes.insert(name.into(), from(json));
        self
    }
}

/// Pod `p` (uid `u`) of namespace `ml` with these volumes.
fn pod(volumes: Value) -> WatchedPod {
    let json = json!({"metadata": {"name": "p", "namespace": "ml", "uid": "u"}, "spec": {"volumes": volumes}});
    serde_json::from_value(json).unwrap()
}

fn claimed(name: &str) -> Value {
    json!({"name": "v", "persistentVolumeClaim": {"claimName": name}})
}

/// A Node `name` with labels `key=value`.
fn node(name: &str, labels: &[(&str, &str)]) -> Node {
    let labels: serde_json::Map<String, Value> =
        labels.iter().map(|(key, value)| ((*key).into(), json!(value))).collect();
    serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}})).unwrap()
}

fn on(host: &str) -> Value {
    json!([{"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": [host]}]}])
}

fn not_ready(field: &str, why: &str) -> VolumeReach {
    VolumeReach::NotReady { field: field.into(), why: why.into() }
}

#[test]
fn each_claim_is_bound_honoured_or_waited_for() {
    let listed = Listed::default()
        .bound("local", "pv-local")
        .volume("pv-local", on("kube-node-2"), json!({}))
        .bound("shared", "pv-nfs")
        .volume("pv-nfs", Value::Null, json!({}))
        .bound("lost", "pv-gone")
        .claim("pending", json!({}), json!({"storageClassName": "standard"}))
        .claim("classless", json!({}), json!({}))
        .claim("late", json!({}), json!({"storageClassName": "local-path"}))
        .claim("pre-bound", json!({}), json!({"volumeName": "pv-nfs"}))
        .claim(
            "going",
            bound_metadata(json!({"deletionTimestamp": "2026-01-01T00:00:00Z"})),
            json!({"volumeName": "pv-nfs"}),
        )
        .claim("p-scratch", bound_metadata(json!({"ownerReferences": [owner("u")]})), json!({"volumeName": "pv-local"}))
        .claim(
            "p-foreign",
            bound_metadata(json!({"ownerReferences": [owner("other")]})),
            json!({"volumeName": "pv-nfs"}),
        )
        .class("standard", "Immediate")
        .class("local-path", "WaitForFirstConsumer");
    let only_local = |field: &str| {
        let volume = format!("{field} (PersistentVolume pv-local)");
        let required = serde_json::from_value(json!({"nodeSelectorTerms": on("kube-node-2")})).unwrap();
        VolumeReach::OnlyWhere(vec![Limit { volume, node_affinity: Some(required), zones: vec![] }])
    };
    let config_map = json!({"name": "conf", "configMap": {"name": "c"}});
    let ephemeral = |name: &str| json!({"name": name, "ephemeral": {"volumeClaimTemplate": {"spec": {}}}});
    let cases: Vec<(&str, Value, VolumeReach)> = vec![
        ("no volumes", json!([]), VolumeReach::Anywhere),
        ("no claim among them", json!([config_map]), VolumeReach::Anywhere),
        ("a volume any Node mounts", json!([claimed("shared")]), VolumeReach::Anywhere),
        ("a local volume", json!([config_map, claimed("local")]), only_local("spec.volumes[1] (claim local)")),
        (
            "an ephemeral volume's own claim",
            json!([ephemeral("scratch")]),
            only_local("spec.volumes[0] (ephemeral scratch)"),
        ),
        (
            "a claim not made",
            json!([claimed("data")]),
            not_ready("spec.volumes[0] (claim data)", "persistentvolumeclaim \"data\" not found"),
        ),
        (
            "an Immediate claim not bound yet",
            json!([claimed("pending")]),
            not_ready("spec.volumes[0] (claim pending)", "persistentvolumeclaim \"pending\" is not bound yet"),
        ),
        (
            "a claim of no class, not bound yet (a volume made by hand may come)",
            json!([claimed("classless")]),
            not_ready("spec.volumes[0] (claim classless)", "persistentvolumeclaim \"classless\" is not bound yet"),
        ),
        (
            "a claim named a volume, its binding not completed",
            json!([claimed("pre-bound")]),
            not_ready(
                "spec.volumes[0] (claim pre-bound)",
                "persistentvolumeclaim \"pre-bound\" is not bound yet (to persistentvolume \"pv-nfs\")",
            ),
        ),
        (
            "a claim bound to a volume not listed",
            json!([claimed("lost")]),
            not_ready(
                "spec.volumes[0] (claim lost)",
                "persistentvolumeclaim \"lost\" is bound to persistentvolume \"pv-gone\", not found",
            ),
        ),
        (
            "a claim being deleted",
            json!([claimed("going")]),
            not_ready("spec.volumes[0] (claim going)", "persistentvolumeclaim \"going\" is being deleted"),
        ),
        (
            "an ephemeral volume whose claim was made for someone else",
            json!([ephemeral("foreign")]),
            not_ready(
                "spec.volumes[0] (ephemeral foreign)",
                "persistentvolumeclaim \"p-foreign\" was not created for the pod",
            ),
        ),
    ];
    for (name, volumes, expected) in cases {
        assert_eq!(reach(&pod(volumes), &listed), expected, "{name}");
    }
    // Waiting for its first consumer, whatever the other claims: sunk does not choose a volume's Node.
    let VolumeReach::Unsupported { field, why } = reach(&pod(json!([claimed("data"), claimed("late")])), &listed)
    else {
        panic!("a WaitForFirstConsumer claim is unsupported");
    };
    assert_eq!(field, "spec.volumes[1] (claim late)");
    assert!(
        why.contains("StorageClass local-path is WaitForFirstConsumer") && why.contains("sunk does not choose"),
        "{why}"
    );
}

fn owner(uid: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": uid, "controller": true})
}

#[test]
fn a_host_that_reads_no_claims_names_the_first_one() {
    let volumes = json!([{"name": "conf", "configMap": {"name": "c"}}, claimed("data")]);
    assert_eq!(first_claim(&pod(volumes)).as_deref(), Some("spec.volumes[1] (claim data)"));
    let ephemeral = json!([{"name": "scratch", "ephemeral": {}}]);
    assert_eq!(first_claim(&pod(ephemeral.clone())).as_deref(), Some("spec.volumes[0] (ephemeral scratch)"));
    assert!(mounts(&pod(ephemeral), "p-scratch"), "an ephemeral volume mounts the claim made for the pod");
    assert_eq!(first_claim(&pod(json!([{"name": "conf", "configMap": {"name": "c"}}]))), None);
    assert_eq!(first_claim(&pod(json!(null))), None);
}

/// The limits of a pod whose one claim is bound to a volume of these terms and labels.
fn limits(terms: Value, labels: Value) -> Vec<Limit> {
    let listed = Listed::default().bound("data", "pv").volume("pv", terms, labels);
    match reach(&pod(json!([claimed("data")])), &listed) {
        VolumeReach::OnlyWhere(limits) => limits,
        other => panic!("{other:?}"),
    }
}

fn admits(limits: &[Limit], node: &Node) -> bool {
    limits.iter().all(|limit| limit.conflict(node).is_none())
}

#[test]
fn node_affinity_admits_the_nodes_its_terms_match() {
    let requirement =
        |key: &str, operator: &str, values: &[&str]| json!({"key": key, "operator": operator, "values": values});
    let expressions = |requirements: Value| json!([{"matchExpressions": requirements}]);
    let gpu = node("kube-node-2", &[("zone", "a"), ("disks", "4")]);
    let plain = node("kube-node-1", &[("zone", "b")]);
    let cases = [
        (expressions(json!([requirement("zone", "In", &["a"])])), true, false),
        (expressions(json!([requirement("zone", "NotIn", &["a"])])), false, true),
        (expressions(json!([requirement("disks", "Exists", &[])])), true, false),
        (expressions(json!([requirement("disks", "DoesNotExist", &[])])), false, true),
        (expressions(json!([requirement("disks", "Gt", &["2"])])), true, false),
        (expressions(json!([requirement("disks", "Lt", &["2"])])), false, false),
        (json!([{"matchFields": [requirement("metadata.name", "In", &["kube-node-1"])]}]), false, true),
        // Terms are ORed.
        (
            json!([{"matchExpressions": [requirement("zone", "In", &["b"])]}, {"matchExpressions": [requirement("disks", "Exists", &[])]}]),
            true,
            true,
        ),
        (json!([]), false, false),
    ];
    for (terms, on_gpu, on_plain) in cases {
        let limits = limits(terms.clone(), json!({}));
        assert_eq!((admits(&limits, &gpu), admits(&limits, &plain)), (on_gpu, on_plain), "{terms}");
    }
    let refused = limits(expressions(json!([requirement("zone", "In", &["a"])])), json!({}));
    assert_eq!(
        refused[0].conflict(&plain).map(|conflict| conflict.to_string()).as_deref(),
        Some("volume node affinity conflict: spec.volumes[0] (claim data) (PersistentVolume pv)")
    );
}

#[test]
fn zone_labels_admit_nodes_of_those_zones_as_volume_zone_does() {
    let zonal = limits(Value::Null, json!({"topology.kubernetes.io/zone": "a__b"}));
    let beta = limits(Value::Null, json!({"failure-domain.beta.kubernetes.io/zone": "a"}));
    let cases = [
        ("in one of its zones", node("n", &[("topology.kubernetes.io/zone", "b")]), true, false),
        ("in another zone", node("n", &[("topology.kubernetes.io/zone", "c")]), false, false),
        ("in zone a", node("n", &[("topology.kubernetes.io/zone", "a")]), true, true),
        ("with no zone or region label at all", node("n", &[("rack", "r1")]), true, true),
        ("with a region but no zone", node("n", &[("topology.kubernetes.io/region", "eu")]), false, false),
    ];
    for (name, node, zonal_admits, beta_admits) in cases {
        assert_eq!((admits(&zonal, &node), admits(&beta, &node)), (zonal_admits, beta_admits), "a Node {name}");
    }
    let elsewhere = node("n", &[("topology.kubernetes.io/zone", "c")]);
    assert_eq!(
        zonal[0].conflict(&elsewhere).map(|conflict| conflict.to_string()).as_deref(),
        Some(
            "no available volume zone: spec.volumes[0] (claim data) (PersistentVolume pv) (topology.kubernetes.io/zone)"
        )
    );
}
