//! The abuse suite: hostile modules are contained, each failure is reported (error kind, counter),
//! and the decision point keeps deciding with the bundled default.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use super::bundled::{self, fixtures};
use super::worlds::MapPodInput;
use super::*;

fn input() -> MapPodInput {
    JobMapperWorld::samples().remove(0)
}

/// A job-mapper decision point whose live module is the abuse fixture behaving as `behaviour`, and
/// its metrics.
fn abused(behaviour: &str, on_failure: OnFailure) -> (DecisionPoint<JobMapperWorld>, PolicyMetrics) {
    let metrics = PolicyMetrics::default();
    let point = DecisionPoint::bundled(on_failure, metrics.clone()).unwrap();
    let module = JobMapper::load(fixtures::ABUSE, Some(behaviour.to_owned())).unwrap();
    point.force(module, Source::File(format!("abuse-{behaviour}")));
    (point, metrics)
}

/// The abusive module fails with `expected`; the bundled default answers instead, and both the
/// failure and the fallback are counted.
fn falls_back(behaviour: &str, outcome: Outcome, expected: fn(&PolicyError) -> bool) {
    let (strict, metrics) = abused(behaviour, OnFailure::FailClosed);
    let error = strict.decide(&input()).expect_err("the abusive module fails");
    assert!(expected(&error), "{behaviour}: {error:?}");
    assert_eq!(metrics.outcome_count("job-mapper", outcome), 1, "{behaviour} counted");
    assert_eq!(metrics.outcome_count("job-mapper", Outcome::fallback), 0);

    let (lenient, metrics) = abused(behaviour, OnFailure::Fallback);
    let mapping = lenient.decide(&input()).expect("the bundled default decides");
    assert!(matches!(mapping, Mapping::Job(_)), "{behaviour}: {mapping:?}");
    assert_eq!(metrics.outcome_count("job-mapper", Outcome::fallback), 1);
    assert_eq!(metrics.outcome_count("job-mapper", outcome), 1);
    // The point stays usable: the next decision falls back again, nothing is poisoned.
    assert!(matches!(lenient.decide(&input()), Ok(Mapping::Job(_))));
}

#[test]
fn an_infinite_loop_runs_out_of_fuel() {
    falls_back("loop", Outcome::out_of_fuel, |e| *e == PolicyError::OutOfFuel);
}

#[test]
fn an_infinite_loop_with_fuel_to_spare_hits_the_wall_clock_backstop() {
    let limits = Limits { fuel: u64::MAX, time: std::time::Duration::from_millis(20), ..Limits::default() };
    let module = JobMapper::load(fixtures::ABUSE, Some("loop".into())).unwrap().with_limits(limits);
    assert_eq!(module.decide(&input()).unwrap_err(), PolicyError::Timeout);
}

#[test]
fn a_memory_bomb_hits_the_limit() {
    falls_back("memory-bomb", Outcome::out_of_memory, |e| *e == PolicyError::OutOfMemory);
}

#[test]
fn deep_recursion_traps() {
    falls_back("recursion", Outcome::trap, |e| matches!(e, PolicyError::Trap(_)));
}

#[test]
fn a_panic_traps_with_its_message() {
    falls_back("panic", Outcome::trap, |e| matches!(e, PolicyError::Trap(m) if m.contains("asked to panic")));
}

#[test]
fn huge_output_is_invalid() {
    falls_back(
        "huge-output",
        Outcome::invalid,
        |e| matches!(e, PolicyError::Invalid(m) if m.contains("bytes of text")),
    );
}

#[test]
fn an_invalid_answer_is_refused() {
    falls_back("invalid", Outcome::invalid, |e| matches!(e, PolicyError::Invalid(m) if m.contains("0 cpus")));
}

#[test]
fn a_flood_of_log_lines_is_capped_and_the_decision_stands() {
    let (point, _) = abused("many-logs", OnFailure::FailClosed);
    assert!(matches!(point.decide(&input()), Ok(Mapping::Job(_))));
    // The heaviest decision that must succeed here and in the swap test below: far from the budget.
    let (answer, fuel) = point.live().module.metered(&input());
    assert!(answer.is_ok());
    assert!(fuel < Limits::default().fuel / 4, "10 000 log lines took {fuel} fuel");
}

#[test]
fn the_wrong_world_is_refused_at_load_naming_the_missing_export() {
    let error = JobMapper::load(bundled::DRAIN, None).unwrap_err();
    assert!(format!("{error:#}").contains("map-pod"), "{error:#}");
    let error = Module::<DrainWorld>::load(bundled::JOB_MAPPER, None).unwrap_err();
    assert!(format!("{error:#}").contains("on-node-event"), "{error:#}");
}

#[test]
fn a_wasi_import_is_refused_at_load_naming_the_import() {
    let error = format!("{:#}", JobMapper::load(fixtures::WASI_IMPORT, None).unwrap_err());
    assert!(error.contains("`wasi:"), "{error}");
    assert!(error.contains("may only import `sunk:policy/host"), "{error}");
}

#[test]
fn corrupt_bytes_are_refused_at_load() {
    let truncated = &bundled::JOB_MAPPER[..bundled::JOB_MAPPER.len() / 2];
    let mut flipped = bundled::JOB_MAPPER.to_vec();
    let middle = flipped.len() / 2;
    flipped[middle..middle + 64].iter_mut().for_each(|b| *b = !*b);
    for bytes in [truncated, &flipped, b"not wasm at all".as_slice(), b"\0asm\x01\0\0\0"] {
        assert!(JobMapper::load(bytes, None).is_err());
    }
}

#[test]
fn a_module_failing_its_dry_run_never_goes_live() {
    let point = DecisionPoint::<JobMapperWorld>::bundled(OnFailure::Fallback, PolicyMetrics::default()).unwrap();
    let error = point.offer(fixtures::ABUSE, Some("panic".into()), Source::File("bad".into())).unwrap_err();
    assert!(format!("{error:#}").contains("dry run"), "{error:#}");
    assert_eq!(point.live().source, Source::Bundled);
    assert!(point.previous().is_none());
}

#[test]
fn swaps_are_atomic_and_roll_back() {
    let point =
        Arc::new(DecisionPoint::<JobMapperWorld>::bundled(OnFailure::FailClosed, PolicyMetrics::default()).unwrap());
    let stop = Arc::new(AtomicBool::new(false));
    let deciders: Vec<_> = (0..2)
        .map(|_| {
            let (point, stop) = (point.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut decisions = 0;
                while !stop.load(Ordering::Relaxed) {
                    point.decide(&input()).expect("no decision fails during a swap");
                    decisions += 1;
                }
                decisions
            })
        })
        .collect();
    for round in 0..10 {
        let config = Some(if round % 2 == 0 { "ok" } else { "many-logs" }.to_owned());
        point.offer(fixtures::ABUSE, config, Source::File(format!("v{round}"))).unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    for decider in deciders {
        assert!(decider.join().unwrap() > 0);
    }
    assert_eq!(point.live().source, Source::File("v9".into()));
    assert_eq!(point.revision(), 10, "every module that went live is a revision");
    assert_eq!(point.rollback(), Some(Source::File("v8".into())));
    assert_eq!(point.live().source, Source::File("v8".into()));
    point.reset();
    assert_eq!(point.live().source, Source::Bundled);
    assert_eq!(point.revision(), 12);
    point.reset();
    assert_eq!(point.revision(), 12, "nothing went live");
}

#[test]
fn an_operators_module_that_is_not_live_withholds_every_decision_until_it_is() {
    let metrics = PolicyMetrics::default();
    let point = DecisionPoint::<JobMapperWorld>::bundled(OnFailure::Fallback, metrics.clone()).unwrap();
    let uploaded = Source::Resource("restrictive".into());
    point.withhold(uploaded.clone(), "PolicyModule restrictive is not live (its ConfigMap is missing)".into());
    let error = point.decide(&input()).expect_err("the bundled default may not stand in, fallback or not");
    assert!(matches!(&error, PolicyError::Withheld(why) if why.contains("ConfigMap is missing")), "{error:?}");
    assert_eq!(metrics.outcome_count("job-mapper", Outcome::withheld), 1);
    point.release(&Source::Resource("another".into()));
    assert!(point.decide(&input()).is_err(), "only the module that withheld decisions releases them");
    point.release(&uploaded);
    assert!(matches!(point.decide(&input()), Ok(Mapping::Job(_))));
}
