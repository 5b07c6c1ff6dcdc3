//! How many passes each controller made, by result, and how long they took: the first thing to
//! look at when a controller seems stuck (no passes), sick (errors) or slow (a pass over an object
//! holds back the next one over the same object: a cordon waits for the pass before it).

use std::future::Future;
use std::time::Instant;

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

#[derive(Debug, Clone, Copy, Hash, PartialEq, Eq, EncodeLabelValue)]
#[allow(non_camel_case_types)] // label values are Prometheus-style snake case
pub enum PassResult {
    ok,
    error,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PassLabels {
    controller: &'static str,
    result: PassResult,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ControllerLabel {
    controller: &'static str,
}

const SECONDS_BUCKETS: [f64; 11] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0];

/// Reconcile passes by controller and result, and their durations; clones share the same series.
#[derive(Clone)]
pub struct ReconcileMetrics {
    passes: Family<PassLabels, Counter>,
    durations: Family<ControllerLabel, Histogram>,
}

impl Default for ReconcileMetrics {
    fn default() -> Self {
        Self { passes: Family::default(), durations: Family::new_with_constructor(|| Histogram::new(SECONDS_BUCKETS)) }
    }
}

impl ReconcileMetrics {
    /// Adds `sunk_reconcile_passes_total` to `registry`.
    pub fn register(&self, registry: &mut Registry) {
        registry.register("sunk_reconcile_passes", "Reconcile passes by controller and result", self.passes.clone());
        registry.register(
            "sunk_reconcile_pass_seconds",
            "How long reconcile passes took, by controller",
            self.durations.clone(),
        );
    }

    /// Runs one pass of `controller`, counting it by result and timing it.
    pub async fn pass<T, E>(&self, controller: &'static str, pass: impl Future<Output = Result<T, E>>) -> Result<T, E> {
        let started = Instant::now();
        let outcome = pass.await;
        self.durations.get_or_create(&ControllerLabel { controller }).observe(started.elapsed().as_secs_f64());
        let result = if outcome.is_ok() { PassResult::ok } else { PassResult::error };
        self.passes.get_or_create(&PassLabels { controller, result }).inc();
        outcome
    }
}
