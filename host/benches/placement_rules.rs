//! What the pod-level placement rules (required pod (anti-)affinity and topology spread) cost one
//! pending pod against N pods already bound: the pass as it was, indexing every pod of the cluster
//! for each pending pod, beside the pass as it is, reading the index the poll builds once and every
//! pass shares (`host/src/scheduler/placement/shared_neighbourhood.rs`); and that build itself.
//!
//! `cargo bench -p sunk --bench placement_rules` runs criterion on each, then prints nearest-rank
//! percentiles side by side. `cargo test --bench placement_rules` runs each once and checks that both
//! passes refuse the same Nodes.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use k8s_openapi::api::core::v1::Node;
use serde_json::{Value, json};
use sunk::latency::Latencies;
use sunk::scheduler::placement_bench::Cluster;

const HOSTNAME: &str = "kubernetes.io/hostname";
const ZONE: &str = "topology.kubernetes.io/zone";
/// Nodes, in zones of `NODES / ZONES`.
const NODES: usize = 100;
const ZONES: usize = 4;
/// Namespaces and apps the pods are spread over; one pod in `REFUSING` has a required anti-affinity.
const NAMESPACES: usize = 10;
const APPS: usize = 50;
const REFUSING: usize = 10;

fn nodes() -> Vec<Node> {
    (0..NODES)
        .map(|at| {
            let (name, zone) = (format!("node-{at}"), format!("zone-{}", at % ZONES));
            let labels = json!({HOSTNAME: name, ZONE: zone});
            serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}, "spec": {}})).unwrap()
        })
        .collect()
}

fn anti_affinity(topology_key: &str, app: &str) -> Value {
    let term = json!({"topologyKey": topology_key, "labelSelector": {"matchLabels": {"app": app}}});
    json!({"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}})
}

/// `count` pods bound round the Nodes; every `REFUSING`th keeps its app off its Node.
fn bound_pods(count: usize) -> Vec<Value> {
    (0..count)
        .map(|at| {
            let (app, namespace) = (format!("app-{}", at % APPS), format!("team-{}", at % NAMESPACES));
            let mut spec = json!({"nodeName": format!("node-{}", at % NODES), "containers": []});
            if at % REFUSING == 0 {
                spec["affinity"] = anti_affinity(HOSTNAME, &app);
            }
            json!({
                "metadata": {"name": format!("pod-{at}"), "namespace": namespace, "uid": format!("uid-{at}"),
                             "labels": {"app": app}},
                "spec": spec,
                "status": {"phase": "Running"}
            })
        })
        .collect()
}

/// A pending replica of `app-1` in `team-1`, kept off Nodes running one and spread over zones.
fn pending() -> Value {
    let spread = json!({"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
                        "labelSelector": {"matchLabels": {"app": "app-1"}}});
    json!({
        "metadata": {"name": "pending", "namespace": "team-1", "uid": "pending", "labels": {"app": "app-1"}},
        "spec": {"containers": [], "affinity": anti_affinity(HOSTNAME, "app-1"), "topologySpreadConstraints": [spread]}
    })
}

/// The clusters measured: N pods bound by another scheduler, and the same N as this scheduler's own.
fn clusters() -> Vec<(String, Cluster)> {
    let mut clusters = Vec::new();
    for count in [1_000, 10_000] {
        for own in [false, true] {
            let whose = if own { "sunk's" } else { "others'" };
            let cluster = Cluster::new(nodes(), bound_pods(count), own, pending());
            // Both passes must refuse the same Nodes, or the comparison means nothing.
            let refused = cluster.rebuilt_per_pass();
            assert!(refused > 0, "the pending pod is refused somewhere");
            assert_eq!(cluster.shared(), refused, "{count} {whose} pods: the passes disagree");
            clusters.push((format!("{count} pods, {whose}"), cluster));
        }
    }
    clusters
}

fn criterion_benches(c: &mut Criterion) {
    for (name, cluster) in clusters() {
        let mut group = c.benchmark_group(format!("placement-rules/{name}"));
        group.bench_function("rebuilt per pass", |b| b.iter(|| black_box(&cluster).rebuilt_per_pass()));
        group.bench_function("shared", |b| b.iter(|| black_box(&cluster).shared()));
        group.bench_function("the poll's build", |b| b.iter(|| black_box(&cluster).build_view()));
        group.finish();
    }
}

/// Percentiles of single passes, which criterion's means hide.
fn percentile_table(_: &mut Criterion) {
    // `cargo test` runs this file too, once per benchmark, as a check that it works: keep that short.
    let measuring = std::env::args().any(|arg| arg == "--bench");
    let clusters = clusters();
    println!("\nplacement rules: one pending pod with rules, {NODES} Nodes (µs, nearest rank)");
    println!("{:<22} {:<18} {:>6} {:>9} {:>9} {:>9}", "bound pods", "pass", "runs", "p50", "p99", "max");
    for (name, cluster) in &clusters {
        let runs: [(&str, &dyn Fn() -> usize); 3] = [
            ("rebuilt per pass", &|| cluster.rebuilt_per_pass()),
            ("shared", &|| cluster.shared()),
            ("the poll's build", &|| cluster.build_view()),
        ];
        for (label, run) in runs {
            let passes = if !measuring {
                3
            } else if name.starts_with("10000") {
                300
            } else {
                3_000
            };
            let latencies = Latencies::measure(passes, || {
                black_box(run());
                Ok::<_, ()>(())
            })
            .unwrap();
            let [p50, _, p99, max] = latencies.summary_micros();
            println!("{name:<22} {label:<18} {passes:>6} {p50:>9.1} {p99:>9.1} {max:>9.1}");
        }
    }
}

criterion_group!(benches, criterion_benches, percentile_table);
criterion_main!(benches);
