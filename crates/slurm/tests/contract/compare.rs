//! The same scenario recorded by two releases, or by two data parsers of one release, compared as the
//! host reads it: every difference must be one documented here (and in `tests/contract/README.md`).

use std::collections::BTreeSet;

use sunk_slurm::{Job, JobsPage, NoValue, Node, NodesPage, SlurmClient, SlurmError};

use crate::client;
use crate::replay::Replay;

/// 26.05's newer data parsers, replayed to the client as if they were v0.0.42: what would change for
/// the host if it spoke them.
#[tokio::test]
async fn slurm_26_05_5_newer_parsers_read_alike() {
    for parser in ["v0.0.43", "v0.0.44"] {
        let differences = differences(("26.05.5", "v0.0.42"), ("26.05.5", parser)).await;
        // Fields that v0.0.43+ add (step_id, submit_line, licenses_allocated, segment_size,
        // std*_expanded, node topology and TLS certificate fields) are not read.
        let documented = [
            // v0.0.42 does not know the flag; v0.0.43 and later run the job.
            "submit-external: HTTP 500, errors [9207, 9000], 0 warnings / HTTP 200, errors [], 0 warnings, a job id",
        ];
        assert_documented(parser, &differences, &documented);
    }
}

/// v0.0.42 on 24.11.5 and on 26.05.5: the same scenario, the same fields, but for these.
#[tokio::test]
async fn v0_0_42_reads_alike_on_24_11_and_26_05() {
    let differences = differences(("24.11.5", "v0.0.42"), ("26.05.5", "v0.0.42")).await;
    let documented = [
        // Release::changed_nodes_fail.
        "nodes-changed: error / 3 nodes",
        // The array's pending record with one task left: 26.05 leaves it unnumbered. Its `target` is
        // 6_2 on both (not listed: the same).
        "jobs-preempted 6 array_task_id: NoValue { set: true, infinite: false, number: 2 } / NoValue { set: false, infinite: false, number: 0 }",
        "jobs-preempted 6 array_task_string: \"\" / \"2\"",
        // Release::refusal_status and resume_not_drained.
        "allocate-full: HTTP 500, errors [2013], 0 warnings / HTTP 422, errors [2013], 0 warnings",
        "node-delete-unknown: HTTP 500, errors [2018], 0 warnings / HTTP 422, errors [2018], 0 warnings",
        "node-resume-not-drained: HTTP 500, errors [2028], 0 warnings / HTTP 422, errors [2180], 0 warnings",
        "submit-no-cwd: HTTP 500, errors [2063], 0 warnings / HTTP 422, errors [2063], 0 warnings",
        "submit-unknown-partition: HTTP 500, errors [2000], 0 warnings / HTTP 422, errors [2000], 0 warnings",
    ];
    assert_documented("24.11.5 -> 26.05.5", &differences, &documented);
}

/// The differences found are the ones documented, no more, no fewer.
fn assert_documented(what: &str, found: &BTreeSet<String>, documented: &[&str]) {
    let documented: BTreeSet<String> = documented.iter().map(|line| line.to_string()).collect();
    let unexpected: Vec<&String> = found.difference(&documented).collect();
    let missing: Vec<&String> = documented.difference(found).collect();
    assert!(
        unexpected.is_empty() && missing.is_empty(),
        "{what}: undocumented differences {unexpected:#?}, documented ones not found {missing:#?}"
    );
}

const JOB_LISTINGS: &[&str] = &["jobs", "jobs-preempted"];
const JOB_LOOKUPS: &[&str] = &[
    "job-completed",
    "job-allocated",
    "job-running",
    "job-pending",
    "job-preempted",
    "job-array",
    "job-array-task-running",
    "job-array-task-pending",
];
const NODE_LISTINGS: &[&str] = &["nodes-idle", "nodes-mixed", "nodes-allocated", "nodes-drained-down", "nodes-changed"];

/// Every difference in what the host reads between two recordings of the scenario: the decoded jobs
/// and nodes of the listings and lookups, and the outcome (status, error numbers, whether a job id came
/// back) of every other exchange both recorded.
async fn differences(left: (&str, &str), right: (&str, &str)) -> BTreeSet<String> {
    let sides = [Replay::start(left.0, left.1).await, Replay::start(right.0, right.1).await];
    let slurms = [client(&sides[0]), client(&sides[1])];
    let mut differences = BTreeSet::new();
    for fixture in JOB_LISTINGS {
        let mut jobs = Vec::new();
        for (replay, slurm) in sides.iter().zip(&slurms) {
            jobs.push(listed_jobs(replay, slurm, fixture).await);
        }
        compare_records(fixture, &jobs[0], &jobs[1], |job| job.job_id.to_string(), job_fields, &mut differences);
    }
    for fixture in JOB_LOOKUPS {
        let mut jobs = Vec::new();
        for (replay, slurm) in sides.iter().zip(&slurms) {
            let (job, _) = replay.serve(&[fixture], slurm.job(replay.fixture(fixture).last_segment())).await;
            jobs.push(job.unwrap_or_else(|error| panic!("{fixture}: {error}")).into_iter().collect::<Vec<Job>>());
        }
        compare_records(fixture, &jobs[0], &jobs[1], |job| job.job_id.to_string(), job_fields, &mut differences);
    }
    for fixture in NODE_LISTINGS {
        let mut listings = Vec::new();
        for (replay, slurm) in sides.iter().zip(&slurms) {
            listings.push(node_listing(replay, slurm, fixture).await);
        }
        match (&listings[0], &listings[1]) {
            (Ok(a), Ok(b)) => compare_records(fixture, a, b, |node| node.name.clone(), node_fields, &mut differences),
            (a, b) => {
                let show = |side: &Result<Vec<Node>, SlurmError>| match side {
                    Ok(nodes) => format!("{} nodes", nodes.len()),
                    Err(_) => "error".to_string(),
                };
                differences.insert(format!("{fixture}: {} / {}", show(a), show(b)));
            }
        }
    }
    let decoded: BTreeSet<&str> = [JOB_LISTINGS, JOB_LOOKUPS, NODE_LISTINGS].concat().into_iter().collect();
    for fixture in sides[0].names().filter(|name| !decoded.contains(name) && sides[1].has(name)) {
        let (a, b) = (sides[0].fixture(fixture).outcome(), sides[1].fixture(fixture).outcome());
        if a != b {
            differences.insert(format!("{fixture}: {a} / {b}"));
        }
    }
    differences
}

async fn listed_jobs(replay: &Replay, slurm: &SlurmClient, fixture: &str) -> Vec<Job> {
    match replay.serve(&[fixture], slurm.jobs(None)).await.0 {
        Ok(JobsPage::All { jobs, .. }) => jobs,
        other => panic!("{fixture}: {other:?}"),
    }
}

async fn node_listing(replay: &Replay, slurm: &SlurmClient, fixture: &str) -> Result<Vec<Node>, SlurmError> {
    let recorded = replay.fixture(fixture);
    let since = recorded.query.contains("update_time").then(|| recorded.since());
    match replay.serve(&[fixture], slurm.nodes(since)).await.0? {
        NodesPage::All { nodes, .. } => Ok(nodes),
        NodesPage::Unchanged => Ok(Vec::new()),
    }
}

fn compare_records<T>(
    fixture: &str,
    left: &[T],
    right: &[T],
    key: impl Fn(&T) -> String,
    fields: impl Fn(&T) -> Vec<(&'static str, String)>,
    differences: &mut BTreeSet<String>,
) {
    let (left_keys, right_keys): (Vec<String>, Vec<String>) =
        (left.iter().map(&key).collect(), right.iter().map(&key).collect());
    if left_keys != right_keys {
        differences.insert(format!("{fixture}: records {left_keys:?} / {right_keys:?}"));
        return;
    }
    for (one, other) in left.iter().zip(right) {
        for ((field, a), (_, b)) in fields(one).into_iter().zip(fields(other)) {
            if a != b {
                differences.insert(format!("{fixture} {} {field}: {a} / {b}", key(one)));
            }
        }
    }
}

/// The fields of a job the host reads, and the id it names the job by; timestamps reduced to whether
/// they are set, since they differ from one recording to the next.
fn job_fields(job: &Job) -> Vec<(&'static str, String)> {
    let time = |time: &NoValue| match time.get() {
        Some(0) => "0",
        Some(_) => "a time",
        None => "unset",
    };
    vec![
        ("target", job.target()),
        ("name", format!("{:?}", job.name)),
        ("admin_comment", format!("{:?}", job.admin_comment)),
        ("comment", format!("{:?}", job.comment)),
        ("account", format!("{:?}", job.account)),
        ("job_state", format!("{:?}", job.job_state)),
        ("nodes", format!("{:?}", job.nodes)),
        ("state_reason", format!("{:?}", job.state_reason)),
        ("partition", format!("{:?}", job.partition)),
        ("priority", format!("{:?}", job.priority)),
        ("excluded_nodes", format!("{:?}", job.excluded_nodes)),
        ("batch_flag", format!("{:?}", job.batch_flag)),
        ("user_name", format!("{:?}", job.user_name)),
        ("start_time", time(&job.start_time).to_string()),
        ("preempt_time", time(&job.preempt_time).to_string()),
        ("requeue", format!("{:?}", job.requeue)),
        ("tres_alloc_str", format!("{:?}", job.tres_alloc_str)),
        ("tres_per_node", format!("{:?}", job.tres_per_node)),
        ("cpus", format!("{:?}", job.cpus)),
        ("array_job_id", format!("{:?}", job.array_job_id)),
        ("array_task_id", format!("{:?}", job.array_task_id)),
        ("array_task_string", format!("{:?}", job.array_task_string)),
        ("node_count", format!("{:?}", job.node_count)),
        ("memory_per_node", format!("{:?}", job.memory_per_node)),
    ]
}

fn node_fields(node: &Node) -> Vec<(&'static str, String)> {
    vec![
        ("state", format!("{:?}", node.state)),
        ("reason", format!("{:?}", node.reason)),
        // Who set no reason is noise: 24.11 says root, or no one, depending on how the node registered.
        (
            "reason_set_by_user",
            if node.reason.is_empty() { String::new() } else { format!("{:?}", node.reason_set_by_user) },
        ),
        ("comment", format!("{:?}", node.comment)),
        ("cpus", node.cpus.to_string()),
        ("real_memory", node.real_memory.to_string()),
        ("gres", format!("{:?}", node.gres)),
        ("features", format!("{:?}", node.features)),
        ("address", format!("{:?}", node.address)),
        ("hostname", format!("{:?}", node.hostname)),
        ("partitions", format!("{:?}", node.partitions)),
        ("alloc_cpus", node.alloc_cpus.to_string()),
        ("alloc_memory", node.alloc_memory.to_string()),
        ("gres_used", format!("{:?}", node.gres_used)),
    ]
}
