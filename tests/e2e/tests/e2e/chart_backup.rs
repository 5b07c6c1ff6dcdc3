//! A backup slurmctld (`slurmCluster.controller.backup`) on the state claim both controllers mount,
//! and two slurmrestd replicas. The primary's pod lost, and a slurmrestd pod: the backup takes
//! control, the running job runs on, and a pod that arrived meanwhile is bound. The primary back: it
//! stops the backup's pod first, starts only once that pod is gone, and loads the state the backup
//! saved, so nothing done meanwhile is lost.

use std::time::{Duration, Instant};

use kube::ResourceExt;
use sunk_e2e::{kubectl, pod, wait_for};

use super::chart_release::*;

/// The chart's state claim, which the test binds in advance to a volume both controllers mount.
const STATE_CLAIM: &str = "sunk-slurmctld-state";
const BACKUP_POD: &str = "sunk-slurmctld-backup-0";
/// The chart's SlurmctldTimeout (20 s) and the backup's pings, with room for a busy machine.
const TAKEOVER: Duration = Duration::from_secs(180);

#[tokio::test]
async fn the_backup_slurmctld_takes_control_when_the_primary_is_lost_and_the_returning_primary_loses_nothing()
-> anyhow::Result<()> {
    // Declared first, dropped last: after the release is uninstalled.
    let _state: StaticVolume;
    let release = Release::new("chart-backup").await?;
    _state = StaticVolume::bound_to(release.namespace(), STATE_CLAIM, "ReadWriteMany")?;
    let values = [
        "--set",
        "slurmCluster.controller.backup.enabled=true",
        "--set",
        "slurmCluster.controller.persistence.enabled=true",
        "--set-json",
        r#"slurmCluster.controller.persistence.accessModes=["ReadWriteMany"]"#,
        "--set",
        "slurmCluster.restapi.replicas=2",
    ]
    .map(String::from);
    release.install_with(&values, &[("slurmctld-backup", 1), ("slurmrestd", 2)]).await?;
    let (busy, free) = (NODES[0], NODES[1]);
    let running = sleep_job(&release, busy).await?;
    let standing_by = backup_uid(&release).await?;

    // The primary's pod lost for good, as with its Node (its Deployment scaled to 0), and one of the two
    // slurmrestd pods with it.
    let lost = Instant::now();
    release.scale("slurmctld", 0)?;
    let restd = release.pods_of("slurmrestd").await?.first().map(|pod| pod.name_any()).unwrap_or_default();
    release.cluster.delete_pod(&restd).await?;
    wait_for("the primary slurmctld's pod to be gone", READY, || async {
        release.pods_of("slurmctld").await.ok()?.is_empty().then_some(())
    })
    .await?;
    // A pod for sunk arrives while no controller is in control.
    let mut waiting = pod("waiting", "500m", "128Mi");
    waiting["spec"]["schedulerName"] = release.scheduler_name().into();
    let waiting_uid = release.cluster.create_pod(waiting).await?.uid().unwrap_or_default();

    let last_refusal = std::cell::RefCell::new(String::new());
    let accepted = wait_for("the backup slurmctld to accept a job", TAKEOVER, || async {
        let sbatch = ["sbatch", "--parsable", "--chdir=/tmp", "--mem=100", "--wrap", "true"];
        release.slurm_in(BACKUP_POD, &sbatch).map_err(|refusal| *last_refusal.borrow_mut() = refusal.to_string()).ok()
    })
    .await
    .map_err(|error| {
        anyhow::anyhow!("{error}; the last refusal: {}{}", last_refusal.borrow(), backup_state(&release))
    })?;
    let accepted = accepted.trim().to_string();
    let took_over = lost.elapsed();
    release
        .cluster
        .wait_pod(
            "waiting",
            "the pod that arrived meanwhile to be bound through the backup and run",
            TAKEOVER,
            sunk_e2e::is_running,
        )
        .await?;
    let bound = lost.elapsed();
    let state = release.slurm_in(BACKUP_POD, &["squeue", "-h", "-j", &running, "-o", "%T"])?;
    assert_eq!(state.trim(), "RUNNING", "job {running} under the backup");
    println!(
        "backup: a job accepted {:.1} s after the primary's pod was lost, the pod that waited running after {:.1} s",
        took_over.as_secs_f64(),
        bound.as_secs_f64()
    );

    // The primary back: it deletes the backup's pod and starts only once that pod is gone. A finalizer
    // holds the pod after its containers stopped, as a lost Node would hold it: the primary waits.
    let held = HeldBackupPod::new(&release)?;
    release.scale("slurmctld", 1)?;
    wait_for("the primary to delete the backup's pod, whose containers then stop", READY, || async {
        let backup = release.cluster.pods().get(BACKUP_POD).await.ok()?;
        let statuses = backup.status.as_ref()?.container_statuses.as_ref()?;
        let stopped = statuses.iter().all(|status| status.state.as_ref().is_some_and(|s| s.terminated.is_some()));
        (backup.metadata.deletion_timestamp.is_some() && stopped).then_some(())
    })
    .await?;
    let primary = release.pods_of("slurmctld").await?;
    assert!(!primary.iter().any(is_ready), "the primary started beside the backup's pod, which is not gone");
    let released = Instant::now();
    drop(held);
    wait_ready(&release, "slurmctld", 1).await?;
    let handed_back = released.elapsed();
    wait_ready(&release, "slurmctld-backup", 1).await?;
    wait_ready(&release, "slurmrestd", 2).await?;
    assert_ne!(backup_uid(&release).await?, standing_by, "the backup's pod was not replaced");
    println!("backup: the primary Ready {:.1} s after the backup's pod could go", handed_back.as_secs_f64());

    // Nothing lost: the job that ran through it all, the job the backup accepted, the placeholder of the
    // pod it bound, and both nodes.
    assert_eq!(release.job_state(&running)?.as_deref(), Some("RUNNING"), "job {running} after the hand-back");
    let jobs = release.slurm(&["scontrol", "-o", "show", "jobs"])?;
    assert!(
        jobs.lines().any(|job| job.starts_with(&format!("JobId={accepted} "))),
        "job {accepted}, which the backup accepted, after the hand-back: {jobs}"
    );
    assert!(
        matches!(sunk_e2e::jobs_not_ended(&jobs, &waiting_uid).as_slice(), [only] if only.contains("JobState=RUNNING")),
        "the waiting pod's placeholder after the hand-back: {jobs}"
    );
    let nodes = release.slurm_nodes().unwrap_or_default();
    for node in [busy, free] {
        assert!(nodes.iter().any(|(name, _)| name == node), "node {node} after the hand-back: {nodes:?}");
    }

    // The primary schedules again: a new pod takes the room the cancelled job leaves.
    release.slurm(&["scancel", &running])?;
    let mut after = pod("after", "500m", "128Mi");
    after["spec"]["schedulerName"] = release.scheduler_name().into();
    release.cluster.create_pod(after).await?;
    release
        .cluster
        .wait_pod("after", "a pod bound through the primary after the hand-back", READY, sunk_e2e::is_running)
        .await?;
    release.cluster.delete_pod("after").await?;
    release.cluster.delete_pod("waiting").await?;
    Ok(())
}

/// A finalizer on the backup's pod, taken off when dropped: a failed test must not leave a pod that
/// keeps its namespace from going.
struct HeldBackupPod<'r>(&'r Release);

impl<'r> HeldBackupPod<'r> {
    fn new(release: &'r Release) -> anyhow::Result<Self> {
        patch_finalizers(release, r#"["e2e.sunk.dev/hold"]"#)?;
        Ok(Self(release))
    }
}

impl Drop for HeldBackupPod<'_> {
    fn drop(&mut self) {
        let _ = patch_finalizers(self.0, "null");
    }
}

fn patch_finalizers(release: &Release, finalizers: &str) -> anyhow::Result<()> {
    let patch = format!(r#"{{"metadata":{{"finalizers":{finalizers}}}}}"#);
    let output =
        kubectl(&["-n", release.namespace(), "patch", "pod", BACKUP_POD, "--type=merge", "-p", &patch]).output()?;
    anyhow::ensure!(output.status.success(), "patching {BACKUP_POD}: {}", String::from_utf8_lossy(&output.stderr));
    Ok(())
}

/// The backup's pod's uid, once it is Ready (standing by).
async fn backup_uid(release: &Release) -> anyhow::Result<String> {
    let pods = wait_ready(release, "slurmctld-backup", 1).await?;
    Ok(pods.first().and_then(|pod| pod.uid()).unwrap_or_default())
}

/// What the backup's pod says of itself, for a test that waited on it in vain: `scontrol ping`, its
/// restarts, and the end of its slurmctld's log.
fn backup_state(release: &Release) -> String {
    let ping = release.slurm_in(BACKUP_POD, &["scontrol", "ping"]).unwrap_or_else(|error| error.to_string());
    let namespace = release.namespace();
    let output = |args: &[&str]| {
        kubectl(args).output().map(|o| String::from_utf8_lossy(&o.stdout).into_owned()).unwrap_or_default()
    };
    let restarts = output(&["-n", namespace, "get", "pod", BACKUP_POD, "-o", "wide"]);
    let log = output(&["-n", namespace, "logs", BACKUP_POD, "-c", "slurmctld", "--tail", "60"]);
    let sidecar = output(&["-n", namespace, "logs", BACKUP_POD, "-c", "reconfigure", "--tail", "10"]);
    format!("\n{ping}\n{restarts}\nits slurmctld's log:\n{log}\nits reconfigure sidecar's:\n{sidecar}")
}
