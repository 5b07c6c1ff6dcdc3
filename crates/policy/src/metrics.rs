//! Per policy and decision point: a latency histogram, outcome counters and reload counters.

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

/// Bucket bounds in seconds: decisions take tens of microseconds, a whole fuel budget about 100 ms.
const LATENCY_BUCKETS: [f64; 14] =
    [5e-6, 10e-6, 20e-6, 30e-6, 50e-6, 75e-6, 100e-6, 200e-6, 500e-6, 1e-3, 5e-3, 10e-3, 50e-3, 100e-3];

/// How a decision ended.
#[derive(Debug, Clone, Copy, Hash, PartialEq, Eq, EncodeLabelValue)]
#[allow(non_camel_case_types)] // label values are Prometheus-style snake case
pub enum Outcome {
    /// The policy decided.
    ok,
    /// The policy decided, and its decision turns the input down.
    rejected,
    /// The module trapped (panic, stack overflow, ...).
    trap,
    /// The decision used up its fuel (did more work than one decision may).
    out_of_fuel,
    /// The decision ran past the wall-clock backstop.
    timeout,
    /// The module grew past its memory limit.
    out_of_memory,
    /// The module returned something the host refuses.
    invalid,
    /// The policy failed and the bundled default decided instead.
    fallback,
    /// No module decided: the operator's is not live (see `PolicyError::Withheld`).
    withheld,
}

/// Which policy made a decision.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PolicyLabels {
    /// The decision point (WIT world), e.g. `job-mapper`.
    pub decision: &'static str,
    /// Where the module came from, e.g. `bundled`, `policymodule/team-accounts`.
    pub policy: String,
    /// The first 12 hex digits of the module's sha256.
    pub digest: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    decision: &'static str,
    policy: String,
    digest: String,
    outcome: Outcome,
}

/// Whether a module offered for a decision point went live.
#[derive(Debug, Clone, Copy, Hash, PartialEq, Eq, EncodeLabelValue)]
#[allow(non_camel_case_types)]
pub enum ReloadResult {
    live,
    refused,
    rolled_back,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReloadLabels {
    decision: &'static str,
    result: ReloadResult,
}

/// The policy metrics; clones share the same series.
#[derive(Clone)]
pub struct PolicyMetrics {
    latency: Family<PolicyLabels, Histogram>,
    outcomes: Family<OutcomeLabels, Counter>,
    reloads: Family<ReloadLabels, Counter>,
}

impl Default for PolicyMetrics {
    fn default() -> Self {
        PolicyMetrics {
            latency: Family::new_with_constructor(|| Histogram::new(LATENCY_BUCKETS)),
            outcomes: Family::default(),
            reloads: Family::default(),
        }
    }
}

impl PolicyMetrics {
    /// Adds the series to `registry` (under the `sunk_policy` prefix).
    pub fn register(&self, registry: &mut Registry) {
        let registry = registry.sub_registry_with_prefix("sunk_policy");
        registry.register(
            "decision_duration_seconds",
            "Time one policy decision took, fresh sandbox included",
            self.latency.clone(),
        );
        registry.register("decisions", "Policy decisions by outcome", self.outcomes.clone());
        registry.register("reloads", "Modules offered to a decision point, by result", self.reloads.clone());
    }

    pub(crate) fn observe(&self, labels: &PolicyLabels, outcome: Outcome, seconds: f64) {
        self.latency.get_or_create(labels).observe(seconds);
        self.count(labels, outcome);
    }

    pub(crate) fn count(&self, labels: &PolicyLabels, outcome: Outcome) {
        let labels = OutcomeLabels {
            decision: labels.decision,
            policy: labels.policy.clone(),
            digest: labels.digest.clone(),
            outcome,
        };
        self.outcomes.get_or_create(&labels).inc();
    }

    pub(crate) fn reloaded(&self, decision: &'static str, result: ReloadResult) {
        self.reloads.get_or_create(&ReloadLabels { decision, result }).inc();
    }

    /// How many decisions of `decision` ended with `outcome`, over all policies.
    #[cfg(test)]
    pub(crate) fn outcome_count(&self, decision: &str, outcome: Outcome) -> u64 {
        let outcome = format!("outcome=\"{outcome:?}\"");
        self.counted(decision, |line| line.contains(&outcome))
    }

    /// How many decisions `decision` made, whatever their outcome, over all policies.
    pub fn decisions(&self, decision: &str) -> u64 {
        self.counted(decision, |_| true)
    }

    fn counted(&self, decision: &str, counts: impl Fn(&str) -> bool) -> u64 {
        // Family has no iterator; the encoded text is the one complete view of it.
        let mut registry = Registry::default();
        registry.register("d", "", self.outcomes.clone());
        let mut text = String::new();
        if prometheus_client::encoding::text::encode(&mut text, &registry).is_err() {
            return 0;
        }
        let decision = format!("decision=\"{decision}\"");
        text.lines()
            .filter(|line| line.starts_with("d_total{") && line.contains(&decision) && counts(line))
            .filter_map(|line| line.rsplit(' ').next()?.parse::<u64>().ok())
            .sum()
    }
}
