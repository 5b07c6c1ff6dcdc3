//! The pod scheduler end to end: real kube-apiserver, real slurmctld/slurmrestd, real slurmd,
//! a real `sunk host` process. Run through the README's test command (one test at a time).

use std::time::Duration;

use sunk::slurm::{JobState, JobStatesListing, JobsPage};
use sunk_e2e::{Cluster, SlurmJob, in_slurm_root, node_name, pod, scheduled_condition, wait_for};

const BIND: Duration = Duration::from_secs(30);

#[tokio::test]
async fn a_pod_gets_one_job_and_is_bound_where_slurm_put_it() -> anyhow::Result<()> {
    let mut cluster = Cluster::connect("bind").await?;
    let host = cluster.start_host(&[])?;
    // The host says which Slurm it found, and the API version it speaks with it, once it has asked
    // (it serves /metrics from its start, before Slurm answers).
    // 24.11 serves v0.0.42 at newest; 26.05 serves v0.0.44, the newest sunk speaks.
    let api = if sunk_e2e::slurm_version() == "24.11" { "v0.0.42" } else { "v0.0.44" };
    let info = format!(r#"sunk_slurm_info{{version="{}."#, sunk_e2e::slurm_version());
    let spoken = format!(r#"api="{api}"}} 1"#);
    wait_for("the host to say which Slurm it speaks with", BIND, || async {
        let metrics = cluster.metrics(host).await.ok()?;
        (metrics.contains(&info) && metrics.contains(&spoken)).then_some(())
    })
    .await?;
    let created = cluster.create_pod(pod("web", "1", "512Mi")).await?;
    let uid = created.metadata.uid.clone().unwrap();

    let bound = cluster.wait_pod("web", "the pod to be bound", BIND, |pod| node_name(pod).is_some()).await?;
    let jobs = cluster.jobs_of(&uid).await?;
    assert_eq!(jobs.len(), 1, "exactly one placeholder job: {jobs:?}");
    assert_eq!(jobs[0].state(), JobState::Running);
    let expected = cluster.kube_node_of(&jobs[0].nodes).await?;
    assert_eq!(node_name(&bound), expected.as_deref(), "bound to the Node hosting slurmd {}", jobs[0].nodes);
    let condition = scheduled_condition(&bound).expect("PodScheduled condition");
    assert_eq!(condition.0, "True");
    let job_id = jobs[0].job_id.to_string();
    cluster
        .wait_event("web", "Scheduled, naming the job", |reason, note| reason == "Scheduled" && note.contains(&job_id))
        .await?;
    // The kubelet starts it, in a real container.
    cluster.wait_pod("web", "the pod to run", BIND, sunk_e2e::is_running).await?;
    Ok(())
}

#[tokio::test]
async fn deleting_a_pod_cancels_its_job() -> anyhow::Result<()> {
    let mut cluster = Cluster::connect("delete").await?;
    let tenancy = cluster.grant(serde_json::json!({"requiredNodes": true}))?;
    cluster.start_host(&[("SUNK_TENANCY", &tenancy)])?;
    let bound = cluster.create_pod(pod("bound", "2", "256Mi")).await?;
    cluster.wait_pod("bound", "the pod to be bound", BIND, |pod| node_name(pod).is_some()).await?;
    // A second pod pinned to the node the first one fills, so its job stays pending.
    let busy = cluster.jobs_of(bound.metadata.uid.as_deref().unwrap()).await?[0].nodes.clone();
    let mut pinned = pod("pending", "2", "256Mi");
    pinned["metadata"]["annotations"] = serde_json::json!({"sunk.dev/required-nodes": busy});
    let pending = cluster.create_pod(pinned).await?;
    cluster
        .wait_pod("pending", "the pinned pod's job to be pending", BIND, |pod| {
            scheduled_condition(pod).is_some_and(|(_, reason, _)| reason == "Unschedulable")
        })
        .await?;

    for (name, created) in [("bound", bound), ("pending", pending)] {
        let uid = created.metadata.uid.clone().unwrap();
        let job_id = cluster.jobs_of(&uid).await?[0].job_id;
        cluster.delete_pod(name).await?;
        let (slurm, uid) = (&cluster, uid.as_str());
        let state = wait_for(&format!("job {job_id} of pod {name} to end"), BIND, || async move {
            let jobs = slurm.jobs_of(uid).await.ok()?;
            jobs.iter().find(|job| job.job_id == job_id && job.state() == JobState::Ended).map(|job| job.state_name())
        })
        .await?;
        assert!(state.starts_with("CANCELLED"), "job of pod {name}: {state}");
    }
    Ok(())
}

#[tokio::test]
async fn a_pod_without_requests_is_not_scheduled_and_says_why() -> anyhow::Result<()> {
    let mut cluster = Cluster::connect("norequests").await?;
    cluster.start_host(&[])?;
    let mut spec = pod("bare", "1", "1Gi");
    spec["spec"]["containers"][0]["resources"] = serde_json::json!({});
    let created = cluster.create_pod(spec).await?;

    let rejected = cluster
        .wait_pod("bare", "a PodScheduled=False condition", BIND, |pod| {
            scheduled_condition(pod).is_some_and(|(status, reason, _)| status == "False" && reason == "PolicyRejected")
        })
        .await?;
    let (_, _, message) = scheduled_condition(&rejected).unwrap();
    assert!(message.contains("resources.requests.cpu"), "the condition names the field: {message}");
    cluster
        .wait_event("bare", "FailedScheduling saying what to fix", |reason, note| {
            reason == "FailedScheduling" && note.contains("resources.requests.cpu")
        })
        .await?;
    // Give the host a few polls to do something wrong.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        cluster.jobs_of(created.metadata.uid.as_deref().unwrap()).await?.is_empty(),
        "no Slurm job for a rejected pod"
    );
    assert!(node_name(&cluster.pods().get("bare").await?).is_none());
    Ok(())
}

#[tokio::test]
async fn a_host_killed_between_submit_and_bind_recovers_with_one_job() -> anyhow::Result<()> {
    let mut cluster = Cluster::connect("restart").await?;
    let doomed = cluster.start_host(&[("SUNK_FAILPOINTS", "after-submit")])?;
    let created = cluster.create_pod(pod("survivor", "1", "256Mi")).await?;
    let uid = created.metadata.uid.clone().unwrap();
    cluster.wait_host_exit(doomed, BIND).await?;

    assert_eq!(cluster.jobs_of(&uid).await?.len(), 1, "the job was submitted before the crash");
    assert!(node_name(&cluster.pods().get("survivor").await?).is_none(), "and the pod was not bound");

    cluster.start_host(&[])?;
    let bound = cluster
        .wait_pod("survivor", "the restarted host to bind the pod", BIND, |pod| node_name(pod).is_some())
        .await?;
    let jobs = cluster.jobs_of(&uid).await?;
    assert_eq!(jobs.len(), 1, "still exactly one job: {jobs:?}");
    assert_eq!(node_name(&bound), cluster.kube_node_of(&jobs[0].nodes).await?.as_deref());
    Ok(())
}

#[tokio::test]
async fn a_pod_waits_for_a_full_cluster_with_the_slurm_reason_then_binds() -> anyhow::Result<()> {
    let mut cluster = Cluster::connect("full").await?;
    cluster.start_host(&[])?;
    // Two Slurm nodes of 2 CPUs: two whole-node pods fill the cluster.
    for name in ["filler-1", "filler-2"] {
        cluster.create_pod(pod(name, "2", "1Gi")).await?;
    }
    for name in ["filler-1", "filler-2"] {
        cluster.wait_pod(name, "a filler to be bound", BIND, |pod| node_name(pod).is_some()).await?;
    }
    cluster.create_pod(pod("waiter", "2", "1Gi")).await?;
    let waiting = cluster
        .wait_pod("waiter", "the pod to report Slurm's pending reason", BIND, |pod| {
            scheduled_condition(pod)
                .is_some_and(|(_, reason, message)| reason == "Unschedulable" && message.contains("Resources"))
        })
        .await?;
    assert!(node_name(&waiting).is_none());
    assert_eq!(waiting.status.as_ref().and_then(|s| s.phase.as_deref()), Some("Pending"));

    let freed = cluster.pods().get("filler-1").await?;
    cluster.delete_pod("filler-1").await?;
    let bound = cluster
        .wait_pod("waiter", "the pod to be bound once capacity frees", BIND, |pod| node_name(pod).is_some())
        .await?;
    assert_eq!(node_name(&bound), node_name(&freed), "it takes the freed node");
    Ok(())
}

#[tokio::test]
async fn a_pod_slurm_can_never_place_stays_pending_with_slurms_error_and_one_job() -> anyhow::Result<()> {
    let mut cluster = Cluster::connect("impossible").await?;
    cluster.start_host(&[])?;
    let created = cluster.create_pod(pod("huge", "64", "1Gi")).await?;
    // Slurm 24.11 fails a job no node can ever hold (BadConstraints); 26.05 keeps it pending
    // (PartitionConfig), since a dynamic node large enough may still join.
    let failed_at_once = sunk_e2e::slurm_version() == "24.11";
    let (expected, slurm_reason) =
        if failed_at_once { ("SlurmJobFailed", "BadConstraints") } else { ("SlurmJobPending", "PartitionConfig") };
    let refused = cluster
        .wait_pod("huge", "the pod to carry Slurm's refusal", BIND, |pod| {
            scheduled_condition(pod).is_some_and(|(status, reason, _)| status == "False" && reason == expected)
        })
        .await?;
    let (_, _, message) = scheduled_condition(&refused).unwrap();
    assert!(message.contains(slurm_reason), "names Slurm's reason: {message}");
    if failed_at_once {
        cluster
            .wait_event("huge", "FailedScheduling in Slurm's own words", |reason, note| {
                reason == "FailedScheduling" && note.contains("Requested node configuration is not available")
            })
            .await?;
    }
    // It is neither deleted nor resubmitted over and over.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(node_name(&cluster.pods().get("huge").await?).is_none());
    assert_eq!(cluster.jobs_of(created.metadata.uid.as_deref().unwrap()).await?.len(), 1);
    Ok(())
}

#[tokio::test]
async fn placeholders_of_pods_deleted_while_the_host_was_down_are_cancelled() -> anyhow::Result<()> {
    let mut cluster = Cluster::connect("orphan").await?;
    let host = cluster.start_host(&[("SUNK_FAILPOINTS", "after-submit")])?;
    let created = cluster.create_pod(pod("gone", "1", "256Mi")).await?;
    let uid = created.metadata.uid.clone().unwrap();
    cluster.wait_host_exit(host, BIND).await?;
    cluster.delete_pod("gone").await?;
    let jobs = cluster.jobs_of(&uid).await?;
    assert!(jobs.len() == 1 && jobs[0].state() != JobState::Ended, "a live orphan: {jobs:?}");

    cluster.start_host(&[])?;
    let (slurm, uid) = (&cluster, uid.as_str());
    let state = wait_for("the orphan to be cancelled", BIND, || async move {
        let jobs = slurm.jobs_of(uid).await.ok()?;
        jobs.iter().find(|job| job.state() == JobState::Ended).map(|job| job.state_name())
    })
    .await?;
    // Ended as soon as cancelled, possibly still cleaning up (CANCELLED+COMPLETING).
    assert!(state.starts_with("CANCELLED"), "the orphan was cancelled: {state}");
    Ok(())
}

#[tokio::test]
async fn a_malformed_annotation_or_unknown_partition_is_refused_naming_the_key() -> anyhow::Result<()> {
    let mut cluster = Cluster::connect("annotations").await?;
    cluster.start_host(&[])?;
    for (name, key, value) in
        [("soon", "sunk.dev/timeout", "soon"), ("nowhere", "sunk.coreweave.com/partition", "nowhere")]
    {
        let mut spec = pod(name, "1", "256Mi");
        spec["metadata"]["annotations"] = serde_json::json!({ key: value });
        let created = cluster.create_pod(spec).await?;
        let refused = cluster
            .wait_pod(name, "a PolicyRejected condition", BIND, |pod| {
                scheduled_condition(pod).is_some_and(|(_, reason, _)| reason == "PolicyRejected")
            })
            .await?;
        let (_, _, message) = scheduled_condition(&refused).unwrap();
        assert!(message.contains(key) && message.contains(value), "names {key} and {value:?}: {message}");
        assert!(cluster.jobs_of(created.metadata.uid.as_deref().unwrap()).await?.is_empty());
    }
    Ok(())
}

/// What a pod's pass reads of its job array's task before any listing shows it (`GET job/<array>_<task>`):
/// every record of the array, so one read answers for each task of a burst.
#[tokio::test]
async fn a_tasks_name_reads_every_record_of_its_array() -> anyhow::Result<()> {
    let cluster = Cluster::connect("array-read").await?;
    let held = SlurmJob::submit(&["--hold", "--array=0-2", "-p", "batch", "--wrap", "sleep 60"])?;
    let array: u64 = held.0.parse()?;
    let records = cluster.slurm.job_records(format!("{array}_1")).await?;
    let mut tasks: Vec<u32> =
        records.iter().filter(|job| job.array_job_id.get() == Some(array)).flat_map(|job| job.array_tasks()).collect();
    tasks.sort_unstable();
    assert_eq!(tasks, [0, 1, 2], "every task of the array, pending together: {records:?}");
    assert!(cluster.slurm.job_records("999999").await?.is_empty(), "a job Slurm does not know");
    Ok(())
}

/// The job poll's first question at thousands of jobs (`GET jobs/state/`), asked of the real
/// slurmrestd: its fingerprint is that of the full listing's jobs, an array's pending tasks one by
/// one, and it moves when a job's state does. The host skips the full listing while it stands.
#[tokio::test]
async fn the_job_states_slurm_lists_are_those_of_its_full_listing() -> anyhow::Result<()> {
    let cluster = Cluster::connect("job-states").await?;
    let held = SlurmJob::submit(&["--hold", "--array=0-2", "-p", "batch", "--wrap", "sleep 60"])?;
    // Three reads, so that no job moved between them (an earlier test's ended job may be purged).
    // The tests before this one leave jobs ending for a while (pods deleted with their grace
    // periods, placeholders completing): the wait is for a moment when nothing moves.
    let agreed = || async {
        let before = cluster.slurm.job_states().await.ok()?;
        let JobsPage::All { jobs, .. } = cluster.slurm.jobs(None).await.ok()? else { return None };
        let after = cluster.slurm.job_states().await.ok()?;
        (before == after && after == JobStatesListing::of_listing(&jobs)).then_some(after)
    };
    let held_states = wait_for("the job states to be the full listing's", Duration::from_secs(90), agreed).await?;
    assert!(held_states.states.jobs >= 3, "the held array's tasks are listed one by one: {held_states:?}");

    in_slurm_root(&["scancel", &format!("{}_1", held.0)])?;
    wait_for("the job states to move with the cancelled task", Duration::from_secs(30), || async {
        (cluster.slurm.job_states().await.ok()? != held_states).then_some(())
    })
    .await?;
    wait_for("the job states to be the full listing's again", Duration::from_secs(90), agreed).await?;
    Ok(())
}
