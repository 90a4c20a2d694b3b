//! Membership changes on PostgreSQL: adding members (by the insert
//! strategy), removing one or leaving, and handing the ownership over.
//!
//! Each is one transaction: it locks the chat row against other membership
//! changes (`FOR NO KEY UPDATE`, which posting does not wait for), checks
//! who may do it, writes the change and its `membership` message, and runs
//! its event's step before COMMIT ([`Publishing`]); the event follows the message's
//! publish mode like any other write's.

use std::time::Duration;

use diesel::prelude::*;
use diesel::result::{DatabaseErrorKind, Error as DieselError};
use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use tracing::instrument;

use chatlab_domain::{
    AddMembers, ChatId, Entity, Event, InsertStrategy, KeyClaim, Keyed, MessageId, MessageKind,
    PublishMode, RemoveMember, RepositoryError, TransferOwnership, UserId,
};

use crate::error_mapping::{name_unknown_users, query_err};
use crate::events::publishing::{Publishing, TxError};
use crate::models::MessageRow;
use crate::reads;
use crate::schema::{chat_members, chats, inbox, messages};
use crate::session::DbSession;
use crate::store::PgStore;
use crate::writes::chat_statements::Members;
use crate::writes::idempotency::{self, Claimed};
use crate::writes::row_writes::write_rows;

/// One membership change's record: its `membership` message.
struct Change {
    chat_id: ChatId,
    message_id: MessageId,
    actor: UserId,
    body: String,
    created_at: chrono::DateTime<chrono::Utc>,
}

/// Writes the change's `membership` message (in `mode`), then the publish
/// event's step before COMMIT: the last two steps of every change.
async fn record(
    s: &mut DbSession,
    change: Change,
    mode: PublishMode,
    publishing: &Publishing,
) -> Result<(), TxError> {
    let row = MessageRow {
        id: change.message_id.as_uuid(),
        chat_id: change.chat_id.as_uuid(),
        sender_id: Some(change.actor.as_uuid()),
        kind: MessageKind::Membership.as_str().to_owned(),
        body: change.body,
        created_at: change.created_at,
        publish_mode: mode.as_str().to_owned(),
    };
    s.execute(diesel::insert_into(messages::table).values(row))
        .await?;
    publishing.before_commit(s).await
}

/// The chat's owner, after checking that `actor` is a member (for anyone
/// else the chat does not exist); locks the chat row.
async fn owner_seen_by(
    s: &mut DbSession,
    chat_id: ChatId,
    actor: UserId,
) -> Result<UserId, TxError> {
    match reads::owner_and_membership_locked(s, chat_id.as_uuid(), actor.as_uuid()).await? {
        Some((owner, true)) => Ok(UserId::from_uuid(owner)),
        _ => Err(refused(PgStore::not_found(Entity::Chat, chat_id))),
    }
}

fn refused(e: RepositoryError) -> TxError {
    TxError::Refused(e)
}

fn not_the_owner(chat_id: ChatId, user_id: UserId) -> TxError {
    refused(RepositoryError::NotTheOwner { chat_id, user_id })
}

fn is_unique_violation(e: &DieselError) -> bool {
    matches!(
        e,
        DieselError::DatabaseError(DatabaseErrorKind::UniqueViolation, _)
    )
}

/// addMembers' unit of work.
async fn add_members_work(
    s: &mut DbSession,
    command: &AddMembers,
    strategy: InsertStrategy,
    publishing: &Publishing,
    mode: PublishMode,
    key: Option<&KeyClaim>,
    retention: Duration,
) -> Result<Keyed<()>, RepositoryError> {
    let chat_id = command.chat_id;
    let outcome = s
        .transaction(async |s| {
            if let Some(key) = key
                && let Claimed::Replay(response) = idempotency::claim(s, key, retention).await?
            {
                return Ok(Keyed::Replayed(response));
            }
            let owner = owner_seen_by(s, chat_id, command.actor_id).await?;
            if owner != command.actor_id {
                return Err(not_the_owner(chat_id, command.actor_id));
            }
            let members = Members {
                chat_id: chat_id.as_uuid(),
                joined_at: command.created_at,
                user_ids: command.user_ids.iter().map(|id| id.as_uuid()).collect(),
            };
            write_rows(s, &members, strategy.plan().rows).await?;
            let change = Change {
                chat_id,
                message_id: command.message_id,
                actor: command.actor_id,
                body: command.message_body(),
                created_at: command.created_at,
            };
            record(s, change, mode, publishing).await?;
            Ok::<_, TxError>(Keyed::Fresh(()))
        })
        .await;
    match outcome {
        Ok(done) => Ok(done),
        // Rolled back: say which users are members already, or unknown.
        Err(TxError::Db(e)) if is_unique_violation(&e) => {
            match reads::members_among(s, chat_id.as_uuid(), &command.user_ids).await {
                Ok(already) if !already.is_empty() => Err(RepositoryError::AlreadyMembers(already)),
                Ok(_) => Err(query_err(e)),
                Err(e) => Err(query_err(e)),
            }
        }
        Err(TxError::Db(e)) => Err(name_unknown_users(s, &command.user_ids, e).await),
        Err(e) => Err(e.into()),
    }
}

/// removeMember's unit of work.
async fn remove_member_work(
    s: &mut DbSession,
    command: &RemoveMember,
    publishing: &Publishing,
    mode: PublishMode,
) -> Result<(), RepositoryError> {
    let chat_id = command.chat_id;
    s.transaction(async |s| {
        let owner = owner_seen_by(s, chat_id, command.actor_id).await?;
        if command.is_leaving() && owner == command.actor_id {
            return Err(refused(RepositoryError::OwnerCannotLeave(chat_id)));
        }
        if !command.is_leaving() && owner != command.actor_id {
            return Err(not_the_owner(chat_id, command.actor_id));
        }
        let removed = s
            .execute(
                diesel::delete(chat_members::table)
                    .filter(chat_members::chat_id.eq(chat_id.as_uuid()))
                    .filter(chat_members::user_id.eq(command.user_id.as_uuid())),
            )
            .await?;
        if removed == 0 {
            return Err(refused(PgStore::not_found(Entity::Member, command.user_id)));
        }
        // Their inbox rows of the chat go with them, whichever fan-out
        // wrote the chat's messages (none leaves nothing to delete): a
        // later return starts from what is sent after it.
        s.execute(
            diesel::delete(inbox::table)
                .filter(inbox::user_id.eq(command.user_id.as_uuid()))
                .filter(inbox::chat_id.eq(chat_id.as_uuid())),
        )
        .await?;
        let change = Change {
            chat_id,
            message_id: command.message_id,
            actor: command.actor_id,
            body: command.message_body(),
            created_at: command.created_at,
        };
        record(s, change, mode, publishing).await
    })
    .await
    .map_err(RepositoryError::from)
}

/// transferOwnership's unit of work.
async fn transfer_work(
    s: &mut DbSession,
    command: &TransferOwnership,
    publishing: &Publishing,
    mode: PublishMode,
) -> Result<(), RepositoryError> {
    let chat_id = command.chat_id;
    s.transaction(async |s| {
        let owner = owner_seen_by(s, chat_id, command.actor_id).await?;
        if owner != command.actor_id {
            return Err(not_the_owner(chat_id, command.actor_id));
        }
        if command.owner_id == owner {
            return Err(refused(RepositoryError::Conflict(format!(
                "user {} owns chat {chat_id} already",
                command.owner_id
            ))));
        }
        if !reads::is_member(s, chat_id.as_uuid(), command.owner_id.as_uuid()).await? {
            return Err(refused(RepositoryError::NotAMember {
                chat_id,
                user_id: command.owner_id,
            }));
        }
        s.execute(
            diesel::update(chats::table.find(chat_id.as_uuid()))
                .set(chats::owner_id.eq(Some(command.owner_id.as_uuid()))),
        )
        .await?;
        let change = Change {
            chat_id,
            message_id: command.message_id,
            actor: command.actor_id,
            body: command.message_body(),
            created_at: command.created_at,
        };
        record(s, change, mode, publishing).await
    })
    .await
    .map_err(RepositoryError::from)
}

impl PgStore {
    /// Adds members to a chat (the owner only), by `strategy`, with a
    /// `membership` message and its `members.added` event published by
    /// `mode`. Members already in the chat answer `AlreadyMembers`, unknown
    /// ids `UnknownUsers`, and nothing is written. With a `key`, as
    /// [`PgStore::create_chat_keyed`].
    #[instrument(skip_all, fields(
        chat_id = %command.chat_id,
        strategy = strategy.as_str(),
        publish_mode = mode.as_str(),
        members = command.user_ids.len(),
    ))]
    pub async fn add_members(
        &self,
        command: AddMembers,
        strategy: InsertStrategy,
        mode: PublishMode,
        key: Option<KeyClaim>,
    ) -> Result<Keyed<()>, RepositoryError> {
        let publishing = self.publishing(mode, || {
            Event::members_added(&command, mode)
                .with_trace_parent(chatlab_telemetry::current_traceparent())
        })?;
        let retention = self.key_retention();
        let outcome = {
            let publishing = publishing.clone();
            self.db()
                .run(move |s| {
                    async move {
                        add_members_work(
                            s,
                            &command,
                            strategy,
                            &publishing,
                            mode,
                            key.as_ref(),
                            retention,
                        )
                        .await
                    }
                    .boxed()
                })
                .await?
        };
        if let Keyed::Fresh(()) = outcome {
            publishing.after_commit().await;
        }
        Ok(outcome)
    }

    /// Removes a member (the owner removes anyone but themself; a member
    /// removes themself: leaves), with a `membership` message and its
    /// `member.removed` event. The owner cannot leave before handing over.
    #[instrument(skip_all, fields(chat_id = %command.chat_id, publish_mode = mode.as_str()))]
    pub async fn remove_member(
        &self,
        command: RemoveMember,
        mode: PublishMode,
    ) -> Result<(), RepositoryError> {
        let publishing = self.publishing(mode, || {
            Event::member_removed(&command, mode)
                .with_trace_parent(chatlab_telemetry::current_traceparent())
        })?;
        self.run_with_event(publishing, move |s, publishing| {
            async move { remove_member_work(s, &command, &publishing, mode).await }.boxed()
        })
        .await
    }

    /// Hands the chat over to another member (the owner only), with a
    /// `membership` message and its `chat.owner_changed` event.
    #[instrument(skip_all, fields(chat_id = %command.chat_id, publish_mode = mode.as_str()))]
    pub async fn transfer_ownership(
        &self,
        command: TransferOwnership,
        mode: PublishMode,
    ) -> Result<(), RepositoryError> {
        let publishing = self.publishing(mode, || {
            Event::owner_changed(&command, mode)
                .with_trace_parent(chatlab_telemetry::current_traceparent())
        })?;
        self.run_with_event(publishing, move |s, publishing| {
            async move { transfer_work(s, &command, &publishing, mode).await }.boxed()
        })
        .await
    }

    /// Runs `work` on a connection with a copy of `publishing`, then its
    /// step after COMMIT, the connection back in the pool.
    async fn run_with_event<F>(
        &self,
        publishing: Publishing,
        work: F,
    ) -> Result<(), RepositoryError>
    where
        F: for<'s> FnOnce(
                &'s mut DbSession,
                Publishing,
            ) -> BoxFuture<'s, Result<(), RepositoryError>>
            + Send
            + 'static,
    {
        let copy = publishing.clone();
        self.db().run(move |s| work(s, copy)).await?;
        publishing.after_commit().await;
        Ok(())
    }
}
