//! A chaos run with invariants on the local cluster (not a test: it prints figures, and exits non-zero
//! when an invariant was broken). The chart's host, two replicas behind a Lease, keeps a NodeSet over
//! three Nodes and schedules a steady stream of pods (singles that run a few seconds, bursts that go
//! to Slurm as job arrays, two-pod gangs, preemptors, pods deleted while they run) beside Slurm batch
//! jobs, while faults are injected one after another (see `faults`): the leader killed or frozen past
//! its Lease, slurmctld, slurmrestd, the API server or a kubelet restarted, a slurmd pod deleted, a
//! Node cordoned. The run lasts `--minutes`, or longer until every fault has struck once. The
//! invariants (see `invariants`) are checked on every sample and at the end.
//!
//! `cargo run -p sunk-e2e --bin chaos -- [--minutes 3] [--seed 1] [--faults all|none|<kind>,...]`,
//! with the cluster up (tests/cluster/up.sh; the host image is the one up.sh built).

mod faults;
mod gauges;
mod invariants;
mod random;
mod report;
mod workload;
mod world;

use std::time::{Duration, Instant};

use anyhow::Context as _;

use faults::{Fault, Recovery};
use invariants::Invariants;
use random::Random;
use workload::Workload;

struct Args {
    minutes: f64,
    seed: u64,
    faults: Vec<Fault>,
    /// Where to write the gauges' readings (CSV, and an SVG plot beside it).
    gauges: Option<std::path::PathBuf>,
}

fn args() -> anyhow::Result<Args> {
    let mut args = Args { minutes: 3.0, seed: 1, faults: Fault::ALL.to_vec(), gauges: None };
    let mut words = std::env::args().skip(1);
    while let Some(flag) = words.next() {
        let value = words.next().with_context(|| format!("a value after {flag}"))?;
        match flag.as_str() {
            "--minutes" => args.minutes = value.parse()?,
            "--seed" => args.seed = value.parse()?,
            "--faults" => args.faults = Fault::parse_list(&value)?,
            "--gauges" => args.gauges = Some(value.into()),
            other => anyhow::bail!("unknown flag {other}"),
        }
    }
    Ok(args)
}

/// How often the workload acts and the invariants are sampled.
const TICK: Duration = Duration::from_secs(2);
/// The gauges are read every this many ticks.
const GAUGE_EVERY: u64 = 5;
/// The quiet time between one fault's recovery and the next fault.
const BETWEEN_FAULTS: (u64, u64) = (5, 15);

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = args()?;
    let world = world::World::up().await?;
    let outcome = run(&world, &args).await;
    if outcome.as_ref().map_or(true, |report| !report.violations.is_empty()) {
        world.keep_host_logs();
    }
    let teardown = world.down().await;
    let report = outcome?;
    println!("{report}");
    teardown?;
    anyhow::ensure!(report.violations.is_empty(), "{} invariant violations", report.violations.len());
    Ok(())
}

async fn run(world: &world::World, args: &Args) -> anyhow::Result<report::Report> {
    let mut random = Random::new(args.seed);
    let mut workload = Workload::new();
    let mut invariants = Invariants::new();
    let mut recoveries: Vec<(Fault, Option<Duration>)> = Vec::new();
    let mut gauges = gauges::Gauges::new();
    let mut ticks = 0_u64;
    let started = Instant::now();
    let end = started + Duration::from_secs_f64(args.minutes * 60.0);
    let mut next_fault = Instant::now() + Duration::from_secs(10);
    let mut in_flight: Option<faults::Injected> = None;
    let order = Fault::shuffled(&args.faults, &mut random);
    let mut injected_count = 0;
    // At least `--minutes`, and until every fault of the list has struck once: a short run still
    // proves each.
    while Instant::now() < end || injected_count < order.len() {
        workload.tick(world, &mut random).await;
        let sample = invariants.sample(world, &workload).await;
        if let Some(sample) = &sample {
            workload.saw_arrays(&sample.arrays);
        }
        ticks += 1;
        if ticks.is_multiple_of(GAUGE_EVERY) {
            gauges.read(world, sample.as_ref().map(|sample| sample.slurm_jobs)).await;
        }
        if let Some(mut injected) = in_flight.take() {
            match injected.recovery(world, sample.as_ref()).await {
                Recovery::Recovered(took) => {
                    recoveries.push((injected.fault, Some(took)));
                    invariants.quiet_since(Instant::now());
                    next_fault = Instant::now() + Duration::from_secs(random.between(BETWEEN_FAULTS));
                }
                Recovery::GaveUp(violation) => {
                    invariants.violation(violation);
                    recoveries.push((injected.fault, None));
                    next_fault = Instant::now();
                }
                Recovery::Waiting => in_flight = Some(injected),
            }
        } else if Instant::now() >= next_fault && !order.is_empty() {
            let fault = order[injected_count % order.len()];
            injected_count += 1;
            eprintln!("[{:>5.0}s] injecting: {fault}", started.elapsed().as_secs_f64());
            invariants.fault_began();
            match faults::inject(world, fault, &mut random, &mut invariants).await {
                Ok(injected) => in_flight = Some(injected),
                Err(error) => anyhow::bail!("injecting {fault}: {error:#}"),
            }
        }
        tokio::time::sleep(TICK).await;
    }
    if let Some(mut injected) = in_flight.take() {
        // The last fault still gets its time to recover: the run ends on a whole system.
        let took = loop {
            let sample = invariants.sample(world, &workload).await;
            match injected.recovery(world, sample.as_ref()).await {
                Recovery::Recovered(took) => break Some(took),
                Recovery::GaveUp(violation) => {
                    invariants.violation(violation);
                    break None;
                }
                Recovery::Waiting => tokio::time::sleep(TICK).await,
            }
        };
        recoveries.push((injected.fault, took));
    }
    workload.stop_and_clean(world).await?;
    if let Some(path) = &args.gauges {
        gauges.write(path)?;
    }
    invariants.at_end(world, &workload).await;
    let preempted = invariants.preempted();
    Ok(report::Report {
        minutes: started.elapsed().as_secs_f64() / 60.0,
        seed: args.seed,
        recoveries,
        counts: workload.counts().clone(),
        preempted,
        kubelet_refusals: invariants.kubelet_refusals(),
        violations: invariants.into_violations(),
        gauges: gauges.summary(),
    })
}
