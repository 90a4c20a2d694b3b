//! createChat's transaction body and the member insert strategies.
//!
//! The functions here take a [`DbSession`] that is already inside
//! a transaction; [`crate::store::PgStore::create_chat`] opens it, so the
//! boundary is visible in one place.

use chrono::{DateTime, Utc};
use diesel::{ExecuteCopyFromDsl, QueryResult};
use uuid::Uuid;

use chatlab_domain::{CreateChat, InsertStrategy, MessageKind, PublishMode};

use crate::models::{ChatRow, MemberRow, MessageRow};
use crate::queries::{
    CreateChatSingle, CreateChatSingleWithOutbox, InsertMembersUnnest, InsertOutboxRow, SingleRows,
};
use crate::schema::{chat_members, chats, messages};
use crate::session::{DbSession, Piped, Pipelined};

/// PostgreSQL's limit on bind parameters in one statement (a 16-bit count in
/// the wire protocol's Bind message).
pub(crate) const MAX_BIND_PARAMS: usize = 65_535;

/// Most rows one multi-row INSERT of `columns` columns may carry.
pub(crate) const fn rows_per_statement(columns: usize) -> usize {
    MAX_BIND_PARAMS / columns
}

/// Member rows per batch statement: 21,845 (three columns each).
pub(crate) const MEMBER_ROWS_PER_STATEMENT: usize = rows_per_statement(3);

// The largest chunk fits; one row more would not.
const _: () = assert!(MEMBER_ROWS_PER_STATEMENT * 3 <= MAX_BIND_PARAMS);
const _: () = assert!((MEMBER_ROWS_PER_STATEMENT + 1) * 3 > MAX_BIND_PARAMS);

/// What a write sent: INSERT statements and rows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct WriteCount {
    pub statements: u64,
    pub rows: u64,
}

/// A committed createChat's statements, rows and round trips (BEGIN and
/// COMMIT included).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct ChatWrite {
    pub count: WriteCount,
    pub round_trips: u64,
}

impl WriteCount {
    fn add(self, other: WriteCount) -> WriteCount {
        WriteCount {
            statements: self.statements + other.statements,
            rows: self.rows + other.rows,
        }
    }
}

/// The three steps of createChat: chat row, member rows, system message;
/// under `single`, one statement that does all three; under `pipeline`,
/// unnest's three statements in one flight. The caller holds the
/// transaction open; the round trips are the body's own.
pub(crate) async fn create_chat_inner(
    s: &mut DbSession,
    command: &CreateChat,
    strategy: InsertStrategy,
    mode: PublishMode,
) -> QueryResult<ChatWrite> {
    match strategy {
        InsertStrategy::Single => return create_chat_single(s, command, mode, None).await,
        InsertStrategy::Pipeline => {
            let pipelined = s
                .pipelined(pipeline_statements(command, mode, None))
                .await?;
            return Ok(pipeline_write(&pipelined));
        }
        InsertStrategy::PerRow
        | InsertStrategy::Batch
        | InsertStrategy::Unnest
        | InsertStrategy::Copy => {}
    }
    let chat_id = command.chat_id.as_uuid();
    s.execute(diesel::insert_into(chats::table).values(chat_row(command, mode)))
        .await?;
    let members: Vec<Uuid> = command.member_ids.iter().map(|id| id.as_uuid()).collect();
    let written = insert_members(s, chat_id, &members, command.created_at, strategy).await?;
    s.execute(diesel::insert_into(messages::table).values(system_message_row(command)))
        .await?;
    let count = written.add(WriteCount {
        statements: 2,
        rows: 2,
    });
    Ok(ChatWrite {
        count,
        round_trips: count.statements,
    })
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
        Piped::new(InsertMembersUnnest {
            chat_id: command.chat_id.as_uuid(),
            joined_at: command.created_at,
            user_ids: command.member_ids.iter().map(|id| id.as_uuid()).collect(),
        }),
        Piped::new(diesel::insert_into(messages::table).values(system_message_row(command))),
    ];
    statements.extend(outbox.map(Piped::new));
    statements
}

/// What `pipeline`'s createChat sent: its three INSERTs and their rows
/// (the outbox row, when there is one, is not a createChat row), in the
/// pipeline's round trips.
pub(crate) fn pipeline_write(pipelined: &Pipelined) -> ChatWrite {
    ChatWrite {
        count: WriteCount {
            statements: 3,
            rows: pipelined.rows.iter().take(3).map(|&n| n as u64).sum(),
        },
        round_trips: pipelined.round_trips,
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
) -> QueryResult<ChatWrite> {
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
    Ok(ChatWrite {
        count: WriteCount {
            statements: 1,
            rows: members + 2,
        },
        round_trips: 1,
    })
}

/// Inserts one membership row per id, by `strategy`. The ids must be
/// distinct (the domain collapses duplicates).
pub(crate) async fn insert_members(
    s: &mut DbSession,
    chat_id: Uuid,
    user_ids: &[Uuid],
    joined_at: DateTime<Utc>,
    strategy: InsertStrategy,
) -> QueryResult<WriteCount> {
    let row = |user_id: Uuid| MemberRow {
        chat_id,
        user_id,
        joined_at,
    };
    let mut count = WriteCount::default();
    match strategy {
        // A single-row INSERT has a fixed shape, so diesel prepares it once
        // per connection and reuses it: each member costs a Bind/Execute
        // round trip, not a parse and plan.
        InsertStrategy::PerRow => {
            for &user_id in user_ids {
                count.rows += s
                    .execute(diesel::insert_into(chat_members::table).values(row(user_id)))
                    .await? as u64;
                count.statements += 1;
            }
        }
        // A multi-row INSERT's SQL text depends on its row count, so diesel
        // never caches it: every statement is parsed and planned afresh.
        // Chunks keep each one under PostgreSQL's 65,535 bind parameters.
        InsertStrategy::Batch => {
            let rows: Vec<MemberRow> = user_ids.iter().copied().map(row).collect();
            for chunk in rows.chunks(MEMBER_ROWS_PER_STATEMENT) {
                count.rows += s
                    .execute(diesel::insert_into(chat_members::table).values(chunk))
                    .await? as u64;
                count.statements += 1;
            }
        }
        // The rows streamed in the COPY protocol: no parameters, no plan.
        InsertStrategy::Copy => {
            let rows: Vec<MemberRow> = user_ids.iter().copied().map(row).collect();
            count.rows += s
                .copy_in("chat_members", |c| {
                    diesel::copy_from(chat_members::table)
                        .from_insertable(rows)
                        .execute(c)
                })
                .await? as u64;
            count.statements += 1;
        }
        // Three bind parameters for any count: one cached statement. Member
        // rows alone (an import job) under `single` and `pipeline` go the
        // same way.
        InsertStrategy::Unnest | InsertStrategy::Single | InsertStrategy::Pipeline => {
            count.rows += s
                .execute(InsertMembersUnnest {
                    chat_id,
                    joined_at,
                    user_ids: user_ids.to_vec(),
                })
                .await? as u64;
            count.statements += 1;
        }
    }
    Ok(count)
}
