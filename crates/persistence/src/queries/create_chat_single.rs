//! createChat in one statement: the `single` strategy.

use chrono::{DateTime, Utc};
use diesel::QueryResult;
use diesel::pg::Pg;
use diesel::query_builder::{AstPass, QueryFragment, QueryId};
use diesel::sql_types::{Array, Nullable, Text, Timestamptz, Uuid as SqlUuid};
use uuid::Uuid;

use super::InsertOutboxRow;

/// The chat, its members and its system message, as one statement:
///
/// ```sql
/// WITH new_chat AS (INSERT INTO chats ... VALUES ($1, ...)),
///      new_members AS (INSERT INTO chat_members ... SELECT $1, u.user_id, $4
///                      FROM unnest($6::uuid[]) AS u(user_id))
/// INSERT INTO messages ... VALUES ($7, $1, NULL, 'system', ...)
/// ```
///
/// One round trip, and one prepared statement for any member count (the
/// ids travel as one array). The foreign keys are checked at the end of the
/// statement, when the chat row of the first CTE exists, so an unknown
/// member fails the statement and nothing is written, as in the other
/// strategies. Run alone (autocommit) it needs no BEGIN or COMMIT.
#[derive(Debug, Clone, QueryId)]
pub struct CreateChatSingle {
    /// The chat's rows.
    pub rows: SingleRows,
}

/// [`CreateChatSingle`] with the event's outbox row as one more CTE: the
/// outbox mode in one round trip, the row written in the same implicit
/// transaction as the chat. Its own type, so that diesel caches its
/// prepared statement apart from the one without the outbox.
#[derive(Debug, Clone, QueryId)]
pub struct CreateChatSingleWithOutbox {
    /// The chat's rows.
    pub rows: SingleRows,
    /// The event's row.
    pub outbox: InsertOutboxRow,
}

/// What the single statement writes.
#[derive(Debug, Clone)]
pub struct SingleRows {
    /// The chat's id.
    pub chat_id: Uuid,
    /// Its name.
    pub name: String,
    /// Its creator.
    pub creator_id: Uuid,
    /// When it was created (also the members' join time and the system
    /// message's time).
    pub created_at: DateTime<Utc>,
    /// The chat's publish mode label.
    pub publish_mode: &'static str,
    /// The members, each once, creator included.
    pub member_ids: Vec<Uuid>,
    /// The system message's id.
    pub system_message_id: Uuid,
    /// Its kind label (`system`).
    pub system_message_kind: &'static str,
    /// Its body.
    pub system_message_body: &'static str,
    /// Its publish mode label (the system message has no event: `off`).
    pub system_message_mode: &'static str,
}

impl SingleRows {
    /// The CTEs of the chat and its members, `WITH` included.
    fn walk_ctes<'b>(&'b self, out: &mut AstPass<'_, 'b, Pg>) -> QueryResult<()> {
        out.push_sql(
            "WITH new_chat AS (INSERT INTO chats (id, name, creator_id, created_at, publish_mode) \
             VALUES (",
        );
        out.push_bind_param::<SqlUuid, _>(&self.chat_id)?;
        out.push_sql(", ");
        out.push_bind_param::<Text, _>(&self.name)?;
        out.push_sql(", ");
        out.push_bind_param::<SqlUuid, _>(&self.creator_id)?;
        out.push_sql(", ");
        out.push_bind_param::<Timestamptz, _>(&self.created_at)?;
        out.push_sql(", ");
        out.push_bind_param::<Text, _>(self.publish_mode)?;
        out.push_sql(
            ")), new_members AS (INSERT INTO chat_members (chat_id, user_id, joined_at) SELECT ",
        );
        out.push_bind_param::<SqlUuid, _>(&self.chat_id)?;
        out.push_sql(", u.user_id, ");
        out.push_bind_param::<Timestamptz, _>(&self.created_at)?;
        out.push_sql(" FROM unnest(");
        out.push_bind_param::<Array<SqlUuid>, _>(&self.member_ids)?;
        out.push_sql(") AS u(user_id))");
        Ok(())
    }

    /// The system message's INSERT, the statement's main part.
    fn walk_message<'b>(&'b self, out: &mut AstPass<'_, 'b, Pg>) -> QueryResult<()> {
        out.push_sql(
            "INSERT INTO messages (id, chat_id, sender_id, kind, body, created_at, publish_mode) \
             VALUES (",
        );
        out.push_bind_param::<SqlUuid, _>(&self.system_message_id)?;
        out.push_sql(", ");
        out.push_bind_param::<SqlUuid, _>(&self.chat_id)?;
        out.push_sql(", ");
        out.push_bind_param::<Nullable<SqlUuid>, _>(&None::<Uuid>)?;
        out.push_sql(", ");
        out.push_bind_param::<Text, _>(self.system_message_kind)?;
        out.push_sql(", ");
        out.push_bind_param::<Text, _>(self.system_message_body)?;
        out.push_sql(", ");
        out.push_bind_param::<Timestamptz, _>(&self.created_at)?;
        out.push_sql(", ");
        out.push_bind_param::<Text, _>(self.system_message_mode)?;
        out.push_sql(")");
        Ok(())
    }
}

impl QueryFragment<Pg> for CreateChatSingle {
    fn walk_ast<'b>(&'b self, mut out: AstPass<'_, 'b, Pg>) -> QueryResult<()> {
        self.rows.walk_ctes(&mut out)?;
        out.push_sql(" ");
        self.rows.walk_message(&mut out)
    }
}

impl QueryFragment<Pg> for CreateChatSingleWithOutbox {
    fn walk_ast<'b>(&'b self, mut out: AstPass<'_, 'b, Pg>) -> QueryResult<()> {
        self.rows.walk_ctes(&mut out)?;
        out.push_sql(", new_event AS (");
        self.outbox.walk_ast(out.reborrow())?;
        out.push_sql(") ");
        self.rows.walk_message(&mut out)
    }
}
