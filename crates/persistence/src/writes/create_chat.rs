//! createChat's unit of work: the chat row, its member rows and the system
//! message in one transaction (or in its statements' own, as
//! [`Transaction::of`] decides), the key's claim, and the event's steps
//! around COMMIT. The statements themselves are [`super::chat_statements`].

use std::sync::Arc;
use std::time::Duration;

use futures_util::FutureExt;
use tracing::instrument;

use chatlab_domain::{
    CreateChat, Event, InsertStrategy, KeyClaim, Keyed, PublishMode, RepositoryError,
};

use crate::error_mapping::name_unknown_users;
use crate::events::publishing::{Publishing, TxError};
use crate::session::DbSession;
use crate::store::PgStore;
use crate::writes::chat_statements::{ChatWrite, create_chat_on_its_own, create_chat_statements};
use crate::writes::idempotency::{self, Claimed};
use crate::writes::transaction::{Shared, Transaction};

/// What createChat's unit of work hands back: rows written and how long
/// the connection was held, or why it failed.
struct Written {
    write: ChatWrite,
    held: std::time::Duration,
}

/// createChat's unit of work: in the transaction the store opens, or in
/// createChat's own statements, as [`Transaction::of`] decides from the
/// strategy's plan and what must share the transaction; on a foreign-key
/// violation, the query that names the unknown users. A keyed write claims
/// its key first, inside the transaction, so even one statement or one
/// flight takes the store's then. The round trips are the session's count
/// over the work.
async fn create_chat_work(
    s: &mut DbSession,
    command: &CreateChat,
    route: CreateChatRoute,
    publishing: &Publishing,
    key: Option<&KeyClaim>,
    retention: Duration,
) -> Result<Keyed<Written>, RepositoryError> {
    let CreateChatRoute { strategy, mode } = route;
    let plan = strategy.plan();
    let shared = Shared {
        key: key.is_some(),
        step_before_commit: publishing.has_step_before_commit(),
        // createChat's statements carry the outbox row themselves.
        outbox_statement: false,
    };
    let trips_before = s.round_trips();
    let outcome = match Transaction::of(plan.sending, shared) {
        Transaction::OnTheirOwn(own) => {
            create_chat_on_its_own(s, command, mode, own, publishing.outbox_row())
                .await
                .map(Keyed::Fresh)
                .map_err(TxError::Db)
        }
        Transaction::OpenedByStore(sending) => {
            s.transaction(async |s| {
                if let Some(key) = key
                    && let Claimed::Replay(response) = idempotency::claim(s, key, retention).await?
                {
                    return Ok(Keyed::Replayed(response));
                }
                let count = create_chat_statements(s, command, plan, mode, sending).await?;
                publishing.before_commit(s).await?;
                Ok::<_, TxError>(Keyed::Fresh(count))
            })
            .await
        }
    };
    let round_trips = s.round_trips() - trips_before;
    match outcome {
        Ok(Keyed::Fresh(count)) => Ok(Keyed::Fresh(Written {
            write: ChatWrite { count, round_trips },
            held: s.held_for(),
        })),
        Ok(Keyed::Replayed(response)) => Ok(Keyed::Replayed(response)),
        // An unknown creator or member: the transaction rolled back, so
        // nothing is written; say which ids are unknown.
        Err(TxError::Db(e)) => Err(name_unknown_users(s, &command.member_ids, e).await),
        Err(e) => Err(e.into()),
    }
}

/// The insert strategy and publish mode of one write.
#[derive(Debug, Clone, Copy)]
struct CreateChatRoute {
    strategy: InsertStrategy,
    mode: PublishMode,
}

impl PgStore {
    /// createChat: the chat row, its member rows (by `strategy`) and the
    /// "room created" system message, in one transaction, with its
    /// `chat.created` event published by `mode`. Unknown member ids answer
    /// `UnknownUsers` listing every one of them, and nothing is written.
    /// The answer is the caller's to build (`ChatCreated::of` the command),
    /// once. Under an idempotency key (`key`) the key is claimed in the
    /// same transaction, so a request repeated under it answers
    /// [`Keyed::Replayed`] with the first response, and writes and
    /// publishes nothing.
    #[instrument(name = "create_chat", skip_all, fields(
        chat_id = %command.chat_id,
        strategy = strategy.as_str(),
        publish_mode = mode.as_str(),
        members = command.member_ids.len(),
    ))]
    pub async fn create_chat_keyed(
        &self,
        command: CreateChat,
        strategy: InsertStrategy,
        mode: PublishMode,
        key: Option<KeyClaim>,
    ) -> Result<Keyed<()>, RepositoryError> {
        let publishing = self.publishing(mode, || {
            Event::chat_created(&command, mode)
                .with_trace_parent(chatlab_telemetry::current_traceparent())
        })?;
        let command = Arc::new(command);
        let retention = self.key_retention;
        let written = {
            let (command, publishing) = (command.clone(), publishing.clone());
            let route = CreateChatRoute { strategy, mode };
            self.db
                .run(move |s| {
                    async move {
                        create_chat_work(s, &command, route, &publishing, key.as_ref(), retention)
                            .await
                    }
                    .boxed()
                })
                .await?
        };
        let written = match written {
            Keyed::Fresh(written) => written,
            Keyed::Replayed(response) => return Ok(Keyed::Replayed(response)),
        };
        self.writes
            .record(strategy, mode, written.write, written.held);
        publishing.after_commit().await;
        Ok(Keyed::Fresh(()))
    }
}
