//! Fan-out on write: a talk message's inbox rows, one per member but the
//! sender, written in the message's transaction by the insert strategy.
//!
//! The rows are the same whatever the strategy; what differs is how they
//! travel, as the strategy's [`WritePlan`] says. `per_row`, `batch`,
//! `unnest` and `copy` read the recipients first (one round trip) and send
//! them back as rows ([`write_rows`]: N single-row INSERTs, multi-row
//! INSERTs, one `unnest` INSERT, or one binary COPY); `single` lets the
//! server fan out (one `INSERT ... SELECT FROM chat_members`), and
//! `pipeline` sends that statement in one flight with the message's.

use std::ops::Range;

use diesel::pg::PgConnection;
use diesel::prelude::*;
use diesel::{ExecuteCopyFromDsl, QueryResult};
use uuid::Uuid;

use chatlab_domain::{Recipients, Sending, UserId, WritePlan, fanout::mentions};

use crate::queries::{
    BlockInsert, InsertInboxFromMembers, InsertInboxUnnest, InsertTalkIfMember,
    InsertTalkIfMemberLockingChat,
};
use crate::schema::{chat_members, inbox};
use crate::session::{DbSession, Executable};
use crate::writes::row_writes::{RowSet, WriteCount, write_rows};

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

/// One message's inbox rows, for recipients the application read.
struct InboxRows {
    chat_id: Uuid,
    message_id: Uuid,
    user_ids: Vec<Uuid>,
    /// Whether the message mentions each recipient, in the same order.
    mentioned: Vec<bool>,
}

impl InboxRows {
    fn of(message: &InsertInboxFromMembers, user_ids: Vec<Uuid>) -> Self {
        let mentioned = user_ids
            .iter()
            .map(|&u| mentions(&message.body, UserId::from_uuid(u)))
            .collect();
        Self {
            chat_id: message.chat_id,
            message_id: message.message_id,
            user_ids,
            mentioned,
        }
    }

    fn row(&self, i: usize) -> InboxRow {
        InboxRow {
            user_id: self.user_ids[i],
            chat_id: self.chat_id,
            message_id: self.message_id,
            read: false,
            mentioned: self.mentioned[i],
        }
    }

    fn rows(&self, range: Range<usize>) -> Vec<InboxRow> {
        range.map(|i| self.row(i)).collect()
    }
}

impl RowSet for InboxRows {
    const TABLE: &'static str = "inbox";
    const COLUMNS: usize = 5;

    fn len(&self) -> usize {
        self.user_ids.len()
    }

    fn insert_one(&self, i: usize) -> Executable {
        Executable::new(diesel::insert_into(inbox::table).values(self.row(i)))
    }

    fn insert_values(&self, range: Range<usize>) -> Executable {
        Executable::new(diesel::insert_into(inbox::table).values(self.rows(range)))
    }

    fn insert_block(&self, range: Range<usize>) -> Executable {
        Executable::new(BlockInsert(
            diesel::insert_into(inbox::table).values(self.rows(range)),
        ))
    }

    fn insert_unnest(&self) -> Executable {
        Executable::new(InsertInboxUnnest {
            chat_id: self.chat_id,
            message_id: self.message_id,
            user_ids: self.user_ids.clone(),
            mentioned: self.mentioned.clone(),
        })
    }

    fn copy(&self, c: &mut PgConnection) -> QueryResult<usize> {
        diesel::copy_from(inbox::table)
            .from_insertable(self.rows(0..self.len()))
            .execute(c)
    }
}

/// Writes the inbox rows of `message` (its server-side fan-out statement,
/// which names the chat, the message, its sender and its text) by `plan`:
/// the server selects the recipients itself, or the application reads
/// them and sends the rows the plan's way. The caller holds the
/// transaction and has locked the chat row, so the members read here stay
/// the members until it commits. A plan that sends one flight has
/// [`insert_fanned`] send the server-side statement in the message's.
pub(crate) async fn write_inbox(
    s: &mut DbSession,
    message: &InsertInboxFromMembers,
    plan: WritePlan,
) -> QueryResult<WriteCount> {
    match plan.recipients {
        Recipients::OnServer => Ok(WriteCount {
            statements: 1,
            rows: s.execute(message.clone()).await? as u64,
        }),
        Recipients::Fetched => {
            let rows = InboxRows::of(message, recipients(s, message).await?);
            write_rows(s, &rows, plan.rows).await
        }
    }
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
/// then its inbox rows by `plan`; a plan that sends one flight and lets the
/// server select the recipients sends both statements in one. Returns the message rows inserted (0 when the sender is no
/// member, and then the caller rolls back whatever the flight wrote) and
/// the inbox rows.
pub(crate) async fn insert_fanned(
    s: &mut DbSession,
    insert: InsertTalkIfMember,
    message: &InsertInboxFromMembers,
    plan: WritePlan,
) -> QueryResult<(usize, WriteCount)> {
    let locking = InsertTalkIfMemberLockingChat(insert);
    if (plan.sending, plan.recipients) == (Sending::OneFlight, Recipients::OnServer) {
        let flight = s
            .pipelined(vec![
                Executable::new(locking),
                Executable::new(message.clone()),
            ])
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
    Ok((inserted, write_inbox(s, message, plan).await?))
}
