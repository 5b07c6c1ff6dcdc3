//! sunk's pod scheduler against kube-scheduler, in one run on the local cluster (not a test: it prints
//! figures). The cluster's own kube-scheduler (built from the same Kubernetes as the API server, run
//! with its defaults by tests/cluster/up.sh) and a `sunk host --fast-path` schedule the same pods onto
//! the same fake Nodes, each running a real slurmd (see `fleet`):
//! - `--sequential` pods one after another, each waited on: the latency of one pod on a quiet cluster;
//! - a burst of `--pods` pods created `--creators` at a time: throughput and create -> bound p50/p99;
//! - both again for sunk with `--queued` jobs pending in Slurm (see `queue`), unless `--queued 0`.
//!
//! Every bench pod has a PriorityClass of 1000 (the same for both schedulers): sunk's job-mapper makes
//! it the placeholder's Slurm priority, above the queued jobs' (1), as a site ranks pods it wants
//! placed at once; otherwise Slurm's main scheduler stops at the first queued job that cannot start
//! and only its backfill pass (every 30 s) would reach the pods.
//!
//! `cargo build --release -p sunk -p sunk-test-agent && cargo run --release -p sunk-e2e --bin sched-bench`
//! `-- [--nodes 8] [--pods 500] [--sequential 100] [--queued 10000] [--creators 8]`, with the cluster up.
//! `-- --against <scheduler name> [--sequential 30]` measures one pod at a time through a scheduler
//! already installed (see `installed`) instead: no fake Nodes, no host of the bench's own.

mod fleet;
mod installed;
mod measure;
mod queue;
mod stats;

use std::time::{Duration, Instant};

use anyhow::Context as _;
use sunk_e2e::{Cluster, SCHEDULER, in_slurm_root, repo_root, wait_for};

use measure::Bindings;
use stats::{Summary, millis};

const KUBE_SCHEDULER: &str = "default-scheduler";

struct Args {
    nodes: usize,
    pods: usize,
    sequential: usize,
    queued: usize,
    creators: usize,
    /// An installed scheduler to measure instead of a host of the bench's own.
    against: Option<String>,
}

fn args() -> anyhow::Result<Args> {
    let mut args = Args { nodes: 8, pods: 500, sequential: 100, queued: 10_000, creators: 8, against: None };
    let mut words = std::env::args().skip(1);
    while let Some(flag) = words.next() {
        if flag == "--against" {
            args.against = Some(words.next().context("a scheduler name after --against")?);
            continue;
        }
        let value: usize = words.next().context("a number after the flag")?.parse()?;
        match flag.as_str() {
            "--nodes" => args.nodes = value,
            "--pods" => args.pods = value,
            "--sequential" => args.sequential = value,
            "--queued" => args.queued = value,
            "--creators" => args.creators = value.max(1),
            other => anyhow::bail!("unknown flag {other}"),
        }
    }
    Ok(args)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = args()?;
    if std::env::var_os("SUNK_BINARY").is_none() {
        // SAFETY: set before any thread of this program reads the environment.
        unsafe { std::env::set_var("SUNK_BINARY", repo_root().join("target/release/sunk")) };
    }
    let mut cluster = Cluster::connect("sched-bench").await?;
    if let Some(installed) = &args.against {
        let _priority_class = measure::BenchPriorityClass::create(&cluster.kube, &cluster.namespace).await?;
        let bindings = Bindings::watch(&cluster.kube, &cluster.namespace);
        let (kube, namespace) = (&cluster.kube, &cluster.namespace);
        let count = args.sequential;
        let theirs = installed::one_at_a_time(kube, namespace, &bindings, KUBE_SCHEDULER, "kube", count).await?;
        let ours = installed::one_at_a_time(kube, namespace, &bindings, installed, "installed", count).await?;
        print_table(&[("kube-scheduler, one by one".into(), theirs), ("sunk, one by one".into(), ours)], &args);
        return Ok(());
    }
    let fleet = fleet::Fleet::start(&cluster.kube, &cluster.namespace, args.nodes).await?;
    println!("{} fake Nodes with {} CPUs each, their slurmd idle", fleet.nodes.len(), fleet::CPUS);
    let namespace = cluster.namespace.clone();
    // The bench's pods rank by their PriorityClass (1000), as a site ranks pods it wants placed at
    // once: the namespace is granted that much. `SUNK_BENCH_TENANCY` names another document (one with
    // `trustAnnotations`, say, to measure the fast path).
    let granted = cluster.grant(serde_json::json!({"maxPriority": 1000}))?;
    let tenancy = std::env::var("SUNK_BENCH_TENANCY").unwrap_or(granted);
    let host = cluster.start_host(&[
        ("SUNK_FAST_PATH", "true"),
        ("SUNK_WATCH_NAMESPACES", &namespace),
        ("SUNK_TENANCY", &tenancy),
    ])?;
    wait_for("the sunk host to be ready", Duration::from_secs(60), || async {
        (cluster.readyz(host).await.ok()?.0 == 200).then_some(())
    })
    .await?;
    let _priority_class = measure::BenchPriorityClass::create(&cluster.kube, &namespace).await?;
    let bindings = Bindings::watch(&cluster.kube, &namespace);

    let mut rows = Vec::new();
    for (scheduler, label) in [(KUBE_SCHEDULER, "kube-scheduler"), (SCHEDULER, "sunk")] {
        // One by one first: a burst of sunk's batch placeholders can leave this machine's Slurm 24.11.5
        // daemons deaf (docs/benchmarks.md), and nothing after it would measure Slurm.
        rows.push((format!("{label}, one by one"), one_by_one(&cluster, &bindings, scheduler, &args, "empty").await?));
        rows.push((format!("{label}, burst"), burst(&cluster, &bindings, scheduler, &args, "empty").await?));
    }
    if args.queued > 0 {
        let began = Instant::now();
        // Its jobs are cancelled when it is dropped, after the queued phases.
        let _queue = tokio::task::block_in_place(|| queue::Queue::fill(args.queued, &fleet.nodes))?;
        println!(
            "{} jobs pending in Slurm (queued in {:.0} s)",
            queue::Queue::pending()?,
            began.elapsed().as_secs_f64()
        );
        rows.push((
            "sunk, one by one, Slurm queue".into(),
            one_by_one(&cluster, &bindings, SCHEDULER, &args, "queued").await?,
        ));
        rows.push(("sunk, burst, Slurm queue".into(), burst(&cluster, &bindings, SCHEDULER, &args, "queued").await?));
    }
    print_table(&rows, &args);
    let metrics = cluster.metrics(host).await?;
    println!("\nthe sunk host's attempts, by result (one per pass over an unbound pod):");
    for line in metrics.lines().filter(|line| line.starts_with("sunk_scheduler_schedule_attempts_total")) {
        println!("  {line}");
    }
    drop(fleet);
    Ok(())
}

async fn burst(
    cluster: &Cluster,
    bindings: &Bindings,
    scheduler: &str,
    args: &Args,
    tag: &str,
) -> anyhow::Result<Summary> {
    let prefix = format!("{}-burst-{tag}", short(scheduler));
    let trips =
        measure::burst(&cluster.kube, &cluster.namespace, bindings, scheduler, &prefix, args.pods, args.creators)
            .await?;
    finish(cluster, Summary::of(&trips), &prefix).await
}

async fn one_by_one(
    cluster: &Cluster,
    bindings: &Bindings,
    scheduler: &str,
    args: &Args,
    tag: &str,
) -> anyhow::Result<Summary> {
    let prefix = format!("{}-seq-{tag}", short(scheduler));
    let trips =
        measure::one_by_one(&cluster.kube, &cluster.namespace, bindings, scheduler, &prefix, args.sequential).await?;
    finish(cluster, Summary::of(&trips), &prefix).await
}

/// Reports a phase and clears its pods (and, for sunk, waits for their Slurm jobs to be gone).
async fn finish(cluster: &Cluster, summary: Summary, prefix: &str) -> anyhow::Result<Summary> {
    println!(
        "{prefix}: {} pods, {:.1} pods/s, p50 {}, p99 {}",
        summary.pods,
        summary.throughput,
        millis(summary.p50),
        millis(summary.p99)
    );
    let clearing = Instant::now();
    measure::clear(&cluster.kube, &cluster.namespace).await?;
    let patience = Duration::from_secs(120 + summary.pods as u64 / 2);
    let cleared = wait_for("the bench nodes to be free in Slurm", patience, || async {
        let listed = in_slurm_root(&["squeue", "-h", "-t", "R,CG,CF", "-o", "%N"]).ok()?;
        (!listed.lines().any(|nodes| nodes.contains("bench-node"))).then_some(())
    })
    .await;
    // Reported, not fatal: the figures are in; what follows says whether they can be trusted.
    match cleared {
        Ok(()) => {
            println!("{prefix}: pods deleted and their Slurm jobs gone in {:.1} s", clearing.elapsed().as_secs_f64())
        }
        Err(error) => println!("{prefix}: NOT CLEARED: {error}; later phases may wait on a stuck Slurm"),
    }
    Ok(summary)
}

fn short(scheduler: &str) -> &'static str {
    if scheduler == KUBE_SCHEDULER { "kube" } else { "sunk" }
}

fn print_table(rows: &[(String, Summary)], args: &Args) {
    let find = |name: &str| rows.iter().find(|(row, _)| row == name).map(|(_, summary)| *summary);
    println!("\n| scheduler, phase | pods | throughput | p50 | p99 |");
    println!("|---|---|---|---|---|");
    for (name, summary) in rows {
        println!(
            "| {name} | {} | {:.1} pods/s | {} | {} |",
            summary.pods,
            summary.throughput,
            millis(summary.p50),
            millis(summary.p99)
        );
    }
    let ratio = |a: Option<Summary>, b: Option<Summary>, of: fn(&Summary) -> f64| match (a, b) {
        (Some(a), Some(b)) if of(&b) > 0.0 => format!("{:.2}", of(&a) / of(&b)),
        _ => "-".to_string(),
    };
    let throughput = |s: &Summary| s.throughput;
    let p50 = |s: &Summary| s.p50.as_secs_f64();
    let p99 = |s: &Summary| s.p99.as_secs_f64();
    let (sunk_burst, kube_burst) = (find("sunk, burst"), find("kube-scheduler, burst"));
    let (sunk_one, kube_one) = (find("sunk, one by one"), find("kube-scheduler, one by one"));
    let (queued_burst, queued_one) = (find("sunk, burst, Slurm queue"), find("sunk, one by one, Slurm queue"));
    let q = args.queued;
    let ratios = [
        ("sunk / kube-scheduler throughput, burst".to_string(), ratio(sunk_burst, kube_burst, throughput)),
        ("sunk / kube-scheduler p50, burst".into(), ratio(sunk_burst, kube_burst, p50)),
        ("sunk / kube-scheduler p50, one by one".into(), ratio(sunk_one, kube_one, p50)),
        ("sunk / kube-scheduler p99, one by one".into(), ratio(sunk_one, kube_one, p99)),
        (format!("sunk with {q} queued / empty, p50 one by one"), ratio(queued_one, sunk_one, p50)),
        (format!("sunk with {q} queued / empty, p99 one by one"), ratio(queued_one, sunk_one, p99)),
        (format!("sunk with {q} queued / empty, p50 burst"), ratio(queued_burst, sunk_burst, p50)),
    ];
    println!("\n| ratio | value |");
    println!("|---|---|");
    // Only what this run measured.
    for (name, value) in ratios.iter().filter(|(_, value)| value != "-") {
        println!("| {name} | {value} |");
    }
}
