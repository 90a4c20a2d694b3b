//! Unread state on PostgreSQL: one chat's read state (from the member row,
//! or with `READ_MARKER_MODE=coalesced` the marker held in memory when it
//! is further), and a member's chats newest activity first. Moving a
//! marker is a write: `writes/mark_read.rs`.

use diesel::prelude::*;
use futures_util::FutureExt;
use uuid::Uuid;

use chatlab_domain::{
    ChatId, ChatSummary, Entity, Message, MessageFanout, MessageId, MessageKind, Page, PageRequest,
    ReadState, RepositoryError, UserId,
};

use crate::error_mapping::query_err;
use crate::errors::PersistenceError;
use crate::queries::{MyChatRow, MyChatsPage, ReadStateOf};
use crate::session::DbSession;
use crate::store::PgStore;

/// One member's read state of one chat, counted by `fanout`'s rows; `None`
/// for a non-member.
pub(crate) async fn read_state_of(
    s: &mut DbSession,
    chat_id: Uuid,
    user_id: Uuid,
    fanout: MessageFanout,
    floor: Option<Uuid>,
) -> QueryResult<Option<(Option<Uuid>, i64)>> {
    match fanout {
        MessageFanout::None => {
            s.optional(ReadStateOf::<false> {
                chat_id,
                user_id,
                floor,
            })
            .await
        }
        MessageFanout::Inbox => {
            s.optional(ReadStateOf::<true> {
                chat_id,
                user_id,
                floor,
            })
            .await
        }
    }
}

pub(crate) fn read_state(chat_id: Uuid, (marker, unread): (Option<Uuid>, i64)) -> ReadState {
    ReadState {
        chat_id: ChatId::from_uuid(chat_id),
        read_up_to: marker.map(MessageId::from_uuid),
        unread_count: unread,
    }
}

fn summary(row: MyChatRow) -> Result<ChatSummary, PersistenceError> {
    let (chat_id, name, marker, last_id, sender_id, kind, body, created_at, unread) = row;
    let kind = MessageKind::parse(&kind)
        .ok_or_else(|| PersistenceError::Corrupt(format!("message kind {kind:?}")))?;
    Ok(ChatSummary {
        chat_id: ChatId::from_uuid(chat_id),
        name,
        last_message: Message {
            id: MessageId::from_uuid(last_id),
            chat_id: ChatId::from_uuid(chat_id),
            sender_id: sender_id.map(UserId::from_uuid),
            kind,
            body,
            created_at,
        },
        read: read_state(chat_id, (marker, unread)),
    })
}

impl PgStore {
    /// The caller's read state of one chat, counted from `fanout`'s rows;
    /// `NotFound` when they are no member.
    pub async fn read_state(
        &self,
        chat_id: ChatId,
        user: UserId,
        fanout: MessageFanout,
    ) -> Result<ReadState, RepositoryError> {
        let (chat, user) = (chat_id.as_uuid(), user.as_uuid());
        let floor = self.read_markers().held_by(chat, user);
        let state = self
            .db()
            .run(move |s| {
                async move {
                    read_state_of(s, chat, user, fanout, floor)
                        .await
                        .map_err(query_err)
                }
                .boxed()
            })
            .await?
            .ok_or_else(|| Self::not_found(Entity::Chat, chat_id))?;
        Ok(read_state(chat, state))
    }

    /// The chats of `user`, newest activity first, each with its newest
    /// message and the user's read state, a page at a time (the cursor is
    /// the last chat's newest message id).
    pub async fn my_chats(
        &self,
        user: UserId,
        page: PageRequest<MessageId>,
        fanout: MessageFanout,
    ) -> Result<Page<ChatSummary, MessageId>, RepositoryError> {
        let user_id = user.as_uuid();
        let before = page.cursor.map_or(Uuid::max(), |c| c.as_uuid());
        // The page's limit is at most 100 (PageRequest checks it).
        let limit = i32::try_from(page.limit).unwrap_or(i32::MAX - 1) + 1;
        let rows: Vec<MyChatRow> = self
            .db()
            .run(move |s| {
                async move {
                    match fanout {
                        MessageFanout::None => {
                            s.load(MyChatsPage::<false> {
                                user_id,
                                before,
                                limit,
                            })
                            .await
                        }
                        MessageFanout::Inbox => {
                            s.load(MyChatsPage::<true> {
                                user_id,
                                before,
                                limit,
                            })
                            .await
                        }
                    }
                    .map_err(query_err)
                }
                .boxed()
            })
            .await?;
        let chats = rows
            .into_iter()
            .map(summary)
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Page::from_overfetch(chats, page.limit, |c| {
            c.last_message.id
        }))
    }
}
