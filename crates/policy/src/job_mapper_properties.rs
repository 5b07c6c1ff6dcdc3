//! Property test of the bundled job-mapper through its sandbox: whatever annotations a pod carries
//! (SUNK's keys under either prefix with any value, and keys of other tools), the module answers
//! within its budgets, never trapping, and a refusal names an annotation the pod carries.

use std::sync::OnceLock;

use proptest::prelude::*;

use super::bindings::job_types::{KeyValue, Mapping};
use super::bundled;
use super::worlds::MapPodInput;
use super::{JobMapper, JobMapperWorld, World};

fn bundled_job_mapper() -> &'static JobMapper {
    static MODULE: OnceLock<JobMapper> = OnceLock::new();
    MODULE.get_or_init(|| JobMapper::load(bundled::JOB_MAPPER, None).expect("the bundled job-mapper"))
}

const NAMES: [&str; 17] = [
    "account",
    "comment",
    "constraints",
    "current-working-dir",
    "excluded-nodes",
    "exclusive",
    "group-id",
    "partition",
    "prefer",
    "priority",
    "qos",
    "required-nodes",
    "reservation",
    "timeout",
    "user-id",
    "unknown-option",
    "",
];

fn key() -> impl Strategy<Value = String> {
    let sunk = (prop::sample::select(&["sunk.dev/", "sunk.coreweave.com/"][..]), prop::sample::select(&NAMES[..]))
        .prop_map(|(prefix, name)| format!("{prefix}{name}"));
    prop_oneof![3 => sunk, 1 => "[a-z0-9./-]{1,40}"]
}

fn value() -> impl Strategy<Value = String> {
    prop_oneof![
        "[0-9]{0,12}",
        "-?[0-9]{1,20}",
        "[a-z0-9_,\\[\\]|&:-]{0,40}",
        "/[a-z/]{0,30}",
        Just("4294967296".to_owned()),
        Just("n[1-99999999]".to_owned()),
        "\\PC{0,60}",
        "x{1000,4000}",
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn any_annotations_are_mapped_or_refused_naming_one_of_them(
        annotations in prop::collection::vec((key(), value()), 0..10),
    ) {
        let mut input: MapPodInput = JobMapperWorld::samples().remove(0);
        input.pod.annotations = annotations.iter().map(|(key, value)| KeyValue { key: key.clone(), value: value.clone() }).collect();
        let answer = bundled_job_mapper().decide(&input);
        match answer {
            Ok(Mapping::Job(job)) => prop_assert!(job.cpus > 0 && job.memory_mib > 0),
            Ok(Mapping::Reject(refusal)) => prop_assert!(
                annotations.iter().any(|(key, _)| *key == refusal.field),
                "refused naming {:?}, which the pod does not carry: {}", refusal.field, refusal.message
            ),
            Err(error) => prop_assert!(false, "the bundled job-mapper failed: {error}"),
        }
    }
}
