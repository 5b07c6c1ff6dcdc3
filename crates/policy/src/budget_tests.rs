//! The budget counts work, not time: the bundled and example policies use a small fraction of it, and
//! a host whose cores are all busy decides exactly as an idle one (same answers, same fuel, no
//! fallback).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::{self, JoinHandle};

use super::bundled::{self, fixtures};
use super::worlds::MapPodInput;
use super::*;

/// The most of the fuel budget a bundled or example policy may use on a sample input: they need far
/// less, and a policy near the budget would be one input away from failing.
const SMALL_FRACTION: f64 = 0.01;

/// The most fuel a dry run of `bytes` (configured with `config`) used in one decision.
fn most_fuel<W: World>(bytes: &[u8], config: Option<&str>) -> u64 {
    let module = Module::<W>::load(bytes, config.map(str::to_owned)).unwrap();
    module.dry_run().unwrap()
}

#[test]
fn bundled_and_example_policies_use_a_small_fraction_of_the_fuel_budget() {
    let budget = Limits::default().fuel;
    let used = [
        ("bundled job-mapper", most_fuel::<JobMapperWorld>(bundled::JOB_MAPPER, None)),
        ("bundled preemption", most_fuel::<PreemptionWorld>(bundled::PREEMPTION, None)),
        ("bundled drain", most_fuel::<DrainWorld>(bundled::DRAIN, None)),
        ("team-accounts", most_fuel::<JobMapperWorld>(fixtures::TEAM_ACCOUNTS.0, Some(fixtures::TEAM_ACCOUNTS.1))),
        ("drain-runbook", most_fuel::<DrainWorld>(fixtures::DRAIN_RUNBOOK.0, Some(fixtures::DRAIN_RUNBOOK.1))),
    ];
    for (policy, fuel) in used {
        // Shown with --nocapture: the figures behind the budget's size.
        println!(
            "{policy}: {fuel} fuel per decision at most, {:.4} % of {budget}",
            fuel as f64 * 100.0 / budget as f64
        );
        assert!(fuel > 0, "{policy}: fuel is counted");
        assert!((fuel as f64) < budget as f64 * SMALL_FRACTION, "{policy} uses {fuel} of {budget}");
    }
}

/// Threads spinning on every core until dropped: the machine as busy as it gets.
struct BusyCores {
    stop: Arc<AtomicBool>,
    spinners: Vec<JoinHandle<()>>,
}

impl BusyCores {
    fn start() -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let cores = thread::available_parallelism().map_or(2, |n| n.get());
        let spinners = (0..cores)
            .map(|_| {
                let stop = stop.clone();
                thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        std::hint::spin_loop();
                    }
                })
            })
            .collect();
        BusyCores { stop, spinners }
    }
}

impl Drop for BusyCores {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for spinner in self.spinners.drain(..) {
            let _ = spinner.join();
        }
    }
}

/// The job-mapper's sample inputs, as pods of team `ml` (which team-accounts maps) and as they are
/// (which it turns down).
fn team_inputs() -> Vec<MapPodInput> {
    let samples = JobMapperWorld::samples();
    let ml = samples.iter().cloned().map(|mut input| {
        input.pod.labels.push(KeyValue { key: "team".into(), value: "ml".into() });
        input
    });
    ml.chain(samples.iter().cloned()).collect()
}

#[test]
fn a_saturated_host_decides_exactly_as_an_idle_one() {
    const DECISIONS_PER_THREAD: usize = 2000;
    const DECIDERS: usize = 2;
    let (bytes, config) = fixtures::TEAM_ACCOUNTS;
    let module = JobMapper::load(bytes, Some(config.to_owned())).unwrap();
    let inputs = team_inputs();
    // Each input's answer and fuel on a quiet host (only the test harness running).
    let idle: Vec<(Mapping, u64)> = inputs
        .iter()
        .map(|input| {
            let (answer, fuel) = module.metered(input);
            (answer.unwrap(), fuel)
        })
        .collect();
    assert!(matches!(&idle[0].0, Mapping::Job(job) if job.account.as_deref() == Some("gpu-ml")), "{:?}", idle[0]);

    let metrics = PolicyMetrics::default();
    let point = Arc::new(DecisionPoint::<JobMapperWorld>::bundled(OnFailure::Fallback, metrics.clone()).unwrap());
    point.force(module.clone(), Source::File("team-accounts".into()));
    let (inputs, idle) = (Arc::new(inputs), Arc::new(idle));
    let busy = BusyCores::start();
    let deciders: Vec<_> = (0..DECIDERS)
        .map(|decider| {
            let (point, module, inputs, idle) = (point.clone(), module.clone(), inputs.clone(), idle.clone());
            thread::spawn(move || {
                for n in 0..DECISIONS_PER_THREAD {
                    let which = (n + decider) % inputs.len();
                    let (expected, fuel) = &idle[which];
                    let answer = point.decide(&inputs[which]).expect("the decision point decides");
                    assert_eq!(&answer, expected, "decision {n} of input {which} under load");
                    // Every few decisions, the fuel too: load changes how long a decision takes, never
                    // how much work it may do.
                    if n % 16 == 0 {
                        assert_eq!(module.metered(&inputs[which]).1, *fuel, "input {which}: the same fuel");
                    }
                }
            })
        })
        .collect();
    for decider in deciders {
        decider.join().expect("a decider failed");
    }
    drop(busy);

    let total = (DECIDERS * DECISIONS_PER_THREAD) as u64;
    let decided =
        metrics.outcome_count("job-mapper", Outcome::ok) + metrics.outcome_count("job-mapper", Outcome::rejected);
    assert_eq!(decided, total, "every decision was the module's own");
    for failure in [Outcome::fallback, Outcome::timeout, Outcome::out_of_fuel, Outcome::trap, Outcome::invalid] {
        assert_eq!(metrics.outcome_count("job-mapper", failure), 0, "{failure:?}");
    }
}
