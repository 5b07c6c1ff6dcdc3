//! Device confinement on the local cluster's GPU nodes (`tests/cluster/up.sh`: two stand-in GPU
//! device files per node, with NVIDIA's device numbers and no driver): a job opens the GPU it was
//! given (ENXIO: allowed, no driver behind it) and not the other (EPERM: its cgroup denies it).
//! The rest of a job's confinement is tested from the chart's login pod (`chart_confinement`).

use std::time::Duration;

use sunk_e2e::{SlurmJob, in_slurm_root, kubectl, wait_for};

/// The local cluster's first GPU node and its stand-in GPUs.
const NODE: &str = "kube-node-1";
const GPUS: [&str; 2] = ["/dev/nvidia0", "/dev/nvidia1"];
const DONE: Duration = Duration::from_secs(120);

/// `command` in the slurmd container on `node` (namespace `slurm`); its standard output.
fn in_slurmd_on(node: &str, command: &[&str]) -> anyhow::Result<String> {
    let field = format!("spec.nodeName={node}");
    let pods = kubectl(&["-n", "slurm", "get", "pods", "--field-selector", &field, "-o", "name"]).output()?;
    let pod = String::from_utf8_lossy(&pods.stdout).lines().next().map(str::to_string);
    let pod = pod.ok_or_else(|| anyhow::anyhow!("no slurmd pod on {node}"))?;
    let mut args = vec!["-n", "slurm", "exec", &pod, "-c", "slurmd", "--"];
    args.extend_from_slice(command);
    let output = kubectl(&args).output()?;
    anyhow::ensure!(output.status.success(), "{command:?} in {pod}: {}", String::from_utf8_lossy(&output.stderr));
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

#[tokio::test]
async fn a_job_opens_only_the_gpu_it_was_given() -> anyhow::Result<()> {
    // Each GPU file, then what opening it said ("No such device or address" or "Operation not
    // permitted").
    let script = format!(
        "for gpu in {}; do echo \"$gpu $(head -c1 $gpu 2>&1 >/dev/null | sed 's/.*: //')\"; done",
        GPUS.join(" ")
    );
    let job = SlurmJob::submit(&[
        "-w",
        NODE,
        "--gres=gpu:1",
        "--mem=100",
        "--chdir=/tmp",
        "--output=/tmp/sunk-e2e-devices-%j.out",
        "--wrap",
        &script,
    ])?;
    let output_file = format!("/tmp/sunk-e2e-devices-{}.out", job.0);
    let output = wait_for(&format!("job {}'s output", job.0), DONE, || async {
        let state = in_slurm_root(&["squeue", "-h", "-t", "all", "-j", &job.0, "-o", "%T"]).ok()?;
        if state.trim() != "COMPLETED" {
            return None;
        }
        in_slurmd_on(NODE, &["cat", &output_file]).ok()
    })
    .await?;
    let _ = in_slurmd_on(NODE, &["rm", "-f", &output_file]);
    let mut said: Vec<&str> =
        GPUS.iter().filter_map(|gpu| output.lines().find_map(|line| line.strip_prefix(&format!("{gpu} ")))).collect();
    said.sort_unstable();
    // The job's GPU index is relative to what it was given (Slurm renumbers under ConstrainDevices),
    // so which file it got is not asserted: that it got one, and only one.
    assert_eq!(said, ["No such device or address", "Operation not permitted"], "one GPU given, one denied: {output}");
    Ok(())
}
