//! Row types: what diesel writes and reads, converted to and from the domain.

use chrono::{DateTime, Utc};
use diesel::prelude::*;
use uuid::Uuid;

use chatlab_domain::{Member, Message, MessageKind, User};

use crate::errors::PersistenceError;
use crate::schema::{chat_members, chats, messages, users};

/// A `users` row.
#[derive(Debug, Clone, Queryable, Selectable, Insertable)]
#[diesel(table_name = users, check_for_backend(diesel::pg::Pg))]
pub(crate) struct UserRow {
    pub id: Uuid,
    pub name: String,
    pub created_at: DateTime<Utc>,
}

impl From<UserRow> for User {
    fn from(r: UserRow) -> Self {
        User {
            id: r.id.into(),
            name: r.name,
            created_at: r.created_at,
        }
    }
}

/// A `chats` row. Every field a value, none a DEFAULT: diesel caches the
/// prepared INSERT only then; a row that may hold a DEFAULT changes its SQL
/// with its values, so each INSERT would be prepared in a round trip of its
/// own (one more per createChat, which shows on the wire at a distance).
#[derive(Debug, Clone, Queryable, Selectable, Insertable)]
#[diesel(
    table_name = chats,
    check_for_backend(diesel::pg::Pg),
    treat_none_as_default_value = false
)]
pub(crate) struct ChatRow {
    pub id: Uuid,
    pub name: String,
    pub creator_id: Uuid,
    pub created_at: DateTime<Utc>,
    pub publish_mode: String,
}

/// A `chat_members` row (every field a value, none a DEFAULT, so a batch of
/// them can go by COPY).
#[derive(Debug, Clone, Copy, Queryable, Selectable, Insertable)]
#[diesel(
    table_name = chat_members,
    check_for_backend(diesel::pg::Pg),
    treat_none_as_default_value = false
)]
pub(crate) struct MemberRow {
    pub chat_id: Uuid,
    pub user_id: Uuid,
    pub joined_at: DateTime<Utc>,
}

impl From<MemberRow> for Member {
    fn from(r: MemberRow) -> Self {
        Member {
            user_id: r.user_id.into(),
            joined_at: r.joined_at,
        }
    }
}

/// A `messages` row. A system message's `sender_id` is written as NULL,
/// not as the column's DEFAULT (the same value), so a batch of rows has
/// one shape and can go by COPY.
#[derive(Debug, Clone, Queryable, Selectable, Insertable)]
#[diesel(
    table_name = messages,
    check_for_backend(diesel::pg::Pg),
    treat_none_as_default_value = false
)]
pub(crate) struct MessageRow {
    pub id: Uuid,
    pub chat_id: Uuid,
    pub sender_id: Option<Uuid>,
    pub kind: String,
    pub body: String,
    pub created_at: DateTime<Utc>,
    pub publish_mode: String,
}

impl TryFrom<MessageRow> for Message {
    type Error = PersistenceError;

    fn try_from(r: MessageRow) -> Result<Self, Self::Error> {
        let kind = MessageKind::parse(&r.kind)
            .ok_or_else(|| PersistenceError::Corrupt(format!("message kind {:?}", r.kind)))?;
        Ok(Message {
            id: r.id.into(),
            chat_id: r.chat_id.into(),
            sender_id: r.sender_id.map(Into::into),
            kind,
            body: r.body,
            created_at: r.created_at,
        })
    }
}
