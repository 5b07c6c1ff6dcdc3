//! Drains and resumes the Syncer applied or withheld, by cause, and how old the Slurm view it acted
//! on was.

use std::time::SystemTime;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

const AGE_BUCKETS: [f64; 10] = [0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0];

/// A write to Slurm, applied or withheld.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct WriteLabels {
    /// `drain`, `reapply` or `resume` (`drain` or `resume` when withheld).
    action: &'static str,
    /// The cause's key: `cordon`, `condition/Ready`, `label/sunk.dev/drain`, ...
    cause: String,
}

/// Clones share the same series.
#[derive(Clone)]
pub struct SyncerMetrics {
    applied: Family<WriteLabels, Counter>,
    withheld: Family<WriteLabels, Counter>,
    view_age: Histogram,
}

impl Default for SyncerMetrics {
    fn default() -> Self {
        Self { applied: Family::default(), withheld: Family::default(), view_age: Histogram::new(AGE_BUCKETS) }
    }
}

impl SyncerMetrics {
    /// Adds the series to `registry` (under the `sunk_syncer` prefix).
    pub fn register(&self, registry: &mut Registry) {
        let registry = registry.sub_registry_with_prefix("sunk_syncer");
        registry.register(
            "applied",
            "Drains, re-applied drains and resumes written to Slurm, by cause",
            self.applied.clone(),
        );
        registry.register(
            "withheld",
            "Drains and resumes not written because the Slurm node is drained or down for a reason that is not \
             sunk's, by cause: once per pass that withheld one",
            self.withheld.clone(),
        );
        registry.register(
            "slurm_view_age_seconds",
            "Age of the Slurm node listing a sync pass acted on: the Slurm -> Kubernetes lag",
            self.view_age.clone(),
        );
    }

    pub fn applied(&self, action: &'static str, cause: &str) {
        self.applied.get_or_create(&WriteLabels { action, cause: cause.to_owned() }).inc();
    }

    pub fn withheld(&self, action: &'static str, cause: &str) {
        self.withheld.get_or_create(&WriteLabels { action, cause: cause.to_owned() }).inc();
    }

    pub fn observe_view_age(&self, confirmed_at: SystemTime) {
        let age = SystemTime::now().duration_since(confirmed_at).unwrap_or_default();
        self.view_age.observe(age.as_secs_f64());
    }
}
