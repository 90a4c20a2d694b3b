//! Event metrics, by publish mode.
//!
//! What a failure means depends on the mode: for `in_tx_await` the write
//! was rolled back (503, nothing lost); for `after_commit` and
//! `in_tx_enqueue` the write is committed and the event is lost; for
//! `outbox` the row stays pending and the relay retries.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Registry, Unit};

use chatlab_domain::PublishMode;

/// Label: the publish mode (the same label name as on the hold-time
/// histogram, so one dashboard variable selects both).
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ModeLabel {
    /// `in_tx_await`, `in_tx_enqueue`, `after_commit` or `outbox`.
    pub publish_mode: &'static str,
}

/// Bucket bounds of produce durations, seconds: 100 µs to 10 s.
const PRODUCE_BUCKETS: [f64; 22] = [
    0.000_1, 0.000_25, 0.000_5, 0.001, 0.002, 0.003, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.03, 0.05,
    0.075, 0.1, 0.15, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

fn new_histogram() -> Histogram {
    Histogram::new(PRODUCE_BUCKETS)
}

/// Event counters and the produce-duration histogram.
#[derive(Debug, Clone)]
pub struct EventMetrics {
    /// Send to broker acknowledgement.
    pub produce_duration: Family<ModeLabel, Histogram, fn() -> Histogram>,
    /// Events the broker acknowledged.
    pub published: Family<ModeLabel, Counter>,
    /// Events the broker did not acknowledge (timeout, refusal, full queue).
    pub failed: Family<ModeLabel, Counter>,
    /// Receipts of acknowledged events that the receipt ledger's queue
    /// had no room for: the audit cannot place those events.
    pub receipts_dropped: Counter,
    /// Producers replaced after librdkafka declared them dead.
    pub producer_rebuilds: Counter,
}

impl EventMetrics {
    /// Records one finished send of `label`'s mode that started at
    /// `started`: its duration, and whether the broker acknowledged it.
    pub fn record(&self, label: &ModeLabel, started: std::time::Instant, acknowledged: bool) {
        self.produce_duration
            .get_or_create(label)
            .observe(started.elapsed().as_secs_f64());
        let counter = if acknowledged {
            &self.published
        } else {
            &self.failed
        };
        counter.get_or_create(label).inc();
    }

    /// Creates the metrics and registers them.
    pub fn register(registry: &mut Registry) -> Self {
        let m = Self {
            produce_duration: Family::new_with_constructor(new_histogram),
            published: Family::default(),
            failed: Family::default(),
            receipts_dropped: Counter::default(),
            producer_rebuilds: Counter::default(),
        };
        // Every mode that publishes, from the start: a dashboard shows 0
        // (the histogram appears with its first send).
        for mode in PublishMode::ALL.into_iter().filter(|m| m.publishes()) {
            let label = ModeLabel {
                publish_mode: mode.as_str(),
            };
            let _ = m.published.get_or_create(&label);
            let _ = m.failed.get_or_create(&label);
        }
        registry.register_with_unit(
            "chatlab_event_produce_duration",
            "Time from handing an event to the producer to the broker's acknowledgement",
            Unit::Seconds,
            m.produce_duration.clone(),
        );
        registry.register(
            "chatlab_events_published",
            "Events acknowledged by the broker",
            m.published.clone(),
        );
        registry.register(
            "chatlab_events_failed",
            "Events not acknowledged: rolled back (in_tx_await), lost (after_commit, in_tx_enqueue) or retried (outbox)",
            m.failed.clone(),
        );
        registry.register(
            "chatlab_event_receipts_dropped",
            "Receipts of acknowledged events dropped because the receipt ledger's queue was full",
            m.receipts_dropped.clone(),
        );
        registry.register(
            "chatlab_event_producer_rebuilds",
            "Event producers destroyed and created anew after a librdkafka fatal error (fencing, sequence)",
            m.producer_rebuilds.clone(),
        );
        m
    }
}
