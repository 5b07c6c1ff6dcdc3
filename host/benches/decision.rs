//! What a job-mapper decision costs: the bundled policy as the host runs it (a fresh wasmtime store and
//! instance per decision, then the result checks; and through the decision point, which adds the
//! metrics and the log line), next to the very same mapping code compiled natively into this benchmark.
//! The gap is the price of the sandbox.
//!
//! `cargo bench -p sunk --bench decision` runs criterion on each, then prints nearest-rank percentiles
//! of single decisions side by side. `cargo test --bench decision` (in the test suite) runs each once and
//! checks that the sandboxed and the native mapping agree on every input.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use serde::Serialize;
use serde::de::DeserializeOwned;
use sunk::latency::Latencies;
use sunk::policy::worlds::MapPodInput;
use sunk::policy::{DecisionPoint, JobMapper, JobMapperWorld, OnFailure, PolicyMetrics, World};
use sunk_policy_job_mapper::mapping;
use sunk_policy_job_mapper::sunk::policy::job_types as native;

/// One input, in the host's records and in the policy crate's own.
struct Case {
    name: &'static str,
    input: MapPodInput,
    pod: native::Pod,
    cluster: native::Cluster,
}

/// The world's sample inputs: a CPU pod, a GPU pod with annotations, a pod turned down.
fn cases() -> Vec<Case> {
    let names = ["cpu-pod", "gpu-pod", "rejected-pod"];
    let cases: Vec<Case> = names
        .into_iter()
        .zip(JobMapperWorld::samples())
        .map(|(name, input)| Case { name, pod: convert(&input.pod), cluster: convert(&input.cluster), input })
        .collect();
    // Both sides must decide the same, or the comparison means nothing.
    let module = JobMapper::bundled().expect("the bundled job-mapper loads");
    for case in &cases {
        let sandboxed = module.decide(&case.input).expect("the bundled job-mapper decides");
        let native = mapping::map_pod(&case.pod, &case.cluster);
        assert_eq!(json(&sandboxed), json(&native), "{}: the sandboxed and native mappings differ", case.name);
    }
    cases
}

/// The same record in the other crate's types (they share the WIT, hence the serde shape).
fn convert<T: DeserializeOwned>(record: &impl Serialize) -> T {
    serde_json::from_value(json(record)).expect("the host's and the policy's records have the same shape")
}

fn json(value: &impl Serialize) -> serde_json::Value {
    serde_json::to_value(value).expect("records serialize")
}

fn decision_point() -> DecisionPoint<JobMapperWorld> {
    DecisionPoint::bundled(OnFailure::Fallback, PolicyMetrics::default()).expect("the bundled job-mapper loads")
}

fn criterion_benches(c: &mut Criterion) {
    let module = JobMapper::bundled().expect("the bundled job-mapper loads");
    let point = decision_point();
    for case in cases() {
        let mut group = c.benchmark_group(format!("job-mapper/{}", case.name));
        group.bench_function("native", |b| b.iter(|| mapping::map_pod(black_box(&case.pod), black_box(&case.cluster))));
        group.bench_function("wasm module", |b| b.iter(|| module.decide(black_box(&case.input))));
        group.bench_function("wasm decision point", |b| b.iter(|| point.decide(black_box(&case.input))));
        group.finish();
    }
}

/// One decision of the input at hand, whatever runs it.
type Decide<'a> = dyn FnMut() -> Result<(), ()> + 'a;

/// Percentiles of single decisions, which criterion's means hide: the p99 is what a burst of pods sees.
fn percentile_table(_: &mut Criterion) {
    // `cargo test` runs this file too (once per benchmark, as a check that it works): keep that short.
    let measuring = std::env::args().any(|arg| arg == "--bench");
    let decisions = if measuring { 20_000 } else { 100 };
    let module = JobMapper::bundled().expect("the bundled job-mapper loads");
    let point = decision_point();
    println!("\njob-mapper: {decisions} single decisions each (µs, nearest rank)");
    println!("{:<14} {:<20} {:>8} {:>8} {:>8} {:>8}", "input", "runs as", "p50", "p95", "p99", "max");
    for case in cases() {
        let runs: [(&str, Box<Decide>); 3] = [
            ("native", Box::new(|| Ok(mapping::map_pod(&case.pod, &case.cluster)).map(|m| drop(black_box(m))))),
            ("wasm module", Box::new(|| module.decide(&case.input).map(drop).map_err(drop))),
            ("wasm decision point", Box::new(|| point.decide(&case.input).map(drop).map_err(drop))),
        ];
        for (label, run) in runs {
            let latencies = Latencies::measure(decisions, run).expect("the bundled job-mapper decides");
            let [p50, p95, p99, max] = latencies.summary_micros();
            println!("{:<14} {label:<20} {p50:>8.2} {p95:>8.2} {p99:>8.2} {max:>8.1}", case.name);
        }
    }
}

criterion_group!(benches, criterion_benches, percentile_table);
criterion_main!(benches);
