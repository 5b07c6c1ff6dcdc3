//! How the host submits, allocates, updates and cancels jobs, and what Slurm's refusals look like to it.

use serde_json::json;
use sunk_slurm::{JobDescription, JobFlag, JobState, JobUpdate, NoValue, NodesPage, SlurmClient, SlurmError};

use crate::replay::{OPENAPI, Replay};
use crate::{Release, client, ends, outcome};

/// A job as the recorder submits them, changed by `change`.
fn job(name: &str, change: impl FnOnce(&mut JobDescription)) -> JobDescription {
    let mut job = JobDescription {
        name: name.into(),
        partition: Some("batch".into()),
        current_working_directory: "/tmp".into(),
        environment: vec!["PATH=/bin:/usr/bin".into()],
        script: "#!/bin/sh\nexec sleep infinity".into(),
        cpus_per_task: 1,
        memory_per_node: NoValue::of(100),
        time_limit: Some(NoValue::of(30)),
        ..Default::default()
    };
    change(&mut job);
    job
}

/// An allocation as the recorder asks for them: no script, now or never.
fn allocation(name: &str) -> JobDescription {
    job(name, |job| {
        job.script.clear();
        job.immediate = Some(true);
    })
}

/// One description the recorder sent, as the host sends it.
struct Submission {
    fixture: &'static str,
    job: JobDescription,
    allocate: bool,
    /// Whether the host sends the recorder's body (see [`Submission::unlike_recorded`]).
    as_recorded: bool,
    /// Slurm's refusal: HTTP status, error numbers and words of its description.
    refused: Option<(u16, &'static [i64], &'static str)>,
}

impl Submission {
    fn accepted(fixture: &'static str, job: JobDescription) -> Self {
        Self { fixture, job, allocate: false, as_recorded: true, refused: None }
    }

    fn refused(
        fixture: &'static str,
        job: JobDescription,
        status: u16,
        errors: &'static [i64],
        says: &'static str,
    ) -> Self {
        Self { refused: Some((status, errors, says)), ..Self::accepted(fixture, job) }
    }

    fn allocated(self) -> Self {
        Self { allocate: true, ..self }
    }

    /// `JobDescription` cannot say what the recorder sent (`hold`, the `EXTERNAL_JOB` flag), or sends an
    /// empty working directory where the recorder sent none: only the answer is checked.
    fn unlike_recorded(self) -> Self {
        Self { as_recorded: false, ..self }
    }
}

/// Every description the recorder sent (but the mistyped one), as the host sends it.
fn submissions_made(release: &Release) -> Vec<Submission> {
    let (accepted, refused) = (Submission::accepted, Submission::refused);
    vec![
        accepted("submit", job("done", |job| job.script = "#!/bin/sh\ntrue".into())),
        accepted("submit-failing", job("failed", |job| job.script = "#!/bin/sh\nexit 3".into())),
        accepted(
            "submit-multinode",
            job("multi", |job| {
                (job.minimum_nodes, job.maximum_nodes, job.tasks, job.tasks_per_node) =
                    (Some(2), Some(2), Some(2), Some(1))
            }),
        ),
        accepted(
            "submit-commented",
            job("running", |job| {
                job.comment = Some("pod default/web-0".into());
                job.admin_comment = Some(r#"{"sunk":"placeholder"}"#.into());
            }),
        ),
        accepted("submit-array", job("array", |job| job.array = Some("0-3".into()))),
        accepted("submit-pending", job("pending", |_| ())),
        accepted("submit-held", job("held", |_| ())).unlike_recorded(),
        accepted(
            "submit-big",
            job("big", |job| {
                (job.minimum_nodes, job.cpus_per_task, job.tasks, job.tasks_per_node) = (Some(2), 2, Some(2), Some(1))
            }),
        ),
        accepted(
            "submit-urgent",
            job("urgent", |job| {
                job.partition = Some("urgent".into());
                job.cpus_per_task = 2;
                job.required_nodes = vec!["r2".into()];
            }),
        ),
        accepted("allocate", allocation("alloc")).allocated(),
        refused(
            "submit-unknown-partition",
            job("refused", |job| job.partition = Some("nope".into())),
            release.refusal_status,
            &[2000],
            "Invalid partition name",
        ),
        refused(
            "submit-no-cwd",
            job("no-cwd", |job| job.current_working_directory.clear()),
            release.refusal_status,
            &[2063],
            "current working directory",
        )
        .unlike_recorded(),
        // v0.0.42 does not know the flag: 500 on both releases.
        refused("submit-external", job("external", |job| job.script.clear()), 500, &[9207, 9000], "EXTERNAL_JOB")
            .unlike_recorded(),
        refused(
            "allocate-full",
            allocation("alloc-full"),
            release.refusal_status,
            &[2013],
            "Immediate execution impossible",
        )
        .allocated(),
    ]
}

pub async fn submissions(replay: &Replay, slurm: &SlurmClient, release: &Release) {
    let mut made = submissions_made(release);
    if release.speaks.has_external_jobs() {
        // Accepted in the versions that know the flag: see `external_jobs`.
        made.retain(|submission| submission.fixture != "submit-external");
    }
    for Submission { fixture, job, allocate, as_recorded, refused } in made {
        let recorded = replay.fixture(fixture);
        let (answer, sent) = if allocate {
            replay.serve(&[fixture], slurm.allocate(&job)).await
        } else {
            replay.serve(&[fixture], slurm.submit(&job)).await
        };
        if as_recorded {
            recorded.assert_sent(&sent[0]);
        }
        match refused {
            None => {
                let id = answer.unwrap_or_else(|error| panic!("{fixture}: {error}"));
                assert_eq!(Some(id), recorded.job_id(), "{fixture}");
            }
            Some((status, errors, says)) => {
                let what = if allocate { "job/allocate" } else { "job/submit" };
                assert_eq!(outcome(&answer), format!("{what}: HTTP {status}, errors {errors:?}"), "{fixture}");
                let error = answer.unwrap_err().to_string();
                assert!(error.contains(says), "{fixture}: {error}");
            }
        }
    }
    // A mistyped field: HTTP 200, no job id, only a warning naming the field.
    let (answer, _) = replay.serve(&["submit-mistyped"], slurm.submit(&job("mistyped", |_| ()))).await;
    let Err(SlurmError::NotSubmitted(warnings)) = answer else { panic!("submit-mistyped: {answer:?}") };
    assert!(warnings.iter().any(|warning| warning.source.contains("cpus_per_task")), "{warnings:?}");
}

pub async fn updates_and_cancels(replay: &Replay, slurm: &SlurmClient) {
    let comment = |text: &str| JobUpdate { admin_comment: Some(text.into()), ..Default::default() };
    let excluded = |nodes: &[&str]| JobUpdate {
        excluded_nodes: Some(nodes.iter().map(|node| node.to_string()).collect()),
        ..Default::default()
    };
    let updates = [
        ("update-job", comment(r#"{"sunk":"updated"}"#), "ok"),
        ("update-job-excluded", excluded(&["r2"]), "ok"),
        ("update-job-excluded-clear", excluded(&[]), "ok"),
        ("update-job-unknown", comment("x"), "job update: HTTP 404, errors [2017]"),
    ];
    for (fixture, update, expected) in updates {
        let recorded = replay.fixture(fixture);
        let (answer, sent) = replay.serve(&[fixture], slurm.update_job(recorded.last_segment(), &update)).await;
        recorded.assert_sent(&sent[0]);
        assert_eq!(outcome(&answer), expected, "{fixture}");
    }

    // A cancelled, unknown or already finished job: HTTP 200, the error inside `status[]`.
    for fixture in ["cancel", "cancel-done", "cancel-unknown", "cancel-array-task"] {
        let id = replay.fixture(fixture).last_segment();
        assert_eq!(ends(replay, &[fixture], slurm.cancel(id)).await, "ok", "{fixture}");
    }
    let recorded = replay.fixture("cancel-jobs");
    let ids: Vec<&str> = recorded.request_body.as_ref().unwrap()["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|id| id.as_str().unwrap())
        .collect();
    let (not_cancelled, sent) = replay.serve(&["cancel-jobs"], slurm.cancel_jobs(&ids)).await;
    recorded.assert_sent(&sent[0]);
    assert_eq!(not_cancelled.unwrap(), Vec::<(String, String)>::new(), "unknown and finished jobs are not failures");
}

/// Placeholders with no script (`flags: ["EXTERNAL_JOB"]`, v0.0.43 and later) as the host submits and
/// reads them, and requeueing (v0.0.45). `parser` is what the recording spoke; the client speaks what
/// it chooses, so the calls it makes are replayed only from the recording in that version.
pub async fn external_jobs(parser: &str) {
    let replay = Replay::start("26.05.5", parser).await;
    let slurm = client(&replay);
    let (info, _) = replay.serve(&[OPENAPI, "ping"], slurm.discover()).await;
    let speaks = info.unwrap().api.to_string() == parser;
    let external = job("external", |job| {
        job.script.clear();
        job.flags = vec![JobFlag::External];
    });
    let submitted = replay.fixture("submit-external");
    assert_eq!(submitted.status, 200);
    let id = if speaks {
        let (id, sent) = replay.serve(&["submit-external"], slurm.submit(&external)).await;
        submitted.assert_sent(&sent[0]);
        id.expect("an external job without a script is accepted")
    } else {
        submitted.job_id().expect("an external job without a script is accepted")
    };

    let (job, _) = replay.serve(&["job-external"], slurm.job(id)).await;
    let job = job.unwrap().unwrap();
    assert_eq!(job.state(), JobState::Running, "{parser}");
    assert!(job.holds_nodes() && !job.batch_flag, "{parser}: {job:?}");
    let (page, _) = replay.serve(&["nodes-external"], slurm.nodes(None)).await;
    let Ok(NodesPage::All { nodes, .. }) = page else { panic!("{page:?}") };
    let node = nodes.iter().find(|node| node.name == job.nodes).unwrap();
    assert_eq!((node.flags().base(), node.alloc_cpus, node.alloc_memory), ("MIXED", 1, 100), "it holds what it asked");

    // Slurm's preemption with PreemptMode=REQUEUE cannot requeue it: it ends PREEMPTED, for good.
    let (job, _) = replay.serve(&["job-external-preempted"], slurm.job(id)).await;
    let job = job.unwrap().unwrap();
    assert_eq!((job.state(), job.state_name().as_str()), (JobState::Ended, "PREEMPTED"));

    let with_script = replay.fixture("submit-external-script");
    assert_eq!((with_script.status, with_script.error_numbers()), (500, vec![2189]), "an external job has no script");
    let allocated = replay.fixture("allocate-external");
    assert!(allocated.status == 200 && allocated.job_id().is_some(), "job/allocate takes EXTERNAL_JOB too");
    if speaks {
        let attempt = JobDescription {
            name: "external-alloc".into(),
            immediate: Some(true),
            required_nodes: vec!["r2".into()],
            ..external.clone()
        };
        let (granted, sent) = replay.serve(&["allocate-external"], slurm.allocate(&attempt)).await;
        allocated.assert_sent(&sent[0]);
        assert_eq!(granted.ok(), allocated.job_id());
    }
    let ended = ends(&replay, &["cancel-external"], slurm.cancel(allocated.job_id().unwrap())).await;
    assert_eq!(ended, "ok", "DELETE job/<id> ends it");

    if replay.has("requeue") {
        // v0.0.45 alone has requeue endpoints (GET job/{id}/requeue, POST jobs/requeue); they take
        // batch jobs only. The client uses the first, whatever else it speaks.
        assert!(slurm.can_requeue(), "slurmrestd offers v0.0.45");
        let batch_job = replay.fixture("job-requeued").json()["jobs"][0]["job_id"].as_u64().unwrap();
        assert_eq!(ends(&replay, &["requeue"], slurm.requeue(batch_job)).await, "ok");
        assert_eq!(replay.fixture("job-requeued").json()["jobs"][0]["job_state"], json!(["PENDING"]));
        let refused = ends(&replay, &["requeue-external"], slurm.requeue(allocated.job_id().unwrap())).await;
        assert_eq!(refused, "job requeue: HTTP 422, errors [2039]", "an external job cannot be requeued");
        assert_eq!(replay.fixture("requeue-jobs").error_numbers(), [2039, 2017]);
    }
}
