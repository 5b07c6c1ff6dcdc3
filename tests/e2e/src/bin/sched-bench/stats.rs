//! Latency percentiles and throughput from client-side clocks.

use std::time::{Duration, Instant};

/// One pod's journey: when its create call was sent, and when a watch first showed it bound.
#[derive(Debug, Clone, Copy)]
pub struct Trip {
    pub sent: Instant,
    pub bound: Instant,
}

/// What one phase measured.
#[derive(Debug, Clone, Copy)]
pub struct Summary {
    pub pods: usize,
    /// Pods per second from the first create sent to the last pod bound.
    pub throughput: f64,
    pub p50: Duration,
    pub p99: Duration,
}

impl Summary {
    pub fn of(trips: &[Trip]) -> Self {
        let mut latencies: Vec<Duration> = trips.iter().map(|trip| trip.bound.duration_since(trip.sent)).collect();
        latencies.sort();
        let first = trips.iter().map(|trip| trip.sent).min();
        let last = trips.iter().map(|trip| trip.bound).max();
        let span = match (first, last) {
            (Some(first), Some(last)) => last.duration_since(first).as_secs_f64(),
            _ => 0.0,
        };
        Summary {
            pods: trips.len(),
            throughput: if span > 0.0 { trips.len() as f64 / span } else { 0.0 },
            p50: percentile(&latencies, 50),
            p99: percentile(&latencies, 99),
        }
    }
}

/// The nearest-rank percentile of sorted values (zero for none).
pub fn percentile(sorted: &[Duration], percent: usize) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = (percent * sorted.len()).div_ceil(100).clamp(1, sorted.len());
    sorted[rank - 1]
}

pub fn millis(duration: Duration) -> String {
    format!("{:.1} ms", duration.as_secs_f64() * 1000.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let values: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        assert_eq!(percentile(&values, 50), Duration::from_millis(50));
        assert_eq!(percentile(&values, 99), Duration::from_millis(99));
        assert_eq!(percentile(&values[..1], 99), Duration::from_millis(1));
        assert_eq!(percentile(&[], 50), Duration::ZERO);
    }

    #[test]
    fn throughput_spans_first_send_to_last_bind() {
        let start = Instant::now();
        let trip = |sent: u64, bound: u64| Trip {
            sent: start + Duration::from_millis(sent),
            bound: start + Duration::from_millis(bound),
        };
        let summary = Summary::of(&[trip(0, 100), trip(100, 500), trip(200, 1000)]);
        assert_eq!(summary.pods, 3);
        assert!((summary.throughput - 3.0).abs() < 1e-9);
        assert_eq!(summary.p50, Duration::from_millis(400));
    }
}
