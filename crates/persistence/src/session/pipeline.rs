//! Pipelined statements: sent on one connection without waiting for each
//! answer, so a transaction of several statements costs one flight.
//!
//! diesel-async pipelines the futures of one `&AsyncPgConnection` that are
//! polled together: each, on its first poll, takes its prepared statement
//! from the connection's statement cache and hands its Bind/Execute to
//! tokio-postgres, which writes them out while the server answers the
//! earlier ones. The cache sits behind a FIFO lock, so statements go out in
//! the order their futures are first polled, even when one must first be
//! prepared (a flight of its own, once per connection). BEGIN, COMMIT and
//! ROLLBACK go through the same cache ([`crate::queries::Begin`]), so COMMIT
//! never overtakes a statement of its transaction.
//!
//! diesel's blocking `PgConnection` has no pipeline: libpq's pipeline mode
//! (`PQenterPipelineMode`, PostgreSQL 14) needs the raw `PGconn`, which
//! diesel keeps private, and its results read per statement with
//! `PQgetResult` up to each `PGRES_PIPELINE_SYNC`. So there the same
//! statements run one by one, and the round trips say so.

use std::sync::atomic::{AtomicBool, Ordering};

use diesel::QueryResult;
use diesel::connection::TransactionManagerStatus;
use diesel::pg::{Pg, PgConnection};
use diesel::query_builder::{QueryFragment, QueryId};
use diesel::query_dsl::methods::ExecuteDsl;
use diesel_async::{
    AnsiTransactionManager as AsyncTxManager, AsyncConnectionCore as _, AsyncPgConnection,
    TransactionManager as _,
};
use futures_util::FutureExt as _;
use futures_util::future::{BoxFuture, join, join_all};

use tracing::Instrument as _;

use super::{Conn, DbSession};
use crate::queries::{Begin, Commit, Rollback};
use crate::spans;

/// A statement that returns no rows, boxed so statements of different
/// types travel together, and runnable on either driver: alone
/// ([`DbSession::run`]), or with others in one flight
/// ([`DbSession::pipelined`]).
pub struct Executable(Box<dyn ExecutableStatement>);

impl Executable {
    /// A statement that returns no rows.
    pub fn new<Q>(query: Q) -> Self
    where
        Q: QueryFragment<Pg> + QueryId + ExecuteDsl<PgConnection> + Send + 'static,
    {
        Self(Box::new(query))
    }
}

impl std::fmt::Debug for Executable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Executable")
    }
}

/// What a statement needs to be sent on either connection.
trait ExecutableStatement: Send {
    /// The statement's future on `conn`; nothing is sent before its first
    /// poll.
    fn send<'c>(self: Box<Self>, conn: &'c AsyncPgConnection) -> BoxFuture<'c, QueryResult<usize>>;
    /// Runs the statement to completion on the blocking connection.
    fn run(self: Box<Self>, conn: &mut PgConnection) -> QueryResult<usize>;
    /// The statement's span, described.
    fn span(&self) -> tracing::Span;
}

impl<Q> ExecutableStatement for Q
where
    Q: QueryFragment<Pg> + QueryId + ExecuteDsl<PgConnection> + Send + 'static,
{
    fn send<'c>(
        self: Box<Self>,
        mut conn: &'c AsyncPgConnection,
    ) -> BoxFuture<'c, QueryResult<usize>> {
        (&mut conn).execute_returning_count(*self)
    }

    fn run(self: Box<Self>, conn: &mut PgConnection) -> QueryResult<usize> {
        ExecuteDsl::execute(*self, conn)
    }

    fn span(&self) -> tracing::Span {
        spans::statement_for(self)
    }
}

impl Executable {
    /// The statement's future on `conn`, in its own span.
    fn send(self, conn: &AsyncPgConnection) -> impl Future<Output = QueryResult<usize>> + '_ {
        let span = self.0.span();
        let sent = self.0.send(conn).instrument(span.clone());
        sent.inspect(move |result| spans::outcome(&span, result, |n| *n))
    }
}

/// What a pipeline did: the rows each statement affected, in order (the
/// session counts its round trips, [`DbSession::round_trips`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pipelined {
    /// Rows each statement affected, in order.
    pub rows: Vec<usize>,
}

impl DbSession {
    /// Sends `statements` in one flight inside the transaction already
    /// open on this session, and waits for every answer. The first error in
    /// statement order is returned (the later statements then failed only
    /// because the transaction was aborted); the caller's transaction rolls
    /// back. On the blocking driver they run one by one.
    pub async fn pipelined(&mut self, statements: Vec<Executable>) -> QueryResult<Pipelined> {
        let count = statements.len() as u64;
        match self.async_conn() {
            Some(conn) => {
                // The first error in statement order is the cause.
                let rows: Vec<usize> = send_all(conn, statements)
                    .await
                    .into_iter()
                    .collect::<QueryResult<_>>()?;
                self.count(count, rows.iter().sum::<usize>() as u64);
                self.travelled(1);
                Ok(Pipelined { rows })
            }
            None => {
                let mut rows = Vec::with_capacity(statements.len());
                for statement in statements {
                    rows.push(self.run_one(statement).await?);
                }
                self.count(count, rows.iter().sum::<usize>() as u64);
                Ok(Pipelined { rows })
            }
        }
    }

    /// BEGIN, `statements` and COMMIT in one flight: a transaction for one
    /// round trip. A statement that fails aborts the transaction, so the
    /// COMMIT behind it rolls back (PostgreSQL answers it with ROLLBACK),
    /// and its error is returned: nothing is written. A statement that
    /// fails before it is sent (its SQL or binds could not be built) fails
    /// on its first poll, before COMMIT's turn, which then sends ROLLBACK.
    ///
    /// Until COMMIT's answer arrives, the connection's transaction manager
    /// is marked in error: diesel does not know of this BEGIN, so a session
    /// dropped mid-flight would otherwise go back to its pool inside an
    /// open transaction. Marked, the pool discards it, as it does any
    /// connection dropped mid-transaction.
    ///
    /// On the blocking driver this is [`DbSession::transaction`] around the
    /// statements, one round trip each.
    pub async fn pipelined_transaction(
        &mut self,
        statements: Vec<Executable>,
    ) -> QueryResult<Pipelined> {
        let count = statements.len() as u64;
        let before = self.counts();
        let Some(conn) = self.async_conn() else {
            return self
                .transaction(async |s| s.pipelined(statements).await)
                .await;
        };
        let span = spans::transaction();
        let sent: QueryResult<Vec<usize>> = async {
            *AsyncTxManager::transaction_manager_status_mut(conn) =
                TransactionManagerStatus::InError;
            let mut all = Vec::with_capacity(statements.len() + 1);
            all.push(Executable::new(Begin));
            all.extend(statements);
            let (results, ended) = send_then_end(conn, all).await;
            if ended.is_ok() {
                *AsyncTxManager::transaction_manager_status_mut(conn) =
                    TransactionManagerStatus::Valid(Default::default());
            }
            let mut rows: Vec<usize> = results.into_iter().collect::<QueryResult<_>>()?;
            ended?;
            rows.remove(0);
            Ok(rows)
        }
        .instrument(span.clone())
        .await;
        self.travelled(1);
        if let Ok(rows) = &sent {
            self.count(count, rows.iter().sum::<usize>() as u64);
        }
        self.close_transaction_span(&span, before, sent.is_ok());
        Ok(Pipelined { rows: sent? })
    }

    /// Runs one erased statement (a multi-row write's, see
    /// [`crate::writes::row_writes`]) and waits for its answer: one round trip.
    pub(crate) async fn run(&mut self, statement: Executable) -> QueryResult<usize> {
        let result = self.run_one(statement).await;
        self.count(1, result.as_ref().map_or(0, |n| *n as u64));
        result
    }

    /// Runs one statement to its end on this session's connection.
    async fn run_one(&mut self, statement: Executable) -> QueryResult<usize> {
        self.travelled(1);
        let span = statement.0.span();
        let result = async {
            on_conn!(self,
                c => statement.0.send(c).await,
                c => statement.0.run(c))
        }
        .instrument(span.clone())
        .await;
        spans::outcome(&span, &result, |n| *n);
        result
    }

    /// The async driver's connection, or `None` on the blocking driver.
    fn async_conn(&mut self) -> Option<&mut AsyncPgConnection> {
        match &mut self.conn {
            Conn::AsyncPooled(pooled) => Some(&mut **pooled),
            Conn::AsyncOwned(conn) => Some(conn),
            Conn::BlockingPooled(_) | Conn::BlockingOwned(_) => None,
        }
    }
}

/// Sends every statement, their futures polled together in order, and
/// collects the answers.
async fn send_all(
    conn: &AsyncPgConnection,
    statements: Vec<Executable>,
) -> Vec<QueryResult<usize>> {
    join_all(statements.into_iter().map(|s| s.send(conn))).await
}

/// [`send_all`], then COMMIT in the same flight, or ROLLBACK when a
/// statement has already failed by the time the end's turn comes. Answers
/// the statements' results and the end's.
async fn send_then_end(
    conn: &AsyncPgConnection,
    statements: Vec<Executable>,
) -> (Vec<QueryResult<usize>>, QueryResult<usize>) {
    let failed = &AtomicBool::new(false);
    let sent = join_all(statements.into_iter().map(|s| {
        s.send(conn).inspect(move |r| {
            if r.is_err() {
                failed.store(true, Ordering::Relaxed);
            }
        })
    }));
    let end = async move {
        // First polled after every statement's first poll (`join` polls
        // its first future first, and `join_all` polls in order): one that
        // failed before it was sent has said so by now.
        let end = if failed.load(Ordering::Relaxed) {
            Executable::new(Rollback)
        } else {
            Executable::new(Commit)
        };
        end.send(conn).await
    };
    join(sent, end).await
}
