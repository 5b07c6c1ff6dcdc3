//! Scheduler metrics in the family kube-scheduler operators know: attempts by result, the time from
//! a pod's creation to its binding, and the pods waiting.

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// How one scheduling attempt (one pass over an unbound pod) ended.
#[derive(Debug, Clone, Copy, Hash, PartialEq, Eq, EncodeLabelValue)]
#[allow(non_camel_case_types)] // label values are Prometheus-style snake case
pub enum AttemptResult {
    /// The pod was bound.
    scheduled,
    /// The pod waits for capacity in Slurm, or no node fits its placement rules.
    unschedulable,
    /// The pod's input was refused (by the job-mapper policy or by Slurm): it waits for its owner.
    rejected,
    /// The pod's group does not have all its pods yet (or has them all without this one).
    waiting_for_group,
    /// Something failed on the way (Slurm unreachable or holding the job, a policy or API error): it
    /// is retried.
    error,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct AttemptLabels {
    result: AttemptResult,
}

/// How one preemption decision for a waiting pod ended.
#[derive(Debug, Clone, Copy, Hash, PartialEq, Eq, EncodeLabelValue)]
#[allow(non_camel_case_types)] // label values are Prometheus-style snake case
pub enum PreemptionResult {
    /// Victims were chosen and made to go.
    preempted,
    /// The policy chose nobody (or nothing running could make room).
    none,
    /// A PodDisruptionBudget refused an eviction: nothing else was done.
    blocked,
    /// The policy failed.
    error,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PreemptionLabels {
    result: PreemptionResult,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct VictimLabels {
    /// `pod` or `slurm_job`.
    kind: &'static str,
    /// `evict` or `cancel`.
    mode: &'static str,
}

/// The scheduler's series; clones share them.
#[derive(Clone)]
pub struct SchedulerMetrics {
    attempts: Family<AttemptLabels, Counter>,
    latency: Histogram,
    pending: Gauge,
    preemptions: Family<PreemptionLabels, Counter>,
    victims: Family<VictimLabels, Counter>,
    sweeps: Counter,
    orphans: Counter,
}

impl Default for SchedulerMetrics {
    fn default() -> Self {
        Self {
            attempts: Family::default(),
            // 10 ms .. ~82 s: a fast bind, a Slurm scheduling pass, a queue wait.
            latency: Histogram::new(exponential_buckets(0.01, 2.0, 14)),
            pending: Gauge::default(),
            preemptions: Family::default(),
            victims: Family::default(),
            sweeps: Counter::default(),
            orphans: Counter::default(),
        }
    }
}

impl SchedulerMetrics {
    /// Adds the series to `registry` (under the `sunk_scheduler` prefix).
    pub fn register(&self, registry: &mut Registry) {
        let registry = registry.sub_registry_with_prefix("sunk_scheduler");
        registry.register("schedule_attempts", "Scheduling attempts by result", self.attempts.clone());
        registry.register(
            "pod_scheduling_duration_seconds",
            "Time from a pod's creation to its binding",
            self.latency.clone(),
        );
        registry.register("pending_pods", "Pods of this scheduler not yet bound", self.pending.clone());
        registry.register(
            "preemption_attempts",
            "Preemption decisions for waiting pods, by result",
            self.preemptions.clone(),
        );
        registry.register("preemption_victims", "Workloads preempted for waiting pods", self.victims.clone());
        registry.register(
            "orphan_sweeps",
            "Passes over this installation's placeholders for pods gone",
            self.sweeps.clone(),
        );
        registry.register(
            "orphans_cancelled",
            "Placeholders cancelled because their pod is gone",
            self.orphans.clone(),
        );
    }

    /// One pass of the orphan sweep over a complete job listing, which cancelled `cancelled` jobs.
    pub fn swept(&self, cancelled: usize) {
        self.sweeps.inc();
        self.orphans.inc_by(u64::try_from(cancelled).unwrap_or(u64::MAX));
    }

    pub fn preemption(&self, result: PreemptionResult) {
        self.preemptions.get_or_create(&PreemptionLabels { result }).inc();
    }

    /// One victim made to go: `kind` is `pod` or `slurm_job`, `mode` `evict`, `requeue` or `cancel`.
    pub fn victim(&self, kind: &'static str, mode: &'static str) {
        self.victims.get_or_create(&VictimLabels { kind, mode }).inc();
    }

    pub fn attempt(&self, result: AttemptResult) {
        self.attempts.get_or_create(&AttemptLabels { result }).inc();
    }

    /// A pod was bound `seconds` after it was created.
    pub fn bound(&self, seconds: f64) {
        self.attempt(AttemptResult::scheduled);
        self.latency.observe(seconds.max(0.0));
    }

    pub fn set_pending(&self, pods: usize) {
        self.pending.set(i64::try_from(pods).unwrap_or(i64::MAX));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduler::conditions::WaitReason;

    fn scrape(metrics: &SchedulerMetrics) -> String {
        let mut registry = Registry::default();
        metrics.register(&mut registry);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        text
    }

    #[test]
    fn counts_attempts_latency_and_pending_pods() {
        let metrics = SchedulerMetrics::default();
        metrics.attempt(WaitReason::Unschedulable.attempt_result());
        metrics.attempt(WaitReason::PolicyRejected.attempt_result());
        metrics.attempt(WaitReason::SlurmUnreachable.attempt_result());
        metrics.bound(0.03);
        metrics.set_pending(4);
        metrics.preemption(PreemptionResult::preempted);
        metrics.victim("slurm_job", "cancel");
        let text = scrape(&metrics);
        for line in [
            "sunk_scheduler_schedule_attempts_total{result=\"unschedulable\"} 1",
            "sunk_scheduler_schedule_attempts_total{result=\"rejected\"} 1",
            "sunk_scheduler_schedule_attempts_total{result=\"error\"} 1",
            "sunk_scheduler_schedule_attempts_total{result=\"scheduled\"} 1",
            "sunk_scheduler_pod_scheduling_duration_seconds_count 1",
            "sunk_scheduler_pod_scheduling_duration_seconds_bucket{le=\"0.04\"} 1",
            "sunk_scheduler_pending_pods 4",
            "sunk_scheduler_preemption_attempts_total{result=\"preempted\"} 1",
            "sunk_scheduler_preemption_victims_total{kind=\"slurm_job\",mode=\"cancel\"} 1",
        ] {
            assert!(text.contains(line), "missing {line:?} in:\n{text}");
        }
    }
}
