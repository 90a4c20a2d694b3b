//! The receipt ledger: writes the receipt of every acknowledged event (its
//! partition and offset) to `event_receipts`, so the audit can tell an
//! event chatlab never got acknowledged from one the broker acknowledged
//! and does not serve.
//!
//! The publisher hands receipts over a bounded channel and never waits (a
//! full channel drops the receipt and counts it); the ledger writes them in
//! batches, one multi-row INSERT per flush, on a connection of its own, so
//! neither the request pool nor any transaction pays for it. A failed write
//! keeps the batch and tries again; receipts past `max_buffered` are
//! dropped and counted. Receipts older than `retention` are deleted in
//! bounded batches.

use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use diesel::sql_types::{Array, BigInt, Integer, Text, Timestamptz, Uuid as SqlUuid};
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::registry::Registry;
use secrecy::{ExposeSecret, SecretString};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};
use uuid::Uuid;

use chatlab_domain::AckedEvent;

use crate::config::SessionSettings;
use crate::database::session_settings::{Setup, connect};

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

/// The ledger of one process.
pub struct ReceiptLedger {
    url: SecretString,
    setup: Setup,
    receipts: mpsc::Receiver<AckedEvent>,
    metrics: LedgerMetrics,
    settings: LedgerSettings,
}

const INSERT_SQL: &str = "INSERT INTO event_receipts \
     (event_id, subject_id, publish_mode, topic, \"partition\", \"offset\", occurred_at) \
     SELECT e, s, m, $4, p, o, t \
     FROM unnest($1::uuid[], $2::uuid[], $3::text[], $5::int4[], $6::int8[], $7::timestamptz[]) \
     AS r(e, s, m, p, o, t)";

const DELETE_SQL: &str = "DELETE FROM event_receipts WHERE id IN \
     (SELECT id FROM event_receipts WHERE recorded_at < $1 LIMIT 10000)";

impl ReceiptLedger {
    /// A ledger on its own connection to `url`, reading `receipts`.
    pub fn new(
        url: SecretString,
        session: &SessionSettings,
        receipts: mpsc::Receiver<AckedEvent>,
        metrics: LedgerMetrics,
        settings: LedgerSettings,
    ) -> Self {
        let mut session = session.clone();
        session.application_name = format!("{}-receipt-ledger", session.application_name);
        Self {
            url,
            setup: Setup::of(&session),
            receipts,
            metrics,
            settings,
        }
    }

    /// Runs until `stop` is cancelled (or every sender is gone), then
    /// writes what it holds, trying for up to five seconds.
    pub fn spawn(mut self, stop: CancellationToken) -> tokio::task::JoinHandle<()> {
        tokio::spawn(async move {
            let mut conn: Option<AsyncPgConnection> = None;
            let mut buffer: Vec<AckedEvent> = Vec::new();
            let mut last_cleanup = Instant::now();
            let mut open = true;
            info!(topic = %self.settings.topic, "receipt ledger started");
            while open && !stop.is_cancelled() {
                tokio::select! {
                    n = self.receipts.recv_many(&mut buffer, self.settings.batch_size) => {
                        open = n > 0;
                    }
                    _ = tokio::time::sleep(self.settings.flush_interval) => {}
                    _ = stop.cancelled() => {}
                }
                // Take what else is already queued, then write.
                while buffer.len() < self.settings.max_buffered {
                    match self.receipts.try_recv() {
                        Ok(r) => buffer.push(r),
                        Err(_) => break,
                    }
                }
                self.write(&mut conn, &mut buffer).await;
                if last_cleanup.elapsed() >= Duration::from_secs(60) {
                    if let Some(c) = conn.as_mut() {
                        self.delete_expired(c).await;
                    }
                    last_cleanup = Instant::now();
                }
            }
            // Shutdown: what is queued still counts.
            self.receipts.close();
            while let Some(r) = self.receipts.recv().await {
                buffer.push(r);
            }
            let deadline = Instant::now() + Duration::from_secs(5);
            while !buffer.is_empty() && Instant::now() < deadline {
                self.write(&mut conn, &mut buffer).await;
                if !buffer.is_empty() {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            }
            if !buffer.is_empty() {
                self.metrics.dropped.inc_by(buffer.len() as u64);
                warn!(
                    receipts = buffer.len(),
                    "receipt ledger stopped with receipts it could not write"
                );
            }
            info!("receipt ledger stopped");
        })
    }

    /// Writes `buffer` in batches; keeps what could not be written (up to
    /// `max_buffered`, the oldest dropped first).
    async fn write(&self, conn: &mut Option<AsyncPgConnection>, buffer: &mut Vec<AckedEvent>) {
        while !buffer.is_empty() {
            let c = match conn.as_mut() {
                Some(c) => c,
                None => match connect(self.url.expose_secret(), &self.setup).await {
                    Ok(c) => conn.insert(c),
                    Err(e) => {
                        debug!(error = %e, "receipt ledger cannot connect");
                        break;
                    }
                },
            };
            let n = buffer.len().min(self.settings.batch_size);
            match insert(c, &self.settings.topic, &buffer[..n]).await {
                Ok(()) => {
                    self.metrics.recorded.inc_by(n as u64);
                    buffer.drain(..n);
                }
                Err(e) => {
                    warn!(error = %e, receipts = buffer.len(), "receipt ledger write failed; will retry");
                    self.metrics.write_failures.inc();
                    *conn = None;
                    break;
                }
            }
        }
        if buffer.len() > self.settings.max_buffered {
            let excess = buffer.len() - self.settings.max_buffered;
            buffer.drain(..excess);
            self.metrics.dropped.inc_by(excess as u64);
        }
    }

    async fn delete_expired(&self, conn: &mut AsyncPgConnection) {
        let cutoff: DateTime<Utc> = Utc::now()
            - chrono::Duration::from_std(self.settings.retention)
                .unwrap_or(chrono::Duration::zero());
        for _ in 0..100 {
            match diesel::sql_query(DELETE_SQL)
                .bind::<Timestamptz, _>(cutoff)
                .execute(conn)
                .await
            {
                Ok(n) if n > 0 => debug!(deleted = n, "receipts past retention deleted"),
                Ok(_) => return,
                Err(e) => {
                    warn!(error = %e, "deleting receipts past retention failed");
                    return;
                }
            }
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
