//! Benchmark of the chart's host at scale (not a test: it prints figures). The chart installs the
//! host as a user gets it (two replicas behind a Lease, 500 ms polls; the NodeSet controller off,
//! since the local cluster's NodeSet has its keeper), then, in one run:
//!
//! 1. at rest, on the local cluster as it is;
//! 2. with `--nodes` dynamic CLOUD nodes added to Slurm (powered down: listed, never run);
//! 3. and with `--pods` pods for sunk waiting in Slurm's queue (filler jobs hold every real node);
//!    then cordon -> Slurm DRAIN and uncordon -> resumed on kube-node-2, `--cordons` times;
//! 4. the pods deleted: the time until their placeholders are gone.
//!
//! Each of 1-3 reads, over `--window` seconds: the leader's and the follower's resident memory, the
//! leader's CPU and Slurm requests by call, beside kube-scheduler's memory and CPU (the reference: its
//! informers hold the same Nodes and pods).
//!
//! `cargo run --release -p sunk-e2e --bin scale-bench -- [--nodes 5000] [--pods 10000] [--cordons 30]
//! [--window 30] [--memory-limit 3Gi] [--log-level info,sunk::syncer=debug]`, with the cluster up
//! (slurm.conf's MaxNodeCount must allow the nodes); `--memory-limit` replaces the chart's 512Mi, and
//! `--log-level` the chart's `logLevel` (the Syncer's debug lines time each pass over a Node: where
//! a slow cordon goes).

mod load;
mod sample;

use std::time::{Duration, Instant};

use sunk_e2e::figures::percentiles;
use sunk_e2e::{Cluster, in_slurm_root, set_unschedulable};

use load::{CloudNodes, Fillers};
use sample::{Observed, Timing, Window};

/// The node cordoned: a real Slurm node whose slurmd pod is in the local cluster's NodeSet.
const CORDONED: &str = "kube-node-2";
/// The node drained with `scontrol` for the reference (the host leaves a drain it did not set alone).
const DRAINED_BY_HAND: &str = "kube-node-1";

/// The chart's host at scale: memory, CPU and Slurm requests at rest, with Slurm nodes and with
/// waiting pods; cordon -> DRAIN latency; the time to delete the pods.
#[derive(clap::Parser)]
struct Args {
    /// Dynamic CLOUD nodes added to Slurm.
    #[arg(long, default_value_t = 5000)]
    nodes: usize,
    /// Pods for sunk created while every real node is held.
    #[arg(long, default_value_t = 10_000)]
    pods: usize,
    /// Cordon/uncordon flips timed.
    #[arg(long, default_value_t = 30)]
    cordons: usize,
    /// Seconds each load is sampled over.
    #[arg(long = "window", default_value_t = 30)]
    window_seconds: u64,
    /// The host's memory limit, when not the chart's (e.g. 3Gi).
    #[arg(long)]
    memory_limit: Option<String>,
    /// The host's log filter, when not the chart's `logLevel`.
    #[arg(long)]
    log_level: Option<String>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = <Args as clap::Parser>::parse();
    let cluster = Cluster::connect("scale-bench").await?;
    let limit = args.memory_limit.as_ref().map(|limit| format!("resources.limits.memory={limit}"));
    let mut values = vec!["--set", "replicas=2", "--set", "leaderElection.enabled=true"];
    if let Some(limit) = &limit {
        values.extend(["--set", limit]);
    }
    let log_level = args.log_level.as_ref().map(|filter| format!("logLevel={}", filter.replace(',', "\\,")));
    if let Some(log_level) = &log_level {
        values.extend(["--set", log_level]);
    }
    let release = cluster.install_host_chart(&values).await?;
    // Both replicas' logs, followed from the start (the kubelet rotates a busy log within minutes),
    // for reading after the run: a slow flip's passes, with `--log-level`.
    let log_path = format!(".cache/scale-bench/{release}.log");
    std::fs::create_dir_all(".cache/scale-bench")?;
    let selector = format!("app.kubernetes.io/instance={release}");
    let mut follow =
        sunk_e2e::kubectl(&["logs", "-f", "-n", &cluster.namespace, "-l", &selector, "--tail=-1", "--prefix"])
            .stdout(std::fs::File::create(&log_path)?)
            .stderr(std::process::Stdio::null())
            .spawn()?;
    let outcome = run(&cluster, &release, &args).await;
    let _ = set_unschedulable(&cluster.kube, CORDONED, false).await;
    let _ = follow.kill();
    eprintln!("the host's log: {log_path}");
    let teardown = cluster.uninstall_host_chart(&release).await;
    let report = outcome?;
    teardown?;
    println!("{report}");
    Ok(())
}

async fn run(cluster: &Cluster, release: &str, args: &Args) -> anyhow::Result<String> {
    let window = Duration::from_secs(args.window_seconds);
    let observed = Observed::find(cluster, release).await?;
    observed.polled(cluster, 5.0).await?;
    let mut rows = Vec::new();
    rows.push(measured("at rest".to_owned(), observed.window(cluster, window).await?));

    let _nodes = CloudNodes::add(args.nodes)?;
    observed.polled(cluster, 5.0).await?;
    rows.push(measured(format!("{} Slurm nodes", args.nodes), observed.window(cluster, window).await?));

    let _fillers = Fillers::hold_every_node()?;
    let start = Instant::now();
    load::create_pods(cluster, args.pods).await?;
    let created = start.elapsed();
    let queued = load::until_count("pods with a job in Slurm", args.pods, Duration::from_secs(1800), || {
        load::pods_with_jobs(cluster)
    })
    .await?;
    let loaded = format!("{} Slurm nodes, {} pods waiting", args.nodes, args.pods);
    rows.push(measured(loaded, observed.window(cluster, window).await?));

    // Where a flip's time goes: the host's node updates (waiting for a request slot, then slurmrestd's
    // answer), the Syncer's passes (a pass over the Node holds back the next one over it), and the
    // listings its view of the node waits on (the node listing may queue behind the jobs').
    const FLIP_TIMINGS: [(&str, &str, &str); 7] = [
        ("the host's node updates, waiting for a slot", "sunk_slurm_request_wait_seconds", r#"call="node update""#),
        ("the host's node updates, answered", "sunk_slurm_request_seconds", r#"call="node update""#),
        ("the Syncer's passes", "sunk_reconcile_pass_seconds", r#"controller="syncer""#),
        ("node listings, waiting for a slot", "sunk_slurm_request_wait_seconds", r#"call="nodes""#),
        ("node listings, answered", "sunk_slurm_request_seconds", r#"call="nodes""#),
        ("job listings, waiting for a slot", "sunk_slurm_request_wait_seconds", r#"call="jobs""#),
        ("job listings, answered", "sunk_slurm_request_seconds", r#"call="jobs""#),
    ];
    let flip_timings =
        |metrics: &str| FLIP_TIMINGS.map(|(_, histogram, selector)| Timing::read(metrics, histogram, selector));
    let timings_before = flip_timings(&observed.leader_metrics(cluster).await?);
    let (mut drains, mut resumes, mut patches) = (Vec::new(), Vec::new(), Vec::new());
    for run in 1..=args.cordons {
        // When, to find the flip in the host's log.
        let at = k8s_openapi::jiff::Timestamp::now();
        let (drained, patched_cordon) = until_drain(cluster, true).await?;
        let (resumed, patched_uncordon) = until_drain(cluster, false).await?;
        eprintln!(
            "[cordon {run}/{} at {at}] drained in {drained:?}, resumed in {resumed:?} (the API server answered the \
             patches in {patched_cordon:?} and {patched_uncordon:?})",
            args.cordons,
        );
        drains.push(drained);
        resumes.push(resumed);
        patches.extend([patched_cordon, patched_uncordon]);
    }
    let after = flip_timings(&observed.leader_metrics(cluster).await?);
    let timings: String = FLIP_TIMINGS
        .iter()
        .zip(after.into_iter().zip(timings_before))
        .map(|((name, _, _), (after, before))| {
            let timing = after.since(before);
            format!(
                "\n{name}: {:.0}, {:.1} ms on average ({:.0} over 1 s)",
                timing.count,
                timing.mean_ms(),
                timing.over_1s
            )
        })
        .collect();
    let mut by_hand = Vec::new();
    for drained in (0..args.cordons).flat_map(|_| [true, false]) {
        by_hand.push(scontrol_update(DRAINED_BY_HAND, drained)?);
    }
    let cordons = format!(
        "cordon -> DRAIN ({} runs): {}\nuncordon -> resumed: {}\nthe API server's answer to the patches: {}\n\
         meanwhile:{timings}\nreference, `scontrol update` drain and resume of {DRAINED_BY_HAND} ({} runs): {}",
        args.cordons,
        percentiles(&mut drains),
        percentiles(&mut resumes),
        percentiles(&mut patches),
        by_hand.len(),
        percentiles(&mut by_hand),
    );
    eprintln!("{cordons}");

    load::delete_pods(cluster).await?;
    let gone =
        load::until_count("pods with a job in Slurm", 0, Duration::from_secs(1800), || load::pods_with_jobs(cluster))
            .await?;
    load::until_count("pods listed", 0, Duration::from_secs(600), || load::pods_listed(cluster)).await?;
    Ok(format!(
        "{}\n{} pods created in {:.0} s; every one with a job in Slurm {:.0} s after the first; \
         deleted -> every placeholder gone in {:.0} s\n{cordons}",
        table(&rows),
        args.pods,
        created.as_secs_f64(),
        (created + queued).as_secs_f64(),
        gone.as_secs_f64(),
    ))
}

/// A window's row, printed at once too: a run that fails later still tells what it measured.
fn measured(load: String, window: Window) -> (String, Window) {
    let row = (load, window);
    eprintln!("{}", table(std::slice::from_ref(&row)));
    row
}

fn table(rows: &[(String, Window)]) -> String {
    let mut text = String::from(
        "| load | leader RSS | follower RSS | leader CPU | Slurm requests per node poll | other Slurm requests/s | \
         kube-scheduler RSS | kube-scheduler CPU |\n|---|---:|---:|---:|---|---:|---:|---:|\n",
    );
    for (load, window) in rows {
        let per_poll = |call: &str| {
            window.requests_per_s.get(call).copied().unwrap_or_default()
                / window.node_polls_per_s.max(f64::MIN_POSITIVE)
        };
        let others: f64 = window
            .requests_per_s
            .iter()
            .filter(|(call, _)| !matches!(call.as_str(), "jobs" | "nodes"))
            .map(|(_, rate)| rate)
            .sum();
        text.push_str(&format!(
            "| {load} | {:.1} MiB | {} | {:.1} ms/s | nodes {:.2}, jobs {:.2} | {others:.2} | {:.1} MiB | {:.1} ms/s |\n",
            window.leader_rss_mib,
            window.follower_rss_mib.map_or("-".into(), |rss| format!("{rss:.1} MiB")),
            window.leader_cpu_ms_per_s,
            per_poll("nodes"),
            per_poll("jobs"),
            window.reference_rss_mib,
            window.reference_cpu_ms_per_s,
        ));
    }
    text
}

/// Drains (or resumes) a node with `scontrol update`, as an administrator would, and returns how long
/// slurmctld took to answer: the reference for the host's cordon -> DRAIN under the same load.
fn scontrol_update(node: &str, drained: bool) -> anyhow::Result<Duration> {
    let start = Instant::now();
    let state = if drained { "State=DRAIN" } else { "State=RESUME" };
    in_slurm_root(&["scontrol", "update", &format!("NodeName={node}"), state, "Reason=scale-bench reference"])?;
    Ok(start.elapsed())
}

/// Cordons (or uncordons) the node and returns how long until slurmctld shows it drained (or not),
/// and how long the API server took to answer the patch.
async fn until_drain(cluster: &Cluster, cordoned: bool) -> anyhow::Result<(Duration, Duration)> {
    let start = Instant::now();
    // The API server of a 2-core machine holding 10,000 pods may miss the client's deadline; the
    // patch is the same however often it is sent.
    let mut attempts = 0;
    while let Err(error) = set_unschedulable(&cluster.kube, CORDONED, cordoned).await {
        attempts += 1;
        anyhow::ensure!(attempts < 3, "cordoning {CORDONED} ({cordoned}): {error}");
        eprintln!("cordoning {CORDONED} ({cordoned}) failed, sent again: {error}");
    }
    let patched = start.elapsed();
    loop {
        // One RPC to slurmctld: a listing of thousands of nodes would be most of what is measured.
        let shown = in_slurm_root(&["scontrol", "-o", "show", "node", CORDONED])?;
        let state = shown.split_whitespace().find_map(|field| field.strip_prefix("State=")).unwrap_or_default();
        if state.contains("DRAIN") == cordoned {
            return Ok((start.elapsed(), patched));
        }
        anyhow::ensure!(start.elapsed() < Duration::from_secs(30), "{CORDONED} still {state} after 30 s");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
