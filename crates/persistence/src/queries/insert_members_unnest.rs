//! The `unnest` member insert.

use chrono::{DateTime, Utc};
use diesel::QueryResult;
use diesel::pg::Pg;
use diesel::query_builder::{AstPass, QueryFragment, QueryId};
use diesel::sql_types::{Array, Timestamptz, Uuid as SqlUuid};
use uuid::Uuid;

/// `INSERT INTO chat_members (chat_id, user_id, joined_at)
///  SELECT $1, u.user_id, $2 FROM unnest($3::uuid[]) AS u(user_id)`.
///
/// Three bind parameters whatever the member count, so one prepared
/// statement serves every chat size and no chunking is needed: PostgreSQL
/// receives the ids as one array value. The price is that the planner sees
/// an array of unknown length; for an INSERT from a function scan that costs
/// nothing measurable.
#[derive(Debug, Clone, QueryId)]
pub struct InsertMembersUnnest {
    /// The chat every row belongs to.
    pub chat_id: Uuid,
    /// One join time for all rows.
    pub joined_at: DateTime<Utc>,
    /// The members, each once.
    pub user_ids: Vec<Uuid>,
}

impl QueryFragment<Pg> for InsertMembersUnnest {
    fn walk_ast<'b>(&'b self, mut out: AstPass<'_, 'b, Pg>) -> QueryResult<()> {
        out.push_sql("INSERT INTO chat_members (chat_id, user_id, joined_at) SELECT ");
        out.push_bind_param::<SqlUuid, _>(&self.chat_id)?;
        out.push_sql(", u.user_id, ");
        out.push_bind_param::<Timestamptz, _>(&self.joined_at)?;
        out.push_sql(" FROM unnest(");
        out.push_bind_param::<Array<SqlUuid>, _>(&self.user_ids)?;
        out.push_sql(") AS u(user_id)");
        Ok(())
    }
}
