//! Tenancy end to end: a pod gets in Slurm only what its namespace is granted. Placeholders run as
//! the grant's user (nobody by default) on the real Slurm; a pod asking for another uid, an
//! administrator's priority or an account it was not granted stays Pending with `NotGranted`, an
//! Event naming the annotation, and no job. A pod granted a uid slurmctld cannot resolve says that
//! Slurm holds its job, and why. And a user's pod labelled as a slurmd pod steers nothing.

use std::time::Duration;

use k8s_openapi::api::events::v1::Event;
use kube::Api;
use kube::api::ListParams;
use sunk::slurm::JobState;
use sunk_e2e::{BUSYBOX, Cluster, metric_value, node_name, pod, scheduled_condition, wait_for};

const BIND: Duration = Duration::from_secs(30);

#[tokio::test]
async fn a_pod_gets_only_what_its_namespace_is_granted() -> anyhow::Result<()> {
    let mut cluster = Cluster::connect("tenancy").await?;
    let tenancy = cluster.grant(serde_json::json!({"accounts": ["ml"]}))?;
    cluster.start_host(&[("SUNK_TENANCY", &tenancy)])?;

    let charged = annotated("charged", "sunk.dev/account", "ml");
    let charged_uid = cluster.create_pod(charged).await?.metadata.uid.unwrap_or_default();
    let mut refused = Vec::new();
    for (name, key, value) in [
        ("as-root", "sunk.dev/user-id", "0"),
        ("first-in-line", "sunk.dev/priority", "4294967293"),
        ("elsewhere", "sunk.dev/account", "physics"),
    ] {
        let created = cluster.create_pod(annotated(name, key, value)).await?;
        refused.push((name, key, value, created.metadata.uid.unwrap_or_default()));
    }

    cluster.wait_pod("charged", "the granted pod to be bound", BIND, |pod| node_name(pod).is_some()).await?;
    let jobs = cluster.jobs_of(&charged_uid).await?;
    let job = jobs.first().expect("the bound pod's job");
    assert_eq!((job.user_name.as_str(), job.account.as_str()), ("nobody", "ml"), "runs as nobody, charged to ml");

    for (name, key, value, uid) in refused {
        let pod = cluster
            .wait_pod(name, "a NotGranted condition", BIND, |pod| {
                scheduled_condition(pod).is_some_and(|(_, reason, _)| reason == "NotGranted")
            })
            .await?;
        let (_, _, message) = scheduled_condition(&pod).unwrap_or_default();
        let asked = format!("{key}={value:?}");
        assert!(message.contains(&asked) && message.contains(&cluster.namespace), "{name}: {message}");
        let events = cluster.events_of(name).await?;
        assert!(
            events.iter().any(|(reason, note)| reason == "FailedScheduling" && note.contains(&asked)),
            "{events:?}"
        );
        assert!(cluster.jobs_of(&uid).await?.is_empty(), "no Slurm job for {name}");
    }
    Ok(())
}

/// A namespace granted uids slurmctld resolves to no user: the local cluster's Slurm root
/// (tests/cluster/build-slurm-root.sh, a debootstrapped Debian whose passwd holds only system users
/// and `nobody`, looked up in files alone) has none at 1500. Slurm holds the pod's job when it cannot
/// create its credential, and the pod says `SlurmHeld`, naming the job, Slurm's reason and note, the
/// uid and the grant, as a Warning Event does; the job is kept, pending, for a release.
#[tokio::test]
async fn a_pod_granted_a_uid_slurmctld_cannot_resolve_says_slurm_holds_its_job() -> anyhow::Result<()> {
    const UNKNOWN_UID: &str = "1500";
    let mut cluster = Cluster::connect("held").await?;
    let tenancy = cluster.grant(serde_json::json!({"userIds": "1500-1599", "groupIds": "1500-1599"}))?;
    cluster.start_host(&[("SUNK_TENANCY", &tenancy)])?;
    let created = cluster.create_pod(annotated("stranger", "sunk.dev/user-id", UNKNOWN_UID)).await?;
    let uid = created.metadata.uid.unwrap_or_default();

    let held = cluster
        .wait_pod("stranger", "a SlurmHeld condition", BIND, |pod| {
            scheduled_condition(pod).is_some_and(|(status, reason, _)| status == "False" && reason == "SlurmHeld")
        })
        .await?;
    let (_, _, message) = scheduled_condition(&held).unwrap_or_default();
    let jobs = cluster.jobs_of(&uid).await?;
    let [job] = jobs.as_slice() else { anyhow::bail!("one job for the held pod: {jobs:?}") };
    // Slurm requeues the job it cannot launch, with its priority 0: it waits, and is not ended.
    let kept = matches!(job.state(), JobState::Pending | JobState::Transient);
    assert!(kept && job.state_reason == "JobHeldAdmin" && job.user_id == Some(1500), "kept, held: {job:?}");
    assert!(job.system_comment.contains("slurm_cred_create failure"), "{job:?}");
    for part in [
        format!("job {} (PENDING", job.target()),
        "JobHeldAdmin".to_string(),
        "slurm_cred_create failure".to_string(),
        format!("uid {UNKNOWN_UID}"),
        "userIds 1500-1599".to_string(),
        format!("namespace {}'s grant (tenancy grants[0])", cluster.namespace),
        format!("scontrol release {}", job.target()),
    ] {
        assert!(message.contains(&part), "{part:?} in {message}");
    }
    assert!(node_name(&held).is_none());
    // Events are written after the condition they repeat.
    let events: Api<Event> = Api::namespaced(cluster.kube.clone(), &cluster.namespace);
    wait_for("a SlurmJobHeld Warning saying the same", Duration::from_secs(20), || async {
        let listed = events.list(&ListParams::default()).await.ok()?;
        listed
            .items
            .iter()
            .any(|event| {
                event.regarding.as_ref().and_then(|about| about.name.as_deref()) == Some("stranger")
                    && event.type_.as_deref() == Some("Warning")
                    && event.reason.as_deref() == Some("SlurmJobHeld")
                    && event.note.as_deref() == Some(message.as_str())
            })
            .then_some(())
    })
    .await?;
    Ok(())
}

/// Pods of a user's namespace labelled as slurmd pods of the local cluster's two Slurm nodes, on a
/// Node where no slurmd runs (three per Slurm node: the host's old lookup took whichever of the
/// claimants its cache listed first). Every pod sunk binds still goes where Slurm runs its job.
#[tokio::test]
async fn a_users_pod_labelled_as_a_slurmd_pod_steers_nothing() -> anyhow::Result<()> {
    let mut cluster = Cluster::connect("impostor").await?;
    cluster.start_host(&[])?;
    for slurm_node in ["kube-node-1", "kube-node-2"] {
        for n in 0..3 {
            let impostor = serde_json::json!({
                "metadata": {"name": format!("{slurm_node}-{n}"), "labels": {"sunk.dev/slurm-node": slurm_node}},
                "spec": {"nodeName": "kube-node-5", "terminationGracePeriodSeconds": 0,
                         "containers": [{"name": "main", "image": BUSYBOX, "command": ["sleep", "3600"],
                                         "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}]},
            });
            cluster.create_pod(impostor).await?;
        }
    }
    let mut uids = Vec::new();
    for name in ["a", "b", "c", "d"] {
        uids.push((name, cluster.create_pod(pod(name, "1", "64Mi")).await?.metadata.uid.unwrap_or_default()));
    }
    for (name, uid) in uids {
        let bound = cluster.wait_pod(name, "the pod to be bound", BIND, |pod| node_name(pod).is_some()).await?;
        let job = cluster.jobs_of(&uid).await?.into_iter().next().expect("the bound pod's job");
        // The local cluster's Slurm nodes are named after the Nodes their slurmd pods run on.
        assert_eq!(node_name(&bound), Some(job.nodes.as_str()), "{name} is bound where Slurm runs its job");
    }
    Ok(())
}

/// Two installations on one Slurm (two releases: schedulers `sunk` and `sunk-other`), a pod each.
/// Each host's orphan sweep passes over the other's placeholder (whose pod it does not know) three
/// times; neither cancels it. Before installations were named, the second host cancelled the first
/// one's job on its first sweep.
#[tokio::test]
async fn two_installations_on_one_slurm_leave_each_others_jobs_alone() -> anyhow::Result<()> {
    let mut cluster = Cluster::connect("installations").await?;
    let first = cluster.start_host(&[])?;
    let second = cluster.start_host(&[("SUNK_SCHEDULER_NAME", "sunk-other")])?;
    let mut theirs = pod("theirs", "1", "64Mi");
    theirs["spec"]["schedulerName"] = "sunk-other".into();
    let mut uids = Vec::new();
    for spec in [pod("mine", "1", "64Mi"), theirs] {
        uids.push(cluster.create_pod(spec).await?.metadata.uid.unwrap_or_default());
    }
    for name in ["mine", "theirs"] {
        cluster.wait_pod(name, "the pod to be bound by its own host", BIND, |pod| node_name(pod).is_some()).await?;
    }
    let sweeps = |text: &str| counter(text, "sunk_scheduler_orphan_sweeps_total");
    let before = (sweeps(&cluster.metrics(first).await?), sweeps(&cluster.metrics(second).await?));
    wait_for("three more orphan sweeps by each host", Duration::from_secs(60), || async {
        let now = (sweeps(&cluster.metrics(first).await.ok()?), sweeps(&cluster.metrics(second).await.ok()?));
        (now.0 >= before.0 + 3 && now.1 >= before.1 + 3).then_some(())
    })
    .await?;
    for uid in &uids {
        let jobs = cluster.jobs_of(uid).await?;
        assert!(jobs.len() == 1 && jobs[0].state() == JobState::Running, "one running job for pod {uid}: {jobs:?}");
    }
    for host in [first, second] {
        assert_eq!(counter(&cluster.metrics(host).await?, "sunk_scheduler_orphans_cancelled_total"), 0);
    }
    Ok(())
}

/// The value of an unlabelled counter in a /metrics text (0 when absent).
fn counter(metrics: &str, name: &str) -> u64 {
    metric_value(metrics, name).unwrap_or(0)
}

fn annotated(name: &str, key: &str, value: &str) -> serde_json::Value {
    let mut spec = pod(name, "1", "64Mi");
    spec["metadata"]["annotations"] = serde_json::json!({ key: value });
    spec
}
