//! The outbox insert, serialised per chat.

use chrono::{DateTime, Utc};
use diesel::QueryResult;
use diesel::pg::Pg;
use diesel::query_builder::{AstPass, QueryFragment, QueryId};
use diesel::sql_types::{Integer, Nullable, Text, Timestamptz, Uuid as SqlUuid};
use uuid::Uuid;

/// Advisory-lock class of writers appending a chat's events.
pub const WRITER_LOCK_CLASS: i32 = 1;
/// Advisory-lock class of relays publishing a chat's events.
pub const RELAY_LOCK_CLASS: i32 = 2;

/// `INSERT INTO outbox (...) SELECT $1, ... FROM (SELECT pg_advisory_xact_lock(1, $key)) l`.
///
/// The outbox id comes from a sequence when the row is inserted, before
/// COMMIT; two transactions of one chat could otherwise commit in the
/// opposite order of their ids, and a relay could publish the later event
/// first. The transaction-scoped advisory lock on the chat, taken in the
/// same statement (no extra round trip), makes a chat's outbox ids follow
/// its commit order. It is held only from this last statement to COMMIT.
#[derive(Debug, Clone, QueryId)]
pub struct InsertOutboxRow {
    /// The event's id.
    pub event_id: Uuid,
    /// Its chat (the record key).
    pub chat_id: Uuid,
    /// [`lock_key`] of the chat.
    pub lock_key: i32,
    /// `chat.created` or `message.sent`.
    pub event_type: &'static str,
    /// The event's JSON.
    pub payload: String,
    /// When the write happened.
    pub created_at: DateTime<Utc>,
    /// The writing request's W3C `traceparent`, when it was traced.
    pub trace_parent: Option<String>,
}

impl QueryFragment<Pg> for InsertOutboxRow {
    fn walk_ast<'b>(&'b self, mut out: AstPass<'_, 'b, Pg>) -> QueryResult<()> {
        out.push_sql(
            "INSERT INTO outbox (event_id, chat_id, lock_key, event_type, payload, created_at, trace_parent) \
             SELECT ",
        );
        out.push_bind_param::<SqlUuid, _>(&self.event_id)?;
        out.push_sql(", ");
        out.push_bind_param::<SqlUuid, _>(&self.chat_id)?;
        out.push_sql(", ");
        out.push_bind_param::<Integer, _>(&self.lock_key)?;
        out.push_sql(", ");
        out.push_bind_param::<Text, _>(self.event_type)?;
        out.push_sql(", ");
        out.push_bind_param::<Text, _>(&self.payload)?;
        out.push_sql(", ");
        out.push_bind_param::<Timestamptz, _>(&self.created_at)?;
        out.push_sql(", ");
        out.push_bind_param::<Nullable<Text>, _>(&self.trace_parent)?;
        out.push_sql(" FROM (SELECT pg_advisory_xact_lock(");
        out.push_bind_param::<Integer, _>(&WRITER_LOCK_CLASS)?;
        out.push_sql(", ");
        out.push_bind_param::<Integer, _>(&self.lock_key)?;
        out.push_sql(")) AS serialised");
        Ok(())
    }
}

/// A chat's advisory-lock key: its UUID folded to 32 bits. Collisions only
/// make two chats wait for each other now and then.
pub fn lock_key(chat_id: Uuid) -> i32 {
    let v = chat_id.as_u128();
    let folded = (v ^ (v >> 64)) as u64;
    ((folded ^ (folded >> 32)) as u32) as i32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lock_keys_are_stable_and_spread() {
        let a = Uuid::from_u128(1);
        assert_eq!(lock_key(a), lock_key(a));
        let keys: std::collections::HashSet<i32> =
            (0..1000).map(|_| lock_key(Uuid::now_v7())).collect();
        assert!(keys.len() > 990);
    }
}
