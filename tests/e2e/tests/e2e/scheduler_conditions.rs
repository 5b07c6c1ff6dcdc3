//! What a waiting pod says, end to end: `Unschedulable` (what cluster-autoscaler and Kueue read) when
//! it waits for capacity, a reason of sunk's own when its input is bad, `SlurmUnreachable` while
//! slurmrestd does not answer; the scheduler's metrics on /metrics; and a host started before Slurm
//! answers, which waits, not ready, instead of exiting.

use std::time::Duration;

use sunk::slurm::JobState;
use sunk_e2e::{
    Answer, Cluster, HostileProxy, node_name, pod, scheduled_condition, slurmrestd_address, slurmrestd_frozen, wait_for,
};

const BIND: Duration = Duration::from_secs(30);
/// The host notices a silent slurmrestd after 10 s; its lists go stale a little earlier.
const NOTICE: Duration = Duration::from_secs(40);

#[tokio::test]
async fn a_pod_waiting_for_capacity_is_unschedulable_and_bad_input_is_not() -> anyhow::Result<()> {
    let mut cluster = Cluster::connect("unschedulable").await?;
    let host = cluster.start_host(&[])?;
    for name in ["filler-1", "filler-2"] {
        cluster.create_pod(pod(name, "2", "1Gi")).await?;
    }
    for name in ["filler-1", "filler-2"] {
        cluster.wait_pod(name, "a filler to be bound", BIND, |pod| node_name(pod).is_some()).await?;
    }
    cluster.create_pod(pod("waiter", "2", "1Gi")).await?;
    let mut bare = pod("bare", "1", "1Gi");
    bare["spec"]["containers"][0]["resources"] = serde_json::json!({});
    cluster.create_pod(bare).await?;

    let waiting = cluster
        .wait_pod("waiter", "PodScheduled=False, Unschedulable, with Slurm's reason", BIND, |pod| {
            scheduled_condition(pod).is_some_and(|(status, reason, message)| {
                status == "False" && reason == "Unschedulable" && message.contains("Resources")
            })
        })
        .await?;
    assert!(node_name(&waiting).is_none());
    let refused = cluster
        .wait_pod("bare", "the refused pod's own reason", BIND, |pod| {
            scheduled_condition(pod).is_some_and(|(status, reason, _)| status == "False" && reason == "PolicyRejected")
        })
        .await?;
    assert!(node_name(&refused).is_none());

    let metrics = cluster.metrics(host).await?;
    for series in [
        "sunk_scheduler_schedule_attempts_total{result=\"scheduled\"}",
        "sunk_scheduler_schedule_attempts_total{result=\"unschedulable\"}",
        "sunk_scheduler_schedule_attempts_total{result=\"rejected\"}",
        "sunk_scheduler_pod_scheduling_duration_seconds_count",
    ] {
        assert!(metrics.contains(series), "{series} on /metrics:\n{metrics}");
    }
    let pending = sunk_e2e::wait_for("two pending pods on /metrics", BIND, || async {
        let text = cluster.metrics(host).await.ok()?;
        text.lines().any(|line| line == "sunk_scheduler_pending_pods 2").then_some(())
    })
    .await;
    assert!(pending.is_ok(), "{:?}", pending);
    Ok(())
}

#[tokio::test]
async fn a_pod_waiting_for_an_unreachable_slurmrestd_says_so_then_binds() -> anyhow::Result<()> {
    let mut cluster = Cluster::connect("unreachable").await?;
    cluster.start_host(&[])?;
    // The host is up and has listed Slurm once it binds a first pod.
    cluster.create_pod(pod("first", "1", "256Mi")).await?;
    cluster.wait_pod("first", "the first pod to be bound", BIND, |pod| node_name(pod).is_some()).await?;

    let frozen = slurmrestd_frozen()?;
    cluster.create_pod(pod("second", "1", "256Mi")).await?;
    let waiting = cluster
        .wait_pod("second", "PodScheduled=False, SlurmUnreachable", NOTICE, |pod| {
            scheduled_condition(pod)
                .is_some_and(|(status, reason, _)| status == "False" && reason == "SlurmUnreachable")
        })
        .await?;
    let (_, _, message) = scheduled_condition(&waiting).unwrap_or_default();
    assert!(message.contains("slurmrestd"), "the message names slurmrestd: {message}");
    drop(frozen);

    let bound = cluster
        .wait_pod("second", "the pod to be bound once slurmrestd answers", Duration::from_secs(60), |pod| {
            node_name(pod).is_some()
        })
        .await?;
    // A submission the stopped slurmrestd took may still be carried out after the host gave up on it
    // and submitted again: the host then cancels the duplicate, and one job lives, where the pod runs.
    let jobs = cluster.jobs_of(bound.metadata.uid.as_deref().unwrap_or_default()).await?;
    let live: Vec<_> = jobs.iter().filter(|job| job.state() != JobState::Ended).collect();
    assert_eq!(live.len(), 1, "one live job: {jobs:?}");
    assert_eq!(node_name(&bound), cluster.kube_node_of(&live[0].nodes).await?.as_deref(), "{jobs:?}");
    Ok(())
}

/// A fresh install starts the host before slurmctld: it must wait, saying why on /readyz, and start
/// once Slurm answers, not exit into a crash loop.
#[tokio::test]
async fn a_host_started_before_slurm_answers_waits_not_ready_then_schedules() -> anyhow::Result<()> {
    let proxy = HostileProxy::start(&slurmrestd_address()).await?;
    proxy.answer(Answer::Reset);
    let mut cluster = Cluster::connect("slurm-late").await?;
    let host = cluster.start_host_via(proxy.url(), &[])?;
    let (_, why) = wait_for("/readyz to say the host waits for Slurm", NOTICE, || async {
        let (status, body) = cluster.readyz(host).await.ok()?;
        (status == 503 && body.contains("slurm: waiting for Slurm")).then_some((status, body))
    })
    .await?;
    assert!(why.contains("slurmrestd"), "/readyz names what does not answer: {why}");
    cluster.create_pod(pod("early", "1", "256Mi")).await?;
    // Several tries go unanswered meanwhile (the host asks again after 1, 2, 4 s).
    tokio::time::sleep(Duration::from_secs(8)).await;
    assert_eq!(cluster.host_exited(host), None, "the host waits for Slurm; it does not exit");
    assert!(cluster.metrics(host).await?.contains("sunk_slurm_up 0"), "/metrics is served while waiting");
    assert!(node_name(&cluster.pods().get("early").await?).is_none(), "nothing is bound before Slurm answers");

    proxy.answer(Answer::Forward);
    wait_for("/readyz to pass once Slurm answers", Duration::from_secs(60), || async {
        cluster.readyz(host).await.ok().filter(|(status, body)| *status == 200 && body == "ok")
    })
    .await?;
    cluster.wait_pod("early", "the pod to be bound once Slurm answers", BIND, |pod| node_name(pod).is_some()).await?;
    assert_eq!(cluster.host_exited(host), None);
    Ok(())
}
