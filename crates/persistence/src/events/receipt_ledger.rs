//! The receipt ledger: writes the receipt of every acknowledged event (its
//! partition and offset) to `event_receipts`, so the audit can tell an
//! event chatlab never got acknowledged from one the broker acknowledged
//! and does not serve.
//!
//! The publisher hands receipts over a bounded channel and never waits (a
//! full channel drops the receipt and counts it); the ledger writes them in
//! batches, one multi-row INSERT per flush, on a connection of its own
//! ([`Dedicated`]), so neither the request pool nor any transaction pays
//! for it. A failed write
//! keeps the batch and tries again; receipts past `max_buffered` are
//! dropped and counted. Receipts older than `retention` are deleted in
//! bounded batches.

use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use diesel::sql_types::{Array, BigInt, Integer, Text, Timestamptz, Uuid as SqlUuid};
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::registry::Registry;
use secrecy::SecretString;
use tokio::sync::mpsc;
use tracing::{debug, warn};
use uuid::Uuid;

use chatlab_domain::AckedEvent;

use crate::config::SessionSettings;
use crate::database::dedicated::{Chore, Dedicated, Retention};

/// How the ledger runs.
#[derive(Debug, Clone)]
pub struct LedgerSettings {
    /// The topic the receipts belong to.
    pub topic: String,
    /// Receipts are written at least this often.
    pub flush_interval: Duration,
    /// Receipts per INSERT at most.
    pub batch_size: usize,
    /// Receipts kept in memory while the database cannot take them; more
    /// are dropped and counted.
    pub max_buffered: usize,
    /// Receipts older than this are deleted (`KAFKA_RECEIPT_RETENTION_SECS`).
    pub retention: Duration,
}

impl LedgerSettings {
    /// The defaults for `topic`.
    pub fn for_topic(topic: &str) -> Self {
        Self {
            topic: topic.to_owned(),
            flush_interval: Duration::from_millis(100),
            batch_size: 2_000,
            max_buffered: 200_000,
            retention: Duration::from_secs(86_400),
        }
    }
}

/// Room in the channel between the publisher and the ledger.
pub const CHANNEL_CAPACITY: usize = 65_536;

/// Ledger metrics.
#[derive(Debug, Clone, Default)]
pub struct LedgerMetrics {
    /// Receipts written.
    pub recorded: Counter,
    /// Receipts dropped because the database could not take them in time.
    pub dropped: Counter,
    /// Writes that failed (the batch is kept and tried again).
    pub write_failures: Counter,
}

impl LedgerMetrics {
    /// Creates the metrics and registers them.
    pub fn register(registry: &mut Registry) -> Self {
        let m = Self::default();
        registry.register(
            "chatlab_event_receipts_recorded",
            "Receipts (partition and offset) of acknowledged events written to event_receipts",
            m.recorded.clone(),
        );
        registry.register(
            "chatlab_event_receipts_unwritten",
            "Receipts dropped because the database could not take them while the ledger's buffer was full",
            m.dropped.clone(),
        );
        registry.register(
            "chatlab_event_receipt_write_failures",
            "Receipt writes that failed and were tried again",
            m.write_failures.clone(),
        );
        m
    }
}

/// The ledger of one process: run by the server's background workers
/// (`api/background/receipt_ledger.rs`), which call [`Self::receive`] and
/// [`Self::write_received`] in turn and [`Self::close`] at the end.
pub struct ReceiptLedger {
    conn: Dedicated,
    receipts: mpsc::Receiver<AckedEvent>,
    /// Received, not yet written.
    buffer: Vec<AckedEvent>,
    /// Whether any sender is left.
    open: bool,
    metrics: LedgerMetrics,
    settings: LedgerSettings,
    retention: Chore,
}

const INSERT_SQL: &str = "INSERT INTO event_receipts \
     (event_id, subject_id, publish_mode, topic, \"partition\", \"offset\", occurred_at) \
     SELECT e, s, m, $4, p, o, t \
     FROM unnest($1::uuid[], $2::uuid[], $3::text[], $5::int4[], $6::int8[], $7::timestamptz[]) \
     AS r(e, s, m, p, o, t)";

/// Deletes up to `$2` receipts recorded before `$1`.
const RETENTION_SQL: &str = "DELETE FROM event_receipts WHERE id IN \
     (SELECT id FROM event_receipts WHERE recorded_at < $1 LIMIT $2)";

/// Receipts deleted per statement by retention.
const RETENTION_BATCH: i64 = 10_000;

/// Most retention statements a minute; what is left waits a minute.
const RETENTION_MAX_BATCHES: usize = 100;

/// How often receipts past retention are deleted.
const RETENTION_EVERY: Duration = Duration::from_secs(60);

/// How long [`ReceiptLedger::close`] keeps trying to write what it holds.
const LAST_WRITE_WINDOW: Duration = Duration::from_secs(5);

/// The pause between [`ReceiptLedger::close`]'s attempts.
const LAST_WRITE_PAUSE: Duration = Duration::from_millis(200);

impl ReceiptLedger {
    /// A ledger on its own connection to `url`, reading `receipts`.
    pub fn new(
        url: SecretString,
        session: &SessionSettings,
        receipts: mpsc::Receiver<AckedEvent>,
        metrics: LedgerMetrics,
        settings: LedgerSettings,
    ) -> Self {
        Self {
            conn: Dedicated::new(url, session, "receipt-ledger", settings.flush_interval),
            receipts,
            buffer: Vec::new(),
            open: true,
            metrics,
            settings,
            retention: Chore::every(RETENTION_EVERY),
        }
    }

    /// How often it writes what it received, at least.
    pub fn flush_interval(&self) -> Duration {
        self.settings.flush_interval
    }

    /// Whether a sender is left: once every one is gone and what they sent
    /// is written, the ledger has nothing more to do.
    pub fn is_open(&self) -> bool {
        self.open
    }

    /// Waits for receipts and takes them (up to a batch); never returns
    /// once every sender is gone. Cancel-safe: a wait given up loses no
    /// receipt.
    pub async fn receive(&mut self) {
        if !self.open {
            return std::future::pending().await;
        }
        let n = self
            .receipts
            .recv_many(&mut self.buffer, self.settings.batch_size)
            .await;
        self.open = n > 0;
    }

    /// Takes what else is queued and writes everything received, in
    /// batches; keeps what could not be written (up to `max_buffered`, the
    /// oldest dropped first) and answers how long to wait before trying
    /// again (zero when all went). Once a minute, deletes receipts past
    /// retention.
    pub async fn write_received(&mut self) -> Duration {
        while self.buffer.len() < self.settings.max_buffered {
            match self.receipts.try_recv() {
                Ok(r) => self.buffer.push(r),
                Err(_) => break,
            }
        }
        self.write().await;
        if self.conn.is_open() && self.retention.due() {
            self.delete_expired().await;
        }
        self.conn.backoff()
    }

    /// At shutdown: closes the channel, takes what is queued, and tries
    /// for up to five seconds to write it all; what is left is counted as
    /// dropped.
    pub async fn close(mut self) {
        self.receipts.close();
        while let Some(r) = self.receipts.recv().await {
            self.buffer.push(r);
        }
        let deadline = Instant::now() + LAST_WRITE_WINDOW;
        while !self.buffer.is_empty() && Instant::now() < deadline {
            self.write().await;
            if !self.buffer.is_empty() {
                tokio::time::sleep(LAST_WRITE_PAUSE).await;
            }
        }
        if !self.buffer.is_empty() {
            self.metrics.dropped.inc_by(self.buffer.len() as u64);
            warn!(
                receipts = self.buffer.len(),
                "receipt ledger stopped with receipts it could not write"
            );
        }
    }

    /// Writes the buffer in batches until it is empty or a write fails.
    async fn write(&mut self) {
        while !self.buffer.is_empty() {
            let c = match self.conn.get().await {
                Ok(c) => c,
                Err(e) => {
                    debug!(error = %e, "receipt ledger cannot connect");
                    break;
                }
            };
            let n = self.buffer.len().min(self.settings.batch_size);
            match insert(c, &self.settings.topic, &self.buffer[..n]).await {
                Ok(()) => {
                    self.conn.worked();
                    self.metrics.recorded.inc_by(n as u64);
                    self.buffer.drain(..n);
                }
                Err(e) => {
                    warn!(error = %e, receipts = self.buffer.len(), "receipt ledger write failed; will retry");
                    self.metrics.write_failures.inc();
                    self.conn.lost();
                    break;
                }
            }
        }
        if self.buffer.len() > self.settings.max_buffered {
            let excess = self.buffer.len() - self.settings.max_buffered;
            self.buffer.drain(..excess);
            self.metrics.dropped.inc_by(excess as u64);
        }
    }

    async fn delete_expired(&mut self) {
        let Ok(conn) = self.conn.get().await else {
            return;
        };
        let retention = Retention {
            sql: RETENTION_SQL,
            keep: self.settings.retention,
            batch: RETENTION_BATCH,
            max_batches: RETENTION_MAX_BATCHES,
            rows: "receipts",
        };
        if !retention.apply(conn).await {
            self.conn.lost();
        }
    }
}

async fn insert(
    conn: &mut AsyncPgConnection,
    topic: &str,
    receipts: &[AckedEvent],
) -> diesel::QueryResult<()> {
    let event_ids: Vec<Uuid> = receipts.iter().map(|r| r.event_id).collect();
    let subjects: Vec<Uuid> = receipts.iter().map(|r| r.subject_id).collect();
    let modes: Vec<&str> = receipts.iter().map(|r| r.mode.as_str()).collect();
    let partitions: Vec<i32> = receipts.iter().map(|r| r.receipt.partition).collect();
    let offsets: Vec<i64> = receipts.iter().map(|r| r.receipt.offset).collect();
    let times: Vec<DateTime<Utc>> = receipts.iter().map(|r| r.occurred_at).collect();
    diesel::sql_query(INSERT_SQL)
        .bind::<Array<SqlUuid>, _>(event_ids)
        .bind::<Array<SqlUuid>, _>(subjects)
        .bind::<Array<Text>, _>(modes)
        .bind::<Text, _>(topic)
        .bind::<Array<Integer>, _>(partitions)
        .bind::<Array<BigInt>, _>(offsets)
        .bind::<Array<Timestamptz>, _>(times)
        .execute(conn)
        .await
        .map(|_| ())
}
