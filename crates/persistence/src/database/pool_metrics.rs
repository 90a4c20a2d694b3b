//! Connection-pool metrics, named after OpenTelemetry's database-client
//! connection conventions (`db.client.connection.*`, written with `_` for
//! Prometheus). HikariCP users will know them as:
//!
//! | chatlab | HikariCP |
//! |---|---|
//! | `db_client_connection_count{db_client_connection_state="used"}` | active connections |
//! | `db_client_connection_count{db_client_connection_state="idle"}` | idle connections |
//! | `db_client_connection_pending_requests` | pending threads |
//! | `db_client_connection_wait_time_seconds` | connection acquire time |
//! | `db_client_connection_use_time_seconds` | connection usage time |
//! | `db_client_connection_timeouts_total` | connection timeouts |
//! | `db_client_connection_max` | maximum pool size |
//!
//! Two more are chatlab's own, for `DB_POOL_LAYOUT=per_worker`, whose
//! workers each own a slice of the pool:
//! `db_client_connection_imbalanced_waits_total` counts checkouts that
//! waited in their slice's queue while another slice had a free
//! connection, and `db_client_connection_imbalanced_wait_seconds_total`
//! sums those waits (both stay 0 in the shared layout).
//!
//! Every series carries `db_client_connection_pool_name` (the pool's name,
//! [`POOL_NAME`]), and the state label is OpenTelemetry's
//! `db.client.connection.state`, so a dashboard written for the
//! conventions works unchanged. The use-time histogram keeps, per bucket,
//! the trace id of a sampled checkout as an exemplar.
//!
//! Pending requests are counted here, around the checkout, and not taken
//! from bb8's statistics: bb8 counts a get as pending until it completes, so
//! a waiting caller that is cancelled (a client that hung up) stays
//! "pending" there forever. A guard decrements ours whichever way the wait
//! ends.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64};
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::exemplar::HistogramWithExemplars;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Registry, Unit};

/// Label of `db_client_connection_count`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StateLabel {
    /// `idle` or `used`.
    pub db_client_connection_state: &'static str,
}

/// The pool's name on every pool series (`db_client_connection_pool_name`).
pub const POOL_NAME: &str = "chatlab";

/// An exemplar's label: the trace a sampled observation belongs to.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TraceLabel {
    /// 32 hex digits.
    pub trace_id: String,
}

impl TraceLabel {
    /// The exemplar label of `span`'s trace, when tracing is on and the
    /// trace is sampled; `None` costs nothing with tracing off.
    pub fn of(span: &tracing::Span) -> Option<Self> {
        chatlab_telemetry::sampled_trace_id(span).map(|trace_id| Self { trace_id })
    }
}

/// A histogram whose buckets keep an exemplar each.
pub type ExemplarHistogram = HistogramWithExemplars<TraceLabel>;

/// Bucket bounds in seconds, from 50 µs to 30 s: about 1.5× apart, fine
/// enough to separate a 1 ms batch transaction from a 5 ms per-row one, and
/// round numbers so the exposition stays readable.
pub const LATENCY_BUCKETS: [f64; 31] = [
    0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.000_75, 0.001, 0.001_5, 0.002, 0.003, 0.004, 0.005,
    0.007_5, 0.01, 0.015, 0.02, 0.03, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.5,
    5.0, 10.0, 20.0, 30.0,
];

/// [`LATENCY_BUCKETS`] as an iterator, for `Histogram::new`.
pub fn latency_buckets() -> impl Iterator<Item = f64> {
    LATENCY_BUCKETS.into_iter()
}

/// The pool's metrics; cheap to clone (all handles are shared).
#[derive(Debug, Clone)]
pub struct PoolMetrics {
    /// Connections by state, refreshed from the pool at each scrape.
    pub count: Family<StateLabel, Gauge>,
    /// The pool's maximum size.
    pub max: Gauge,
    /// Callers waiting for a connection right now.
    pub pending: Gauge<i64, AtomicI64>,
    /// Time from asking for a connection to getting one (or timing out).
    pub wait_time: Histogram,
    /// Time from checkout to return, for every checkout.
    pub use_time: ExemplarHistogram,
    /// Checkouts that gave up after the acquire timeout.
    pub timeouts: Counter,
    /// New connections opened, and how long opening took (its count is
    /// the number of opens, failed ones included).
    pub create_time: Histogram,
    /// Opens that failed: PostgreSQL refusing ("too many clients"),
    /// unreachable, or rejecting the session settings.
    pub open_failures: Counter,
    /// Checkouts that waited in their worker's slice while another slice
    /// had a free connection (`per_worker` layout).
    pub imbalanced_waits: Counter,
    /// Seconds those checkouts waited, summed.
    pub imbalanced_wait_time: Counter<f64, AtomicU64>,
}

impl PoolMetrics {
    /// Creates the metrics and registers them in `registry`, every series
    /// labelled with the pool's name.
    pub fn register(registry: &mut Registry) -> Arc<Self> {
        let registry = registry
            .sub_registry_with_label(("db_client_connection_pool_name".into(), POOL_NAME.into()));
        let m = Self {
            count: Family::default(),
            max: Gauge::default(),
            pending: Gauge::default(),
            wait_time: Histogram::new(latency_buckets()),
            use_time: HistogramWithExemplars::new(latency_buckets()),
            timeouts: Counter::default(),
            create_time: Histogram::new(latency_buckets()),
            open_failures: Counter::default(),
            imbalanced_waits: Counter::default(),
            imbalanced_wait_time: Counter::default(),
        };
        registry.register(
            "db_client_connection_count",
            "Connections in the pool, by state (idle or used)",
            m.count.clone(),
        );
        registry.register(
            "db_client_connection_max",
            "Most connections the pool may open",
            m.max.clone(),
        );
        registry.register(
            "db_client_connection_pending_requests",
            "Callers waiting for a pooled connection right now",
            m.pending.clone(),
        );
        registry.register_with_unit(
            "db_client_connection_wait_time",
            "Time to obtain a connection from the pool",
            Unit::Seconds,
            m.wait_time.clone(),
        );
        registry.register_with_unit(
            "db_client_connection_use_time",
            "Time between checking a connection out and returning it",
            Unit::Seconds,
            m.use_time.clone(),
        );
        registry.register(
            "db_client_connection_timeouts",
            "Checkouts that timed out waiting for a connection",
            m.timeouts.clone(),
        );
        registry.register_with_unit(
            "db_client_connection_create_time",
            "Time to open and set up a new connection",
            Unit::Seconds,
            m.create_time.clone(),
        );
        registry.register(
            "db_client_connection_open_failures",
            "Connection opens that failed (refused, unreachable or misconfigured)",
            m.open_failures.clone(),
        );
        registry.register(
            "db_client_connection_imbalanced_waits",
            "Checkouts that waited in their worker's slice of the pool while another slice had a free connection (DB_POOL_LAYOUT=per_worker)",
            m.imbalanced_waits.clone(),
        );
        registry.register_with_unit(
            "db_client_connection_imbalanced_wait",
            "Time those checkouts waited, summed",
            Unit::Seconds,
            m.imbalanced_wait_time.clone(),
        );
        // Both states from the start, so a dashboard shows 0, not nothing.
        m.refresh(0, 0, 0);
        Arc::new(m)
    }

    /// Sets the gauges that mirror the pool's current state.
    pub fn refresh(&self, connections: u32, idle: u32, max: u32) {
        let used = connections.saturating_sub(idle);
        self.count
            .get_or_create(&StateLabel {
                db_client_connection_state: "idle",
            })
            .set(i64::from(idle));
        self.count
            .get_or_create(&StateLabel {
                db_client_connection_state: "used",
            })
            .set(i64::from(used));
        self.max.set(i64::from(max));
    }

    /// Counts the caller as pending until the returned guard drops.
    pub(crate) fn enter_pending(&self) -> PendingGuard {
        self.pending.inc();
        PendingGuard(self.pending.clone())
    }
}

/// Decrements the pending gauge when dropped, so a cancelled wait is counted
/// out as surely as a finished one.
#[derive(Debug)]
pub(crate) struct PendingGuard(Gauge<i64, AtomicI64>);

impl Drop for PendingGuard {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// Seconds as `f64`, for histogram observations.
pub(crate) fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}
