//! A connection a background worker keeps for itself, outside every pool:
//! the outbox relay, the receipt ledger and the read marker writer each
//! hold one, so their work never waits behind requests and still runs once
//! the request pools have stopped.
//!
//! [`Dedicated`] opens it when first asked (with the session settings every
//! connection gets, and an `application_name` that names the worker),
//! forgets it after any failure ([`Dedicated::lost`]: a connection that
//! failed is not trusted again) and says how long to wait before the next
//! attempt, doubling from the worker's base to a cap while failures
//! continue ([`Dedicated::backoff`]). [`Chore`] times what such a worker
//! does now and then besides its work (deleting rows past retention), and
//! [`delete_in_batches`] is that deletion, bounded per statement.

use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use diesel::sql_types::{BigInt, Timestamptz};
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use secrecy::{ExposeSecret, SecretString};

use crate::config::SessionSettings;
use crate::database::session_settings::{Setup, connect};
use crate::errors::PersistenceError;

/// The longest pause between attempts, however many failed.
const MAX_BACKOFF: Duration = Duration::from_secs(10);

/// A worker's own connection: opened when needed, dropped after a failure,
/// reopened after a backoff that grows while failures continue.
pub struct Dedicated {
    url: SecretString,
    setup: Setup,
    conn: Option<AsyncPgConnection>,
    /// The pause after one failure; doubled for each further one.
    base: Duration,
    /// Failures since the last success.
    failures: u32,
}

impl std::fmt::Debug for Dedicated {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dedicated")
            .field("connected", &self.conn.is_some())
            .field("failures", &self.failures)
            .finish_non_exhaustive()
    }
}

impl Dedicated {
    /// A connection to `url` for the worker `role` (its sessions show as
    /// `<application_name>-<role>` in `pg_stat_activity`), pausing `base`
    /// after a first failure.
    pub fn new(url: SecretString, session: &SessionSettings, role: &str, base: Duration) -> Self {
        let mut session = session.clone();
        session.application_name = format!("{}-{role}", session.application_name);
        Self {
            url,
            setup: Setup::of(&session),
            conn: None,
            base,
            failures: 0,
        }
    }

    /// Whether a connection is open now.
    pub fn is_open(&self) -> bool {
        self.conn.is_some()
    }

    /// The connection, opened first when there is none. A failed open
    /// counts as a failure (see [`Self::backoff`]).
    pub async fn get(&mut self) -> Result<&mut AsyncPgConnection, PersistenceError> {
        let conn = match self.conn.take() {
            Some(conn) => conn,
            None => match connect(self.url.expose_secret(), &self.setup).await {
                Ok(conn) => conn,
                Err(e) => {
                    self.failures = self.failures.saturating_add(1);
                    return Err(PersistenceError::Connect(Box::new(e)));
                }
            },
        };
        Ok(self.conn.insert(conn))
    }

    /// The work on the connection failed: it is closed and not trusted
    /// again; the next [`Self::get`] opens another.
    pub fn lost(&mut self) {
        self.conn = None;
        self.failures = self.failures.saturating_add(1);
    }

    /// Closes the connection after work that is done with it for a while
    /// (a sweep every few minutes): not a failure; the next
    /// [`Self::get`] opens another.
    pub fn close(&mut self) {
        self.conn = None;
    }

    /// The work on the connection succeeded: the backoff starts over.
    pub fn worked(&mut self) {
        self.failures = 0;
    }

    /// How long to wait before the next attempt: nothing after a success,
    /// the base after one failure, doubled for each further one up to
    /// 10 s (or the base, when that is longer).
    pub fn backoff(&self) -> Duration {
        match self.failures {
            0 => Duration::ZERO,
            n => {
                let doubled = self.base.saturating_mul(1 << (n - 1).min(16));
                doubled.min(MAX_BACKOFF.max(self.base))
            }
        }
    }
}

/// Something a worker does every `period` besides its work (a cleanup),
/// the first time one period after it started.
#[derive(Debug)]
pub struct Chore {
    period: Duration,
    last: Instant,
}

impl Chore {
    /// A chore due every `period`.
    pub fn every(period: Duration) -> Self {
        Self {
            period,
            last: Instant::now(),
        }
    }

    /// True at most once a period: when it is, the period starts again.
    pub fn due(&mut self) -> bool {
        if self.last.elapsed() < self.period {
            return false;
        }
        self.last = Instant::now();
        true
    }
}

/// Deletes rows older than `cutoff` by `sql` (which binds the cutoff as
/// `$1` and a row limit as `$2`), `batch` rows per statement, each its own
/// short transaction (an unbounded DELETE after a long outage would hold
/// its locks and bloat the WAL in one go), at most `max_batches`
/// statements a call (the rest waits for the next); answers the rows
/// deleted.
pub async fn delete_in_batches(
    conn: &mut AsyncPgConnection,
    sql: &str,
    cutoff: DateTime<Utc>,
    batch: i64,
    max_batches: usize,
) -> diesel::QueryResult<u64> {
    let mut deleted = 0u64;
    for _ in 0..max_batches {
        let n = diesel::sql_query(sql)
            .bind::<Timestamptz, _>(cutoff)
            .bind::<BigInt, _>(batch)
            .execute(conn)
            .await?;
        deleted += n as u64;
        if (n as i64) < batch {
            break;
        }
    }
    Ok(deleted)
}

/// A table's retention chore: the rows older than `keep` deleted by `sql`
/// ([`delete_in_batches`]), `batch` a statement, at most `max_batches`.
#[derive(Debug, Clone, Copy)]
pub struct Retention {
    /// Deletes up to `$2` rows older than `$1`.
    pub sql: &'static str,
    /// How long rows are kept.
    pub keep: Duration,
    /// Rows a statement.
    pub batch: i64,
    /// Statements a call.
    pub max_batches: usize,
    /// What the rows are, for the log ("receipts").
    pub rows: &'static str,
}

impl Retention {
    /// Deletes the rows past retention and logs how many went, or why
    /// none could; answers whether it worked (the caller counts a failure
    /// its own way).
    pub async fn apply(&self, conn: &mut AsyncPgConnection) -> bool {
        let done = delete_in_batches(
            conn,
            self.sql,
            cutoff(self.keep),
            self.batch,
            self.max_batches,
        )
        .await;
        match done {
            Ok(0) => true,
            Ok(n) => {
                tracing::debug!(deleted = n, "{} past retention deleted", self.rows);
                true
            }
            Err(e) => {
                tracing::warn!(error = %e, "deleting {} past retention failed", self.rows);
                false
            }
        }
    }
}

/// The instant `retention` before now (now, if it does not fit).
pub fn cutoff(retention: Duration) -> DateTime<Utc> {
    Utc::now() - chrono::Duration::from_std(retention).unwrap_or(chrono::Duration::zero())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dedicated(base_ms: u64) -> Dedicated {
        Dedicated::new(
            SecretString::from("postgres://nowhere"),
            &SessionSettings::default(),
            "test",
            Duration::from_millis(base_ms),
        )
    }

    #[test]
    fn the_backoff_doubles_while_failures_continue_and_starts_over_after_a_success() {
        let mut d = dedicated(100);
        assert_eq!(d.backoff(), Duration::ZERO);
        let waits: Vec<u128> = (0..9)
            .map(|_| {
                d.lost();
                d.backoff().as_millis()
            })
            .collect();
        assert_eq!(waits, [100, 200, 400, 800, 1600, 3200, 6400, 10000, 10000]);
        d.worked();
        assert_eq!(d.backoff(), Duration::ZERO);
        d.lost();
        assert_eq!(d.backoff(), Duration::from_millis(100));
    }

    #[test]
    fn a_base_longer_than_the_cap_is_kept() {
        let mut d = dedicated(30_000);
        d.lost();
        d.lost();
        assert_eq!(d.backoff(), Duration::from_secs(30));
    }

    #[tokio::test]
    async fn a_failed_open_counts_as_a_failure() {
        let mut d = Dedicated::new(
            // Port 1 on loopback: refused at once.
            SecretString::from("postgres://postgres@127.0.0.1:1/none"),
            &SessionSettings::default(),
            "test",
            Duration::from_millis(50),
        );
        assert!(d.get().await.is_err());
        assert!(!d.is_open());
        assert_eq!(d.backoff(), Duration::from_millis(50));
    }

    #[test]
    fn a_chore_is_due_once_a_period() {
        let mut chore = Chore::every(Duration::ZERO);
        assert!(chore.due());
        let mut chore = Chore::every(Duration::from_secs(3600));
        assert!(!chore.due(), "not before its first period");
    }
}
