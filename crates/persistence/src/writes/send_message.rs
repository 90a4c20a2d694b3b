//! sendMessage's unit of work: the guarded insert of a talk message (with
//! its inbox rows when it fans out on write), the key's claim, and the
//! event's steps around COMMIT.

use std::time::Duration;

use futures_util::FutureExt;
use tracing::instrument;

use chatlab_domain::{
    ChatId, Entity, Event, InsertStrategy, KeyClaim, Keyed, MessageFanout, PublishMode,
    RepositoryError, SendMessage, Sending,
};

use crate::error_mapping::query_err;
use crate::events::publishing::{Publishing, TxError};
use crate::queries::{InsertInboxFromMembers, InsertTalkIfMember};
use crate::session::DbSession;
use crate::store::PgStore;
use crate::writes::fanout::insert_fanned;
use crate::writes::idempotency::{self, Claimed};
use crate::writes::row_writes::WriteCount;
use crate::writes::transaction::{Shared, Transaction};

/// sendMessage's unit of work: the guarded insert (with the message's
/// inbox rows when it fans out on write, and the event step of modes that
/// have one), then, when nothing was inserted, why. Returns the inbox rows
/// written.
async fn send_message_work(
    s: &mut DbSession,
    insert: InsertTalkIfMember,
    fanned: Option<(&InsertInboxFromMembers, InsertStrategy)>,
    publishing: &Publishing,
    key: Option<&KeyClaim>,
    retention: Duration,
) -> Result<Keyed<u64>, RepositoryError> {
    let chat_id = ChatId::from_uuid(insert.chat_id);
    // The message alone is one statement; with its inbox rows, more, in
    // the store's transaction whatever the strategy sends them by.
    let sending = match fanned {
        None => Sending::OneStatement,
        Some(_) => Sending::OneByOne,
    };
    let shared = Shared {
        key: key.is_some(),
        step_before_commit: publishing.has_step_before_commit(),
        // The guarded insert cannot carry the outbox row.
        outbox_statement: publishing.writes_outbox_row(),
    };
    let (inserted, inbox_rows) = if let Transaction::OnTheirOwn(_) =
        Transaction::of(sending, shared)
    {
        // One statement that commits by itself.
        (s.execute(insert).await.map_err(query_err)?, 0)
    } else {
        let outcome = s
            .transaction(async |s| {
                if let Some(key) = key
                    && let Claimed::Replay(response) = idempotency::claim(s, key, retention).await?
                {
                    return Ok(Keyed::Replayed(response));
                }
                let (inserted, inbox) = match fanned {
                    None => (s.execute(insert).await?, WriteCount::default()),
                    Some((message, strategy)) => {
                        insert_fanned(s, insert, message, strategy.plan()).await?
                    }
                };
                if inserted == 1 {
                    publishing.before_commit(s).await?;
                } else {
                    // Roll the key's claim (and whatever a pipelined
                    // fan-out wrote) back with the write that did not
                    // happen.
                    return Err(TxError::Refused(PgStore::not_found(Entity::Chat, chat_id)));
                }
                Ok::<_, TxError>(Keyed::Fresh((inserted, inbox.rows)))
            })
            .await
            .map_err(RepositoryError::from)?;
        match outcome {
            Keyed::Fresh(done) => done,
            Keyed::Replayed(response) => return Ok(Keyed::Replayed(response)),
        }
    };
    if inserted == 0 {
        // No such chat, or the sender is no member of it: the same answer,
        // so a chat's existence cannot be probed, and no second statement.
        return Err(PgStore::not_found(Entity::Chat, chat_id));
    }
    Ok(Keyed::Fresh(inbox_rows))
}

/// How one send writes: its publish mode, and whether (and by which
/// strategy) it fans out on write.
#[derive(Debug, Clone, Copy)]
pub struct SendRoute {
    /// When and how its event is published.
    pub mode: PublishMode,
    /// `inbox`: one row per recipient in the message's transaction.
    pub fanout: MessageFanout,
    /// How the inbox rows are sent (nothing else depends on it).
    pub strategy: InsertStrategy,
}

impl SendRoute {
    /// A send that writes the message alone.
    pub fn plain(mode: PublishMode) -> Self {
        Self {
            mode,
            fanout: MessageFanout::None,
            strategy: InsertStrategy::default(),
        }
    }
}

impl PgStore {
    /// Writes a talk message with its `message.sent` event published by
    /// `route.mode`, under an idempotency key as
    /// [`Self::create_chat_keyed`] when `key` is given. `NotFound` if the
    /// chat does not exist or the sender is not one of its members (one
    /// answer for both); the answer is the caller's to build
    /// (`Message::sent` the command), once. With
    /// [`MessageFanout::Inbox`] the message's inbox rows (one per member
    /// but the sender) are written in its transaction by the route's
    /// strategy, after a share lock on the chat row that keeps membership
    /// changes out until it commits.
    #[instrument(
        name = "send_message",
        skip_all,
        fields(
            chat_id = %command.chat_id,
            publish_mode = route.mode.as_str(),
            fanout = route.fanout.as_str(),
        )
    )]
    pub async fn send_message_routed(
        &self,
        command: SendMessage,
        route: SendRoute,
        key: Option<KeyClaim>,
    ) -> Result<Keyed<()>, RepositoryError> {
        let mode = route.mode;
        let publishing = self.publishing(mode, || {
            Event::message_sent(&command, mode, self.event_body)
                .with_trace_parent(chatlab_telemetry::current_traceparent())
        })?;
        let insert = InsertTalkIfMember {
            id: command.id.as_uuid(),
            chat_id: command.chat_id.as_uuid(),
            sender_id: command.sender_id.as_uuid(),
            body: command.body.clone(),
            created_at: command.created_at,
            publish_mode: mode.as_str(),
        };
        let fanned = (route.fanout == MessageFanout::Inbox).then(|| InsertInboxFromMembers {
            chat_id: command.chat_id.as_uuid(),
            message_id: command.id.as_uuid(),
            sender_id: command.sender_id.as_uuid(),
            body: command.body.clone(),
        });
        let retention = self.key_retention;
        let strategy = route.strategy;
        let outcome = {
            let publishing = publishing.clone();
            self.db
                .run(move |s| {
                    async move {
                        let fanned = fanned.as_ref().map(|f| (f, strategy));
                        send_message_work(s, insert, fanned, &publishing, key.as_ref(), retention)
                            .await
                    }
                    .boxed()
                })
                .await?
        };
        let inbox_rows = match outcome {
            Keyed::Fresh(rows) => rows,
            Keyed::Replayed(response) => return Ok(Keyed::Replayed(response)),
        };
        if route.fanout == MessageFanout::Inbox {
            self.writes.record_inbox(strategy, inbox_rows);
        }
        publishing.after_commit().await;
        Ok(Keyed::Fresh(()))
    }
}
