//! What a chaos run prints: the faults by kind with their recovery times, the work done, and every
//! invariant violation (there must be none).

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use crate::faults::Fault;
use crate::workload::Counts;

pub struct Report {
    pub minutes: f64,
    pub seed: u64,
    pub recoveries: Vec<(Fault, Option<Duration>)>,
    pub counts: Counts,
    /// The preemptors' victims: the workload's pods, and batch jobs.
    pub preempted: (usize, usize),
    /// Pods a kubelet refused to admit that a sample saw (each one also a violation).
    pub kubelet_refusals: usize,
    pub violations: Vec<String>,
    /// The gauges' summary table.
    pub gauges: String,
}

/// The value at quantile `q` of sorted `values` (nearest rank).
fn quantile(sorted: &[Duration], q: f64) -> Duration {
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "chaos run: {:.1} minutes, seed {}", self.minutes, self.seed)?;
        writeln!(f)?;
        writeln!(f, "| fault | injected | recovered | recovery p50 | recovery p99 |")?;
        writeln!(f, "|---|---:|---:|---:|---:|")?;
        let mut by_kind: BTreeMap<Fault, Vec<Option<Duration>>> = BTreeMap::new();
        for (fault, took) in &self.recoveries {
            by_kind.entry(*fault).or_default().push(*took);
        }
        for (fault, takes) in by_kind {
            let mut recovered: Vec<Duration> = takes.iter().flatten().copied().collect();
            recovered.sort();
            let figure = |q| {
                if recovered.is_empty() {
                    "-".to_string()
                } else {
                    format!("{:.1} s", quantile(&recovered, q).as_secs_f64())
                }
            };
            writeln!(f, "| {fault} | {} | {} | {} | {} |", takes.len(), recovered.len(), figure(0.5), figure(0.99))?;
        }
        let c = &self.counts;
        writeln!(f)?;
        writeln!(
            f,
            "work: {} pods ({} in {} gangs, {} in {} bursts: {} job arrays seen), {} bound, {} succeeded, {} deleted while running, {} failed; {} Slurm batch jobs",
            c.pods,
            c.gangs * 2,
            c.gangs,
            c.bursts * crate::workload::BURST,
            c.bursts,
            c.arrays,
            c.bound,
            c.succeeded,
            c.deleted_running,
            c.failed_because.values().sum::<usize>(),
            c.batch_jobs
        )?;
        writeln!(
            f,
            "preemption: {} preemptors; {} of the workload's pods and {} batch jobs preempted",
            c.preemptors, self.preempted.0, self.preempted.1
        )?;
        // The workload sees every pod fail; a sample may miss one the host deleted in between.
        let refused: usize = c
            .failed_because
            .iter()
            .filter(|(reason, _)| reason.to_ascii_lowercase().starts_with("outof"))
            .map(|(_, n)| n)
            .sum();
        writeln!(
            f,
            "pods refused by a kubelet: {} ({} of them seen by a sample, as violations)",
            refused.max(self.kubelet_refusals),
            self.kubelet_refusals
        )?;
        if !c.failed_because.is_empty() {
            writeln!(f, "failed pods by reason: {:?}", c.failed_because)?;
        }
        writeln!(f)?;
        writeln!(f, "{}", self.gauges)?;
        writeln!(f, "invariant violations: {}", self.violations.len())?;
        for violation in &self.violations {
            writeln!(f, "- {violation}")?;
        }
        Ok(())
    }
}
