//! Read queries, each taking a connection so callers can compose them.

use std::collections::HashSet;

use diesel::dsl::{count_star, exists};
use diesel::prelude::*;
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use uuid::Uuid;

use chatlab_domain::{Message, UserId};

use crate::models::{ChatRow, MemberRow, MessageRow, UserRow};
use crate::schema::{chat_members, chats, messages, users};

pub(crate) async fn user(conn: &mut AsyncPgConnection, id: Uuid) -> QueryResult<Option<UserRow>> {
    users::table
        .find(id)
        .select(UserRow::as_select())
        .first(conn)
        .await
        .optional()
}

pub(crate) async fn chat(conn: &mut AsyncPgConnection, id: Uuid) -> QueryResult<Option<ChatRow>> {
    chats::table
        .find(id)
        .select(ChatRow::as_select())
        .first(conn)
        .await
        .optional()
}

pub(crate) async fn chat_exists(conn: &mut AsyncPgConnection, id: Uuid) -> QueryResult<bool> {
    diesel::select(exists(chats::table.find(id)))
        .get_result(conn)
        .await
}

pub(crate) async fn member_count(conn: &mut AsyncPgConnection, chat_id: Uuid) -> QueryResult<i64> {
    chat_members::table
        .filter(chat_members::chat_id.eq(chat_id))
        .select(count_star())
        .get_result(conn)
        .await
}

/// Up to `limit + 1` members after `after`, by user id.
pub(crate) async fn members_page(
    conn: &mut AsyncPgConnection,
    chat_id: Uuid,
    after: Option<Uuid>,
    limit: u32,
) -> QueryResult<Vec<MemberRow>> {
    let mut query = chat_members::table
        .filter(chat_members::chat_id.eq(chat_id))
        .select(MemberRow::as_select())
        .order(chat_members::user_id.asc())
        .limit(i64::from(limit) + 1)
        .into_boxed();
    if let Some(after) = after {
        query = query.filter(chat_members::user_id.gt(after));
    }
    query.load(conn).await
}

/// Up to `limit + 1` messages older than `before`, newest first.
pub(crate) async fn messages_page(
    conn: &mut AsyncPgConnection,
    chat_id: Uuid,
    before: Option<Uuid>,
    limit: u32,
) -> QueryResult<Vec<MessageRow>> {
    let mut query = messages::table
        .filter(messages::chat_id.eq(chat_id))
        .select(MessageRow::as_select())
        .order(messages::id.desc())
        .limit(i64::from(limit) + 1)
        .into_boxed();
    if let Some(before) = before {
        query = query.filter(messages::id.lt(before));
    }
    query.load(conn).await
}

/// The ids among `ids` that name no user, in the order given.
pub(crate) async fn missing_users(
    conn: &mut AsyncPgConnection,
    ids: &[UserId],
) -> QueryResult<Vec<UserId>> {
    let wanted: Vec<Uuid> = ids.iter().map(|id| id.as_uuid()).collect();
    let found: HashSet<Uuid> = users::table
        .filter(users::id.eq_any(&wanted))
        .select(users::id)
        .load::<Uuid>(conn)
        .await?
        .into_iter()
        .collect();
    Ok(ids
        .iter()
        .copied()
        .filter(|id| !found.contains(&id.as_uuid()))
        .collect())
}

/// Converts message rows, failing on a row the domain cannot represent.
pub(crate) fn to_messages(
    rows: Vec<MessageRow>,
) -> Result<Vec<Message>, crate::errors::PersistenceError> {
    rows.into_iter().map(Message::try_from).collect()
}
