//! How the benchmarks print what they timed.

use std::time::Duration;

/// p50, p99 and the longest of `samples` (sorted in place), nearest rank.
pub fn percentiles(samples: &mut [Duration]) -> String {
    if samples.is_empty() {
        return "no runs".into();
    }
    samples.sort();
    let at = |q: f64| samples[((samples.len() as f64 - 1.0) * q).round() as usize];
    format!("p50 {:?}, p99 {:?}, max {:?}", at(0.5), at(0.99), samples[samples.len() - 1])
}
