//! How a write travels: the insert strategy (here) and its plan
//! ([`write_plan`]), the one place a strategy is described.
//!
//! How createChat writes its member rows. The strategies write exactly the
//! same rows; they differ in statements, round trips and server work.

pub mod write_plan;

use std::fmt;
use std::str::FromStr;

/// The member insert strategy of createChat (`CHAT_INSERT_STRATEGY`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum InsertStrategy {
    /// One single-row INSERT per member: N round trips, one cached prepared
    /// statement reused N times: the baseline the others are measured
    /// against.
    PerRow,
    /// One multi-row `INSERT ... VALUES (..), (..)` per chunk of rows, chunked
    /// below PostgreSQL's 65,535 bind parameters. Its SQL text changes with
    /// the row count, so it is parsed and planned afresh every time.
    #[default]
    Batch,
    /// `batch`'s multi-row `INSERT ... VALUES`, its rows split into blocks
    /// whose sizes are powers of two (pgjdbc's `reWriteBatchedInserts`
    /// shape): each block size is one cached prepared statement, so no
    /// request parses SQL, and the blocks of one write go in one flight on
    /// the async driver (one by one on the blocking one).
    BatchPrepared,
    /// One `INSERT ... SELECT ... FROM unnest($n::uuid[])`: three bind
    /// parameters for any member count, one cached prepared statement.
    Unnest,
    /// The whole createChat as one statement (data-modifying CTEs around an
    /// `unnest` of the members, and the outbox row in outbox mode): one
    /// round trip, and no BEGIN/COMMIT of its own where the publish mode
    /// needs no open transaction. Member inserts alone (import jobs) go as
    /// `unnest`.
    Single,
    /// `unnest`'s statements, BEGIN to COMMIT, sent without waiting for
    /// each answer: one flight on the async driver (diesel-async pipelines
    /// futures polled together on one connection). Where the publish mode
    /// holds the transaction open for the broker, the statements are one
    /// flight between BEGIN and COMMIT. The blocking driver has no pipeline
    /// (diesel's `PgConnection` does not expose libpq's pipeline mode), so
    /// there it sends the same statements one by one. Member inserts alone
    /// (import jobs) go as `unnest`.
    Pipeline,
    /// The rows (members, inbox rows, an import chunk's messages) as one
    /// binary `COPY ... FROM STDIN` inside the transaction, the chat row
    /// and the system message as `unnest` writes them. Only the blocking
    /// driver can send it (diesel's `PgConnection::copy_from`):
    /// diesel-async 0.9 has no COPY and keeps its tokio-postgres client
    /// private, so on the async driver the strategy is refused
    /// ([`InsertStrategy::needs_blocking_driver`]).
    Copy,
}

impl InsertStrategy {
    /// Every strategy, in a stable order.
    pub const ALL: [InsertStrategy; 7] = [
        Self::PerRow,
        Self::Batch,
        Self::BatchPrepared,
        Self::Unnest,
        Self::Single,
        Self::Pipeline,
        Self::Copy,
    ];

    /// Whether only the blocking driver can run it (`copy`).
    pub const fn needs_blocking_driver(self) -> bool {
        self.plan().rows.needs_blocking_driver()
    }

    /// The name used in env vars, headers, metrics labels and logs.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::PerRow => "per_row",
            Self::Batch => "batch",
            Self::BatchPrepared => "batch_prepared",
            Self::Unnest => "unnest",
            Self::Single => "single",
            Self::Pipeline => "pipeline",
            Self::Copy => "copy",
        }
    }
}

impl fmt::Display for InsertStrategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A strategy name that is not one of [`InsertStrategy::ALL`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown insert strategy {0:?}: expected one of per_row, batch, batch_prepared, unnest, single, pipeline, copy"
)]
pub struct UnknownStrategy(pub String);

impl FromStr for InsertStrategy {
    type Err = UnknownStrategy;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "per_row" | "per-row" | "perrow" => Ok(Self::PerRow),
            "batch" => Ok(Self::Batch),
            "batch_prepared" | "batch-prepared" => Ok(Self::BatchPrepared),
            "unnest" => Ok(Self::Unnest),
            "single" => Ok(Self::Single),
            "pipeline" => Ok(Self::Pipeline),
            "copy" => Ok(Self::Copy),
            _ => Err(UnknownStrategy(s.to_owned())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for s in InsertStrategy::ALL {
            assert_eq!(s.as_str().parse::<InsertStrategy>(), Ok(s));
        }
        assert_eq!(
            " Per-Row ".parse::<InsertStrategy>(),
            Ok(InsertStrategy::PerRow)
        );
        assert!("bulk".parse::<InsertStrategy>().is_err());
    }
}
