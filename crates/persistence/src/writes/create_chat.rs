//! createChat's transaction body, and member rows as a [`RowSet`].
//!
//! The functions here take a [`DbSession`] that is already inside
//! a transaction; [`crate::store::PgStore::create_chat`] opens it, so the
//! boundary is visible in one place.

use std::ops::Range;

use chrono::{DateTime, Utc};
use diesel::pg::PgConnection;
use diesel::{ExecuteCopyFromDsl, QueryResult};
use uuid::Uuid;

use chatlab_domain::{CreateChat, InsertStrategy, MessageKind, PublishMode, Sending};

use crate::models::{ChatRow, MemberRow, MessageRow};
use crate::queries::{
    CreateChatSingle, CreateChatSingleWithOutbox, InsertMembersUnnest, InsertOutboxRow, SingleRows,
};
use crate::schema::{chat_members, chats, messages};
use crate::session::{DbSession, Piped, Pipelined};
use crate::writes::row_writes::{RowSet, WriteCount, write_rows};

/// A committed createChat's statements, rows and round trips (BEGIN and
/// COMMIT included).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct ChatWrite {
    pub count: WriteCount,
    pub round_trips: u64,
}

/// The three steps of createChat: chat row, member rows, system message,
/// sent the strategy's way ([`chatlab_domain::Sending`]): one by one, the
/// members by the plan's [`chatlab_domain::RowsBy`]; as one statement that does all three;
/// or as one flight. The caller holds the transaction open (or, for one
/// statement or one flight alone, [`crate::store`] sends it without one);
/// the session counts the round trips.
pub(crate) async fn create_chat_inner(
    s: &mut DbSession,
    command: &CreateChat,
    strategy: InsertStrategy,
    mode: PublishMode,
) -> QueryResult<WriteCount> {
    let plan = strategy.plan();
    match plan.sending {
        Sending::OneStatement => create_chat_single(s, command, mode, None).await,
        Sending::OneFlight => {
            let pipelined = s
                .pipelined(pipeline_statements(command, mode, None))
                .await?;
            Ok(pipeline_write(&pipelined))
        }
        Sending::OneByOne => {
            s.execute(diesel::insert_into(chats::table).values(chat_row(command, mode)))
                .await?;
            let written = write_rows(s, &Members::of(command), plan.rows).await?;
            s.execute(diesel::insert_into(messages::table).values(system_message_row(command)))
                .await?;
            Ok(written.add(WriteCount {
                statements: 2,
                rows: 2,
            }))
        }
    }
}

/// The chat row of `command`.
fn chat_row(command: &CreateChat, mode: PublishMode) -> ChatRow {
    ChatRow {
        id: command.chat_id.as_uuid(),
        name: command.name.clone(),
        creator_id: command.creator_id.as_uuid(),
        created_at: command.created_at,
        publish_mode: mode.as_str().to_owned(),
    }
}

/// The "room created" system message of `command`.
fn system_message_row(command: &CreateChat) -> MessageRow {
    MessageRow {
        id: command.system_message_id.as_uuid(),
        chat_id: command.chat_id.as_uuid(),
        sender_id: None,
        kind: MessageKind::System.as_str().to_owned(),
        body: command.system_message_body.to_owned(),
        created_at: command.created_at,
        // The system message has no event of its own.
        publish_mode: PublishMode::Off.as_str().to_owned(),
    }
}

/// `pipeline`'s statements: unnest's chat row, members and system message,
/// and the event's outbox row when `outbox` is given.
pub(crate) fn pipeline_statements(
    command: &CreateChat,
    mode: PublishMode,
    outbox: Option<InsertOutboxRow>,
) -> Vec<Piped> {
    let mut statements = vec![
        Piped::new(diesel::insert_into(chats::table).values(chat_row(command, mode))),
        Members::of(command).insert_unnest(),
        Piped::new(diesel::insert_into(messages::table).values(system_message_row(command))),
    ];
    statements.extend(outbox.map(Piped::new));
    statements
}

/// What `pipeline`'s createChat sent: its three INSERTs and their rows
/// (the outbox row, when there is one, is not a createChat row).
pub(crate) fn pipeline_write(pipelined: &Pipelined) -> WriteCount {
    WriteCount {
        statements: 3,
        rows: pipelined.rows.iter().take(3).map(|&n| n as u64).sum(),
    }
}

/// createChat as one statement ([`CreateChatSingle`]), with the event's
/// outbox row in it when `outbox` is given: one round trip. Outside a
/// transaction it is its own: all of it commits, or none.
pub(crate) async fn create_chat_single(
    s: &mut DbSession,
    command: &CreateChat,
    mode: PublishMode,
    outbox: Option<InsertOutboxRow>,
) -> QueryResult<WriteCount> {
    let rows = SingleRows {
        chat_id: command.chat_id.as_uuid(),
        name: command.name.clone(),
        creator_id: command.creator_id.as_uuid(),
        created_at: command.created_at,
        publish_mode: mode.as_str(),
        member_ids: command.member_ids.iter().map(|id| id.as_uuid()).collect(),
        system_message_id: command.system_message_id.as_uuid(),
        system_message_kind: MessageKind::System.as_str(),
        system_message_body: command.system_message_body,
        // The system message has no event of its own.
        system_message_mode: PublishMode::Off.as_str(),
    };
    let members = rows.member_ids.len() as u64;
    match outbox {
        None => s.execute(CreateChatSingle { rows }).await?,
        Some(outbox) => {
            s.execute(CreateChatSingleWithOutbox { rows, outbox })
                .await?
        }
    };
    // The statement inserts every member or fails: the count it reports is
    // the system message's row.
    Ok(WriteCount {
        statements: 1,
        rows: members + 2,
    })
}

/// Member rows of one chat, joined at one time; the ids must be distinct
/// (the domain collapses duplicates).
pub(crate) struct Members {
    pub chat_id: Uuid,
    pub joined_at: DateTime<Utc>,
    pub user_ids: Vec<Uuid>,
}

impl Members {
    /// createChat's member rows.
    fn of(command: &CreateChat) -> Self {
        Self {
            chat_id: command.chat_id.as_uuid(),
            joined_at: command.created_at,
            user_ids: command.member_ids.iter().map(|id| id.as_uuid()).collect(),
        }
    }

    fn row(&self, i: usize) -> MemberRow {
        MemberRow {
            chat_id: self.chat_id,
            user_id: self.user_ids[i],
            joined_at: self.joined_at,
        }
    }

    fn rows(&self, range: Range<usize>) -> Vec<MemberRow> {
        range.map(|i| self.row(i)).collect()
    }
}

impl RowSet for Members {
    const TABLE: &'static str = "chat_members";
    const COLUMNS: usize = 3;

    fn len(&self) -> usize {
        self.user_ids.len()
    }

    fn insert_one(&self, i: usize) -> Piped {
        Piped::new(diesel::insert_into(chat_members::table).values(self.row(i)))
    }

    fn insert_values(&self, range: Range<usize>) -> Piped {
        Piped::new(diesel::insert_into(chat_members::table).values(self.rows(range)))
    }

    fn insert_unnest(&self) -> Piped {
        Piped::new(InsertMembersUnnest {
            chat_id: self.chat_id,
            joined_at: self.joined_at,
            user_ids: self.user_ids.clone(),
        })
    }

    fn copy(&self, c: &mut PgConnection) -> QueryResult<usize> {
        diesel::copy_from(chat_members::table)
            .from_insertable(self.rows(0..self.len()))
            .execute(c)
    }
}
