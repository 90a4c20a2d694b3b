//! W3C trace context on a chosen fraction of requests, and the slowest of
//! those requests kept per cell, so a bad p99 in `results.md` leads straight
//! to the traces behind it.
//!
//! A traced request carries `traceparent: 00-<trace id>-<parent id>-01`: the
//! sampled flag is set, so a server whose sampler is parent-based
//! (`OTEL_TRACES_SAMPLER=parentbased_traceidratio`) records every one of
//! them whatever its ratio, and the trace id listed is one the backend has.
//!
//! Only the [`SLOWEST_KEPT`] slowest traced requests of a variant are kept,
//! in a bounded min-heap: a push costs O(log N) and the memory is fixed
//! however long the run, and heaps of several runs merge into the heap of
//! their union.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// How many traced requests a cell lists.
pub const SLOWEST_KEPT: usize = 5;

/// The trace context of one request: random non-zero ids (W3C forbids the
/// all-zero ones), the sampled flag set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceParent {
    /// The 16-byte trace id.
    pub trace_id: u128,
    /// The 8-byte id of the (client) parent span.
    pub parent_id: u64,
}

impl TraceParent {
    /// A trace context for this request with probability `fraction` (0:
    /// never, 1: always), else `None`.
    ///
    /// The ids come from fastrand's thread-local generator, which is seeded
    /// from the OS per thread, not from a virtual user's replayable seed: a
    /// replayed run must not reuse the trace ids of the run before it.
    pub fn pick(fraction: f64) -> Option<Self> {
        if fraction <= 0.0 || (fraction < 1.0 && fastrand::f64() >= fraction) {
            return None;
        }
        Some(Self {
            trace_id: fastrand::u128(1..),
            parent_id: fastrand::u64(1..),
        })
    }

    /// The `traceparent` header value (version 00, flags 01: sampled).
    pub fn header(&self) -> String {
        format!("00-{:032x}-{:016x}-01", self.trace_id, self.parent_id)
    }
}

/// The trace id as the backends show it: 32 lowercase hex digits.
pub fn trace_id_hex(trace_id: u128) -> String {
    format!("{trace_id:032x}")
}

/// One traced request that completed. Ordered by latency, then trace id,
/// so "the N slowest" is one well-defined set even when latencies tie.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct TracedRequest {
    /// Client-side latency, µs.
    pub micros: u64,
    /// Its trace id.
    pub trace_id: u128,
    /// What it was (`create`, `send`, ...).
    pub op: &'static str,
    /// Its HTTP status (0: transport error or timeout).
    pub status: u16,
}

/// The slowest traced requests of a variant or cell, and how many were
/// traced in all.
#[derive(Debug, Clone, Default)]
pub struct SlowestTraces {
    /// A min-heap of at most [`SLOWEST_KEPT`]: its top is the fastest kept,
    /// the one a slower request evicts.
    kept: BinaryHeap<Reverse<TracedRequest>>,
    traced: u64,
}

impl SlowestTraces {
    /// Counts one traced request and keeps it if it is among the slowest.
    pub fn offer(&mut self, request: TracedRequest) {
        self.traced += 1;
        self.keep(request);
    }

    fn keep(&mut self, request: TracedRequest) {
        if self.kept.len() < SLOWEST_KEPT {
            self.kept.push(Reverse(request));
        } else if self
            .kept
            .peek()
            .is_some_and(|Reverse(fastest)| request > *fastest)
        {
            self.kept.pop();
            self.kept.push(Reverse(request));
        }
    }

    /// Adds `other`'s traced requests: the result keeps the slowest of both.
    pub fn merge(&mut self, other: &SlowestTraces) {
        self.traced += other.traced;
        for Reverse(request) in &other.kept {
            self.keep(*request);
        }
    }

    /// Requests traced in all.
    pub fn traced(&self) -> u64 {
        self.traced
    }

    /// The kept requests, slowest first.
    pub fn slowest(&self) -> Vec<TracedRequest> {
        let mut out: Vec<TracedRequest> = self.kept.iter().map(|Reverse(r)| *r).collect();
        out.sort_unstable_by(|a, b| b.cmp(a));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn request(micros: u64, trace_id: u128) -> TracedRequest {
        TracedRequest {
            micros,
            trace_id,
            op: "create",
            status: 201,
        }
    }

    /// The true top N of `all`, slowest first.
    fn top_n(all: &[TracedRequest]) -> Vec<TracedRequest> {
        let mut sorted = all.to_vec();
        sorted.sort_unstable_by(|a, b| b.cmp(a));
        sorted.truncate(SLOWEST_KEPT);
        sorted
    }

    fn is_lower_hex(s: &str) -> bool {
        s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    }

    proptest! {
        #[test]
        fn traceparent_is_version_00_sampled_with_padded_lowercase_ids(
            trace_id in 1u128..,
            parent_id in 1u64..,
        ) {
            let header = TraceParent { trace_id, parent_id }.header();
            prop_assert_eq!(header.len(), 55);
            let parts: Vec<&str> = header.split('-').collect();
            prop_assert_eq!(parts.len(), 4);
            prop_assert_eq!(parts[0], "00");
            prop_assert_eq!(parts[1].len(), 32);
            prop_assert_eq!(parts[2].len(), 16);
            prop_assert_eq!(parts[3], "01");
            prop_assert!(is_lower_hex(parts[1]) && is_lower_hex(parts[2]));
            prop_assert_eq!(u128::from_str_radix(parts[1], 16).ok(), Some(trace_id));
            prop_assert_eq!(u64::from_str_radix(parts[2], 16).ok(), Some(parent_id));
            prop_assert_eq!(trace_id_hex(trace_id), parts[1]);
        }

        #[test]
        fn the_kept_set_is_the_true_top_n(
            samples in prop::collection::vec((0u64..2_000, 1u128..8), 0..200),
        ) {
            // Few distinct latencies and ids, so ties are common.
            let all: Vec<TracedRequest> =
                samples.iter().map(|&(m, id)| request(m, id)).collect();
            let mut slowest = SlowestTraces::default();
            for r in &all {
                slowest.offer(*r);
            }
            prop_assert_eq!(slowest.traced(), all.len() as u64);
            prop_assert_eq!(slowest.slowest(), top_n(&all));
        }

        #[test]
        fn merged_heaps_keep_the_top_n_of_the_union(
            samples in prop::collection::vec((0u64..2_000, 1u128..8), 0..200),
            cut in 0usize..200,
        ) {
            let all: Vec<TracedRequest> =
                samples.iter().map(|&(m, id)| request(m, id)).collect();
            let (left, right) = all.split_at(cut.min(all.len()));
            let (mut a, mut b) = (SlowestTraces::default(), SlowestTraces::default());
            left.iter().for_each(|r| a.offer(*r));
            right.iter().for_each(|r| b.offer(*r));
            a.merge(&b);
            prop_assert_eq!(a.traced(), all.len() as u64);
            prop_assert_eq!(a.slowest(), top_n(&all));
        }
    }

    #[test]
    fn small_ids_are_zero_padded() {
        let header = TraceParent {
            trace_id: 1,
            parent_id: 0xab,
        }
        .header();
        assert_eq!(
            header,
            "00-00000000000000000000000000000001-00000000000000ab-01"
        );
    }

    #[test]
    fn fractions_zero_and_one_are_never_and_always() {
        for _ in 0..1_000 {
            assert_eq!(TraceParent::pick(0.0), None);
            let picked = TraceParent::pick(1.0);
            assert!(picked.is_some_and(|t| t.trace_id != 0 && t.parent_id != 0));
        }
    }

    #[test]
    fn a_fraction_traces_about_that_share() {
        let traced = (0..100_000)
            .filter(|_| TraceParent::pick(0.1).is_some())
            .count();
        // 10% of 100,000 with a standard deviation of about 95.
        assert!((9_400..10_600).contains(&traced), "{traced}");
    }
}
