//! Instant placement (`--fast-path`): with free capacity a pod's job is an immediate allocation,
//! running when the call returns; with a higher-priority Slurm job waiting for the node, the fast path
//! does not take it, and the pod waits behind that job as a queued placeholder.

use std::time::Duration;

use sunk::slurm::JobState;
use sunk_e2e::{Cluster, SlurmJob, in_slurm_root, node_name, pod, scheduled_condition, wait_for};

const BIND: Duration = Duration::from_secs(30);

/// A host that tries immediate allocations: only placeholders that name no user may be one
/// (slurmrestd's `job/allocate` runs them as the host's Slurm user), so annotations are trusted.
fn start_fast_host(cluster: &mut Cluster) -> anyhow::Result<usize> {
    let tenancy = cluster.tenancy(serde_json::json!({"trustAnnotations": true}))?;
    cluster.start_host(&[("SUNK_FAST_PATH", "true"), ("SUNK_TENANCY", &tenancy)])
}

/// A pod whose placeholder has a time limit, so Slurm knows when its node frees.
fn timed_pod(name: &str, cpu: &str, minutes: u32) -> serde_json::Value {
    let mut pod = pod(name, cpu, "256Mi");
    pod["metadata"]["annotations"] = serde_json::json!({"sunk.dev/timeout": minutes.to_string()});
    pod
}

#[tokio::test]
async fn with_free_capacity_a_pod_is_bound_through_an_immediate_allocation() -> anyhow::Result<()> {
    let mut cluster = Cluster::connect("fast").await?;
    start_fast_host(&mut cluster)?;
    let created = cluster.create_pod(pod("quick", "1", "256Mi")).await?;
    let bound = cluster.wait_pod("quick", "the pod to be bound", BIND, |pod| node_name(pod).is_some()).await?;
    let jobs = cluster.jobs_of(created.metadata.uid.as_deref().unwrap_or_default()).await?;
    assert_eq!(jobs.len(), 1, "one job: {jobs:?}");
    assert!(!jobs[0].batch_flag, "an allocation, not a queued batch placeholder: {:?}", jobs[0]);
    assert_eq!(jobs[0].state(), JobState::Running);
    assert_eq!(node_name(&bound), cluster.kube_node_of(&jobs[0].nodes).await?.as_deref());
    cluster
        .wait_event("quick", "SlurmJobAllocated", |reason, note| {
            reason == "SlurmJobAllocated" && note.contains(&jobs[0].job_id.to_string())
        })
        .await?;
    Ok(())
}

#[tokio::test]
async fn the_fast_path_does_not_take_a_node_a_higher_priority_job_waits_for() -> anyhow::Result<()> {
    let mut cluster = Cluster::connect("fast-prio").await?;
    start_fast_host(&mut cluster)?;
    // One node full, the other half full: one CPU is free. The half-full node frees first, so it is
    // the node Slurm's backfill plans the urgent job on. Were it the full one, backfill would rightly
    // start the pod's queued placeholder on the free CPU, as that delays nobody.
    cluster.create_pod(timed_pod("whole", "2", 10)).await?;
    cluster.wait_pod("whole", "the 2-CPU pod to be bound", BIND, |pod| node_name(pod).is_some()).await?;
    cluster.create_pod(timed_pod("half", "1", 5)).await?;
    cluster.wait_pod("half", "the 1-CPU pod to be bound", BIND, |pod| node_name(pod).is_some()).await?;

    // A higher-priority Slurm job needs a whole node: it waits for the half-full one.
    let urgent = SlurmJob::submit(&["--priority=1000000", "-c", "2", "--mem=256M", "--wrap", "sleep 600"])?;
    let id = urgent.0.clone();
    wait_for("the urgent job to wait", BIND, || {
        let id = id.clone();
        async move {
            let out = in_slurm_root(&["squeue", "-h", "-j", &id, "-o", "%T"]).ok()?;
            (out.trim() == "PENDING").then_some(())
        }
    })
    .await?;

    let created = cluster.create_pod(pod("polite", "1", "256Mi")).await?;
    let waiting = cluster
        .wait_pod("polite", "the pod to wait behind the urgent job", BIND, |pod| {
            scheduled_condition(pod)
                .is_some_and(|(_, reason, message)| reason == "Unschedulable" && message.contains("PENDING"))
        })
        .await?;
    assert!(node_name(&waiting).is_none(), "the free CPU was not taken");
    // Slurm keeps the refused immediate allocation as a FAILED job that never held a node.
    let jobs = cluster.every_job_of(created.metadata.uid.as_deref().unwrap_or_default()).await?;
    let live: Vec<_> = jobs.iter().filter(|job| job.state() != JobState::Ended).collect();
    assert_eq!(live.len(), 1, "one live job: {jobs:?}");
    assert!(live[0].batch_flag, "a queued placeholder, not an allocation: {:?}", live[0]);
    assert!(jobs.iter().all(|job| job.state() != JobState::Ended || job.nodes.is_empty()), "{jobs:?}");

    drop(urgent);
    cluster
        .wait_pod("polite", "the pod to be bound once the urgent job is gone", BIND, |pod| node_name(pod).is_some())
        .await?;
    Ok(())
}

/// A host under a grant (not `trustAnnotations`), running the namespace's placeholders as nobody.
fn start_granted_fast_host(cluster: &mut Cluster, failpoints: &str) -> anyhow::Result<usize> {
    let tenancy = cluster.grant(serde_json::json!({"user": NOBODY, "group": NOBODY}))?;
    cluster.start_host(&[("SUNK_FAST_PATH", "true"), ("SUNK_TENANCY", &tenancy), ("SUNK_FAILPOINTS", failpoints)])
}

const NOBODY: u32 = 65534;

#[tokio::test]
async fn a_granted_pod_is_allocated_at_once_as_its_grants_user_and_linked_by_the_host() -> anyhow::Result<()> {
    let mut cluster = Cluster::connect("fast-grant").await?;
    start_granted_fast_host(&mut cluster, "")?;
    let created = cluster.create_pod(pod("tenant", "1", "256Mi")).await?;
    let bound = cluster.wait_pod("tenant", "the pod to be bound", BIND, |pod| node_name(pod).is_some()).await?;
    let jobs = cluster.jobs_of(created.metadata.uid.as_deref().unwrap_or_default()).await?;
    assert_eq!(jobs.len(), 1, "one job: {jobs:?}");
    let job = &jobs[0];
    assert!(!job.batch_flag, "an allocation, not a queued placeholder: {job:?}");
    assert_eq!((job.user_id, job.group_id), (Some(NOBODY), Some(NOBODY)), "the grant's user and group: {job:?}");
    assert!(job.comment.is_empty(), "the sealed link is cleared once the admin link is written: {job:?}");
    assert_eq!(node_name(&bound), cluster.kube_node_of(&job.nodes).await?.as_deref());
    Ok(())
}

/// The crash window between the allocation (as the tenant, which may not write `admin_comment`) and
/// the host's writing of the admin link: the restarted host finds the job by its sealed comment.
#[tokio::test]
async fn a_host_killed_between_a_tenants_allocation_and_its_link_adopts_the_job() -> anyhow::Result<()> {
    let mut cluster = Cluster::connect("fast-seal").await?;
    let doomed = start_granted_fast_host(&mut cluster, "after-allocate")?;
    let created = cluster.create_pod(pod("sealed", "1", "256Mi")).await?;
    let uid = created.metadata.uid.clone().unwrap_or_default();
    cluster.wait_host_exit(doomed, BIND).await?;

    let sealed = jobs_naming(&cluster, &uid).await?;
    assert_eq!(sealed.len(), 1, "one allocation before the crash: {sealed:?}");
    assert!(sealed[0].admin_comment.is_empty() && sealed[0].comment.contains(";seal="), "{:?}", sealed[0]);
    assert!(cluster.jobs_of(&uid).await?.is_empty(), "no admin link yet");
    assert!(node_name(&cluster.pods().get("sealed").await?).is_none(), "and the pod was not bound");

    start_granted_fast_host(&mut cluster, "")?;
    let bound =
        cluster.wait_pod("sealed", "the restarted host to bind the pod", BIND, |pod| node_name(pod).is_some()).await?;
    let (slurm, id) = (&cluster, sealed[0].job_id);
    let linked = wait_for("the admin link to be written", BIND, || async move {
        let job = slurm.slurm.job(id).await.ok()??;
        (!job.admin_comment.is_empty() && job.comment.is_empty()).then_some(job)
    })
    .await?;
    let jobs = jobs_naming(&cluster, &uid).await?;
    assert_eq!(jobs.len(), 1, "still exactly one job: {jobs:?}");
    assert_eq!(cluster.jobs_of(&uid).await?.len(), 1, "linked to the pod");
    assert_eq!(node_name(&bound), cluster.kube_node_of(&linked.nodes).await?.as_deref());
    Ok(())
}

/// Every job whose admin link or comment names the pod `uid`.
async fn jobs_naming(cluster: &Cluster, uid: &str) -> anyhow::Result<Vec<sunk::slurm::Job>> {
    let sunk::slurm::JobsPage::All { jobs, .. } = cluster.slurm.jobs(None).await? else {
        anyhow::bail!("a full job listing came back empty")
    };
    Ok(jobs.into_iter().filter(|job| job.admin_comment.contains(uid) || job.comment.contains(uid)).collect())
}

/// `SUNK_PLACEHOLDERS=external` without the fast path: the queued placeholder is a job that launches
/// nothing where the Slurm has them (26.05), and a batch job where it has not (24.11).
#[tokio::test]
async fn an_external_placeholder_holds_the_pods_place_and_launches_nothing() -> anyhow::Result<()> {
    let mut cluster = Cluster::connect("external").await?;
    cluster.start_host(&[("SUNK_FAST_PATH", "false"), ("SUNK_PLACEHOLDERS", "external")])?;
    let external = cluster.slurm.discover().await?.api.has_external_jobs();
    let created = cluster.create_pod(pod("outside", "1", "256Mi")).await?;
    let uid = created.metadata.uid.clone().unwrap_or_default();
    let bound = cluster.wait_pod("outside", "the pod to be bound", BIND, |pod| node_name(pod).is_some()).await?;
    let jobs = cluster.jobs_of(&uid).await?;
    assert_eq!(jobs.len(), 1, "one job: {jobs:?}");
    assert_eq!(jobs[0].state(), JobState::Running);
    assert_eq!(jobs[0].batch_flag, !external, "external: {external}, {:?}", jobs[0]);
    assert_eq!(node_name(&bound), cluster.kube_node_of(&jobs[0].nodes).await?.as_deref());

    cluster.delete_pod("outside").await?;
    let id = jobs[0].job_id;
    wait_for("the placeholder to end with its pod", BIND, || async {
        let job = cluster.slurm.job(id).await.ok()??;
        (job.state() == JobState::Ended).then_some(())
    })
    .await?;
    Ok(())
}
