//! The send-message insert, with its membership check in the same statement.

use chrono::{DateTime, Utc};
use diesel::QueryResult;
use diesel::pg::Pg;
use diesel::query_builder::{AstPass, QueryFragment, QueryId};
use diesel::sql_types::{Text, Timestamptz, Uuid as SqlUuid};
use uuid::Uuid;

/// `INSERT INTO messages (...) SELECT $1, $2, $3, 'talk', $4, $5, $6
///  WHERE EXISTS (SELECT 1 FROM chat_members WHERE chat_id = $7 AND user_id = $8)`.
///
/// One round trip checks membership and writes the message atomically; it
/// affects one row, or none when the sender is not a member (or the chat
/// does not exist), which the caller then tells apart off the happy path.
#[derive(Debug, Clone, QueryId)]
pub struct InsertTalkIfMember {
    /// New message id.
    pub id: Uuid,
    /// The chat.
    pub chat_id: Uuid,
    /// The sender.
    pub sender_id: Uuid,
    /// The text.
    pub body: String,
    /// Creation time.
    pub created_at: DateTime<Utc>,
    /// The publish mode of the message's event.
    pub publish_mode: &'static str,
}

impl QueryFragment<Pg> for InsertTalkIfMember {
    fn walk_ast<'b>(&'b self, mut out: AstPass<'_, 'b, Pg>) -> QueryResult<()> {
        out.push_sql(
            "INSERT INTO messages (id, chat_id, sender_id, kind, body, created_at, publish_mode) \
             SELECT ",
        );
        out.push_bind_param::<SqlUuid, _>(&self.id)?;
        out.push_sql(", ");
        out.push_bind_param::<SqlUuid, _>(&self.chat_id)?;
        out.push_sql(", ");
        out.push_bind_param::<SqlUuid, _>(&self.sender_id)?;
        out.push_sql(", 'talk', ");
        out.push_bind_param::<Text, _>(&self.body)?;
        out.push_sql(", ");
        out.push_bind_param::<Timestamptz, _>(&self.created_at)?;
        out.push_sql(", ");
        out.push_bind_param::<Text, _>(self.publish_mode)?;
        out.push_sql(" WHERE EXISTS (SELECT 1 FROM chat_members WHERE chat_id = ");
        out.push_bind_param::<SqlUuid, _>(&self.chat_id)?;
        out.push_sql(" AND user_id = ");
        out.push_bind_param::<SqlUuid, _>(&self.sender_id)?;
        out.push_sql(")");
        Ok(())
    }
}

/// [`InsertTalkIfMember`] that first takes a share lock on the chat row
/// (`... AND EXISTS (SELECT 1 FROM chats WHERE id = $8 FOR SHARE)`): the
/// first statement of a send that fans out on write. A membership change
/// holds `FOR NO KEY UPDATE` on the chat row until it commits, so once
/// this statement returns, the next one (a new snapshot under READ
/// COMMITTED) reads the members as they will stay until this transaction
/// ends; sends do not wait for one another.
#[derive(Debug, Clone, QueryId)]
pub struct InsertTalkIfMemberLockingChat(pub InsertTalkIfMember);

impl QueryFragment<Pg> for InsertTalkIfMemberLockingChat {
    fn walk_ast<'b>(&'b self, mut out: AstPass<'_, 'b, Pg>) -> QueryResult<()> {
        self.0.walk_ast(out.reborrow())?;
        out.push_sql(" AND EXISTS (SELECT 1 FROM chats WHERE id = ");
        out.push_bind_param::<SqlUuid, _>(&self.0.chat_id)?;
        out.push_sql(" FOR SHARE)");
        Ok(())
    }
}
