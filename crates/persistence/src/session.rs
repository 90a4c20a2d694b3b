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

use crate::blocking_manager::BlockingManager;
use crate::pool_metrics::{PoolMetrics, secs};

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
    + Send
    + 'static
{
}

impl<Q, U> Loadable<U> for Q where
    Q: diesel::RunQueryDsl<PgConnection>
        + diesel::query_dsl::LoadQuery<'static, PgConnection, U>
        + diesel_async::methods::LoadQuery<'static, AsyncPgConnection, U>
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

pub use pipeline::{Piped, Pipelined};

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
        }
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
        on_conn!(self,
            c => diesel_async::RunQueryDsl::execute(query, c).await,
            c => ExecuteDsl::execute(query, c))
    }

    /// Runs a query and collects its rows.
    pub async fn load<Q, U>(&mut self, query: Q) -> QueryResult<Vec<U>>
    where
        Q: Loadable<U>,
        U: Send + 'static,
    {
        on_conn!(self,
            c => diesel_async::RunQueryDsl::load(query, c).await,
            c => diesel::RunQueryDsl::load(query, c))
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

    async fn commit(&mut self) -> QueryResult<()> {
        on_conn!(self,
            c => AsyncTxManager::commit_transaction(c).await,
            c => SyncTxManager::commit_transaction(c))
    }

    async fn rollback(&mut self) -> QueryResult<()> {
        on_conn!(self,
            c => AsyncTxManager::rollback_transaction(c).await,
            c => SyncTxManager::rollback_transaction(c))
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
        self.begin().await?;
        let outcome = body(self).await;
        match outcome {
            Ok(value) => {
                self.commit().await?;
                Ok(value)
            }
            Err(e) => {
                if let Err(rollback) = self.rollback().await {
                    tracing::warn!(error = %rollback, "rollback failed; the connection is discarded");
                }
                Err(e)
            }
        }
    }

    async fn begin(&mut self) -> QueryResult<()> {
        on_conn!(self,
            c => AsyncTxManager::begin_transaction(c).await,
            c => SyncTxManager::begin_transaction(c))
    }
}

impl Drop for DbSession {
    fn drop(&mut self) {
        self.metrics.use_time.observe(secs(self.since.elapsed()));
        if let Some(live) = &self.live {
            live.fetch_sub(1, Ordering::Relaxed);
        }
    }
}
