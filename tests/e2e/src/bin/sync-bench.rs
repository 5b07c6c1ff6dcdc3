//! Benchmark of the Syncer against a Slurm with many nodes (not a test: it prints figures).
//!
//! Adds `--nodes` dynamic CLOUD nodes (powered down: listed, never run) to the local cluster's Slurm (slurm.conf's MaxNodeCount must
//! allow them), runs a host with only the Syncer, and measures, in one run:
//! - Slurm requests per poll and host CPU per poll (from the host's metrics and /proc), idle;
//! - the reference: what one poll costs when every poll re-lists every node (as Slinky and Soperator
//!   do) against an incremental poll (`update_time`, answered 304 when nothing changed);
//! - cordon -> Slurm DRAIN and uncordon -> resumed latency on kube-node-1, p50/p99.
//!
//! `cargo run -p sunk-e2e --bin sync-bench -- [--nodes 1000] [--cordons 30]`, with the cluster up.

use std::time::{Duration, Instant};

use anyhow::Context as _;
use sunk::slurm::NodesPage;
use sunk_e2e::figures::percentiles;
use sunk_e2e::process::Usage;
use sunk_e2e::{Cluster, in_slurm_root, set_unschedulable, wait_for};

const NODE: &str = "kube-node-1";

struct Args {
    nodes: usize,
    cordons: usize,
}

fn args() -> anyhow::Result<Args> {
    let mut args = Args { nodes: 1000, cordons: 30 };
    let mut words = std::env::args().skip(1);
    while let Some(flag) = words.next() {
        let value: usize = words.next().context("a number after the flag")?.parse()?;
        match flag.as_str() {
            "--nodes" => args.nodes = value,
            "--cordons" => args.cordons = value,
            other => anyhow::bail!("unknown flag {other}"),
        }
    }
    Ok(args)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = args()?;
    let range = format!("bench[{:04}-{:04}]", 1, args.nodes);
    in_slurm_root(&["scontrol", "create", &format!("NodeName={range}"), "CPUs=1", "RealMemory=100", "State=CLOUD"])
        .context("creating the benchmark's CLOUD nodes (MaxNodeCount in slurm.conf must allow them)")?;
    let outcome = run(&args).await;
    let _ = in_slurm_root(&["scontrol", "delete", &format!("nodename={range}")]);
    let kube = Cluster::client().await?;
    let _ = set_unschedulable(&kube, NODE, false).await;
    outcome
}

async fn run(args: &Args) -> anyhow::Result<()> {
    let mut cluster = Cluster::connect("sync-bench").await?;
    let NodesPage::All { nodes, last_update } = cluster.slurm.nodes(None).await? else {
        anyhow::bail!("slurmrestd answered a full listing with 304");
    };
    println!("Slurm nodes listed: {}", nodes.len());

    // The reference, in the same run: a full listing per poll against an incremental one.
    let rounds = 20;
    let full = timed(rounds, || async { cluster.slurm.nodes(None).await.map(drop) }).await?;
    let since = last_update.unwrap_or(0);
    // As the node cache polls: slurmrestd's 500 "Unable to query partitions" means a full listing.
    let incremental = timed(rounds, || async {
        match cluster.slurm.nodes(Some(since)).await {
            Err(error) if error.is_partitions_unchanged() => cluster.slurm.nodes(None).await.map(drop),
            other => other.map(drop),
        }
    })
    .await?;
    println!("one poll, client side (wall, CPU): full listing {full:?}; incremental {incremental:?}");

    let host = cluster.start_host(&[("SUNK_SYNCER", "true"), ("SUNK_SCHEDULER", "false")])?;
    let pid = cluster.host_pid(host);
    let metrics = |text: String, name: &str| {
        text.lines()
            .find(|l| l.starts_with(name) && !l.starts_with('#'))
            .and_then(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
    };
    wait_for("the host's first polls", Duration::from_secs(30), || async {
        (metrics(cluster.metrics(host).await.ok()?, "sunk_slurm_node_polls_total")? >= 5.0).then_some(())
    })
    .await?;
    let before = (cluster.metrics(host).await?, cpu_seconds(pid)?);
    tokio::time::sleep(Duration::from_secs(20)).await;
    let after = (cluster.metrics(host).await?, cpu_seconds(pid)?);
    let polls = metrics(after.0.clone(), "sunk_slurm_node_polls_total").unwrap_or(0.0)
        - metrics(before.0.clone(), "sunk_slurm_node_polls_total").unwrap_or(0.0);
    let requests = metrics(after.0, "sunk_slurm_node_requests_total").unwrap_or(0.0)
        - metrics(before.0, "sunk_slurm_node_requests_total").unwrap_or(0.0);
    println!(
        "host, idle, 20 s: {polls} polls, {:.2} Slurm requests per poll, {:.2} ms host CPU per poll",
        requests / polls.max(1.0),
        (after.1 - before.1) * 1000.0 / polls.max(1.0)
    );

    let kube = cluster.kube.clone();
    let mut drains = Vec::new();
    let mut resumes = Vec::new();
    for _ in 0..args.cordons {
        drains.push(until_drain(&cluster, &kube, true).await?);
        resumes.push(until_drain(&cluster, &kube, false).await?);
    }
    println!("cordon -> DRAIN in Slurm ({} runs): {}", args.cordons, percentiles(&mut drains));
    println!("uncordon -> resumed in Slurm ({} runs): {}", args.cordons, percentiles(&mut resumes));
    Ok(())
}

/// Mean wall and CPU time (of this process) of one call.
async fn timed<F, Fut>(rounds: u32, mut call: F) -> anyhow::Result<(Duration, Duration)>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<(), sunk::slurm::SlurmError>>,
{
    let pid = std::process::id();
    let (start, cpu) = (Instant::now(), cpu_seconds(pid)?);
    for _ in 0..rounds {
        call().await?;
    }
    let cpu = Duration::from_secs_f64((cpu_seconds(pid)? - cpu) / f64::from(rounds));
    Ok((start.elapsed() / rounds, cpu))
}

/// Cordons (or uncordons) kube-node-1 and returns how long until Slurm shows the node drained (or not).
async fn until_drain(cluster: &Cluster, kube: &kube::Client, cordoned: bool) -> anyhow::Result<Duration> {
    let start = Instant::now();
    set_unschedulable(kube, NODE, cordoned).await?;
    loop {
        let node = sunk_e2e::slurm_node(cluster, NODE).await?.context("kube-node-1 in Slurm")?;
        if node.state.iter().any(|s| s == "DRAIN") == cordoned {
            return Ok(start.elapsed());
        }
        anyhow::ensure!(start.elapsed() < Duration::from_secs(30), "no drain change in 30 s");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn cpu_seconds(pid: u32) -> anyhow::Result<f64> {
    Ok(Usage::of(pid).context("the process is gone")?.cpu_seconds)
}
