//! The `unnest` message insert, for imports.

use chrono::{DateTime, Utc};
use diesel::QueryResult;
use diesel::pg::Pg;
use diesel::query_builder::{AstPass, QueryFragment, QueryId};
use diesel::sql_types::{Array, Text, Timestamptz, Uuid as SqlUuid};
use uuid::Uuid;

/// `INSERT INTO messages (id, chat_id, sender_id, kind, body, created_at,
/// publish_mode) SELECT m.id, $1, m.sender_id, 'talk', m.body,
/// m.created_at, 'off' FROM unnest($2, $3, $4, $5) AS m(...)`.
///
/// Five bind parameters whatever the row count (four parallel arrays), so
/// one prepared statement serves every chunk size. Imported messages
/// publish no event, hence `'off'`.
#[derive(Debug, Clone, QueryId)]
pub struct InsertMessagesUnnest {
    /// The chat every row belongs to.
    pub chat_id: Uuid,
    /// Message ids.
    pub ids: Vec<Uuid>,
    /// Senders, parallel to `ids`.
    pub sender_ids: Vec<Uuid>,
    /// Bodies, parallel to `ids`.
    pub bodies: Vec<String>,
    /// Creation times, parallel to `ids`.
    pub created_at: Vec<DateTime<Utc>>,
}

impl QueryFragment<Pg> for InsertMessagesUnnest {
    fn walk_ast<'b>(&'b self, mut out: AstPass<'_, 'b, Pg>) -> QueryResult<()> {
        out.push_sql(
            "INSERT INTO messages (id, chat_id, sender_id, kind, body, created_at, publish_mode) \
             SELECT m.id, ",
        );
        out.push_bind_param::<SqlUuid, _>(&self.chat_id)?;
        out.push_sql(", m.sender_id, 'talk', m.body, m.created_at, 'off' FROM unnest(");
        out.push_bind_param::<Array<SqlUuid>, _>(&self.ids)?;
        out.push_sql(", ");
        out.push_bind_param::<Array<SqlUuid>, _>(&self.sender_ids)?;
        out.push_sql(", ");
        out.push_bind_param::<Array<Text>, _>(&self.bodies)?;
        out.push_sql(", ");
        out.push_bind_param::<Array<Timestamptz>, _>(&self.created_at)?;
        out.push_sql(") AS m(id, sender_id, body, created_at)");
        Ok(())
    }
}
