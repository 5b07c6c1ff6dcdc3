//! The bundled job-mapper, run through the sandbox.

use std::time::Instant;

use super::*;
use crate::JobMapper;
use crate::bindings::job_types::{Exclusive, NodeSelectorRequirement, SelectorOperator};
use crate::module::sha256_hex;

fn pod() -> Pod {
    Pod {
        namespace: "ml".into(),
        name: "train-0".into(),
        uid: "0b5e".into(),
        labels: vec![],
        annotations: vec![],
        cpu_request_millis: 2500,
        memory_request_bytes: 3 << 30,
        cpu_limit_millis: 0,
        memory_limit_bytes: 0,
        gpus: 2,
        node_selector: vec![],
        required_node_affinity: vec![],
        tolerations: vec![],
        priority: None,
        termination_grace_seconds: 30,
    }
}

fn cluster() -> Cluster {
    Cluster {
        partitions: vec!["batch".into(), "gpu".into()],
        default_partition: Some("batch".into()),
        default_account: Some("root".into()),
        kill_wait_seconds: 60,
    }
}

fn annotation(key: &str, value: &str) -> KeyValue {
    KeyValue { key: key.into(), value: value.into() }
}

#[test]
fn bundled_maps_a_typical_pod() {
    let mapper = JobMapper::bundled().unwrap();
    let pod = Pod {
        annotations: vec![
            annotation("sunk.dev/partition", "gpu"),
            annotation("sunk.coreweave.com/qos", "high"),
            annotation("sunk.dev/exclusive", "user"),
            annotation("sunk.dev/excluded-nodes", "gpu[1-3,7],cpu1"),
            annotation("sunk.dev/user-id", "1000"),
            annotation("sunk.dev/timeout", "90"),
            annotation("sunk.dev/constraints", "ib"),
        ],
        required_node_affinity: vec![vec![NodeSelectorRequirement {
            key: "nvidia.com/gpu.product".into(),
            operator: SelectorOperator::In,
            values: vec!["H100".into(), "A100".into()],
        }]],
        ..pod()
    };
    let want = JobRequest {
        partition: Some("gpu".into()),
        account: Some("root".into()),
        qos: Some("high".into()),
        reservation: None,
        comment: None,
        constraints: Some("ib&(H100|A100)".into()),
        prefer: None,
        exclusive: Some(Exclusive::User),
        excluded_nodes: vec!["gpu[1-3,7]".into(), "cpu1".into()],
        required_nodes: vec![],
        priority: None,
        user_id: Some(1000),
        group_id: Some(1000),
        current_working_directory: None,
        time_limit_minutes: Some(90),
        cpus: 3,
        memory_mib: 3072,
        tres_per_node: Some("gres/gpu:2".into()),
    };
    assert_eq!(mapper.map_pod(&pod, &cluster()), Ok(Mapping::Job(want)));
}

#[test]
fn bundled_rejects_a_pod_without_requests() {
    let mapper = JobMapper::bundled().unwrap();
    let pod = Pod { cpu_request_millis: 0, memory_request_bytes: 0, ..pod() };
    let Mapping::Reject(rejection) = mapper.map_pod(&pod, &cluster()).unwrap() else {
        panic!("the pod was mapped");
    };
    assert_eq!(rejection.field, "spec.containers[*].resources.requests.cpu");
    let pod = Pod { memory_request_bytes: 0, ..self::pod() };
    let Mapping::Reject(rejection) = mapper.map_pod(&pod, &cluster()).unwrap() else {
        panic!("the pod was mapped");
    };
    assert_eq!(rejection.field, "spec.containers[*].resources.requests.memory");
}

#[test]
fn bundled_rejects_a_bad_annotation() {
    let mapper = JobMapper::bundled().unwrap();
    let pod = Pod { annotations: vec![annotation("sunk.dev/priority", "-1")], ..pod() };
    let Mapping::Reject(rejection) = mapper.map_pod(&pod, &cluster()).unwrap() else {
        panic!("the pod was mapped");
    };
    assert_eq!(rejection.field, "sunk.dev/priority");
    assert!(rejection.message.contains("\"-1\""), "{}", rejection.message);
}

#[test]
fn digest_is_sha256_hex() {
    let mapper = JobMapper::bundled().unwrap();
    let digest = mapper.digest();
    assert_eq!(digest.len(), 64);
    assert!(digest.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')));
    assert_eq!(digest, sha256_hex(bundled::JOB_MAPPER));
    assert_eq!(sha256_hex(b""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

#[test]
fn clones_share_the_module_across_threads() {
    let mapper = JobMapper::bundled().unwrap();
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let mapper = mapper.clone();
            std::thread::spawn(move || mapper.map_pod(&pod(), &cluster()).unwrap())
        })
        .collect();
    for thread in threads {
        assert!(matches!(thread.join().unwrap(), Mapping::Job(_)));
    }
}

#[test]
fn refuses_a_core_module_and_garbage() {
    assert!(JobMapper::load(b"not wasm", None).is_err());
    // The smallest core module: a component is required.
    assert!(JobMapper::load(b"\0asm\x01\0\0\0", None).is_err());
}

/// Prints per-decision latency (run with `--nocapture`); asserts nothing about speed.
#[test]
fn decision_latency() {
    let mapper = JobMapper::bundled().unwrap();
    let (pod, cluster) = (pod(), cluster());
    let mut samples: Vec<_> = (0..500)
        .map(|_| {
            let start = Instant::now();
            mapper.map_pod(&pod, &cluster).unwrap();
            start.elapsed()
        })
        .collect();
    samples.sort();
    println!(
        "job-mapper: component {} bytes, per decision p50 {:?} p99 {:?}",
        bundled::JOB_MAPPER.len(),
        samples[samples.len() / 2],
        samples[samples.len() * 99 / 100]
    );
}
