//! Fan-out on write: a talk message's inbox rows, one per member but the
//! sender, written in the message's transaction by the insert strategy.
//!
//! The rows are the same whatever the strategy; what differs is how they
//! travel. `per_row`, `batch`, `unnest` and `copy` read the recipients
//! first (one round trip) and send them back as N single-row INSERTs,
//! multi-row INSERTs, one `unnest` INSERT, or one binary COPY; `single` lets the server fan out (one
//! `INSERT ... SELECT FROM chat_members`), and `pipeline` sends that
//! statement in one flight with the message's.

use diesel::prelude::*;
use diesel::{ExecuteCopyFromDsl, QueryResult};
use uuid::Uuid;

use chatlab_domain::{InsertStrategy, UserId, fanout::mentions};

use crate::create_chat::{WriteCount, rows_per_statement};
use crate::queries::{
    InsertInboxFromMembers, InsertInboxUnnest, InsertTalkIfMember, InsertTalkIfMemberLockingChat,
};
use crate::schema::{chat_members, inbox};
use crate::session::{DbSession, Piped};

/// Inbox rows per batch statement: 13,107 (five columns each).
const INBOX_ROWS_PER_STATEMENT: usize = rows_per_statement(5);

/// An `inbox` row (every field a value, none a DEFAULT, so a batch of them
/// can go by COPY).
#[derive(Debug, Clone, Copy, Insertable)]
#[diesel(
    table_name = inbox,
    check_for_backend(diesel::pg::Pg),
    treat_none_as_default_value = false
)]
pub(crate) struct InboxRow {
    pub user_id: Uuid,
    pub chat_id: Uuid,
    pub message_id: Uuid,
    pub read: bool,
    pub mentioned: bool,
}

/// Writes the inbox rows of `message` (its server-side fan-out statement,
/// which names the chat, the message, its sender and its text) by
/// `strategy`; the caller holds the transaction and has locked the chat
/// row, so the members read here stay the members until it commits.
/// `pipeline` goes as `single` here: [`insert_fanned`] sends it in the
/// message's flight.
pub(crate) async fn write_inbox(
    s: &mut DbSession,
    message: &InsertInboxFromMembers,
    strategy: InsertStrategy,
) -> QueryResult<WriteCount> {
    let row = |user_id: Uuid| InboxRow {
        user_id,
        chat_id: message.chat_id,
        message_id: message.message_id,
        read: false,
        mentioned: mentions(&message.body, UserId::from_uuid(user_id)),
    };
    let mut count = WriteCount::default();
    match strategy {
        InsertStrategy::Single | InsertStrategy::Pipeline => {
            count.rows += s.execute(message.clone()).await? as u64;
            count.statements += 1;
        }
        InsertStrategy::PerRow => {
            for user_id in recipients(s, message).await? {
                count.rows += s
                    .execute(diesel::insert_into(inbox::table).values(row(user_id)))
                    .await? as u64;
                count.statements += 1;
            }
        }
        InsertStrategy::Batch => {
            let rows: Vec<InboxRow> = recipients(s, message).await?.into_iter().map(row).collect();
            for chunk in rows.chunks(INBOX_ROWS_PER_STATEMENT) {
                count.rows += s
                    .execute(diesel::insert_into(inbox::table).values(chunk))
                    .await? as u64;
                count.statements += 1;
            }
        }
        InsertStrategy::Copy => {
            let rows: Vec<InboxRow> = recipients(s, message).await?.into_iter().map(row).collect();
            if !rows.is_empty() {
                count.rows += s
                    .copy_in("inbox", |c| {
                        diesel::copy_from(inbox::table)
                            .from_insertable(rows)
                            .execute(c)
                    })
                    .await? as u64;
                count.statements += 1;
            }
        }
        InsertStrategy::Unnest => {
            let user_ids = recipients(s, message).await?;
            if !user_ids.is_empty() {
                let mentioned = user_ids.iter().map(|&u| row(u).mentioned).collect();
                count.rows += s
                    .execute(InsertInboxUnnest {
                        chat_id: message.chat_id,
                        message_id: message.message_id,
                        user_ids,
                        mentioned,
                    })
                    .await? as u64;
                count.statements += 1;
            }
        }
    }
    Ok(count)
}

/// The members of `message`'s chat but its sender: one round trip.
async fn recipients(s: &mut DbSession, message: &InsertInboxFromMembers) -> QueryResult<Vec<Uuid>> {
    s.load(
        chat_members::table
            .filter(chat_members::chat_id.eq(message.chat_id))
            .filter(chat_members::user_id.ne(message.sender_id))
            .select(chat_members::user_id),
    )
    .await
}

/// A send that fans out on write, inside its transaction: the message
/// (locking the chat row first, see [`InsertTalkIfMemberLockingChat`]),
/// then its inbox rows by `strategy`; `pipeline` sends both statements in
/// one flight. Returns the message rows inserted (0 when the sender is no
/// member, and then the caller rolls back whatever the flight wrote) and
/// the inbox rows.
pub(crate) async fn insert_fanned(
    s: &mut DbSession,
    insert: InsertTalkIfMember,
    message: &InsertInboxFromMembers,
    strategy: InsertStrategy,
) -> QueryResult<(usize, WriteCount)> {
    let locking = InsertTalkIfMemberLockingChat(insert);
    if strategy == InsertStrategy::Pipeline {
        let flight = s
            .pipelined(vec![Piped::new(locking), Piped::new(message.clone())])
            .await?;
        let inbox_rows = flight.rows.get(1).copied().unwrap_or(0) as u64;
        let inserted = flight.rows.first().copied().unwrap_or(0);
        return Ok((
            inserted,
            WriteCount {
                statements: 1,
                rows: inbox_rows,
            },
        ));
    }
    let inserted = s.execute(locking).await?;
    if inserted == 0 {
        return Ok((0, WriteCount::default()));
    }
    Ok((inserted, write_inbox(s, message, strategy).await?))
}
