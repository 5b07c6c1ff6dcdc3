use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;

/// Every answer recorded from slurmrestd 26.05.5 (v0.0.44) and 24.11.5 (v0.0.42), by name.
fn recorded() -> &'static [(String, u16, Value)] {
    static RECORDED: std::sync::OnceLock<Vec<(String, u16, Value)>> = std::sync::OnceLock::new();
    RECORDED.get_or_init(read_recordings)
}

fn read_recordings() -> Vec<(String, u16, Value)> {
    let files = [
        include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/slurmrestd/26.05.5/v0.0.44.json")),
        include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/slurmrestd/24.11.5/v0.0.42.json")),
    ];
    let mut answers = Vec::new();
    for file in files {
        let exchanges: serde_json::Map<String, Value> = serde_json::from_str(file).expect("a recording");
        for (name, exchange) in exchanges {
            let status = exchange["status"].as_u64().and_then(|status| u16::try_from(status).ok()).unwrap_or(0);
            if let Some(response) = exchange.get("response").filter(|response| response.is_object()) {
                answers.push((name, status, response.clone()));
            }
        }
    }
    answers
}

fn answer(name: &str) -> &'static Value {
    recorded().iter().find(|(recorded, ..)| recorded == name).map(|(.., answer)| answer).expect("recorded")
}

/// Decodes `body` as each answer type the client reads; whether each was believed.
fn decode_all(status: u16, body: &[u8]) -> [bool; 7] {
    [
        decode_body::<JobsResponse>("jobs", status, body).is_ok(),
        decode_body::<JobStatesResponse>("job states", status, body).map(|answer| answer.listing()).is_ok(),
        decode_body::<NodesResponse>("nodes", status, body).is_ok(),
        decode_body::<PartitionsResponse>("partitions", status, body).is_ok(),
        decode_body::<SubmitResponse>("submit", status, body).is_ok(),
        decode_body::<PingResponse>("ping", status, body).is_ok(),
        decode_body::<CancelJobsResponse>("cancel", status, body).is_ok(),
    ]
}

#[test]
fn a_listing_without_its_list_is_an_error_not_an_empty_listing() {
    let jobs = decode_body::<JobsResponse>("jobs", 200, br#"{"errors": [], "warnings": []}"#);
    assert!(matches!(&jobs, Err(SlurmError::Api { status: 200, .. })), "{jobs:?}");
    assert!(jobs.unwrap_err().to_string().contains("missing field `jobs`"));
    assert!(decode_body::<NodesResponse>("nodes", 200, b"{}").is_err());
    assert!(decode_body::<PartitionsResponse>("partitions", 200, b"{}").is_err());
    let stateless = json!({"jobs": [{"job_id": 4}], "last_update": {"number": 1, "set": true}});
    let stateless = decode_body::<JobsResponse>("jobs", 200, stateless.to_string().as_bytes());
    assert!(stateless.is_err(), "a job without a state would read as ended: {stateless:?}");
}

/// The held job of each recorded listing (24.11's v0.0.42, 26.05's v0.0.43 and v0.0.44) made what
/// slurmctld makes of a job whose credential it cannot create: its reason, its own note and the uid
/// it cannot resolve are all read.
#[test]
fn a_job_slurmctld_holds_is_read_with_its_system_comment_and_uid() {
    let files = [
        include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/slurmrestd/24.11.5/v0.0.42.json")),
        include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/slurmrestd/26.05.5/v0.0.43.json")),
        include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/slurmrestd/26.05.5/v0.0.44.json")),
    ];
    for file in files {
        let recording: Value = serde_json::from_str(file).expect("a recording");
        let mut listing = recording["jobs"]["response"].clone();
        let jobs = listing["jobs"].as_array_mut().expect("a job listing");
        let held = jobs.iter_mut().find(|job| job["name"] == "held").expect("the recorded held job");
        held["state_reason"] = json!("JobHeldAdmin");
        held["system_comment"] = json!("slurm_cred_create failure, holding job.");
        held["user_id"] = json!(1500);
        let read = decode_body::<JobsResponse>("jobs", 200, listing.to_string().as_bytes()).expect("read");
        let job = read.jobs.iter().find(|job| job.name == "held").expect("the held job");
        assert_eq!(
            (job.state(), job.state_reason.as_str(), job.system_comment.as_str(), job.user_id),
            (crate::JobState::Pending, "JobHeldAdmin", "slurm_cred_create failure, holding job.", Some(1500))
        );
    }
}

#[test]
fn an_error_answer_without_the_data_keeps_its_errors() {
    // 24.11.5's answer to an incremental node listing when partitions did not change (recorded as
    // `nodes-changed`): a 500 without `nodes`.
    let quirk = json!({"errors": [{"description": "Unable to query partitions", "error": "Unspecified error",
                                   "error_number": -1, "source": "_dump_nodes"}], "warnings": [], "meta": {}});
    let error = decode_body::<NodesResponse>("nodes", 500, quirk.to_string().as_bytes()).expect_err("a 500");
    assert!(error.is_partitions_unchanged(), "{error}");
}

#[test]
fn html_truncated_json_and_a_200_with_errors_are_errors() {
    let html = decode_body::<JobsResponse>("jobs", 200, b"<html><body>502 Bad Gateway</body></html>");
    assert!(html.unwrap_err().to_string().contains("unreadable answer"));
    let whole = answer("jobs").to_string();
    assert!(decode_body::<JobsResponse>("jobs", 200, whole.as_bytes()).is_ok());
    assert!(decode_body::<JobsResponse>("jobs", 200, &whole.as_bytes()[..whole.len() / 2]).is_err());
    let refused = json!({"jobs": [], "errors": [{"error": "no", "error_number": 2017}]});
    let refused = decode_body::<JobsResponse>("jobs", 200, refused.to_string().as_bytes()).expect_err("errors");
    assert!(matches!(refused, SlurmError::Api { status: 200, ref errors, .. } if errors[0].error_number == 2017));
}

/// One change to a recorded answer: a value replaced, a key removed, or the text cut short.
#[derive(Debug, Clone)]
enum Mutation {
    Replace { path: usize, with: Value },
    Remove { path: usize },
    Truncate { at: usize },
    Flip { at: usize, byte: u8 },
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let value = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        "\\PC{0,12}".prop_map(Value::String),
        Just(json!([])),
        Just(json!({})),
        Just(json!({"number": -1, "set": true, "infinite": false})),
        Just(json!([{"job_id": 4294967295u64, "job_state": ["RUNNING"], "array_job_id": {"number": 1, "set": true},
                     "array_task_string": "0-4294967295", "nodes": "n[0000000000000001-0000000000065536]"}])),
    ];
    prop_oneof![
        (any::<usize>(), value).prop_map(|(path, with)| Mutation::Replace { path, with }),
        any::<usize>().prop_map(|path| Mutation::Remove { path }),
        any::<usize>().prop_map(|at| Mutation::Truncate { at }),
        (any::<usize>(), any::<u8>()).prop_map(|(at, byte)| Mutation::Flip { at, byte }),
    ]
}

/// Every value's place in `value`, depth first: object keys and array indexes.
fn places(value: &Value, at: Vec<String>, out: &mut Vec<Vec<String>>) {
    match value {
        Value::Object(map) => map.iter().for_each(|(key, inner)| {
            let place = [at.clone(), vec![key.clone()]].concat();
            out.push(place.clone());
            places(inner, place, out);
        }),
        Value::Array(items) => items.iter().enumerate().for_each(|(index, inner)| {
            let place = [at.clone(), vec![index.to_string()]].concat();
            out.push(place.clone());
            places(inner, place, out);
        }),
        _ => {}
    }
}

fn apply(answer: &Value, mutation: &Mutation) -> Vec<u8> {
    let mut mutated = answer.clone();
    let mut all = Vec::new();
    places(answer, Vec::new(), &mut all);
    match mutation {
        Mutation::Replace { path, with } if !all.is_empty() => {
            let pointer = format!("/{}", all[path % all.len()].join("/"));
            if let Some(place) = mutated.pointer_mut(&pointer) {
                *place = with.clone();
            }
        }
        Mutation::Remove { path } if !all.is_empty() => {
            let place = &all[path % all.len()];
            let parent = format!("/{}", place[..place.len() - 1].join("/"));
            let parent = if place.len() == 1 { Some(&mut mutated) } else { mutated.pointer_mut(&parent) };
            match parent {
                Some(Value::Object(map)) => _ = map.remove(&place[place.len() - 1]),
                Some(Value::Array(items)) => _ = place[place.len() - 1].parse::<usize>().map(|i| items.remove(i)),
                _ => {}
            }
        }
        _ => {}
    }
    let mut text = mutated.to_string().into_bytes();
    match *mutation {
        Mutation::Truncate { at } if !text.is_empty() => text.truncate(at % text.len()),
        Mutation::Flip { at, byte } if !text.is_empty() => {
            let at = at % text.len();
            text[at] = byte;
        }
        _ => {}
    }
    text
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Any recorded answer, changed once, decodes as each answer type or is an error: never a panic,
    /// and what is believed reads without one too (states, array tasks, host lists).
    #[test]
    fn a_mutated_answer_is_read_or_refused_never_a_panic(pick in any::<usize>(), mutation in mutation()) {
        let answers = recorded();
        let (_, status, answer) = &answers[pick % answers.len()];
        let body = apply(answer, &mutation);
        let _ = decode_all(*status, &body);
        if let Ok(listing) = decode_body::<JobsResponse>("jobs", 200, &body) {
            for job in listing.jobs {
                let _ = (job.state(), job.holds_nodes(), job.array_tasks(), job.target(), job.state_name());
                let _ = crate::expand_hostlist(&job.nodes);
            }
        }
        if let Ok(listing) = decode_body::<NodesResponse>("nodes", 200, &body) {
            for node in listing.nodes {
                let flags = node.flags();
                let _ = (flags.base(), flags.is_busy(), flags.is_drained(), flags.is_dynamic(), flags.is_responsive());
            }
        }
    }

    #[test]
    fn any_bytes_are_read_or_refused(body in prop::collection::vec(any::<u8>(), 0..256), status in 100u16..600) {
        let _ = decode_all(status, &body);
    }
}

/// The recorded partitions (slurm.conf: batch `PriorityTier=1`, urgent `PriorityTier=2
/// PreemptMode=OFF`) read with their tiers on every parser; v0.0.42 to v0.0.44 do not list a
/// partition's PreemptMode, so none is made up.
#[test]
fn recorded_partitions_read_with_their_tiers_and_no_made_up_preempt_mode() {
    let files = [
        include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/slurmrestd/24.11.5/v0.0.42.json")),
        include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/slurmrestd/26.05.5/v0.0.42.json")),
        include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/slurmrestd/26.05.5/v0.0.43.json")),
        include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/slurmrestd/26.05.5/v0.0.44.json")),
    ];
    for file in files {
        let recording: Value = serde_json::from_str(file).expect("a recording");
        let body = recording["partitions"]["response"].to_string();
        let read = decode_body::<PartitionsResponse>("partitions", 200, body.as_bytes()).expect("read");
        let tiers: Vec<_> =
            read.partitions.iter().map(|p| (p.name.as_str(), p.priority.tier, p.preempt_mode)).collect();
        let unlisted = crate::PartitionPreemptMode::Unlisted;
        assert_eq!(tiers, [("batch", 1, unlisted), ("urgent", 2, unlisted)]);
        assert!(read.partitions.iter().all(|p| p.qos.assigned.is_empty()));
    }
}
