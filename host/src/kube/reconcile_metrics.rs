//! How many passes each controller made, by result: the first thing to look at when a controller
//! seems stuck (no passes) or sick (errors).

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
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

/// Reconcile passes by controller and result; clones share the same series.
#[derive(Clone, Default)]
pub struct ReconcileMetrics {
    passes: Family<PassLabels, Counter>,
}

impl ReconcileMetrics {
    /// Adds `sunk_reconcile_passes_total` to `registry`.
    pub fn register(&self, registry: &mut Registry) {
        registry.register("sunk_reconcile_passes", "Reconcile passes by controller and result", self.passes.clone());
    }

    /// Counts one finished pass of `controller`.
    pub fn count<T, E>(&self, controller: &'static str, outcome: &Result<T, E>) {
        let result = if outcome.is_ok() { PassResult::ok } else { PassResult::error };
        self.passes.get_or_create(&PassLabels { controller, result }).inc();
    }
}
