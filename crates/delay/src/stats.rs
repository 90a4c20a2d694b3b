//! What a proxy has relayed: connections, bytes and chunks each way, round
//! trips on the wire, and how late its deliveries were against their
//! deadlines (its own precision).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The proxy's counters, updated by every connection.
#[derive(Debug, Default)]
pub struct Counters {
    connections: AtomicU64,
    open: AtomicU64,
    flights: AtomicU64,
    bytes_up: AtomicU64,
    bytes_down: AtomicU64,
    chunks_up: AtomicU64,
    chunks_down: AtomicU64,
    delivered: AtomicU64,
    late_us_total: AtomicU64,
    late_us_max: AtomicU64,
    accept_errors: AtomicU64,
    read_errors: AtomicU64,
}

/// A snapshot of the counters, as the control port and the binary print it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Stats {
    /// Connections relayed so far.
    pub connections: u64,
    /// Connections open now.
    pub open: u64,
    /// Round trips on the wire: chunks from the client that follow a chunk
    /// from the server (or open the connection). Statements sent together
    /// in one flight count once; a statement that waits for an answer
    /// before it is sent counts again.
    pub flights: u64,
    /// Bytes client to server.
    pub bytes_up: u64,
    /// Bytes server to client.
    pub bytes_down: u64,
    /// Chunks client to server.
    pub chunks_up: u64,
    /// Chunks server to client.
    pub chunks_down: u64,
    /// Chunks delivered (both ways).
    pub delivered: u64,
    /// Their lateness against their deadlines, summed, µs.
    pub late_us_total: u64,
    /// The latest of them, µs.
    pub late_us_max: u64,
    /// Whether traffic is blackholed now.
    pub blackholed: bool,
    /// Connections the listener failed to accept (out of descriptors,
    /// say); each is followed by a pause before the next accept.
    #[serde(default)]
    pub accept_errors: u64,
    /// Reads that failed (a reset, say), each ending its direction as the
    /// peer's close would, and counted apart from closes.
    #[serde(default)]
    pub read_errors: u64,
}

impl Stats {
    /// Mean lateness of a delivery, µs.
    pub fn late_us_mean(&self) -> f64 {
        if self.delivered == 0 {
            0.0
        } else {
            self.late_us_total as f64 / self.delivered as f64
        }
    }

    /// What happened between `earlier` and this snapshot (`open`,
    /// `late_us_max` and `blackholed` as now).
    pub fn since(&self, earlier: &Self) -> Self {
        Self {
            connections: self.connections.saturating_sub(earlier.connections),
            flights: self.flights.saturating_sub(earlier.flights),
            bytes_up: self.bytes_up.saturating_sub(earlier.bytes_up),
            bytes_down: self.bytes_down.saturating_sub(earlier.bytes_down),
            chunks_up: self.chunks_up.saturating_sub(earlier.chunks_up),
            chunks_down: self.chunks_down.saturating_sub(earlier.chunks_down),
            delivered: self.delivered.saturating_sub(earlier.delivered),
            late_us_total: self.late_us_total.saturating_sub(earlier.late_us_total),
            accept_errors: self.accept_errors.saturating_sub(earlier.accept_errors),
            read_errors: self.read_errors.saturating_sub(earlier.read_errors),
            ..*self
        }
    }
}

impl Counters {
    pub(crate) fn opened(&self) {
        self.connections.fetch_add(1, Ordering::Relaxed);
        self.open.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn closed(&self) {
        self.open.fetch_sub(1, Ordering::Relaxed);
    }

    pub(crate) fn flight(&self) {
        self.flights.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn read(&self, up: bool, bytes: usize) {
        let (b, c) = if up {
            (&self.bytes_up, &self.chunks_up)
        } else {
            (&self.bytes_down, &self.chunks_down)
        };
        b.fetch_add(bytes as u64, Ordering::Relaxed);
        c.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn accept_failed(&self) {
        self.accept_errors.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn read_failed(&self) {
        self.read_errors.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn delivered(&self, late: Duration) {
        let us = late.as_micros() as u64;
        self.delivered.fetch_add(1, Ordering::Relaxed);
        self.late_us_total.fetch_add(us, Ordering::Relaxed);
        self.late_us_max.fetch_max(us, Ordering::Relaxed);
    }

    /// The counters now.
    pub fn snapshot(&self, blackholed: bool) -> Stats {
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        Stats {
            connections: get(&self.connections),
            open: get(&self.open),
            flights: get(&self.flights),
            bytes_up: get(&self.bytes_up),
            bytes_down: get(&self.bytes_down),
            chunks_up: get(&self.chunks_up),
            chunks_down: get(&self.chunks_down),
            delivered: get(&self.delivered),
            late_us_total: get(&self.late_us_total),
            late_us_max: get(&self.late_us_max),
            blackholed,
            accept_errors: get(&self.accept_errors),
            read_errors: get(&self.read_errors),
        }
    }
}
