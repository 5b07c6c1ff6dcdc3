//! Preemption both ways, on the local cluster's two Slurm nodes (2 CPUs each):
//! - a pod with a PriorityClass that Slurm has no room for preempts the lowest-priority running Slurm
//!   job the preemption policy chooses (requeued where slurmrestd can requeue, as on 26.05; cancelled
//!   on 24.11), and is bound where it ran; a pod of equal priority preempts nothing;
//! - a task of a user's job array is preempted without its siblings, even the task that runs as the
//!   array's own record (whose job id names every task);
//! - a pod of lower priority is evicted for it once its PodDisruptionBudget allows, and told why;
//! - a custom preemption policy pushed while the host runs changes the victim of the next preemption;
//! - a Slurm job of a higher-tier partition (`urgent`, slurm.conf's `preempt/partition_prio`) that
//!   preempts a pod's placeholder deletes the pod with its grace period and an Event naming the job.

use std::time::Duration;

use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::Api;
use kube::api::PostParams;
use sunk::slurm::{ApiVersion, Job, JobState, JobsPage};
use sunk_e2e::{Cluster, Priority, SlurmJob, node_name, pod, scheduled_condition, wait_for};

const WAIT: Duration = Duration::from_secs(60);

/// A whole-node pod (2 CPUs) of this priority class.
fn ranked_pod(name: &str, class: &Priority) -> serde_json::Value {
    let mut pod = pod(name, "2", "256Mi");
    pod["spec"]["priorityClassName"] = class.name.clone().into();
    pod
}

/// A whole-node Slurm job of this priority and account, running once this returns.
async fn running_job(cluster: &Cluster, priority: u32, account: &str) -> anyhow::Result<SlurmJob> {
    let priority = format!("--priority={priority}");
    let job = SlurmJob::submit(&["-A", account, &priority, "-c", "2", "--mem=256M", "--wrap", "sleep 600"])?;
    wait_state(cluster, job.id(), "running", |job| job.state() == JobState::Running).await?;
    Ok(job)
}

async fn wait_state(cluster: &Cluster, id: u32, what: &str, check: impl Fn(&Job) -> bool) -> anyhow::Result<Job> {
    wait_for(&format!("Slurm job {id} {what}"), WAIT, || async {
        cluster.slurm.job(id).await.ok().flatten().filter(|job| check(job))
    })
    .await
}

/// How the bundled policy makes a running batch job go, in words and the state it is left in: requeued
/// where slurmrestd can requeue (26.05; JobRequeue defaults to 1), cancelled where it cannot.
async fn bundled_preemption(cluster: &Cluster) -> anyhow::Result<(&'static str, JobState)> {
    let requeues = cluster.slurm.discover().await?.offered.contains(&ApiVersion::V0_0_45);
    Ok(if requeues { ("requeued", JobState::Pending) } else { ("cancelled", JobState::Ended) })
}

/// A host that preempts, the test's namespace granted ranks up to any PriorityClass's (a billion) and
/// the jobs of `batch`, which Slurm's own rules (`preempt/partition_prio`, one tier) keep from the
/// pods' placeholders, themselves in `batch`.
/// Starts a host that preempts, once the nodes are free of the previous test's jobs: every test here
/// fills both nodes.
async fn start_preempting_host(cluster: &mut Cluster) -> anyhow::Result<()> {
    sunk_e2e::wait_no_node_completing(cluster).await?;
    let grant = serde_json::json!({"maxPriority": 1_000_000_000, "preemptable": {"partitions": ["batch"]}});
    let tenancy = cluster.grant(grant)?;
    cluster.start_host(&[("SUNK_PREEMPTION", "true"), ("SUNK_TENANCY", &tenancy)])?;
    Ok(())
}

/// Waits for the pod to be bound; returns the Kubernetes Node.
async fn bound(cluster: &Cluster, name: &str) -> anyhow::Result<String> {
    let pod = cluster.wait_pod(name, &format!("{name} to be bound"), WAIT, |pod| node_name(pod).is_some()).await?;
    Ok(node_name(&pod).unwrap_or_default().to_string())
}

fn is_ready(pod: &k8s_openapi::api::core::v1::Pod) -> bool {
    let conditions = pod.status.as_ref().and_then(|status| status.conditions.as_deref()).unwrap_or_default();
    conditions.iter().any(|condition| condition.type_ == "Ready" && condition.status == "True")
}

/// Slurm's own rules stand without a grant: `preempt/partition_prio` lets a job be preempted only by
/// one of a higher-tier partition, so a pod in `batch` takes nothing from `batch`, whatever its
/// priority. (24.11's slurmrestd does not say its preemption type: the flags state the same.)
#[tokio::test]
async fn without_a_grant_a_pod_preempts_only_what_slurms_rules_let_it() -> anyhow::Result<()> {
    let mut cluster = Cluster::connect("preempt-rules").await?;
    sunk_e2e::wait_no_node_completing(&cluster).await?;
    let tenancy = cluster.grant(serde_json::json!({"maxPriority": 1_000_000_000}))?;
    cluster.start_host(&[
        ("SUNK_PREEMPTION", "true"),
        ("SUNK_TENANCY", &tenancy),
        ("SUNK_SLURM_PREEMPT_TYPE", "preempt/partition_prio"),
        ("SUNK_SLURM_PREEMPT_MODE", "REQUEUE"),
        ("SUNK_SLURM_PARTITION_PREEMPT_MODES", "urgent=OFF"),
    ])?;
    let high = Priority::create(&cluster, "high", 100).await?;
    let jobs = [running_job(&cluster, 10, "physics").await?, running_job(&cluster, 20, "bio").await?];
    cluster.create_pod(ranked_pod("same-tier", &high)).await?;
    let waiting = cluster
        .wait_pod("same-tier", "the pod to be told Slurm's rules protect the jobs", WAIT, |pod| {
            scheduled_condition(pod).is_some_and(|(_, _, message)| message.contains("may be preempted (job"))
        })
        .await?;
    let (_, _, message) = scheduled_condition(&waiting).unwrap_or_default();
    assert!(message.contains("PriorityTier 1, not below the waiting job's 1"), "{message}");
    for job in &jobs {
        let listed = cluster.slurm.job(job.id()).await?.expect("listed");
        assert_eq!(listed.state(), JobState::Running, "Slurm's rules protect it: {listed:?}");
    }
    drop(high);
    Ok(())
}

#[tokio::test]
async fn a_high_priority_pod_preempts_the_lowest_priority_job_and_an_equal_one_nothing() -> anyhow::Result<()> {
    let mut cluster = Cluster::connect("preempt").await?;
    start_preempting_host(&mut cluster).await?;
    let (low, high) = (Priority::create(&cluster, "low", 10).await?, Priority::create(&cluster, "high", 100).await?);
    let lowest = running_job(&cluster, 10, "physics").await?;
    let other = running_job(&cluster, 20, "bio").await?;

    // Priority 10 against jobs of 10 and 20: nobody ranks below it.
    cluster.create_pod(ranked_pod("equal", &low)).await?;
    let waiting = cluster
        .wait_pod("equal", "the equal pod to be told nothing is preempted", WAIT, |pod| {
            scheduled_condition(pod).is_some_and(|(_, _, message)| message.contains("preempting nothing"))
        })
        .await?;
    assert_eq!(scheduled_condition(&waiting).map(|(_, reason, _)| reason).as_deref(), Some("Unschedulable"));
    for job in [&lowest, &other] {
        let listed = cluster.slurm.job(job.id()).await?.expect("listed");
        assert_eq!(listed.state(), JobState::Running, "the equal pod preempted nothing: {listed:?}");
    }
    cluster.delete_pod("equal").await?;

    // Priority 100: the policy takes the lowest-priority job, and the pod runs where it ran.
    let lowest_node = cluster.slurm.job(lowest.id()).await?.expect("listed").nodes;
    cluster.create_pod(ranked_pod("urgent", &high)).await?;
    let node = bound(&cluster, "urgent").await?;
    assert_eq!(Some(node), cluster.kube_node_of(&lowest_node).await?, "bound where the victim ran");
    let (how, gone) = bundled_preemption(&cluster).await?;
    let victim = wait_state(&cluster, lowest.id(), how, |job| job.state() == gone).await?;
    assert!(victim.admin_comment.contains("preempted by pod"), "the reason is on the job: {victim:?}");
    assert!(victim.admin_comment.contains("/urgent (priority 100)"), "{victim:?}");
    let spared = cluster.slurm.job(other.id()).await?.expect("listed");
    assert_eq!(spared.state(), JobState::Running, "only the lowest-priority job goes: {spared:?}");
    let id = lowest.id().to_string();
    cluster
        .wait_event("urgent", "a Preempting Event naming the victim", |reason, note| {
            reason == "Preempting"
                && note.contains(&format!("Slurm job {id} ("))
                && note.contains("account physics")
                && note.contains(how)
        })
        .await?;
    drop((low, high));
    Ok(())
}

/// A user's job array on both nodes. The last of its tasks to start runs as the array's own record:
/// its job id is the array's, which names every task. Ranked lowest, that task is the victim, and it
/// goes alone: its sibling keeps running.
#[tokio::test]
async fn a_preempted_task_of_a_job_array_goes_without_its_siblings() -> anyhow::Result<()> {
    let mut cluster = Cluster::connect("preempt-array").await?;
    start_preempting_host(&mut cluster).await?;
    let high = Priority::create(&cluster, "high", 100).await?;
    let args = ["-A", "physics", "--priority=10", "--array=0-1", "-c", "2", "--mem=256M", "--wrap", "sleep 600"];
    let array = SlurmJob::submit(&args)?;
    let tasks = wait_for("both of the array's tasks running", WAIT, || async {
        let Ok(JobsPage::All { jobs, .. }) = cluster.slurm.jobs(None).await else { return None };
        let running: Vec<Job> = jobs
            .into_iter()
            .filter(|job| job.array_job_id.get() == Some(array.id().into()) && job.state() == JobState::Running)
            .collect();
        (running.len() == 2).then_some(running)
    })
    .await?;
    let (record, sibling): (Vec<Job>, Vec<Job>) = tasks.into_iter().partition(|job| job.job_id == array.id());
    let (record, sibling) = (&record[0], &sibling[0]);
    sunk_e2e::in_slurm_root(&["scontrol", "update", &format!("JobId={}", record.target()), "Priority=5"])?;
    wait_state(&cluster, record.job_id, "ranked below its sibling", |job| job.priority.get() == Some(5)).await?;

    cluster.create_pod(ranked_pod("urgent", &high)).await?;
    bound(&cluster, "urgent").await?;
    let (how, gone) = bundled_preemption(&cluster).await?;
    wait_state(&cluster, record.job_id, how, |job| job.state() == gone).await?;
    let spared = cluster.slurm.job(sibling.job_id).await?.expect("listed");
    assert_eq!(spared.state(), JobState::Running, "the sibling task keeps running: {spared:?}");
    // Cancelled (on drop) while its launch is still under way, the sibling would hold its node
    // COMPLETING for about 90 s, past the next test's wait for that node.
    sunk_e2e::wait_launched(&sibling.target()).await?;
    drop(high);
    Ok(())
}

#[tokio::test]
async fn a_lower_priority_pod_is_evicted_once_its_disruption_budget_allows() -> anyhow::Result<()> {
    let mut cluster = Cluster::connect("preempt-pods").await?;
    start_preempting_host(&mut cluster).await?;
    let (low, high) = (Priority::create(&cluster, "low", 10).await?, Priority::create(&cluster, "high", 100).await?);
    for name in ["serve-1", "serve-2"] {
        let mut serving = ranked_pod(name, &low);
        serving["metadata"]["labels"] = serde_json::json!({"app": "serve"});
        cluster.create_pod(serving).await?;
    }
    // Only running pods are guarded: the Eviction API lets a pod that has not started go regardless.
    for name in ["serve-1", "serve-2"] {
        cluster.wait_pod(name, "the serving pod to be ready", WAIT, is_ready).await?;
    }
    let budgets: Api<PodDisruptionBudget> = Api::namespaced(cluster.kube.clone(), &cluster.namespace);
    let budget: PodDisruptionBudget = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "serve"},
        "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "serve"}}}
    }))?;
    budgets.create(&PostParams::default(), &budget).await?;
    wait_for("the budget to allow no disruption of the 2 healthy pods", WAIT, || async {
        let status = budgets.get("serve").await.ok()?.status?;
        (status.current_healthy == 2 && status.disruptions_allowed == 0).then_some(())
    })
    .await?;

    // The budget forbids any eviction: the pod waits and says why; both serving pods stay.
    cluster.create_pod(ranked_pod("urgent", &high)).await?;
    cluster
        .wait_event("urgent", "PreemptionBlocked", |reason, note| {
            reason == "PreemptionBlocked" && note.contains("serve-")
        })
        .await?;
    for name in ["serve-1", "serve-2"] {
        let serving = cluster.pods().get(name).await?;
        assert!(serving.metadata.deletion_timestamp.is_none(), "{name} was not evicted");
    }

    // Without the budget, one serving pod is evicted, told why, and the urgent pod takes its node.
    budgets.delete("serve", &Default::default()).await?;
    let node = bound(&cluster, "urgent").await?;
    let evicted = cluster
        .pod_with_event(&["serve-1", "serve-2"], WAIT, |reason, note| {
            reason == "Preempted" && note.contains("/urgent (priority 100)")
        })
        .await?;
    let other = if evicted == "serve-1" { "serve-2" } else { "serve-1" };
    let kept = cluster.pods().get(other).await?;
    assert!(kept.metadata.deletion_timestamp.is_none(), "one eviction was enough");
    assert_ne!(node_name(&kept), Some(node.as_str()), "the urgent pod took the evicted pod's node");
    drop((low, high));
    Ok(())
}

#[tokio::test]
async fn a_preemption_policy_pushed_while_running_changes_the_next_victim() -> anyhow::Result<()> {
    let mut cluster = Cluster::connect("preempt-policy").await?;
    start_preempting_host(&mut cluster).await?;
    let high = Priority::create(&cluster, "high", 100).await?;
    let physics = running_job(&cluster, 10, "physics").await?;
    let bio = running_job(&cluster, 20, "bio").await?;

    // The bundled default takes the lowest priority: the physics job.
    cluster.create_pod(ranked_pod("first", &high)).await?;
    bound(&cluster, "first").await?;
    let (how, gone) = bundled_preemption(&cluster).await?;
    wait_state(&cluster, physics.id(), how, |job| job.state() == gone).await?;
    drop(physics); // requeued, it would start again
    cluster.delete_pod("first").await?;
    wait_for("the first pod's job to end", WAIT, || async {
        let left = cluster.jobs_in_namespace().await.ok()?;
        left.iter().all(|(_, job)| job.state() == JobState::Ended).then_some(())
    })
    .await?;
    let physics_again = running_job(&cluster, 10, "physics").await?;

    cluster.push_example_policy("protected-accounts")?;

    // physics is protected now: the bio job goes instead, although it ranks higher.
    cluster.create_pod(ranked_pod("second", &high)).await?;
    bound(&cluster, "second").await?;
    wait_state(&cluster, bio.id(), "preempted", |job| job.state() == JobState::Ended).await?;
    let kept = cluster.slurm.job(physics_again.id()).await?.expect("listed");
    assert_eq!(kept.state(), JobState::Running, "the protected account's job stays: {kept:?}");
    drop(high);
    Ok(())
}

#[tokio::test]
async fn a_slurm_job_of_a_higher_tier_partition_preempts_a_pods_placeholder() -> anyhow::Result<()> {
    let mut cluster = Cluster::connect("preempt-slurm").await?;
    start_preempting_host(&mut cluster).await?;
    // Both nodes held by pods whose containers ignore SIGTERM, so a graceful deletion takes its 10 s.
    for name in ["held-1", "held-2"] {
        let mut held = pod(name, "2", "256Mi");
        held["spec"]["terminationGracePeriodSeconds"] = 10.into();
        held["spec"]["containers"][0]["command"] = serde_json::json!(["sleep", "3600"]);
        cluster.create_pod(held).await?;
    }
    for name in ["held-1", "held-2"] {
        cluster.wait_pod(name, "the pod to run", WAIT, sunk_e2e::is_running).await?;
    }

    let urgent = SlurmJob::submit(&["-p", "urgent", "-c", "2", "--mem=256M", "--wrap", "sleep 600"])?;
    wait_state(&cluster, urgent.id(), "running", |job| job.state() == JobState::Running).await?;
    let id = urgent.id().to_string();
    let preempted = cluster
        .pod_with_event(&["held-1", "held-2"], WAIT, |reason, note| {
            reason == "SlurmJobPreempted" && note.contains(&format!("Slurm job {id} "))
        })
        .await?;
    // Deleted gracefully: with its own grace period, not at once. The Event comes first (the host then
    // cancels a requeued placeholder and deletes), so the deletion is waited for.
    let leaving = wait_for("the preempted pod to be deleted", WAIT, || async {
        match cluster.pods().get_opt(preempted).await.ok()? {
            Some(pod) if pod.metadata.deletion_timestamp.is_none() => None,
            leaving => Some(leaving),
        }
    })
    .await?;
    if let Some(leaving) = leaving {
        assert_eq!(leaving.metadata.deletion_grace_period_seconds, Some(10), "with its grace period");
    }
    let other = if preempted == "held-1" { "held-2" } else { "held-1" };
    let spared = cluster.pods().get(other).await?;
    assert!(spared.metadata.deletion_timestamp.is_none(), "one node was enough: {other} stays");
    Ok(())
}
