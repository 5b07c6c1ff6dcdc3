//! The grant applied to job requests: each attack of issue 22 that a request can carry, and what a
//! grant lets through.

use super::*;
use crate::policy::{JobMapperWorld, KeyValue, World};
use crate::tenancy::grant::{NOBODY, Tenancy};

/// The job-mapper world's first sample pod, in namespace `ml`, with these annotations and class.
fn pod(annotations: &[(&str, &str)], priority: Option<i32>) -> Pod {
    let sample = JobMapperWorld::samples().remove(0).pod;
    let annotations = annotations.iter().map(|(key, value)| KeyValue { key: (*key).into(), value: (*value).into() });
    Pod { namespace: "ml".into(), annotations: annotations.collect(), priority, ..sample }
}

/// A cluster whose operator set a default account (`k8s`) and whose default partition is `batch`.
fn cluster() -> Cluster {
    Cluster { default_account: Some("k8s".into()), ..JobMapperWorld::samples().remove(0).cluster }
}

fn request(fields: serde_json::Value) -> JobRequest {
    let mut base = serde_json::json!({"cpus": 1, "memory_mib": 1024, "excluded_nodes": [], "required_nodes": []});
    base.as_object_mut().expect("an object").extend(fields.as_object().expect("an object").clone());
    serde_json::from_value(base).expect("a job request")
}

/// The grant the tests' namespace `ml` gets.
fn granted() -> Grant {
    let text = r#"{"grants": [{"namespaces": ["ml"], "user": 1000, "group": 1000, "userIds": "1000-1999",
        "groupIds": "1000-1999", "accounts": ["ml"], "partitions": ["gpu"], "qos": ["high"],
        "reservations": ["maint"], "maxPriority": 5000, "requiredNodes": true, "workingDirectory": true}]}"#;
    Tenancy::parse(text, "t.json").expect("parses").grant_for("ml", None).expect("named").clone()
}

#[test]
fn a_fresh_install_runs_every_placeholder_as_nobody_and_honours_no_privileged_annotation() {
    let grant = Grant::default();
    let plain = enforce(request(serde_json::json!({})), &pod(&[], None), &cluster(), &grant).expect("allowed");
    assert_eq!((plain.user_id, plain.group_id), (Some(NOBODY), Some(NOBODY)));
    let refused = [
        (
            serde_json::json!({"user_id": 0}),
            "sunk.dev/user-id",
            "0",
            "runs as user 65534, naming another is not granted",
        ),
        (serde_json::json!({"group_id": 0}), "sunk.dev/group-id", "0", "runs as group 65534"),
        (serde_json::json!({"account": "physics"}), "sunk.dev/account", "physics", "accounts: k8s"),
        (serde_json::json!({"partition": "gpu"}), "sunk.dev/partition", "gpu", "partitions: batch"),
        (serde_json::json!({"qos": "high"}), "sunk.dev/qos", "high", "no QOS granted"),
        (serde_json::json!({"reservation": "maint"}), "sunk.dev/reservation", "maint", "no reservations granted"),
        (serde_json::json!({"required_nodes": ["n1", "n2"]}), "sunk.dev/required-nodes", "n1,n2", "naming nodes"),
        (serde_json::json!({"current_working_directory": "/root"}), "sunk.dev/current-working-dir", "/root", "working"),
    ];
    for (fields, annotation, value, granted) in refused {
        let error = enforce(request(fields.clone()), &pod(&[], None), &cluster(), &grant).expect_err(annotation);
        assert_eq!((error.annotation, error.value.as_str()), (annotation, value), "{fields}");
        assert!(error.granted.contains(granted), "{fields}: {}", error.granted);
        assert_eq!(error.namespace, "ml");
    }
}

#[test]
fn an_annotated_priority_beyond_the_grant_is_refused_and_a_priority_class_capped() {
    let administrator = pod(&[("sunk.dev/priority", "4294967293")], Some(10));
    let asked = || request(serde_json::json!({"priority": 4_294_967_293_u32}));
    let error = enforce(asked(), &administrator, &cluster(), &Grant::default()).expect_err("refused");
    assert_eq!(
        error.to_string(),
        "sunk.dev/priority=\"4294967293\" is beyond what namespace ml is granted (setting a priority is not granted)"
    );
    let legacy_prefix = pod(&[("sunk.coreweave.com/priority", "4294967293")], None);
    assert!(enforce(asked(), &legacy_prefix, &cluster(), &granted()).is_err());

    let from_class = |grant: &Grant| {
        let request = request(serde_json::json!({"priority": 100_000}));
        enforce(request, &pod(&[], Some(100_000)), &cluster(), grant).expect("capped, not refused").priority
    };
    assert_eq!(from_class(&Grant::default()), None, "no priority granted: Slurm computes it (0 would hold the job)");
    assert_eq!(from_class(&granted()), Some(5000));
    let within = enforce(
        request(serde_json::json!({"priority": 4000})),
        &pod(&[("sunk.dev/priority", "4000")], None),
        &cluster(),
        &granted(),
    );
    assert_eq!(within.expect("within the grant").priority, Some(4000));
}

#[test]
fn a_grant_lets_through_what_it_names_and_nothing_past_it() {
    let grant = granted();
    let allowed = [
        serde_json::json!({"user_id": 1500, "group_id": 1500}),
        serde_json::json!({"account": "ml", "partition": "gpu", "qos": "high", "reservation": "maint"}),
        serde_json::json!({"account": "k8s", "partition": "batch"}),
        serde_json::json!({"required_nodes": ["n1"], "current_working_directory": "/data"}),
    ];
    for fields in allowed {
        let out = enforce(request(fields.clone()), &pod(&[], None), &cluster(), &grant).expect("allowed");
        let expected = request(fields);
        assert_eq!(
            (out.account, out.partition, out.required_nodes),
            (expected.account, expected.partition, expected.required_nodes)
        );
        assert_eq!(out.user_id, expected.user_id.or(Some(1000)));
    }
    let refused = [
        (serde_json::json!({"user_id": 2000}), "sunk.dev/user-id", "runs as user 1000 or one of 1000-1999"),
        (serde_json::json!({"user_id": 1500, "group_id": 0}), "sunk.dev/group-id", "or one of 1000-1999"),
        (serde_json::json!({"account": "physics"}), "sunk.dev/account", "accounts: ml, k8s"),
    ];
    for (fields, annotation, granted) in refused {
        let error = enforce(request(fields.clone()), &pod(&[], None), &cluster(), &grant).expect_err(annotation);
        assert_eq!(error.annotation, annotation, "{fields}");
        assert!(error.granted.contains(granted), "{fields}: {}", error.granted);
    }
}

#[test]
fn a_pod_preempts_with_its_priority_class_capped_by_the_grant() {
    let cases = [
        (None, Grant::default(), 0),
        (Some(1_000_000), Grant::default(), 0),
        (Some(-5), granted(), 0),
        (Some(100), granted(), 100),
        (Some(1_000_000), granted(), 5000),
    ];
    for (class, grant, rank) in cases {
        assert_eq!(preemption_rank(class, &grant), rank, "{class:?} under max {}", grant.max_priority);
    }
}
