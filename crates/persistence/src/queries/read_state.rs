//! Read markers and unread counts, in both fan-out modes.
//!
//! An unread count is the same number in both: the chat's talk messages by
//! others, sent after the reader joined and newer than their marker. With
//! `none` it is counted from `messages`; with `inbox`, from the reader's
//! unread inbox rows (the partial index `inbox_unread_idx`), which the
//! send wrote for the members of the moment.

use chrono::{DateTime, Utc};
use diesel::QueryResult;
use diesel::RunQueryDsl;
use diesel::pg::{Pg, PgConnection};
use diesel::query_builder::{AstPass, Query, QueryFragment, QueryId};
use diesel::sql_types::{Array, BigInt, Integer, Nullable, Text, Timestamptz, Uuid as SqlUuid};
use uuid::Uuid;

use super::read_marker_log::push_newest_logged;

/// `UPDATE chat_members SET read_up_to = $3 WHERE chat_id = $1 AND user_id
///  = $2 AND (read_up_to IS NULL OR read_up_to < $3) AND EXISTS (SELECT 1
///  FROM messages WHERE id = $3 AND chat_id = $1)`: moves a member's marker
/// forward to a message of the chat, never back. One row, or none when the
/// marker is there already or further, the message is not the chat's, or
/// the reader is no member.
#[derive(Debug, Clone, Copy, QueryId)]
pub struct MoveReadMarker {
    /// The chat.
    pub chat_id: Uuid,
    /// The reader.
    pub user_id: Uuid,
    /// The newest message read.
    pub up_to: Uuid,
}

impl QueryFragment<Pg> for MoveReadMarker {
    fn walk_ast<'b>(&'b self, mut out: AstPass<'_, 'b, Pg>) -> QueryResult<()> {
        out.push_sql("UPDATE chat_members SET read_up_to = ");
        out.push_bind_param::<SqlUuid, _>(&self.up_to)?;
        out.push_sql(" WHERE chat_id = ");
        out.push_bind_param::<SqlUuid, _>(&self.chat_id)?;
        out.push_sql(" AND user_id = ");
        out.push_bind_param::<SqlUuid, _>(&self.user_id)?;
        out.push_sql(" AND (read_up_to IS NULL OR read_up_to < ");
        out.push_bind_param::<SqlUuid, _>(&self.up_to)?;
        out.push_sql(") AND EXISTS (SELECT 1 FROM messages WHERE id = ");
        out.push_bind_param::<SqlUuid, _>(&self.up_to)?;
        out.push_sql(" AND chat_id = ");
        out.push_bind_param::<SqlUuid, _>(&self.chat_id)?;
        out.push_sql(")");
        Ok(())
    }
}

/// Advisory-lock class of read marker flushes
/// (`pg_advisory_xact_lock(FLUSH_LOCK_CLASS, 0)`): the flushes of several
/// instances take turns, so they never lock member rows in two orders.
pub const FLUSH_LOCK_CLASS: i32 = 3;

/// Held read markers as three parallel arrays, one element per member
/// (`READ_MARKER_MODE=coalesced`), sent as `unnest($1, $2, $3) AS
/// u(chat_id, user_id, up_to)`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MarkerColumns {
    /// The chats.
    pub chats: Vec<Uuid>,
    /// The members.
    pub users: Vec<Uuid>,
    /// The newest messages read.
    pub up_to: Vec<Uuid>,
}

impl MarkerColumns {
    fn push_unnest<'b>(&'b self, out: &mut AstPass<'_, 'b, Pg>) -> QueryResult<()> {
        out.push_sql("unnest(");
        out.push_bind_param::<Array<SqlUuid>, _>(&self.chats)?;
        out.push_sql(", ");
        out.push_bind_param::<Array<SqlUuid>, _>(&self.users)?;
        out.push_sql(", ");
        out.push_bind_param::<Array<SqlUuid>, _>(&self.up_to)?;
        out.push_sql(") AS u(chat_id, user_id, up_to)");
        Ok(())
    }
}

/// `UPDATE chat_members cm SET read_up_to = u.up_to FROM unnest(...) u
///  WHERE cm.chat_id = u.chat_id AND cm.user_id = u.user_id AND
///  (cm.read_up_to IS NULL OR cm.read_up_to < u.up_to)`: the held markers
/// of many members in one statement, each moved forward only; a member
/// who left meanwhile has no row to move.
#[derive(Debug, Clone, QueryId)]
pub struct FlushReadMarkers(pub MarkerColumns);

impl QueryFragment<Pg> for FlushReadMarkers {
    fn walk_ast<'b>(&'b self, mut out: AstPass<'_, 'b, Pg>) -> QueryResult<()> {
        out.push_sql("UPDATE chat_members cm SET read_up_to = u.up_to FROM ");
        self.0.push_unnest(&mut out)?;
        out.push_sql(
            " WHERE cm.chat_id = u.chat_id AND cm.user_id = u.user_id \
             AND (cm.read_up_to IS NULL OR cm.read_up_to < u.up_to)",
        );
        Ok(())
    }
}

/// `UPDATE inbox i SET read = true FROM unnest(...) u WHERE i.user_id =
///  u.user_id AND i.chat_id = u.chat_id AND i.message_id <= u.up_to AND NOT
///  i.read`: the read flags of many readers' inbox rows up to their
/// markers, in one statement.
#[derive(Debug, Clone, QueryId)]
pub struct FlagInboxRead(pub MarkerColumns);

impl QueryFragment<Pg> for FlagInboxRead {
    fn walk_ast<'b>(&'b self, mut out: AstPass<'_, 'b, Pg>) -> QueryResult<()> {
        out.push_sql("UPDATE inbox i SET read = true FROM ");
        self.0.push_unnest(&mut out)?;
        out.push_sql(
            " WHERE i.user_id = u.user_id AND i.chat_id = u.chat_id \
             AND i.message_id <= u.up_to AND NOT i.read",
        );
        Ok(())
    }
}

/// The unread count of the member row aliased `p` (columns `chat_id`,
/// `joined_at`, `read_up_to`) for `user`, as a scalar subquery.
fn push_unread<'b>(out: &mut AstPass<'_, 'b, Pg>, inbox: bool, user: &'b Uuid) -> QueryResult<()> {
    if inbox {
        out.push_sql("(SELECT count(*) FROM inbox i WHERE i.user_id = ");
        out.push_bind_param::<SqlUuid, _>(user)?;
        out.push_sql(
            " AND i.chat_id = p.chat_id AND NOT i.read \
             AND (p.read_up_to IS NULL OR i.message_id > p.read_up_to))",
        );
    } else {
        out.push_sql(
            "(SELECT count(*) FROM messages m WHERE m.chat_id = p.chat_id AND m.kind = 'talk' \
             AND m.sender_id <> ",
        );
        out.push_bind_param::<SqlUuid, _>(user)?;
        out.push_sql(
            " AND m.created_at >= p.joined_at \
             AND (p.read_up_to IS NULL OR m.id > p.read_up_to))",
        );
    }
    Ok(())
}

/// `SELECT p.read_up_to, <unread count> FROM (SELECT chat_id, joined_at,
///  GREATEST(read_up_to, $3, <newest logged>) AS read_up_to FROM
///  chat_members WHERE chat_id = $1 AND user_id = $2) p`: one member's read
/// state of one chat, no row for a non-member. The marker is the newest of
/// the member row's, one held by this instance and one in the log not yet
/// compacted (`READ_MARKER_MODE=log`; in the other modes the log is empty
/// and the probe finds nothing). `INBOX` picks where the count comes from; each is its
/// own cached statement.
#[derive(Debug, Clone, Copy)]
pub struct ReadStateOf<const INBOX: bool> {
    /// The chat.
    pub chat_id: Uuid,
    /// The member.
    pub user_id: Uuid,
    /// A marker this instance holds and has not written yet
    /// (`READ_MARKER_MODE=coalesced`): the state is counted from the
    /// further of it and the row's.
    pub floor: Option<Uuid>,
}

impl<const INBOX: bool> QueryId for ReadStateOf<INBOX> {
    type QueryId = Self;
    const HAS_STATIC_QUERY_ID: bool = true;
}

impl<const INBOX: bool> Query for ReadStateOf<INBOX> {
    type SqlType = (Nullable<SqlUuid>, BigInt);
}

impl<const INBOX: bool> RunQueryDsl<PgConnection> for ReadStateOf<INBOX> {}

impl<const INBOX: bool> QueryFragment<Pg> for ReadStateOf<INBOX> {
    fn walk_ast<'b>(&'b self, mut out: AstPass<'_, 'b, Pg>) -> QueryResult<()> {
        out.push_sql("SELECT p.read_up_to, ");
        push_unread(&mut out, INBOX, &self.user_id)?;
        out.push_sql(" FROM (SELECT chat_id, joined_at, GREATEST(read_up_to, ");
        out.push_bind_param::<Nullable<SqlUuid>, _>(&self.floor)?;
        out.push_sql(", ");
        push_newest_logged(&mut out, "chat_members");
        out.push_sql(") AS read_up_to FROM chat_members WHERE chat_id = ");
        out.push_bind_param::<SqlUuid, _>(&self.chat_id)?;
        out.push_sql(" AND user_id = ");
        out.push_bind_param::<SqlUuid, _>(&self.user_id)?;
        out.push_sql(") p");
        Ok(())
    }
}

/// One row of [`MyChatsPage`]: chat id and name, the member's marker, the
/// chat's newest message (id, sender, kind, body, time) and the unread
/// count.
pub type MyChatRow = (
    Uuid,
    String,
    Option<Uuid>,
    Uuid,
    Option<Uuid>,
    String,
    String,
    DateTime<Utc>,
    i64,
);

/// A page of the chats of `user_id`, newest activity first (the id of each
/// chat's newest message, which every chat has), strictly before the
/// `before` message id; the page is chosen first and only its rows are
/// counted:
///
/// ```sql
/// SELECT p.*, <unread count> FROM (
///   SELECT c.id AS chat_id, c.name, cm.joined_at,
///     GREATEST(cm.read_up_to, <newest logged>) AS read_up_to, lm.*
///   FROM chat_members cm JOIN chats c ON c.id = cm.chat_id
///   CROSS JOIN LATERAL (SELECT id, sender_id, kind, body, created_at
///     FROM messages WHERE chat_id = cm.chat_id ORDER BY id DESC LIMIT 1) lm
///   WHERE cm.user_id = $1 AND lm.id < $2 ORDER BY lm.id DESC LIMIT $3) p
/// ORDER BY p.last_id DESC
/// ```
#[derive(Debug, Clone, Copy)]
pub struct MyChatsPage<const INBOX: bool> {
    /// The member.
    pub user_id: Uuid,
    /// Only chats whose newest message is older than this (`Uuid::max()`
    /// for the first page).
    pub before: Uuid,
    /// Most rows.
    pub limit: i32,
}

impl<const INBOX: bool> QueryId for MyChatsPage<INBOX> {
    type QueryId = Self;
    const HAS_STATIC_QUERY_ID: bool = true;
}

impl<const INBOX: bool> Query for MyChatsPage<INBOX> {
    type SqlType = (
        SqlUuid,
        Text,
        Nullable<SqlUuid>,
        SqlUuid,
        Nullable<SqlUuid>,
        Text,
        Text,
        Timestamptz,
        BigInt,
    );
}

impl<const INBOX: bool> RunQueryDsl<PgConnection> for MyChatsPage<INBOX> {}

impl<const INBOX: bool> QueryFragment<Pg> for MyChatsPage<INBOX> {
    fn walk_ast<'b>(&'b self, mut out: AstPass<'_, 'b, Pg>) -> QueryResult<()> {
        out.push_sql(
            "SELECT p.chat_id, p.name, p.read_up_to, p.last_id, p.sender_id, p.kind, p.body, \
             p.created_at, ",
        );
        push_unread(&mut out, INBOX, &self.user_id)?;
        out.push_sql(
            " FROM (SELECT c.id AS chat_id, c.name, cm.joined_at, GREATEST(cm.read_up_to, ",
        );
        push_newest_logged(&mut out, "cm");
        out.push_sql(
            ") AS read_up_to, \
             lm.id AS last_id, lm.sender_id, lm.kind, lm.body, lm.created_at \
             FROM chat_members cm JOIN chats c ON c.id = cm.chat_id \
             CROSS JOIN LATERAL (SELECT m.id, m.sender_id, m.kind, m.body, m.created_at \
             FROM messages m WHERE m.chat_id = cm.chat_id ORDER BY m.id DESC LIMIT 1) lm \
             WHERE cm.user_id = ",
        );
        out.push_bind_param::<SqlUuid, _>(&self.user_id)?;
        out.push_sql(" AND lm.id < ");
        out.push_bind_param::<SqlUuid, _>(&self.before)?;
        out.push_sql(" ORDER BY lm.id DESC LIMIT ");
        out.push_bind_param::<Integer, _>(&self.limit)?;
        out.push_sql(") p ORDER BY p.last_id DESC");
        Ok(())
    }
}
