//! Live delivery's counters on `/metrics`.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Registry, Unit};

use chatlab_persistence::database::pool_metrics::latency_buckets;

/// Label of the refused streams: which limit refused them (`user` or
/// `instance`).
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RefusedLabel {
    /// The limit.
    pub reason: &'static str,
}

/// Label of the catch-ups: where their events came from (`memory`, the
/// events this instance holds; `topic`, a reader of the topic).
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ServedLabel {
    /// The source.
    pub source: &'static str,
}

/// Live delivery metrics.
#[derive(Debug, Clone)]
pub struct LiveMetrics {
    /// Open streaming connections.
    pub connections: Gauge,
    /// Events read from the topic and fanned out.
    pub events: Counter,
    /// Frames handed to connections.
    pub deliveries: Counter,
    /// Connections dropped because their buffer was full.
    pub dropped_slow: Counter,
    /// Duplicate events not delivered again.
    pub duplicates: Counter,
    /// Reconnections caught up.
    pub resumed: Counter,
    /// Catch-ups, by where their events came from.
    pub catch_ups: Family<ServedLabel, Counter>,
    /// Events whose frame could not be written, delivered to nobody.
    pub unencodable: Counter,
    /// Events given by catch-ups.
    pub caught_up: Counter,
    /// Reconnections told to reload (`reset`).
    pub resets: Counter,
    /// Streams refused by a limit (429), by limit.
    pub refused: Family<RefusedLabel, Counter>,
    /// Records of the topic this instance's tail has not read, per
    /// partition.
    pub lag: chatlab_kafka::live_tail::TailLag,
    /// From the event's creation (the write's timestamp) to its hand-over
    /// to the connections' buffers.
    pub delay: Histogram,
}

impl LiveMetrics {
    /// Counts what one hand-over to the connections did.
    pub fn count(&self, done: super::hub::FanOut) {
        self.deliveries.inc_by(done.delivered);
        self.dropped_slow.inc_by(done.dropped);
        self.duplicates.inc_by(done.duplicates);
        self.unencodable.inc_by(done.unencodable);
    }

    /// Creates the metrics and registers them.
    pub fn register(registry: &mut Registry) -> Self {
        let m = Self {
            connections: Gauge::default(),
            events: Counter::default(),
            deliveries: Counter::default(),
            dropped_slow: Counter::default(),
            duplicates: Counter::default(),
            resumed: Counter::default(),
            catch_ups: Family::default(),
            unencodable: Counter::default(),
            caught_up: Counter::default(),
            resets: Counter::default(),
            refused: Family::default(),
            lag: chatlab_kafka::live_tail::TailLag::default(),
            delay: Histogram::new(latency_buckets()),
        };
        registry.register(
            "chatlab_live_connections",
            "Open live delivery connections (GET /v1/events)",
            m.connections.clone(),
        );
        registry.register(
            "chatlab_live_events",
            "Events read from the topic and fanned out",
            m.events.clone(),
        );
        registry.register(
            "chatlab_live_deliveries",
            "Events handed to connections",
            m.deliveries.clone(),
        );
        registry.register(
            "chatlab_live_dropped_slow",
            "Connections closed because their buffer was full",
            m.dropped_slow.clone(),
        );
        registry.register(
            "chatlab_live_duplicates",
            "Events a connection had already received, not delivered again",
            m.duplicates.clone(),
        );
        registry.register(
            "chatlab_live_resumed",
            "Reconnections (Last-Event-ID) caught up",
            m.resumed.clone(),
        );
        registry.register(
            "chatlab_live_catch_ups",
            "Catch-ups of reconnections, by where their events came from: memory (the events this instance holds, LIVE_RECENT_EVENTS) or topic (a reader of the topic, a few at a time)",
            m.catch_ups.clone(),
        );
        registry.register(
            "chatlab_live_unencodable_events",
            "Events whose live frame could not be written, delivered to nobody (logged)",
            m.unencodable.clone(),
        );
        registry.register(
            "chatlab_live_caught_up_events",
            "Events given to reconnecting clients from the topic",
            m.caught_up.clone(),
        );
        registry.register(
            "chatlab_live_resets",
            "Reconnections that could not be caught up and were told to reload",
            m.resets.clone(),
        );
        registry.register(
            "chatlab_live_refused",
            "Streams refused (429) because their user (LIVE_MAX_STREAMS_PER_USER) or this instance (LIVE_MAX_STREAMS) held as many as allowed",
            m.refused.clone(),
        );
        registry.register(
            "chatlab_live_consumer_lag",
            "Records of the event topic this instance's live tail has not read yet, per partition (librdkafka's statistics, every 5 s)",
            m.lag.clone(),
        );
        registry.register_with_unit(
            "chatlab_live_delay",
            "From an event's write to its hand-over to the connections",
            Unit::Seconds,
            m.delay.clone(),
        );
        m
    }
}
