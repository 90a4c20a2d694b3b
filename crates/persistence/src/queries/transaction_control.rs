//! BEGIN, COMMIT and ROLLBACK as prepared statements, for the pipelined
//! transaction.
//!
//! diesel's transaction manager sends BEGIN and COMMIT with the simple
//! query protocol, which skips diesel-async's statement cache. The
//! pipelined transaction sends them through that cache on purpose: every
//! statement then takes its turn at the cache's lock in the order its
//! future was first polled, so COMMIT can never overtake a statement still
//! being prepared (see [`crate::session::DbSession::pipelined_transaction`]).
//! PostgreSQL accepts transaction control in the extended protocol, and a
//! fixed text with a static [`QueryId`] is prepared once per connection.

use diesel::QueryResult;
use diesel::pg::Pg;
use diesel::query_builder::{AstPass, QueryFragment, QueryId};

/// `BEGIN`, prepared.
#[derive(Debug, Clone, Copy, QueryId)]
pub struct Begin;

/// `ROLLBACK`, prepared: ends a pipelined transaction in which a statement
/// failed before it was sent.
#[derive(Debug, Clone, Copy, QueryId)]
pub struct Rollback;

/// `COMMIT`, prepared. In a transaction that a failed statement aborted,
/// PostgreSQL answers it with ROLLBACK and no error: the failed statement's
/// own error says what happened.
#[derive(Debug, Clone, Copy, QueryId)]
pub struct Commit;

impl QueryFragment<Pg> for Begin {
    fn walk_ast<'b>(&'b self, mut out: AstPass<'_, 'b, Pg>) -> QueryResult<()> {
        out.push_sql("BEGIN");
        Ok(())
    }
}

impl QueryFragment<Pg> for Commit {
    fn walk_ast<'b>(&'b self, mut out: AstPass<'_, 'b, Pg>) -> QueryResult<()> {
        out.push_sql("COMMIT");
        Ok(())
    }
}

impl QueryFragment<Pg> for Rollback {
    fn walk_ast<'b>(&'b self, mut out: AstPass<'_, 'b, Pg>) -> QueryResult<()> {
        out.push_sql("ROLLBACK");
        Ok(())
    }
}
