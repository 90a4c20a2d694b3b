//! A chat as its members read it: the chat, its members and its messages a
//! page at a time (each read only where the viewer is a member), and the
//! chats a user is in.

use futures_util::FutureExt;

use chatlab_domain::{
    Chat, ChatId, Entity, Member, Message, MessageId, Page, PageRequest, RepositoryError, UserId,
};

use crate::error_mapping::query_err;
use crate::reads;
use crate::session::DbSession;
use crate::store::PgStore;

impl PgStore {
    /// Reads a chat with its member count; `NotFound` if absent or if
    /// `viewer` is not one of its members.
    pub async fn get_chat(&self, id: ChatId, viewer: UserId) -> Result<Chat, RepositoryError> {
        self.db
            .run(move |s| {
                async move {
                    let (row, owner) = reads::chat_seen_by(s, id.as_uuid(), viewer.as_uuid())
                        .await
                        .map_err(query_err)?
                        .ok_or_else(|| Self::not_found(Entity::Chat, id))?;
                    let member_count = reads::member_count(s, row.id).await.map_err(query_err)?;
                    Ok(Chat {
                        id: row.id.into(),
                        name: row.name,
                        creator_id: row.creator_id.into(),
                        owner_id: owner.unwrap_or(row.creator_id).into(),
                        member_count,
                        created_at: row.created_at,
                    })
                }
                .boxed()
            })
            .await
    }

    /// Members ordered by user id, after the cursor; `NotFound` if the chat
    /// does not exist or `viewer` is not one of its members.
    pub async fn list_members(
        &self,
        chat_id: ChatId,
        viewer: UserId,
        page: PageRequest<UserId>,
    ) -> Result<Page<Member, UserId>, RepositoryError> {
        let rows = self
            .db
            .run(move |s| {
                async move {
                    let rows = reads::members_page(
                        s,
                        chat_id.as_uuid(),
                        viewer.as_uuid(),
                        page.cursor.map(|c| c.as_uuid()),
                        page.limit,
                    )
                    .await
                    .map_err(query_err)?;
                    ensure_member_behind_empty_page(s, chat_id, viewer, rows.is_empty()).await?;
                    Ok::<_, RepositoryError>(rows)
                }
                .boxed()
            })
            .await?;
        let members: Vec<Member> = rows.into_iter().map(Member::from).collect();
        Ok(Page::from_overfetch(members, page.limit, |m| m.user_id))
    }

    /// Messages newest first, strictly older than the cursor; `NotFound` if
    /// the chat does not exist or `viewer` is not one of its members.
    pub async fn list_messages(
        &self,
        chat_id: ChatId,
        viewer: UserId,
        page: PageRequest<MessageId>,
    ) -> Result<Page<Message, MessageId>, RepositoryError> {
        let rows = self
            .db
            .run(move |s| {
                async move {
                    let rows = reads::messages_page(
                        s,
                        chat_id.as_uuid(),
                        viewer.as_uuid(),
                        page.cursor.map(|c| c.as_uuid()),
                        page.limit,
                    )
                    .await
                    .map_err(query_err)?;
                    ensure_member_behind_empty_page(s, chat_id, viewer, rows.is_empty()).await?;
                    Ok::<_, RepositoryError>(rows)
                }
                .boxed()
            })
            .await?;
        let messages = reads::to_messages(rows)?;
        Ok(Page::from_overfetch(messages, page.limit, |m| m.id))
    }

    /// The chats `user` is a member of (live delivery routes by them).
    pub async fn chats_of(&self, user: UserId) -> Result<Vec<ChatId>, RepositoryError> {
        let ids = self
            .db
            .run(move |s| {
                async move { reads::chats_of(s, user.as_uuid()).await.map_err(query_err) }.boxed()
            })
            .await?;
        Ok(ids.into_iter().map(ChatId::from_uuid).collect())
    }
}

/// A list of a chat's rows, read only where the viewer is a member, came
/// back empty: either the viewer is no member (or there is no chat), which
/// answers `NotFound`, or a later page is empty legitimately. A non-empty
/// page proves membership and costs nothing more.
async fn ensure_member_behind_empty_page(
    s: &mut DbSession,
    chat_id: ChatId,
    viewer: UserId,
    empty: bool,
) -> Result<(), RepositoryError> {
    if empty
        && !reads::is_member(s, chat_id.as_uuid(), viewer.as_uuid())
            .await
            .map_err(query_err)?
    {
        return Err(PgStore::not_found(Entity::Chat, chat_id));
    }
    Ok(())
}
