//! Latency samples and their percentiles, for `sunk policy bench` and the criterion benches.

use std::time::{Duration, Instant};

/// Sorted latencies of repeated calls.
#[derive(Debug, Clone)]
pub struct Latencies(Vec<Duration>);

impl Latencies {
    /// Times `iterations` calls of `call` (after a few untimed ones that warm the caches); stops at
    /// the first error.
    pub fn measure<E>(iterations: usize, mut call: impl FnMut() -> Result<(), E>) -> Result<Self, E> {
        for _ in 0..iterations.min(50) {
            call()?;
        }
        let mut samples = Vec::with_capacity(iterations);
        for _ in 0..iterations {
            let start = Instant::now();
            call()?;
            samples.push(start.elapsed());
        }
        Ok(Self::from(samples))
    }

    /// The nearest-rank percentile `q` (0 < q <= 1); zero when there are no samples.
    pub fn percentile(&self, q: f64) -> Duration {
        if self.0.is_empty() {
            return Duration::ZERO;
        }
        let rank = (q * self.0.len() as f64).ceil() as usize;
        self.0[rank.clamp(1, self.0.len()) - 1]
    }

    /// p50, p95, p99 and the maximum, in microseconds.
    pub fn summary_micros(&self) -> [f64; 4] {
        [0.50, 0.95, 0.99, 1.0].map(|q| self.percentile(q).as_secs_f64() * 1e6)
    }
}

impl From<Vec<Duration>> for Latencies {
    fn from(mut samples: Vec<Duration>) -> Self {
        samples.sort_unstable();
        Latencies(samples)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let latencies = Latencies::from((1..=100).rev().map(Duration::from_micros).collect::<Vec<_>>());
        assert_eq!(latencies.percentile(0.50), Duration::from_micros(50));
        assert_eq!(latencies.percentile(0.99), Duration::from_micros(99));
        assert_eq!(latencies.summary_micros(), [50.0, 95.0, 99.0, 100.0]);
        assert_eq!(Latencies::from(vec![Duration::from_micros(7)]).percentile(0.5), Duration::from_micros(7));
        assert_eq!(Latencies::from(vec![]).percentile(0.99), Duration::ZERO);
    }

    #[test]
    fn measuring_stops_at_the_first_error() {
        let mut calls = 0;
        let result = Latencies::measure(10, || {
            calls += 1;
            if calls == 3 { Err("third") } else { Ok(()) }
        });
        assert_eq!(result.unwrap_err(), "third");
        assert_eq!(Latencies::measure(10, || Ok::<_, ()>(())).unwrap().0.len(), 10);
    }
}
