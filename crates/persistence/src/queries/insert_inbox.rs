//! The inbox rows of fan-out on write: one per recipient of a talk
//! message, by the shape each insert strategy sends.

use diesel::QueryResult;
use diesel::pg::Pg;
use diesel::query_builder::{AstPass, QueryFragment, QueryId};
use diesel::sql_types::{Array, Bool, Text, Uuid as SqlUuid};
use uuid::Uuid;

/// `INSERT INTO inbox (user_id, chat_id, message_id, read, mentioned)
///  SELECT u.user_id, $1, $2, false, u.mentioned
///  FROM unnest($3::uuid[], $4::bool[]) AS u(user_id, mentioned)`.
///
/// Four bind parameters for any number of recipients: one cached
/// statement, the recipients read by the application first.
#[derive(Debug, Clone, QueryId)]
pub struct InsertInboxUnnest {
    /// The message's chat.
    pub chat_id: Uuid,
    /// The message.
    pub message_id: Uuid,
    /// The recipients, each once.
    pub user_ids: Vec<Uuid>,
    /// Whether the message mentions each recipient, in the same order.
    pub mentioned: Vec<bool>,
}

impl QueryFragment<Pg> for InsertInboxUnnest {
    fn walk_ast<'b>(&'b self, mut out: AstPass<'_, 'b, Pg>) -> QueryResult<()> {
        out.push_sql(
            "INSERT INTO inbox (user_id, chat_id, message_id, read, mentioned) SELECT u.user_id, ",
        );
        out.push_bind_param::<SqlUuid, _>(&self.chat_id)?;
        out.push_sql(", ");
        out.push_bind_param::<SqlUuid, _>(&self.message_id)?;
        out.push_sql(", false, u.mentioned FROM unnest(");
        out.push_bind_param::<Array<SqlUuid>, _>(&self.user_ids)?;
        out.push_sql(", ");
        out.push_bind_param::<Array<Bool>, _>(&self.mentioned)?;
        out.push_sql(") AS u(user_id, mentioned)");
        Ok(())
    }
}

/// `INSERT INTO inbox (user_id, chat_id, message_id, read, mentioned)
///  SELECT m.user_id, $1, $2, false, strpos($3, '@' || m.user_id::text) > 0
///  FROM chat_members m WHERE m.chat_id = $4 AND m.user_id <> $5`.
///
/// The fan-out done by the server: the recipients never travel to the
/// application and back (`single` and `pipeline`). The mention test is
/// [`chatlab_domain::fanout::mentions`]'s, in SQL.
#[derive(Debug, Clone, QueryId)]
pub struct InsertInboxFromMembers {
    /// The message's chat.
    pub chat_id: Uuid,
    /// The message.
    pub message_id: Uuid,
    /// Its sender, who gets no row.
    pub sender_id: Uuid,
    /// Its text, for the mention flags.
    pub body: String,
}

impl QueryFragment<Pg> for InsertInboxFromMembers {
    fn walk_ast<'b>(&'b self, mut out: AstPass<'_, 'b, Pg>) -> QueryResult<()> {
        out.push_sql(
            "INSERT INTO inbox (user_id, chat_id, message_id, read, mentioned) SELECT m.user_id, ",
        );
        out.push_bind_param::<SqlUuid, _>(&self.chat_id)?;
        out.push_sql(", ");
        out.push_bind_param::<SqlUuid, _>(&self.message_id)?;
        out.push_sql(", false, strpos(");
        out.push_bind_param::<Text, _>(&self.body)?;
        out.push_sql(", '@' || m.user_id::text) > 0 FROM chat_members m WHERE m.chat_id = ");
        out.push_bind_param::<SqlUuid, _>(&self.chat_id)?;
        out.push_sql(" AND m.user_id <> ");
        out.push_bind_param::<SqlUuid, _>(&self.sender_id)?;
        Ok(())
    }
}

/// `INSERT INTO inbox (user_id, chat_id, message_id, read, mentioned)
///  SELECT cm.user_id, $1, m.id, false, strpos(m.body, '@' || cm.user_id::text) > 0
///  FROM unnest($2::uuid[], $3::uuid[], $4::text[]) AS m(id, sender_id, body)
///  JOIN chat_members cm ON cm.chat_id = $5 AND cm.user_id <> m.sender_id`.
///
/// An import chunk's inbox rows: every member but each message's sender,
/// for every message of the chunk, in one statement whatever the strategy
/// that wrote the messages.
#[derive(Debug, Clone, QueryId)]
pub struct InsertImportedInbox {
    /// The chat.
    pub chat_id: Uuid,
    /// The chunk's messages.
    pub ids: Vec<Uuid>,
    /// Their senders, in the same order.
    pub sender_ids: Vec<Uuid>,
    /// Their texts, in the same order.
    pub bodies: Vec<String>,
}

impl QueryFragment<Pg> for InsertImportedInbox {
    fn walk_ast<'b>(&'b self, mut out: AstPass<'_, 'b, Pg>) -> QueryResult<()> {
        out.push_sql(
            "INSERT INTO inbox (user_id, chat_id, message_id, read, mentioned) SELECT cm.user_id, ",
        );
        out.push_bind_param::<SqlUuid, _>(&self.chat_id)?;
        out.push_sql(", m.id, false, strpos(m.body, '@' || cm.user_id::text) > 0 FROM unnest(");
        out.push_bind_param::<Array<SqlUuid>, _>(&self.ids)?;
        out.push_sql(", ");
        out.push_bind_param::<Array<SqlUuid>, _>(&self.sender_ids)?;
        out.push_sql(", ");
        out.push_bind_param::<Array<Text>, _>(&self.bodies)?;
        out.push_sql(") AS m(id, sender_id, body) JOIN chat_members cm ON cm.chat_id = ");
        out.push_bind_param::<SqlUuid, _>(&self.chat_id)?;
        out.push_sql(" AND cm.user_id <> m.sender_id");
        Ok(())
    }
}
