//! Is a transaction pooler between chatlab and PostgreSQL? Asked once at
//! startup, so settings that cannot work behind one (session `SET`s, a
//! statement cache, the async driver's prepare in a Sync of its own) are
//! refused before the first request fails, not found in its 500s.
//!
//! A client connection has one backend for its life when it reaches
//! PostgreSQL itself or a session pooler: `pg_backend_pid()` answers the
//! same pid every time. A transaction pooler hands it whichever server
//! connection is free at each transaction. The probe makes that visible:
//! client A asks for its pid; client B opens a transaction and holds it
//! (a transaction pooler gives B the server A just released, the most
//! recently used, as PgBouncer does by default); A asks again. Straight,
//! A's pid is the same; through a transaction pooler it is another
//! server's, or A waits until B lets go (a pooler of one server), and
//! then answers from whichever server is free. Three rounds, in case the
//! pooler hands B another server (`server_round_robin`).
//!
//! It talks through two blocking connections with their statement cache
//! off: libpq sends each statement's parse, bind and execute in one flight,
//! which any pooler serves.

use std::time::{Duration, Instant};

use diesel::connection::{CacheSize, Connection, SimpleConnection};
use diesel::pg::PgConnection;
use diesel::sql_types::Integer;
use diesel::{QueryResult, RunQueryDsl};

use crate::errors::PersistenceError;

/// What the probe found between chatlab and PostgreSQL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pooling {
    /// One backend per client connection: PostgreSQL itself, or a pooler in
    /// session mode.
    SessionPerConnection,
    /// A client connection moved from backend `before` to `after` between
    /// two transactions: a transaction (or statement) pooler.
    TransactionPooler {
        /// The backend of the first transaction.
        before: i32,
        /// The backend of a later one.
        after: i32,
    },
}

/// Rounds the probe tries before it answers [`Pooling::SessionPerConnection`].
const ROUNDS: usize = 3;

/// How long A's second question may wait while B holds its transaction
/// before B lets go (only a pooler makes it wait at all).
const HOLD: Duration = Duration::from_secs(1);

#[derive(diesel::QueryableByName)]
struct Pid {
    #[diesel(sql_type = Integer)]
    pid: i32,
}

/// Probes `url` (blocking: call it from `spawn_blocking`). Answers an
/// error when it cannot connect or a statement fails.
pub fn probe(url: &str) -> Result<Pooling, PersistenceError> {
    let mut a = open(url)?;
    let mut b = open(url)?;
    for _ in 0..ROUNDS {
        let before = pid(&mut a)?;
        b.batch_execute("BEGIN")?;
        pid(&mut b)?;
        let after = std::thread::scope(|scope| {
            let asked = scope.spawn(|| pid(&mut a));
            let deadline = Instant::now() + HOLD;
            while !asked.is_finished() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(5));
            }
            let ended = b.batch_execute("ROLLBACK");
            let after = asked.join().map_err(|_| {
                PersistenceError::Worker("the pooler probe's thread panicked".into())
            })?;
            ended?;
            Ok::<_, PersistenceError>(after?)
        })?;
        if after != before {
            return Ok(Pooling::TransactionPooler { before, after });
        }
    }
    Ok(Pooling::SessionPerConnection)
}

/// A connection that prepares nothing it keeps.
fn open(url: &str) -> Result<PgConnection, PersistenceError> {
    let mut conn = PgConnection::establish(url)?;
    conn.set_prepared_statement_cache_size(CacheSize::Disabled);
    Ok(conn)
}

/// The backend serving `conn`'s statement.
fn pid(conn: &mut PgConnection) -> QueryResult<i32> {
    diesel::sql_query("SELECT pg_backend_pid() AS pid")
        .get_result::<Pid>(conn)
        .map(|p| p.pid)
}
