//! What the host reads of jobs: the listings it polls and the lookups of one job.

use serde_json::json;
use sunk_slurm::{Job, JobState, JobsPage, SlurmClient, expand_hostlist};

use crate::replay::Replay;

/// What the host must read of one job of a listing, found by name.
struct Expected {
    name: &'static str,
    state: JobState,
    /// The state flags as `state_name()` joins them.
    flags: &'static str,
    reason: &'static str,
    nodes: Nodes,
    batch: bool,
}

enum Nodes {
    None,
    Any,
    Exactly(&'static str),
}

const fn expect(name: &'static str, state: JobState, flags: &'static str, reason: &'static str) -> Expected {
    Expected { name, state, flags, reason, nodes: Nodes::None, batch: true }
}

const LISTED: &[Expected] = &[
    Expected { nodes: Nodes::Any, ..expect("done", JobState::Ended, "COMPLETED", "None") },
    Expected { nodes: Nodes::Any, ..expect("failed", JobState::Ended, "FAILED", "NonZeroExitCode") },
    Expected { nodes: Nodes::Any, batch: false, ..expect("alloc", JobState::Ended, "CANCELLED", "None") },
    // A refused immediate allocation still leaves a job record behind.
    Expected { batch: false, ..expect("alloc-full", JobState::Ended, "FAILED", "BadConstraints") },
    Expected { nodes: Nodes::Exactly("r[1-2]"), ..expect("multi", JobState::Running, "RUNNING", "None") },
    Expected { nodes: Nodes::Any, ..expect("running", JobState::Running, "RUNNING", "None") },
    expect("pending", JobState::Pending, "PENDING", "Priority"),
    expect("held", JobState::Pending, "PENDING", "JobHeldUser"),
    expect("big", JobState::Pending, "PENDING", "Priority"),
];

/// After an urgent job took r2 (PreemptMode=REQUEUE): what ran there is pending again.
const AFTER_PREEMPTION: &[Expected] = &[
    expect("multi", JobState::Pending, "PENDING", "BeginTime"),
    Expected { nodes: Nodes::Exactly("r2"), ..expect("urgent", JobState::Running, "RUNNING", "None") },
    expect("held", JobState::Ended, "CANCELLED", "JobHeldUser"),
    Expected { nodes: Nodes::Any, ..expect("running", JobState::Running, "RUNNING", "None") },
];

pub async fn listings(replay: &Replay, slurm: &SlurmClient) {
    let (jobs, since) = listed(replay, slurm, "jobs").await;
    check_listed("jobs", &jobs, LISTED);

    let running = by_name(&jobs, "running");
    assert_eq!(running.comment, "pod default/web-0");
    assert_eq!(running.admin_comment, r#"{"sunk":"updated"}"#, "the update of a running job's admin comment");
    assert_eq!((running.partition.as_str(), running.user_name.as_str()), ("batch", "root"));
    assert_eq!(
        (running.cpus.get(), running.memory_per_node.get(), running.node_count.get()),
        (Some(1), Some(100), Some(1))
    );
    assert!(running.tres_alloc_str.contains("cpu=1") && running.tres_alloc_str.contains("mem=100M"));
    assert!(running.requeue, "JobRequeue defaults to requeueable");
    assert!(running.start_time.get().is_some_and(|time| time > 0));
    assert_eq!(running.preempt_time.get().filter(|time| *time > 0), None);

    let multi = by_name(&jobs, "multi");
    assert_eq!(expand_hostlist(&multi.nodes).unwrap(), ["r1", "r2"]);
    assert_eq!((multi.node_count.get(), multi.cpus.get()), (Some(2), Some(2)));
    let held = by_name(&jobs, "held");
    assert_eq!(held.priority.get(), Some(0), "a held job's priority");
    // A hold by `scontrol hold` notes nothing; slurmctld's own holds say why here.
    assert_eq!((held.system_comment.as_str(), held.user_id), ("", Some(0)));

    // The array 0-3 with one CPU free: task 0 runs as a job of its own, tasks 1-3 wait in the array's
    // record, whose target (the array's id) names every task, running ones included.
    let array = replay.fixture("submit-array").job_id().expect("the array's id");
    assert_eq!(
        array_records(&jobs, array),
        [(array.to_string(), JobState::Pending), (format!("{array}_0"), JobState::Running)]
    );
    let rest = jobs.iter().find(|job| job.job_id == array).unwrap();
    assert_eq!((rest.array_task_string.as_str(), rest.state_reason.as_str()), ("1-3", "Resources"));
    let task0 = jobs.iter().find(|job| job.array_task() == Some((array, 0))).unwrap();
    assert_ne!(task0.job_id, array, "a running task has a job id of its own");

    // The host passes the last_update of its previous listing; nothing changed is no jobs and a
    // last_update of 0.
    assert_eq!(replay.fixture("jobs-unchanged").json()["last_update"]["number"], json!(0));
    let (page, _) = replay.serve(&["jobs-unchanged"], slurm.jobs(Some(since))).await;
    assert!(matches!(page, Ok(JobsPage::Unchanged)), "{page:?}");

    let (jobs, _) = listed(replay, slurm, "jobs-preempted").await;
    check_listed("jobs-preempted", &jobs, AFTER_PREEMPTION);
    // Requeued by preemption: preempt_time is cleared, restart_cnt (not read) counts it.
    assert_eq!(by_name(&jobs, "multi").preempt_time.get(), Some(0));
    // Task 3 was cancelled, task 1 took the CPU multi left, tasks 0 (requeued) and 2 wait, 2 alone in
    // the array's record. 24.11 numbers that record (`array_task_id: 2`), 26.05 does not
    // (`array_task_string: "2"`): either is task 2, or cancelling it would cancel the whole array.
    assert_eq!(
        array_records(&jobs, array),
        [
            (format!("{array}_0"), JobState::Pending),
            (format!("{array}_1"), JobState::Running),
            (format!("{array}_2"), JobState::Pending)
        ]
    );
}

/// A full listing: its jobs, and the last_update to pass next time.
async fn listed(replay: &Replay, slurm: &SlurmClient, fixture: &str) -> (Vec<Job>, u64) {
    match replay.serve(&[fixture], slurm.jobs(None)).await.0 {
        Ok(JobsPage::All { jobs, last_update }) if last_update > 0 => (jobs, last_update),
        other => panic!("{fixture}: {other:?}"),
    }
}

fn check_listed(fixture: &str, jobs: &[Job], expected: &[Expected]) {
    for want in expected {
        let job = by_name(jobs, want.name);
        let what = format!("{fixture}: job {} ({})", job.job_id, want.name);
        assert_eq!((job.state(), job.state_name().as_str()), (want.state, want.flags), "{what}");
        assert_eq!(job.state_reason, want.reason, "{what}");
        assert_eq!(job.batch_flag, want.batch, "{what}");
        match want.nodes {
            Nodes::None => assert!(job.nodes.is_empty(), "{what}: {}", job.nodes),
            Nodes::Any => assert!(!job.nodes.is_empty(), "{what}"),
            Nodes::Exactly(nodes) => assert_eq!(job.nodes, nodes, "{what}"),
        }
        assert_eq!(job.holds_nodes(), want.state == JobState::Running, "{what}");
    }
}

/// The job of that name that is no array's task.
fn by_name<'a>(jobs: &'a [Job], name: &str) -> &'a Job {
    let job = jobs.iter().find(|job| job.name == name && job.array_job_id.get().unwrap_or(0) == 0);
    job.unwrap_or_else(|| panic!("no job {name}"))
}

/// The records of an array as the host names them to Slurm, in order.
fn array_records(jobs: &[Job], array: u32) -> Vec<(String, JobState)> {
    let records = jobs.iter().filter(|job| job.array_job_id.get() == Some(array.into()));
    let mut records: Vec<(String, JobState)> = records.map(|job| (job.target(), job.state())).collect();
    records.sort_by(|a, b| a.0.cmp(&b.0));
    records
}

/// `GET job/<id>` as the host asks it, the job it must get back, and how many records Slurm listed.
const LOOKUPS: &[(&str, &str, JobState, usize)] = &[
    ("job-completed", "done", JobState::Ended, 1),
    ("job-allocated", "alloc", JobState::Running, 1),
    ("job-running", "running", JobState::Running, 1),
    ("job-pending", "pending", JobState::Pending, 1),
    ("job-pending-excluded", "pending", JobState::Pending, 1),
    ("job-preempted", "multi", JobState::Pending, 1),
    // Slurm lists every record of an array for any of its ids: the host must pick the one asked for.
    ("job-array", "array", JobState::Pending, 2),
    ("job-array-task-running", "array", JobState::Running, 2),
];

pub async fn lookups(replay: &Replay, slurm: &SlurmClient) {
    for &(fixture, name, state, records) in LOOKUPS {
        let recorded = replay.fixture(fixture);
        assert_eq!(recorded.json()["jobs"].as_array().map(Vec::len), Some(records), "{fixture}");
        let id = recorded.last_segment();
        let (job, _) = replay.serve(&[fixture], slurm.job(&id)).await;
        let job = job.unwrap_or_else(|error| panic!("{fixture}: {error}")).expect(fixture);
        assert_eq!((job.target(), job.name.as_str(), job.state()), (id, name, state), "{fixture}");
    }

    // Task 1 has no record of its own: it waits with tasks 2 and 3 in the array's.
    let recorded = replay.fixture("job-array-task-pending");
    let (job, _) = replay.serve(&["job-array-task-pending"], slurm.job(recorded.last_segment())).await;
    let job = job.unwrap().expect("the array's pending tasks");
    let array = replay.fixture("submit-array").job_id().unwrap();
    assert_eq!((job.target(), job.array_task_string.as_str()), (array.to_string(), "1-3"));

    let recorded = replay.fixture("job-pending-excluded");
    let (job, _) = replay.serve(&["job-pending-excluded"], slurm.job(recorded.last_segment())).await;
    assert_eq!(job.unwrap().unwrap().excluded_nodes, "r2");
    let (job, _) = replay.serve(&["job-unknown"], slurm.job(999999)).await;
    assert_eq!(job.unwrap(), None);
}
