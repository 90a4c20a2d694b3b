//! Which workers a server runs, all started here: the order of this
//! function is the order they start in. The jobs (the relay, the ledger,
//! the sweeper, the marker writer) run in one shape ([`super::Worker`]);
//! the live tail and its fan-out follow a stream until it ends.

use std::sync::Arc;

use prometheus_client::registry::Registry;
use tokio::sync::mpsc;

use chatlab_domain::{AckedEvent, ReadMarkerMode};
use chatlab_kafka::KafkaPublisher;
use chatlab_persistence::events::outbox_relay::{OutboxMetrics, OutboxRelay};
use chatlab_persistence::events::receipt_ledger::{LedgerMetrics, ReceiptLedger};
use chatlab_persistence::writes::idempotency::KeySweep;
use chatlab_persistence::{MarkerWriter, PgStore};

use super::Background;
use super::key_sweeper::KeySweeper;
use super::marker_writer::MarkerWrites;
use super::outbox_relay::Relay;
use super::receipt_ledger::Receipts;
use crate::config::Settings;
use crate::live::Live;

/// Events read from the topic and waiting for the fan-out; when full, the
/// tail waits (the broker keeps the rest).
const LIVE_TAIL_CAPACITY: usize = 4096;

/// How long startup waits for the live tail to follow the topic.
const LIVE_TAIL_START: std::time::Duration = std::time::Duration::from_secs(10);

/// What the workers are built from: the phases of startup before them.
pub struct Inputs<'a> {
    /// The settings.
    pub settings: &'a Settings,
    /// The store: its key retention (for the sweeper) and its held read
    /// markers (for the marker writer).
    pub store: &'a PgStore,
    /// The publisher the relay sends through.
    pub publisher: &'a KafkaPublisher,
    /// The publisher's acknowledgements, for the receipt ledger.
    pub receipts: mpsc::Receiver<AckedEvent>,
    /// Where the live tail reads the topic.
    pub bootstrap: &'a str,
    /// The live streams the fan-out delivers to.
    pub live: &'a Live,
}

/// Starts every background worker and answers their owner. Returns once
/// the live tail follows the topic (so a member who connects to a ready
/// server misses nothing written after), or after 10 s when the broker
/// does not answer.
pub async fn start_all(inputs: Inputs<'_>, registry: &mut Registry) -> Background {
    let Inputs {
        settings,
        store,
        publisher,
        receipts,
        bootstrap,
        live,
    } = inputs;
    let mut workers = Background::new();
    let ledger = ReceiptLedger::new(
        settings.db.url.clone(),
        &settings.db.session,
        receipts,
        LedgerMetrics::register(registry),
        settings.ledger.clone(),
    );
    workers.run_last("receipt ledger", ledger.flush_interval(), Receipts(ledger));
    let sweeper = KeySweeper {
        sweep: KeySweep::new(
            settings.db.url.clone(),
            &settings.db.session,
            store.key_retention(),
        ),
    };
    workers.run(
        "idempotency key sweeper",
        settings.writes.idempotency_sweep_every,
        sweeper,
    );
    // `coalesced` flushes what it holds, `log` compacts its log; `direct`
    // writes at once and needs neither.
    if settings.writes.read_marker_mode != ReadMarkerMode::Direct {
        let writes = MarkerWrites {
            writer: MarkerWriter::new(
                settings.db.url.clone(),
                &settings.db.session,
                store.read_markers().clone(),
            ),
            every: settings.writes.read_marker_flush,
        };
        workers.run("read marker writer", writes.every, writes);
    }
    start_live(&mut workers, settings, bootstrap, live).await;
    let relay = OutboxRelay::new(
        settings.db.url.clone(),
        &settings.db.session,
        Arc::new(publisher.clone()),
        store.outbox_wakeup(),
        OutboxMetrics::register(registry),
        settings.outbox.clone(),
    );
    workers.run("outbox relay", relay.poll_interval(), Relay::new(relay));
    workers
}

/// The live tail, which follows the topic, and the fan-out, which hands
/// what it reads to this instance's streams; waits for the tail to follow.
async fn start_live(workers: &mut Background, settings: &Settings, bootstrap: &str, live: &Live) {
    let (tailed, to_fan_out) = mpsc::channel(LIVE_TAIL_CAPACITY);
    let (following, tail_follows) = tokio::sync::oneshot::channel();
    workers.start("live tail", |stop| {
        chatlab_kafka::live_tail::spawn(
            bootstrap,
            &settings.kafka.topic,
            settings.live.fetch_wait,
            live.metrics.lag.clone(),
            tailed,
            following,
            stop,
        )
    });
    if tokio::time::timeout(LIVE_TAIL_START, tail_follows)
        .await
        .is_err()
    {
        tracing::warn!(
            "live delivery: the topic cannot be followed yet; members receive events once the broker answers"
        );
    }
    // Ends once the tail does (its channel closes).
    let (hub, metrics) = (live.hub.clone(), live.metrics.clone());
    workers.start("live fan-out", |_| {
        crate::live::dispatch::spawn(to_fan_out, hub, metrics)
    });
}
