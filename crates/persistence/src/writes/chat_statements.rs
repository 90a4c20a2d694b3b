//! createChat's statements (the unit of work that sends them is
//! [`super::create_chat`]), and member rows as a [`RowSet`].
//!
//! Whose transaction createChat runs in is decided with every write's, in
//! [`crate::writes::transaction`]: the store's ([`create_chat_statements`])
//! or none but its statements' own ([`create_chat_on_its_own`]).

use std::ops::Range;

use chrono::{DateTime, Utc};
use diesel::pg::PgConnection;
use diesel::{ExecuteCopyFromDsl, QueryResult};
use uuid::Uuid;

use chatlab_domain::{CreateChat, MessageKind, PublishMode, Sending, WritePlan};

use crate::models::{ChatRow, MemberRow, MessageRow};
use crate::queries::{
    BlockInsert, CreateChatSingle, CreateChatSingleWithOutbox, InsertMembersUnnest,
    InsertOutboxRow, SingleRows,
};
use crate::schema::{chat_members, chats, messages};
use crate::session::{DbSession, Executable, Pipelined};
use crate::writes::row_writes::{RowSet, WriteCount, write_rows};
use crate::writes::transaction::OnTheirOwn;

/// A committed createChat's statements, rows and round trips (BEGIN and
/// COMMIT included).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct ChatWrite {
    pub count: WriteCount,
    pub round_trips: u64,
}

/// The three steps of createChat inside the store's transaction (see
/// [`Transaction`]): chat row, member rows, system message, sent `sending`:
/// one by one, the members by the plan's [`chatlab_domain::RowsBy`]; as
/// one statement that does all three; or as one flight without BEGIN and
/// COMMIT of its own. The session counts the round trips.
pub(crate) async fn create_chat_statements(
    s: &mut DbSession,
    command: &CreateChat,
    plan: WritePlan,
    mode: PublishMode,
    sending: Sending,
) -> QueryResult<WriteCount> {
    match sending {
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

/// createChat with no BEGIN from the store ([`OnTheirOwn`]): one statement
/// that commits by itself, or one flight from BEGIN to COMMIT, the event's
/// outbox row among them when given.
pub(crate) async fn create_chat_on_its_own(
    s: &mut DbSession,
    command: &CreateChat,
    mode: PublishMode,
    own: OnTheirOwn,
    outbox: Option<InsertOutboxRow>,
) -> QueryResult<WriteCount> {
    match own {
        OnTheirOwn::OneStatement => create_chat_single(s, command, mode, outbox).await,
        OnTheirOwn::OneFlight => {
            let pipelined = s
                .pipelined_transaction(pipeline_statements(command, mode, outbox))
                .await?;
            Ok(pipeline_write(&pipelined))
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
fn pipeline_statements(
    command: &CreateChat,
    mode: PublishMode,
    outbox: Option<InsertOutboxRow>,
) -> Vec<Executable> {
    let mut statements = vec![
        Executable::new(diesel::insert_into(chats::table).values(chat_row(command, mode))),
        Members::of(command).insert_unnest(),
        Executable::new(diesel::insert_into(messages::table).values(system_message_row(command))),
    ];
    statements.extend(outbox.map(Executable::new));
    statements
}

/// What `pipeline`'s createChat sent: its three INSERTs and their rows
/// (the outbox row, when there is one, is not a createChat row).
fn pipeline_write(pipelined: &Pipelined) -> WriteCount {
    WriteCount {
        statements: 3,
        rows: pipelined.rows.iter().take(3).map(|&n| n as u64).sum(),
    }
}

/// createChat as one statement ([`CreateChatSingle`]), with the event's
/// outbox row in it when `outbox` is given: one round trip. It runs inside
/// the store's transaction or as a transaction by itself: all of it
/// commits, or none.
async fn create_chat_single(
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

    fn insert_one(&self, i: usize) -> Executable {
        Executable::new(diesel::insert_into(chat_members::table).values(self.row(i)))
    }

    fn insert_values(&self, range: Range<usize>) -> Executable {
        Executable::new(diesel::insert_into(chat_members::table).values(self.rows(range)))
    }

    fn insert_block(&self, range: Range<usize>) -> Executable {
        Executable::new(BlockInsert(
            diesel::insert_into(chat_members::table).values(self.rows(range)),
        ))
    }

    fn insert_unnest(&self) -> Executable {
        Executable::new(InsertMembersUnnest {
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
