//! Reads: the read queries here, each taking a session so callers can
//! compose them; the units of work on [`crate::store::PgStore`] that read
//! a chat, its members and messages ([`chat_reads`]), and a member's read state
//! and unread counts ([`read_state`]).

mod chat_reads;
pub(crate) mod read_state;

use std::collections::HashSet;

use diesel::dsl::count_star;
use diesel::prelude::*;
use uuid::Uuid;

use chatlab_domain::{Message, UserId};

use crate::models::{ChatRow, MemberRow, MessageRow, UserRow};
use crate::queries::ViewerIsMember;
use crate::schema::{chat_members, chats, messages, users};
use crate::session::DbSession;

pub(crate) async fn user(s: &mut DbSession, id: Uuid) -> QueryResult<Option<UserRow>> {
    s.optional(users::table.find(id).select(UserRow::as_select()))
        .await
}

/// The chat and its handed-over owner, if `viewer` is one of its members: for anyone else it does
/// not exist. One statement.
pub(crate) async fn chat_seen_by(
    s: &mut DbSession,
    id: Uuid,
    viewer: Uuid,
) -> QueryResult<Option<(ChatRow, Option<Uuid>)>> {
    s.optional(
        chats::table
            .find(id)
            .filter(viewer_is_member(id, viewer))
            .select((ChatRow::as_select(), chats::owner_id)),
    )
    .await
}

fn viewer_is_member(chat_id: Uuid, viewer: Uuid) -> ViewerIsMember {
    ViewerIsMember { chat_id, viewer }
}

/// Whether `user` is a member of the chat (false when there is no chat).
pub(crate) async fn is_member(s: &mut DbSession, chat_id: Uuid, user: Uuid) -> QueryResult<bool> {
    s.get_result(diesel::select(viewer_is_member(chat_id, user)))
        .await
}

/// The chat's owner (the creator until they hand it over) and whether
/// `user` is a member, or `None` when there is no such chat. One
/// statement.
pub(crate) async fn owner_and_membership(
    s: &mut DbSession,
    chat_id: Uuid,
    user: Uuid,
) -> QueryResult<Option<(Uuid, bool)>> {
    let row: Option<(Uuid, Option<Uuid>, bool)> = s
        .optional(chats::table.find(chat_id).select((
            chats::creator_id,
            chats::owner_id,
            viewer_is_member(chat_id, user),
        )))
        .await?;
    Ok(row.map(|(creator, owner, member)| (owner.unwrap_or(creator), member)))
}

/// [`owner_and_membership`], locking the chat row against other membership
/// changes until the transaction ends (`FOR NO KEY UPDATE`: messages and
/// member rows, whose foreign keys take `KEY SHARE`, are not blocked).
pub(crate) async fn owner_and_membership_locked(
    s: &mut DbSession,
    chat_id: Uuid,
    user: Uuid,
) -> QueryResult<Option<(Uuid, bool)>> {
    let row: Option<(Uuid, Option<Uuid>, bool)> = s
        .optional(
            chats::table
                .find(chat_id)
                .select((
                    chats::creator_id,
                    chats::owner_id,
                    viewer_is_member(chat_id, user),
                ))
                .for_no_key_update(),
        )
        .await?;
    Ok(row.map(|(creator, owner, member)| (owner.unwrap_or(creator), member)))
}

/// The chats `user` is a member of (the index on `chat_members.user_id`).
pub(crate) async fn chats_of(s: &mut DbSession, user: Uuid) -> QueryResult<Vec<Uuid>> {
    s.load(
        chat_members::table
            .filter(chat_members::user_id.eq(user))
            .select(chat_members::chat_id),
    )
    .await
}

/// Which of `ids` are members of the chat already.
pub(crate) async fn members_among(
    s: &mut DbSession,
    chat_id: Uuid,
    ids: &[UserId],
) -> QueryResult<Vec<UserId>> {
    let found: HashSet<Uuid> = s
        .load::<_, Uuid>(
            chat_members::table
                .filter(chat_members::chat_id.eq(chat_id))
                .filter(chat_members::user_id.eq_any(uuids(ids)))
                .select(chat_members::user_id),
        )
        .await?
        .into_iter()
        .collect();
    Ok(sift(ids, &found, true))
}

/// The ids as UUIDs.
fn uuids(ids: &[UserId]) -> Vec<Uuid> {
    ids.iter().map(|id| id.as_uuid()).collect()
}

/// The ids among `ids` that are in `found` (`present`) or are not, in the
/// order given.
fn sift(ids: &[UserId], found: &HashSet<Uuid>, present: bool) -> Vec<UserId> {
    ids.iter()
        .copied()
        .filter(|id| found.contains(&id.as_uuid()) == present)
        .collect()
}

pub(crate) async fn member_count(s: &mut DbSession, chat_id: Uuid) -> QueryResult<i64> {
    s.get_result(
        chat_members::table
            .filter(chat_members::chat_id.eq(chat_id))
            .select(count_star()),
    )
    .await
}

/// Up to `limit + 1` members after `after`, by user id; none unless
/// `viewer` is a member.
pub(crate) async fn members_page(
    s: &mut DbSession,
    chat_id: Uuid,
    viewer: Uuid,
    after: Option<Uuid>,
    limit: u32,
) -> QueryResult<Vec<MemberRow>> {
    // Two fixed shapes rather than one boxed query: each is a cached
    // prepared statement. The membership test is an uncorrelated EXISTS,
    // one primary-key probe in the same statement.
    let of_chat = chat_members::table
        .filter(chat_members::chat_id.eq(chat_id))
        .filter(viewer_is_member(chat_id, viewer));
    let limit = i64::from(limit) + 1;
    match after {
        Some(after) => {
            s.load(
                of_chat
                    .filter(chat_members::user_id.gt(after))
                    .select(MemberRow::as_select())
                    .order(chat_members::user_id.asc())
                    .limit(limit),
            )
            .await
        }
        None => {
            s.load(
                of_chat
                    .select(MemberRow::as_select())
                    .order(chat_members::user_id.asc())
                    .limit(limit),
            )
            .await
        }
    }
}

/// Up to `limit + 1` messages older than `before`, newest first; none
/// unless `viewer` is a member.
pub(crate) async fn messages_page(
    s: &mut DbSession,
    chat_id: Uuid,
    viewer: Uuid,
    before: Option<Uuid>,
    limit: u32,
) -> QueryResult<Vec<MessageRow>> {
    let of_chat = messages::table
        .filter(messages::chat_id.eq(chat_id))
        .filter(viewer_is_member(chat_id, viewer));
    let limit = i64::from(limit) + 1;
    match before {
        Some(before) => {
            s.load(
                of_chat
                    .filter(messages::id.lt(before))
                    .select(MessageRow::as_select())
                    .order(messages::id.desc())
                    .limit(limit),
            )
            .await
        }
        None => {
            s.load(
                of_chat
                    .select(MessageRow::as_select())
                    .order(messages::id.desc())
                    .limit(limit),
            )
            .await
        }
    }
}

/// The ids among `ids` that name no user, in the order given.
pub(crate) async fn missing_users(s: &mut DbSession, ids: &[UserId]) -> QueryResult<Vec<UserId>> {
    let found: HashSet<Uuid> = s
        .load::<_, Uuid>(
            users::table
                .filter(users::id.eq_any(uuids(ids)))
                .select(users::id),
        )
        .await?
        .into_iter()
        .collect();
    Ok(sift(ids, &found, false))
}

/// Converts message rows, failing on a row the domain cannot represent.
pub(crate) fn to_messages(
    rows: Vec<MessageRow>,
) -> Result<Vec<Message>, crate::errors::PersistenceError> {
    rows.into_iter().map(Message::try_from).collect()
}
