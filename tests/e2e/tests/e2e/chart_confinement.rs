//! Jobs confined by the chart's default cgroups, as a user sees them from the login pod: a job over
//! its `--mem` is killed by its own limit (OUT_OF_MEMORY in sacct) while a pod on the same Node runs
//! on; a `-c1` job sees one CPU; a process a job leaves behind ends with the job; sacct reports what
//! a job used (MaxRSS, TotalCPU). Unconfined, each of these fails: the job allocates 600 MB inside
//! a 1-GiB slurmd pod, `nproc` says 2, and the `sleep` outlives its job.

use k8s_openapi::api::core::v1::Pod;
use serde_json::json;
use sunk_e2e::{is_running, kubectl, node_name, pod, wait_for};

use super::chart_release::*;
use super::chart_user::*;

/// What the test's left-behind process runs: unique, so that `pgrep` finds only it.
const LEFT_BEHIND: &str = "sleep 777";

/// `pgrep -f pattern` in the slurmd container of the pod on `node`: the pids it lists.
async fn processes_on(release: &Release, node: &str, pattern: &str) -> anyhow::Result<Vec<String>> {
    let slurmd = slurmd_on(release, node).await?.ok_or_else(|| anyhow::anyhow!("no slurmd pod on {node}"))?;
    let name = slurmd.metadata.name.unwrap_or_default();
    let output =
        kubectl(&["-n", release.namespace(), "exec", &name, "-c", "slurmd", "--", "pgrep", "-f", pattern]).output()?;
    // pgrep exits 1 when nothing matches.
    anyhow::ensure!(output.status.code().is_some_and(|code| code <= 1), "pgrep on {node}: {output:?}");
    Ok(String::from_utf8_lossy(&output.stdout).lines().map(str::to_string).collect())
}

/// `sacct` fields of batch job `job`, its allocation's and its batch step's lines (`JobID|State|...`),
/// once both have ended.
async fn accounted(ssh: &SshClient, job: &str, fields: &str) -> anyhow::Result<Vec<String>> {
    const NOT_ENDED: [&str; 6] = ["", "PENDING", "RUNNING", "REQUEUED", "RESIZING", "SUSPENDED"];
    let mut last = String::new();
    let ended = wait_for(&format!("sacct to record job {job} ended"), READY, || {
        let listed = ssh.run(&format!("sacct -n -P -j {job} -o JobID,State,{fields}")).unwrap_or_default();
        last.clone_from(&listed);
        async move {
            let lines: Vec<String> = listed.lines().map(str::to_string).collect();
            let state_of = |id: String| {
                let line = lines.iter().find(|line| line.starts_with(&format!("{id}|")))?;
                line.split('|').nth(1).map(|state| state.split_whitespace().next().unwrap_or_default().to_string())
            };
            let ended = |id: String| state_of(id).is_some_and(|state| !NOT_ENDED.contains(&state.as_str()));
            (ended(job.to_string()) && ended(format!("{job}.batch"))).then_some(lines)
        }
    })
    .await;
    // A job left waiting says why, and so does every job and node of the cluster then (a job that
    // stays COMPLETING keeps its node from the next).
    let cluster = "squeue -h -a -o '%i %T %r %N'; sinfo -h -N -o '%N %T %E'";
    ended.map_err(|error| error.context(format!("{last}; then: {}", ssh.run(cluster).unwrap_or_default())))
}

/// Restarts and termination reasons of every container of `pod`.
fn restarts(pod: &Pod) -> Vec<(i32, Option<String>)> {
    let statuses = pod.status.as_ref().and_then(|status| status.container_statuses.clone()).unwrap_or_default();
    statuses
        .into_iter()
        .map(|status| {
            let terminated = status.last_state.and_then(|state| state.terminated).map(|terminated| terminated.reason);
            (status.restart_count, terminated.flatten())
        })
        .collect()
}

#[tokio::test]
async fn a_job_gets_only_what_it_was_allocated_and_nothing_it_starts_outlives_it() -> anyhow::Result<()> {
    let LoggedIn { ssh, release, .. } = &logged_in_to_whole_cluster("chart-confine").await?;
    let node = NODES[0];

    // A pod on the Node the jobs run on, beside its slurmd pod (kube-scheduler's: the 1-CPU Slurm
    // node has no room for a placeholder beside a job; the host holds the pod's share in Slurm).
    let mut neighbour = pod("neighbour", "10m", "16Mi");
    neighbour["spec"]["schedulerName"] = "default-scheduler".into();
    neighbour["spec"]["nodeSelector"] = json!({"kubernetes.io/hostname": node});
    release.cluster.create_pod(neighbour).await?;
    let neighbour = release.cluster.wait_pod("neighbour", "the pod to run", READY, is_running).await?;
    assert_eq!(node_name(&neighbour), Some(node), "the pod runs on the jobs' Node");

    // A job's tasks see the cores they were given.
    let cpus = ssh.run(&format!("srun -w {node} -c1 --mem=100 nproc"))?;
    assert_eq!(cpus.trim(), "1", "`srun -c1 nproc` on a 2-core Node");

    // A job over its memory is killed by its own limit, and nothing else is.
    let hungry = ssh.run(&format!(
        "sbatch --parsable -w {node} --mem=64 --wrap 'head -c 600M /dev/zero | tail >/dev/null && echo allocated'"
    ))?;
    let hungry = hungry.trim().to_string();
    let lines = accounted(ssh, &hungry, "MaxRSS").await?;
    let allocation = lines.iter().find(|line| line.starts_with(&format!("{hungry}|"))).cloned().unwrap_or_default();
    assert!(allocation.contains("|OUT_OF_MEMORY|"), "job {hungry} over its --mem=64: {lines:?}");
    let output = ssh.run(&format!("cat slurm-{hungry}.out"))?;
    assert!(!output.contains("allocated"), "the job allocated 600 MB beyond its 64: {output}");
    let neighbour = release.cluster.pods().get("neighbour").await?;
    assert!(is_running(&neighbour), "the pod beside the job runs on");
    assert!(restarts(&neighbour).iter().all(|(count, _)| *count == 0), "the pod restarted: {:?}", restarts(&neighbour));
    let slurmd = slurmd_on(release, node).await?.ok_or_else(|| anyhow::anyhow!("no slurmd pod on {node}"))?;
    assert!(restarts(&slurmd).iter().all(|(count, _)| *count == 0), "slurmd restarted: {:?}", restarts(&slurmd));

    // What a job starts ends with it, however it detached itself.
    ssh.run(&format!("srun -w {node} --mem=100 bash -c 'setsid {LEFT_BEHIND} </dev/null >/dev/null 2>&1 & disown'"))?;
    wait_for(&format!("`{LEFT_BEHIND}` to end with its job"), READY, || async {
        processes_on(release, node, LEFT_BEHIND).await.ok()?.is_empty().then_some(())
    })
    .await?;

    // Accounting sees what a job used: 100 MB held in a shell variable for a few of its samples
    // (every second), and a second of CPU.
    let used = ssh.run(&format!(
        "sbatch --parsable -w {node} --mem=400 --acctg-freq=task=1 --wrap \
         'held=$(head -c 100M /dev/zero | tr \"\\\\0\" x); timeout 1 sh -c \"while :; do :; done\"; sleep 3; echo ${{#held}}'"
    ))?;
    let used = used.trim().to_string();
    let lines = accounted(ssh, &used, "MaxRSS,TotalCPU").await?;
    let batch = lines
        .iter()
        .find(|line| line.starts_with(&format!("{used}.batch|")))
        .ok_or_else(|| anyhow::anyhow!("no batch step of job {used}: {lines:?}"))?;
    let fields: Vec<&str> = batch.split('|').collect();
    let max_rss = fields.get(2).copied().unwrap_or_default();
    assert!(mebibytes(max_rss).is_some_and(|rss| rss >= 90.0), "MaxRSS of a 100-MB job: {lines:?}");
    let total_cpu = fields.get(3).copied().unwrap_or_default();
    assert!(seconds(total_cpu).is_some_and(|cpu| cpu >= 0.5), "TotalCPU of a 1-s busy loop: {lines:?}");

    release.cluster.delete_pod("neighbour").await?;
    Ok(())
}

/// sacct's size (`102400K`, `100M`, `1.5G`) in MiB.
fn mebibytes(size: &str) -> Option<f64> {
    let (number, unit) = size.split_at(size.find(|c: char| c.is_ascii_alphabetic())?);
    let number: f64 = number.parse().ok()?;
    Some(match unit {
        "K" => number / 1024.0,
        "M" => number,
        "G" => number * 1024.0,
        _ => return None,
    })
}

/// sacct's CPU time (`[DD-[HH:]]MM:SS.mmm`) in seconds.
fn seconds(time: &str) -> Option<f64> {
    let (days, clock) = time.split_once('-').map_or((0.0, time), |(days, clock)| (days.parse().unwrap_or(0.0), clock));
    let parts: Vec<f64> = clock.split(':').map(str::parse).collect::<Result<_, _>>().ok()?;
    let within_day = parts.iter().fold(0.0, |total, part| total * 60.0 + part);
    Some(days * 86_400.0 + within_day)
}
