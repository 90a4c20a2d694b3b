//! The session: one connection and its statements ([`DbSession`]), its
//! transactions, and pipelined statements ([`pipeline`]).
//!
//! [`DbSession`]: one connection, whichever driver opened it, with the
//! statement methods every repository query goes through.
//!
//! The repository's SQL is written once, as diesel query values, and run
//! here: on diesel-async's `AsyncPgConnection` the call awaits; on diesel's
//! blocking `PgConnection` it runs to completion on the calling thread (a
//! thread of the blocking pool, see [`crate::database`]). A unit of work is
//! an async block either way; on the blocking driver it never yields except
//! where it waits for the broker (`in_tx_await`), and then it blocks its
//! thread, as a JDBC request thread would.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Instant;

use diesel::QueryResult;
use diesel::connection::{AnsiTransactionManager as SyncTxManager, TransactionManager as _};
use diesel::pg::{Pg, PgConnection};
use diesel::query_builder::{QueryFragment, QueryId};
use diesel::query_dsl::methods::ExecuteDsl;
use diesel_async::pooled_connection::AsyncDieselConnectionManager;
use diesel_async::{
    AnsiTransactionManager as AsyncTxManager, AsyncPgConnection, TransactionManager as _,
};
use tokio::sync::OwnedSemaphorePermit;
use tracing::Instrument as _;

use crate::database::blocking_manager::BlockingManager;
use crate::database::pool_metrics::{PoolMetrics, TraceLabel, secs};
use crate::spans;

/// A pooled diesel-async connection.
pub(crate) type AsyncPooled =
    bb8::PooledConnection<'static, AsyncDieselConnectionManager<AsyncPgConnection>>;

/// A pooled blocking connection.
pub(crate) type BlockingPooled = r2d2::PooledConnection<BlockingManager>;

/// A query both drivers can load rows of type `U` from: any diesel select
/// (or `sql_query`) that owns its bind values.
pub trait Loadable<U>:
    diesel::RunQueryDsl<PgConnection>
    + diesel::query_dsl::LoadQuery<'static, PgConnection, U>
    + diesel_async::methods::LoadQuery<'static, AsyncPgConnection, U>
    + QueryFragment<Pg>
    + Send
    + 'static
{
}

impl<Q, U> Loadable<U> for Q where
    Q: diesel::RunQueryDsl<PgConnection>
        + diesel::query_dsl::LoadQuery<'static, PgConnection, U>
        + diesel_async::methods::LoadQuery<'static, AsyncPgConnection, U>
        + QueryFragment<Pg>
        + Send
        + 'static
{
}

/// Runs the first expression with `c: &mut AsyncPgConnection` or the
/// second with `c: &mut PgConnection`, by the session's connection.
macro_rules! on_conn {
    ($session:expr, $a:ident => $on_async:expr, $b:ident => $on_blocking:expr) => {
        match &mut $session.conn {
            Conn::AsyncPooled(pooled) => {
                let $a: &mut AsyncPgConnection = &mut *pooled;
                $on_async
            }
            Conn::AsyncOwned($a) => $on_async,
            Conn::BlockingPooled(pooled) => {
                let $b: &mut PgConnection = &mut *pooled;
                $on_blocking
            }
            Conn::BlockingOwned($b) => $on_blocking,
        }
    };
}

mod pipeline;

pub use pipeline::{Executable, Pipelined};

/// The connection a session runs on.
pub(crate) enum Conn {
    /// From the bb8 pool.
    AsyncPooled(AsyncPooled),
    /// Opened for this unit of work; closed when the session drops.
    AsyncOwned(AsyncPgConnection),
    /// From the r2d2 pool.
    BlockingPooled(BlockingPooled),
    /// Opened for this unit of work; closed when the session drops.
    BlockingOwned(PgConnection),
}

/// A connection checked out (or opened) for one unit of work. Records the
/// connection's use time when dropped, the moment it goes back to its pool
/// or is closed.
pub struct DbSession {
    // Fields drop in order: the connection goes back to its pool before
    // the permit lets the next caller in the queue ask for one.
    conn: Conn,
    _permit: Option<OwnedSemaphorePermit>,
    since: Instant,
    metrics: Arc<PoolMetrics>,
    /// Unpooled only: the count of open connections this one is part of.
    live: Option<Arc<AtomicU32>>,
    /// The connection-use span (disabled until [`DbSession::held_in`]).
    span: tracing::Span,
    /// Statements run and rows they touched, for the transaction spans.
    statements: u64,
    rows: u64,
    /// Round trips to the server: every statement, BEGIN and COMMIT its
    /// own, a pipelined flight one.
    round_trips: u64,
    /// The caller's watch on this unit's answers, when it has one.
    progress: Option<Arc<crate::database::Progress>>,
}

impl DbSession {
    pub(crate) fn new(
        conn: Conn,
        permit: Option<OwnedSemaphorePermit>,
        metrics: Arc<PoolMetrics>,
        live: Option<Arc<AtomicU32>>,
    ) -> Self {
        Self {
            conn,
            _permit: permit,
            since: Instant::now(),
            metrics,
            live,
            span: tracing::Span::none(),
            statements: 0,
            rows: 0,
            round_trips: 0,
            progress: None,
        }
    }

    /// Marks `span` as the span of this session's hold on its connection:
    /// it closes when the session drops, and the use-time observation
    /// carries its trace as an exemplar.
    pub(crate) fn held_in(&mut self, span: tracing::Span) {
        self.span = span;
    }

    /// Counts statements and rows for the enclosing transaction's span.
    pub(crate) fn count(&mut self, statements: u64, rows: u64) {
        self.statements += statements;
        self.rows += rows;
    }

    /// Counts `n` round trips (each ended with an answer).
    pub(crate) fn travelled(&mut self, n: u64) {
        self.round_trips += n;
        self.answered();
    }

    /// Tells the caller's stall watch that the unit heard from PostgreSQL
    /// (or, at its start, holds its connection), or from the broker it
    /// waits on inside the transaction.
    pub(crate) fn answered(&self) {
        if let Some(p) = &self.progress {
            p.answered();
        }
    }

    /// Puts the unit under its caller's stall watch, and starts it.
    pub(crate) fn watched_by(&mut self, progress: Arc<crate::database::Progress>) {
        progress.answered();
        self.progress = Some(progress);
    }

    /// Round trips this session has made so far: the one place a write's
    /// round trips are counted (each statement, BEGIN, COMMIT and ROLLBACK
    /// one, a pipelined flight one; a VALUES statement on the async driver
    /// and a COPY two, see [`crate::writes::row_writes`]), as a hop counts them on
    /// the wire. Recorded on the connection-use span as
    /// `chatlab.round_trips` when the connection goes back.
    pub(crate) fn round_trips(&self) -> u64 {
        self.round_trips
    }

    /// Whether the connection is diesel-async's (else diesel's blocking
    /// one).
    pub(crate) fn on_async_driver(&self) -> bool {
        matches!(self.conn, Conn::AsyncPooled(_) | Conn::AsyncOwned(_))
    }

    /// How long this session has held its connection.
    pub fn held_for(&self) -> std::time::Duration {
        self.since.elapsed()
    }

    /// Runs a statement that returns no rows; returns the rows it affected.
    pub async fn execute<Q>(&mut self, query: Q) -> QueryResult<usize>
    where
        Q: QueryFragment<Pg> + QueryId + ExecuteDsl<PgConnection> + Send,
    {
        let span = spans::statement_for(&query);
        let result = async {
            on_conn!(self,
                c => diesel_async::RunQueryDsl::execute(query, c).await,
                c => ExecuteDsl::execute(query, c))
        }
        .instrument(span.clone())
        .await;
        spans::outcome(&span, &result, |n| *n);
        self.travelled(1);
        self.count(1, result.as_ref().map_or(0, |n| *n as u64));
        result
    }

    /// Runs the `COPY ... FROM STDIN` that `copy` sends on the blocking
    /// driver's connection (diesel's `copy_from`); answers the rows it
    /// wrote. The async driver cannot send one (diesel-async has no COPY,
    /// and keeps its tokio-postgres client private): there it fails before
    /// sending anything. The API refuses `copy` on such a server before a
    /// request gets here.
    pub async fn copy_in<F>(&mut self, table: &str, copy: F) -> QueryResult<usize>
    where
        F: FnOnce(&mut PgConnection) -> QueryResult<usize>,
    {
        let span = spans::statement();
        if !span.is_disabled() {
            spans::describe(&span, &format!("COPY {table} FROM STDIN (FORMAT binary)"));
        }
        let result = span.in_scope(|| {
            on_conn!(self,
                _c => Err(diesel::result::Error::QueryBuilderError(
                    "COPY needs DB_DRIVER=blocking: diesel-async has no COPY".into(),
                )),
                c => copy(c))
        });
        spans::outcome(&span, &result, |n| *n);
        self.travelled(1);
        self.count(1, result.as_ref().map_or(0, |n| *n as u64));
        result
    }

    /// Runs a query and collects its rows.
    pub async fn load<Q, U>(&mut self, query: Q) -> QueryResult<Vec<U>>
    where
        Q: Loadable<U>,
        U: Send + 'static,
    {
        let span = spans::statement_for(&query);
        let result = async {
            on_conn!(self,
                c => diesel_async::RunQueryDsl::load(query, c).await,
                c => diesel::RunQueryDsl::load(query, c))
        }
        .instrument(span.clone())
        .await;
        spans::returned(&span, &result);
        self.travelled(1);
        self.count(1, result.as_ref().map_or(0, |r| r.len() as u64));
        result
    }

    /// Runs a query that returns exactly one row.
    pub async fn get_result<Q, U>(&mut self, query: Q) -> QueryResult<U>
    where
        Q: Loadable<U>,
        U: Send + 'static,
    {
        self.optional(query)
            .await?
            .ok_or(diesel::result::Error::NotFound)
    }

    /// Runs a query that returns at most one row (add `.limit(1)` where
    /// more could match).
    pub async fn optional<Q, U>(&mut self, query: Q) -> QueryResult<Option<U>>
    where
        Q: Loadable<U>,
        U: Send + 'static,
    {
        Ok(self.load(query).await?.into_iter().next())
    }

    /// BEGIN, COMMIT or ROLLBACK through the driver's transaction
    /// manager (which keeps its own account of the transaction), in a span
    /// of its own.
    async fn control(&mut self, op: Control) -> QueryResult<()> {
        self.travelled(1);
        let span = spans::statement();
        if !span.is_disabled() {
            spans::describe(&span, op.sql());
        }
        async {
            on_conn!(self,
            c => match op {
                Control::Begin => AsyncTxManager::begin_transaction(c).await,
                Control::Commit => AsyncTxManager::commit_transaction(c).await,
                Control::Rollback => AsyncTxManager::rollback_transaction(c).await,
            },
            c => match op {
                Control::Begin => SyncTxManager::begin_transaction(c),
                Control::Commit => SyncTxManager::commit_transaction(c),
                Control::Rollback => SyncTxManager::rollback_transaction(c),
            })
        }
        .instrument(span)
        .await
    }

    /// Runs `body` in a transaction on this session, whichever driver
    /// opened it: BEGIN, the body, then COMMIT when it returns `Ok` and
    /// ROLLBACK when it returns `Err`. The body's result is returned, or the
    /// COMMIT's error. With [`DbSession::pipelined_transaction`] (which
    /// sends its BEGIN and COMMIT in one flight), the only way to open a
    /// transaction, so no path can forget to end one.
    ///
    /// ```ignore
    /// s.transaction(async |s| {
    ///     s.execute(first).await?;
    ///     s.execute(second).await
    /// })
    /// .await
    /// ```
    ///
    /// A failed ROLLBACK is logged and the body's error returned: the
    /// connection is then marked broken and its pool discards it. So is a
    /// session dropped mid-transaction (a cancelled request): its
    /// transaction manager is left mid-transaction, which both pools treat
    /// as broken, so no open transaction is reused.
    pub async fn transaction<R, E, F>(&mut self, body: F) -> Result<R, E>
    where
        F: AsyncFnOnce(&mut DbSession) -> Result<R, E>,
        E: From<diesel::result::Error>,
    {
        let span = spans::transaction();
        let before = (self.statements, self.rows);
        let outcome = self
            .transaction_unspanned(body)
            .instrument(span.clone())
            .await;
        self.close_transaction_span(&span, before, outcome.is_ok());
        outcome
    }

    /// Records on a transaction's span what ran in it.
    pub(crate) fn close_transaction_span(
        &self,
        span: &tracing::Span,
        (statements, rows): (u64, u64),
        committed: bool,
    ) {
        if span.is_disabled() {
            return;
        }
        span.record("chatlab.statements", self.statements - statements);
        span.record("chatlab.rows", self.rows - rows);
        span.record(
            "chatlab.outcome",
            if committed {
                "committed"
            } else {
                "rolled_back"
            },
        );
    }

    /// Statement and row counts so far, for [`DbSession::close_transaction_span`].
    pub(crate) fn counts(&self) -> (u64, u64) {
        (self.statements, self.rows)
    }

    async fn transaction_unspanned<R, E, F>(&mut self, body: F) -> Result<R, E>
    where
        F: AsyncFnOnce(&mut DbSession) -> Result<R, E>,
        E: From<diesel::result::Error>,
    {
        self.control(Control::Begin).await?;
        let outcome = body(self).await;
        match outcome {
            Ok(value) => {
                self.control(Control::Commit).await?;
                Ok(value)
            }
            Err(e) => {
                if let Err(rollback) = self.control(Control::Rollback).await {
                    tracing::warn!(error = %rollback, "rollback failed; the connection is discarded");
                }
                Err(e)
            }
        }
    }
}

/// The statements that open and end a transaction.
#[derive(Debug, Clone, Copy)]
enum Control {
    Begin,
    Commit,
    Rollback,
}

impl Control {
    fn sql(self) -> &'static str {
        match self {
            Self::Begin => "BEGIN",
            Self::Commit => "COMMIT",
            Self::Rollback => "ROLLBACK",
        }
    }
}

impl Drop for DbSession {
    fn drop(&mut self) {
        if !self.span.is_disabled() {
            self.span.record("chatlab.round_trips", self.round_trips);
        }
        self.metrics
            .use_time
            .observe(secs(self.since.elapsed()), TraceLabel::of(&self.span), None);
        if let Some(live) = &self.live {
            live.fetch_sub(1, Ordering::Relaxed);
        }
    }
}
