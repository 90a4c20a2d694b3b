//! Client-side latencies in an HDR histogram: microseconds from 1 µs to
//! 5 minutes at three significant digits, so p99 and max are exact to 0.1%
//! whatever the spread, and per-worker histograms merge without loss.

use hdrhistogram::Histogram;

/// Highest latency recorded, in µs; slower requests are clamped to it.
const MAX_MICROS: u64 = 300_000_000;

/// Latencies of one run (or one worker's share of it).
#[derive(Debug, Clone)]
pub struct Latencies {
    hist: Histogram<u64>,
}

impl Default for Latencies {
    fn default() -> Self {
        Self::new()
    }
}

impl Latencies {
    /// An empty recorder.
    #[allow(clippy::expect_used)] // constant bounds within hdrhistogram's limits
    pub fn new() -> Self {
        let hist = Histogram::new_with_bounds(1, MAX_MICROS, 3).expect("constant histogram bounds");
        Self { hist }
    }

    /// Records one latency in microseconds.
    pub fn record_micros(&mut self, micros: u64) {
        let _ = self.hist.record(micros.clamp(1, MAX_MICROS));
    }

    /// Adds another recorder's latencies.
    pub fn merge(&mut self, other: &Latencies) {
        let _ = self.hist.add(&other.hist);
    }

    /// Requests recorded.
    pub fn count(&self) -> u64 {
        self.hist.len()
    }

    /// The q-quantile in milliseconds (0 with no requests).
    pub fn quantile_ms(&self, q: f64) -> f64 {
        if self.hist.is_empty() {
            return 0.0;
        }
        self.hist.value_at_quantile(q) as f64 / 1000.0
    }

    /// The slowest request in milliseconds.
    pub fn max_ms(&self) -> f64 {
        if self.hist.is_empty() {
            0.0
        } else {
            self.hist.max() as f64 / 1000.0
        }
    }

    /// Forgets everything (for windowed live figures).
    pub fn reset(&mut self) {
        self.hist.reset();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn quantiles_of_a_known_distribution() {
        let mut l = Latencies::new();
        for ms in 1..=100u64 {
            l.record_micros(ms * 1000);
        }
        assert_eq!(l.count(), 100);
        assert!((l.quantile_ms(0.5) - 50.0).abs() < 0.1);
        assert!((l.quantile_ms(0.95) - 95.0).abs() < 0.1);
        assert!((l.max_ms() - 100.0).abs() < 0.1);
    }

    #[test]
    fn empty_is_zero_and_reset_empties() {
        let mut l = Latencies::new();
        assert_eq!(l.quantile_ms(0.99), 0.0);
        l.record_micros(5);
        l.reset();
        assert_eq!(l.count(), 0);
    }

    proptest! {
        /// Merging per-worker histograms gives the histogram of all
        /// requests: same count, same max, same quantiles.
        #[test]
        fn merge_equals_recording_everything_in_one(
            a in proptest::collection::vec(1u64..5_000_000, 1..200),
            b in proptest::collection::vec(1u64..5_000_000, 1..200),
        ) {
            let (mut la, mut lb, mut all) = (Latencies::new(), Latencies::new(), Latencies::new());
            for &x in &a { la.record_micros(x); all.record_micros(x); }
            for &x in &b { lb.record_micros(x); all.record_micros(x); }
            la.merge(&lb);
            prop_assert_eq!(la.count(), all.count());
            prop_assert_eq!(la.max_ms(), all.max_ms());
            for q in [0.5, 0.95, 0.99] {
                prop_assert_eq!(la.quantile_ms(q), all.quantile_ms(q));
            }
        }
    }
}
