//! The append-only read marker log (`READ_MARKER_MODE=log`): one INSERT per
//! accepted move, and the compaction that folds the log into the member
//! rows.

use diesel::QueryResult;
use diesel::RunQueryDsl;
use diesel::pg::{Pg, PgConnection};
use diesel::query_builder::{AstPass, Query, QueryFragment, QueryId};
use diesel::sql_types::{BigInt, Uuid as SqlUuid};
use uuid::Uuid;

/// The newest marker of the member row aliased `alias` in the log, as a
/// scalar subquery (NULL when the log has none): what reads take the newer
/// of, beside the row's own marker.
pub(crate) fn push_newest_logged(out: &mut AstPass<'_, '_, Pg>, alias: &str) {
    out.push_sql("(SELECT l.up_to FROM read_marker_log l WHERE l.chat_id = ");
    out.push_sql(alias);
    out.push_sql(".chat_id AND l.user_id = ");
    out.push_sql(alias);
    out.push_sql(".user_id ORDER BY l.up_to DESC LIMIT 1)");
}

/// `INSERT INTO read_marker_log (chat_id, user_id, up_to) SELECT $1, $2, $3
///  WHERE EXISTS (SELECT 1 FROM chat_members WHERE chat_id = $1 AND user_id
///  = $2 AND (read_up_to IS NULL OR read_up_to < $3)) AND EXISTS (SELECT 1
///  FROM messages WHERE id = $3 AND chat_id = $1) ON CONFLICT DO NOTHING`:
/// a member's move to a message of the chat, appended and never an UPDATE
/// of the member row. One row, or none when the reader is no member, the
/// message is not the chat's, the member row is there already or further,
/// or the same move is logged already.
#[derive(Debug, Clone, Copy, QueryId)]
pub struct AppendReadMarker {
    /// The chat.
    pub chat_id: Uuid,
    /// The reader.
    pub user_id: Uuid,
    /// The newest message read.
    pub up_to: Uuid,
}

impl QueryFragment<Pg> for AppendReadMarker {
    fn walk_ast<'b>(&'b self, mut out: AstPass<'_, 'b, Pg>) -> QueryResult<()> {
        out.push_sql("INSERT INTO read_marker_log (chat_id, user_id, up_to) SELECT ");
        out.push_bind_param::<SqlUuid, _>(&self.chat_id)?;
        out.push_sql(", ");
        out.push_bind_param::<SqlUuid, _>(&self.user_id)?;
        out.push_sql(", ");
        out.push_bind_param::<SqlUuid, _>(&self.up_to)?;
        out.push_sql(" WHERE EXISTS (SELECT 1 FROM chat_members WHERE chat_id = ");
        out.push_bind_param::<SqlUuid, _>(&self.chat_id)?;
        out.push_sql(" AND user_id = ");
        out.push_bind_param::<SqlUuid, _>(&self.user_id)?;
        out.push_sql(" AND (read_up_to IS NULL OR read_up_to < ");
        out.push_bind_param::<SqlUuid, _>(&self.up_to)?;
        out.push_sql(")) AND EXISTS (SELECT 1 FROM messages WHERE id = ");
        out.push_bind_param::<SqlUuid, _>(&self.up_to)?;
        out.push_sql(" AND chat_id = ");
        out.push_bind_param::<SqlUuid, _>(&self.chat_id)?;
        out.push_sql(") ON CONFLICT DO NOTHING");
        Ok(())
    }
}

/// The log folded into the member rows, in one statement: every log row
/// the statement sees is deleted, the newest per member moves its member
/// row forward (never back; a member who left has no row to move), and the
/// member's inbox rows up to it are flagged read. Rows logged while it
/// runs are not in its snapshot and wait for the next compaction, and
/// reads take the newer of the row and the log throughout, so no reader
/// sees a marker move back.
///
/// ```sql
/// WITH gone AS (DELETE FROM read_marker_log RETURNING chat_id, user_id, up_to),
/// newest AS (SELECT DISTINCT ON (chat_id, user_id) chat_id, user_id, up_to
///   FROM gone ORDER BY chat_id, user_id, up_to DESC),
/// moved AS (UPDATE chat_members cm SET read_up_to = n.up_to FROM newest n
///   WHERE cm.chat_id = n.chat_id AND cm.user_id = n.user_id
///   AND (cm.read_up_to IS NULL OR cm.read_up_to < n.up_to) RETURNING 1),
/// flagged AS (UPDATE inbox i SET read = true FROM newest n
///   WHERE i.user_id = n.user_id AND i.chat_id = n.chat_id
///   AND i.message_id <= n.up_to AND NOT i.read RETURNING 1)
/// SELECT (SELECT count(*) FROM gone), (SELECT count(*) FROM newest),
///        (SELECT count(*) FROM moved), (SELECT count(*) FROM flagged)
/// ```
///
/// Answers the log rows deleted, the members among them, the member rows
/// moved and the inbox rows flagged.
#[derive(Debug, Clone, Copy, QueryId)]
pub struct CompactReadMarkerLog;

/// What one compaction did: log rows deleted, members they named, member
/// rows moved, inbox rows flagged read.
pub type Compacted = (i64, i64, i64, i64);

impl Query for CompactReadMarkerLog {
    type SqlType = (BigInt, BigInt, BigInt, BigInt);
}

impl RunQueryDsl<PgConnection> for CompactReadMarkerLog {}

impl QueryFragment<Pg> for CompactReadMarkerLog {
    fn walk_ast<'b>(&'b self, mut out: AstPass<'_, 'b, Pg>) -> QueryResult<()> {
        out.push_sql(
            "WITH gone AS (DELETE FROM read_marker_log RETURNING chat_id, user_id, up_to), \
             newest AS (SELECT DISTINCT ON (chat_id, user_id) chat_id, user_id, up_to \
             FROM gone ORDER BY chat_id, user_id, up_to DESC), \
             moved AS (UPDATE chat_members cm SET read_up_to = n.up_to FROM newest n \
             WHERE cm.chat_id = n.chat_id AND cm.user_id = n.user_id \
             AND (cm.read_up_to IS NULL OR cm.read_up_to < n.up_to) RETURNING 1), \
             flagged AS (UPDATE inbox i SET read = true FROM newest n \
             WHERE i.user_id = n.user_id AND i.chat_id = n.chat_id \
             AND i.message_id <= n.up_to AND NOT i.read RETURNING 1) \
             SELECT (SELECT count(*) FROM gone), (SELECT count(*) FROM newest), \
             (SELECT count(*) FROM moved), (SELECT count(*) FROM flagged)",
        );
        Ok(())
    }
}
