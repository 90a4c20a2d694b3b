//! The outbox relay: publishes committed outbox rows, in order, at least
//! once.
//!
//! Each batch is one transaction on the relay's own connection (not one of
//! the request pool's, so pool experiments measure requests only):
//!
//! 1. claim up to `batch_size` pending rows in id order, `FOR UPDATE SKIP
//!    LOCKED` so several server instances can relay at once, and only rows
//!    whose chat this relay can lock (`pg_try_advisory_xact_lock(2, key)`,
//!    tried on the first `batch_size` pending rows only, [`CLAIM_SQL`]):
//!    another relay busy with a chat owns all of that chat's rows until it
//!    commits, so one chat's events are never published out of order;
//! 2. produce them all, in id order, and await every acknowledgement;
//! 3. mark the acknowledged rows published (`published_at`), count an
//!    attempt and the error on the others, COMMIT. A chat's rows are marked
//!    in order: after a failed row, the chat's later rows of the batch stay
//!    pending even when acknowledged (they are sent again: a duplicate,
//!    never a reordering). A row whose payload cannot be read is set aside
//!    (`dead_at`, counted in `chatlab_outbox_dead_rows_total`) after
//!    [`UNREADABLE_ATTEMPTS`] attempts, so it stops holding up its chat and
//!    throttling the relay.
//!
//! Publication is tracked per row, never as "the last id published": ids
//! are taken before COMMIT, so a lower id can become visible after a higher
//! one has been published, and it is still pending and still gets
//! published. A crash between produce and COMMIT publishes the batch again:
//! duplicates, never losses (consumers dedupe on `event_id`).
//!
//! The relay wakes when this process commits an outbox row, and polls every
//! `poll_interval` for rows written by other instances; the server's
//! background workers run it (`api/background/outbox_relay.rs`), one batch
//! a run, so on shutdown it finishes the batch in hand and stops, however
//! long the backlog. Its connection is its own ([`Dedicated`]: reopened
//! after a failure, with a growing backoff). Retention deletes published
//! rows in bounded batches and counts failures.

use std::sync::Arc;
use std::time::{Duration, Instant};

use diesel::QueryableByName;
use diesel::sql_types::{Array, BigInt, Double, Nullable, Text};
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
use futures_util::future::join_all;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::{Registry, Unit};
use secrecy::SecretString;
use std::sync::atomic::AtomicU64;
use tokio::sync::Notify;
use tracing::{Instrument as _, debug, warn};

use chatlab_domain::{Event, EventPublisher, PublishError, PublishMode};

use crate::config::SessionSettings;
use crate::database::dedicated::{Chore, Dedicated, Retention};
use crate::queries::RELAY_LOCK_CLASS;

/// How the relay runs.
#[derive(Debug, Clone)]
pub struct RelaySettings {
    /// Rows per batch (`OUTBOX_BATCH_SIZE`).
    pub batch_size: i64,
    /// Poll period for rows from other instances (`OUTBOX_POLL_MS`).
    pub poll_interval: Duration,
    /// Published rows older than this are deleted (`OUTBOX_RETENTION_SECS`).
    pub retention: Duration,
    /// Wait after a failed batch before the next try.
    pub retry_backoff: Duration,
}

impl Default for RelaySettings {
    fn default() -> Self {
        Self {
            batch_size: 500,
            poll_interval: Duration::from_millis(100),
            retention: Duration::from_secs(3600),
            retry_backoff: Duration::from_millis(500),
        }
    }
}

/// Outbox metrics.
#[derive(Debug, Clone, Default)]
pub struct OutboxMetrics {
    /// Rows not yet published, sampled at most once a second.
    pub pending: Gauge,
    /// Age of the oldest pending row, in seconds.
    pub oldest_age: Gauge<f64, AtomicU64>,
    /// Rows the relay marked published.
    pub relayed: Counter,
    /// Rows whose publication failed (they stay pending and are retried).
    pub failed: Counter,
    /// Rows set aside for good (unreadable payload): `dead_at` is set.
    pub dead: Counter,
    /// Retention deletes that failed.
    pub retention_failures: Counter,
}

impl OutboxMetrics {
    /// Creates the metrics and registers them.
    pub fn register(registry: &mut Registry) -> Self {
        let m = Self::default();
        registry.register(
            "chatlab_outbox_pending_rows",
            "Outbox rows not yet published",
            m.pending.clone(),
        );
        registry.register_with_unit(
            "chatlab_outbox_oldest_pending_age",
            "Age of the oldest unpublished outbox row",
            Unit::Seconds,
            m.oldest_age.clone(),
        );
        registry.register(
            "chatlab_outbox_relayed_rows",
            "Outbox rows published and marked by the relay",
            m.relayed.clone(),
        );
        registry.register(
            "chatlab_outbox_failed_rows",
            "Outbox row publications that failed and will be retried",
            m.failed.clone(),
        );
        registry.register(
            "chatlab_outbox_dead_rows",
            "Outbox rows set aside for good after repeated failures (unreadable payload); see dead_at and last_error",
            m.dead.clone(),
        );
        registry.register(
            "chatlab_outbox_retention_failures",
            "Deletes of published outbox rows past retention that failed",
            m.retention_failures.clone(),
        );
        m
    }
}

/// The relay of one process: run by the server's background workers,
/// one [`Self::relay_once`] at a time.
pub struct OutboxRelay {
    conn: Dedicated,
    work: RelayWork,
    wakeup: Arc<Notify>,
    /// When the backlog was last sampled (none yet: an instant a second
    /// before now does not exist in a process started within a second of
    /// boot).
    sampled: Option<Instant>,
    retention: Chore,
}

/// What a batch needs besides the connection.
struct RelayWork {
    publisher: Arc<dyn EventPublisher>,
    metrics: OutboxMetrics,
    settings: RelaySettings,
}

/// How often published rows past retention are deleted.
const RETENTION_EVERY: Duration = Duration::from_secs(60);

#[derive(QueryableByName)]
struct Claimed {
    #[diesel(sql_type = BigInt)]
    id: i64,
    #[diesel(sql_type = diesel::sql_types::Uuid)]
    chat_id: uuid::Uuid,
    #[diesel(sql_type = Text)]
    payload: String,
    #[diesel(sql_type = diesel::sql_types::Integer)]
    attempts: i32,
    #[diesel(sql_type = Nullable<Text>)]
    trace_parent: Option<String>,
}

#[derive(QueryableByName)]
struct Backlog {
    #[diesel(sql_type = BigInt)]
    pending: i64,
    #[diesel(sql_type = Nullable<Double>)]
    oldest_age: Option<f64>,
}

/// What to write back for one batch.
#[derive(Default)]
struct Marks {
    /// Acknowledged: published.
    published: Vec<i64>,
    /// Not published this time, with the last error: tried again later.
    failed: Vec<i64>,
    last_error: Option<String>,
    /// Unreadable for the last allowed time: set aside for good.
    dead: Vec<(i64, String)>,
    /// Chats with a failure earlier in this batch: their later rows,
    /// acknowledged or not, stay pending, so a chat's rows are marked in
    /// order (they are sent again after the failed one: a duplicate, never
    /// a reordering of what is marked).
    stopped: std::collections::HashSet<uuid::Uuid>,
}

impl Marks {
    fn add(&mut self, row: &Claimed, outcome: Result<(), String>, unreadable: bool) {
        if unreadable && row.attempts + 1 >= UNREADABLE_ATTEMPTS {
            // Set aside: it can never be published, and it no longer holds
            // up the rows of its chat behind it.
            let error = outcome.err().unwrap_or_default();
            self.dead.push((row.id, error));
            return;
        }
        match outcome {
            Ok(()) if !self.stopped.contains(&row.chat_id) => self.published.push(row.id),
            Ok(()) => self.failed.push(row.id),
            Err(e) => {
                self.stopped.insert(row.chat_id);
                self.failed.push(row.id);
                self.last_error = Some(e);
            }
        }
    }

    async fn write(self, c: &mut AsyncPgConnection) -> diesel::QueryResult<BatchOutcome> {
        diesel::sql_query(
            "UPDATE outbox SET published_at = now(), attempts = attempts + 1 \
             WHERE id = ANY($1)",
        )
        .bind::<Array<BigInt>, _>(&self.published)
        .execute(c)
        .await?;
        if !self.failed.is_empty() {
            diesel::sql_query(
                "UPDATE outbox SET attempts = attempts + 1, last_error = $2 WHERE id = ANY($1)",
            )
            .bind::<Array<BigInt>, _>(&self.failed)
            .bind::<Nullable<Text>, _>(self.last_error)
            .execute(c)
            .await?;
        }
        for (id, error) in &self.dead {
            warn!(outbox_id = id, error = %error, "outbox row set aside: its payload cannot be read");
            diesel::sql_query(
                "UPDATE outbox SET attempts = attempts + 1, last_error = $2, dead_at = now() \
                 WHERE id = $1",
            )
            .bind::<BigInt, _>(id)
            .bind::<Text, _>(error)
            .execute(c)
            .await?;
        }
        Ok(BatchOutcome {
            published: self.published.len(),
            failed: self.failed.len(),
            dead: self.dead.len(),
        })
    }
}

/// What one batch did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct BatchOutcome {
    /// Rows published and marked.
    published: usize,
    /// Rows whose publication failed, or that wait behind a failed row of
    /// their chat.
    failed: usize,
    /// Rows set aside for good.
    dead: usize,
}

/// A batch's claim: the first `$2` pending rows in id order (the window),
/// of those the rows whose chat lock (class `$1`) this transaction gets,
/// row-locked, skipping rows another relay holds.
///
/// The chat locks are tried on the window only. With the lock call in the
/// scan's filter, the planner was free to evaluate it on every pending row
/// before sorting and limiting (a bitmap scan and a sort, as it chose once
/// a backlog grew past its statistics): one advisory lock per pending
/// chat, held to COMMIT, and with tens of thousands of chats in the
/// backlog PostgreSQL's shared lock table filled and every other
/// transaction on the server failed with "out of shared memory".
pub const CLAIM_SQL: &str = "WITH batch_window AS MATERIALIZED ( \
         SELECT id, lock_key FROM outbox \
         WHERE published_at IS NULL AND dead_at IS NULL \
         ORDER BY id LIMIT $2 \
     ), owned AS MATERIALIZED ( \
         SELECT id FROM batch_window WHERE pg_try_advisory_xact_lock($1, lock_key) \
     ) \
     SELECT o.id, o.chat_id, o.payload, o.attempts, o.trace_parent \
     FROM outbox o JOIN owned USING (id) \
     WHERE o.published_at IS NULL AND o.dead_at IS NULL \
     ORDER BY o.id FOR UPDATE OF o SKIP LOCKED";

/// Attempts after which a row whose payload cannot be read is set aside.
pub const UNREADABLE_ATTEMPTS: i32 = 5;

/// Published rows deleted per statement by retention.
const RETENTION_BATCH: i64 = 5_000;

/// Most retention statements a minute; what is left waits a minute.
const RETENTION_MAX_BATCHES: usize = 100;

/// Deletes up to `$2` published rows older than `$1`.
const RETENTION_SQL: &str = "DELETE FROM outbox WHERE id IN (SELECT id FROM outbox \
     WHERE published_at IS NOT NULL AND published_at < $1 LIMIT $2)";

/// The span of one relay batch's sends: a trace of its own (no request
/// waits for it), linked to the request of every event it carries, whose
/// traces the records themselves continue.
fn batch_span(rows: &[(&Claimed, Result<Event, String>)]) -> tracing::Span {
    let span = tracing::debug_span!(
        parent: None,
        "outbox relay batch",
        otel.name = "outbox publish",
        otel.kind = "producer",
        messaging.system = "kafka",
        messaging.batch.message_count = rows.len(),
    );
    if !span.is_disabled() {
        for (row, _) in rows {
            if let Some(tp) = &row.trace_parent {
                chatlab_telemetry::link_to(&span, tp);
            }
        }
    }
    span
}

impl OutboxRelay {
    /// A relay on its own connection to `url`.
    pub fn new(
        url: SecretString,
        session: &SessionSettings,
        publisher: Arc<dyn EventPublisher>,
        wakeup: Arc<Notify>,
        metrics: OutboxMetrics,
        settings: RelaySettings,
    ) -> Self {
        Self {
            conn: Dedicated::new(url, session, "outbox-relay", settings.retry_backoff),
            work: RelayWork {
                publisher,
                metrics,
                settings,
            },
            wakeup,
            sampled: None,
            retention: Chore::every(RETENTION_EVERY),
        }
    }

    /// What wakes it before its poll interval is up: this process
    /// committing an outbox row.
    pub fn wakeup(&self) -> Arc<Notify> {
        self.wakeup.clone()
    }

    /// How often it looks for rows other instances wrote.
    pub fn poll_interval(&self) -> Duration {
        self.work.settings.poll_interval
    }

    /// Relays one batch on its connection (opened first if need be), then
    /// samples the backlog (at most once a second) and deletes published
    /// rows past retention (once a minute). Answers whether more rows may
    /// be waiting, or how long to wait before trying again.
    pub async fn relay_once(&mut self) -> Relayed {
        let conn = match self.conn.get().await {
            Ok(conn) => conn,
            Err(e) => {
                warn!(error = %e, "outbox relay cannot connect; retrying");
                return Relayed::Failed(self.conn.backoff());
            }
        };
        let outcome = match self.work.relay_batch(conn).await {
            Ok(outcome) => outcome,
            Err(e) => {
                warn!(error = %e, "outbox relay batch failed; reconnecting");
                self.conn.lost();
                return Relayed::Failed(self.conn.backoff());
            }
        };
        if self
            .sampled
            .is_none_or(|at| at.elapsed() >= Duration::from_secs(1))
        {
            self.work.sample_backlog(conn).await;
            self.sampled = Some(Instant::now());
        }
        if self.retention.due() {
            self.work.delete_published(conn).await;
        }
        self.conn.worked();
        let full = ((outcome.published + outcome.dead) as i64) >= self.work.settings.batch_size;
        if outcome.failed > 0 {
            Relayed::Failed(self.work.settings.retry_backoff)
        } else if full {
            Relayed::More
        } else {
            Relayed::Drained
        }
    }
}

/// What one [`OutboxRelay::relay_once`] left.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Relayed {
    /// A full batch went out: more rows may be waiting.
    More,
    /// Fewer than a batch: the outbox is drained for now.
    Drained,
    /// Rows or the connection failed: try again after this long.
    Failed(Duration),
}

impl RelayWork {
    /// Claims, publishes and marks one batch.
    async fn relay_batch(&self, conn: &mut AsyncPgConnection) -> diesel::QueryResult<BatchOutcome> {
        let publisher = self.publisher.as_ref();
        let batch_size = self.settings.batch_size;
        let outcome = conn
            .transaction(async |c| {
                let claimed: Vec<Claimed> = diesel::sql_query(CLAIM_SQL)
                    .bind::<diesel::sql_types::Integer, _>(RELAY_LOCK_CLASS)
                    .bind::<BigInt, _>(batch_size)
                    .load(c)
                    .await?;
                if claimed.is_empty() {
                    return Ok(BatchOutcome::default());
                }
                // Each row's fate, in id order: its event, or why none.
                let rows: Vec<(&Claimed, Result<Event, String>)> = claimed
                    .iter()
                    .map(|row| {
                        let event = Event::from_json(row.payload.as_bytes())
                            .map(|e| e.with_trace_parent(row.trace_parent.clone()))
                            .map_err(|e| format!("unreadable payload: {e}"));
                        (row, event)
                    })
                    .collect();
                let span = batch_span(&rows);
                // join_all polls the sends in order, so the producer queues
                // them in id order; the idempotent producer keeps that order
                // per partition.
                let sends = rows.iter().filter_map(|(_, event)| event.as_ref().ok());
                let mut results =
                    join_all(sends.map(|event| publisher.publish(event, PublishMode::Outbox)))
                        .instrument(span)
                        .await
                        .into_iter();
                let mut marks = Marks::default();
                for (row, event) in &rows {
                    let outcome = match event {
                        Ok(_) => results
                            .next()
                            .unwrap_or_else(|| Err(PublishError("no result".into())))
                            .map(|_receipt| ())
                            .map_err(|e| e.to_string()),
                        Err(e) => Err(e.clone()),
                    };
                    marks.add(row, outcome, event.is_err());
                }
                marks.write(c).await
            })
            .await?;
        self.metrics.relayed.inc_by(outcome.published as u64);
        self.metrics.failed.inc_by(outcome.failed as u64);
        self.metrics.dead.inc_by(outcome.dead as u64);
        if outcome.published + outcome.failed > 0 {
            debug!(
                published = outcome.published,
                failed = outcome.failed,
                "outbox batch"
            );
        }
        Ok(outcome)
    }

    async fn sample_backlog(&self, conn: &mut AsyncPgConnection) {
        let backlog = diesel::sql_query(
            "SELECT count(*) AS pending, \
             extract(epoch FROM now() - min(created_at))::float8 AS oldest_age \
             FROM outbox WHERE published_at IS NULL AND dead_at IS NULL",
        )
        .get_result::<Backlog>(conn)
        .await;
        if let Ok(b) = backlog {
            self.metrics.pending.set(b.pending);
            self.metrics
                .oldest_age
                .set(b.oldest_age.unwrap_or(0.0).max(0.0));
        }
    }

    /// Deletes published rows past retention, in bounded batches
    /// ([`delete_in_batches`]); a failure is counted and logged, and the
    /// next minute tries again.
    async fn delete_published(&self, conn: &mut AsyncPgConnection) {
        let retention = Retention {
            sql: RETENTION_SQL,
            keep: self.settings.retention,
            batch: RETENTION_BATCH,
            max_batches: RETENTION_MAX_BATCHES,
            rows: "published outbox rows",
        };
        if !retention.apply(conn).await {
            self.metrics.retention_failures.inc();
        }
    }
}
