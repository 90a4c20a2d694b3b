//! [`PgStore`]: the domain's ports on PostgreSQL.

use std::sync::Arc;
use std::time::Duration;

use diesel::prelude::*;
use diesel::sql_types::Integer;
use futures_util::FutureExt;
use prometheus_client::registry::Registry;
use tracing::instrument;

use chatlab_domain::{
    Chat, ChatId, CreateChat, Entity, Event, EventBody, EventPublisher, InsertStrategy, KeyClaim,
    Keyed, Member, Message, MessageFanout, MessageId, NewUser, Page, PageRequest, PublishMode,
    ReadMarkerMode, RepositoryError, SendMessage, Sending, User, UserId,
};
use tokio::sync::Notify;

use crate::config::DbConfig;
use crate::database::Database;
use crate::database::pool_metrics::PoolMetrics;
use crate::error_mapping::{name_unknown_users, query_err};
use crate::events::publishing::{Publishing, TxError};
use crate::models::UserRow;
use crate::queries::{InsertInboxFromMembers, InsertTalkIfMember};
use crate::reads;
use crate::reads::read_markers::{MarkerMetrics, ReadMarkers};
use crate::schema::users;
use crate::session::DbSession;
use crate::writes::create_chat::{ChatWrite, create_chat_on_its_own, create_chat_statements};
use crate::writes::fanout::insert_fanned;
use crate::writes::idempotency::{self, Claimed};
use crate::writes::row_writes::WriteCount;
use crate::writes::transaction::{Shared, Transaction};
use crate::writes::write_metrics::WriteMetrics;

/// Users per multi-row INSERT in bulk creation (three columns each).
const USER_ROWS_PER_STATEMENT: usize = chatlab_domain::write_plan::rows_per_statement(3);

/// The PostgreSQL store: its connections (by driver and pooling), the
/// event publisher and the write-path metrics.
///
/// Every method is one unit of work on one connection, run through
/// [`Database::run`]: the same code and the same SQL on either driver.
#[derive(Clone)]
pub struct PgStore {
    db: Database,
    writes: Arc<WriteMetrics>,
    publisher: Arc<dyn EventPublisher>,
    outbox_wakeup: Arc<Notify>,
    /// How long idempotency keys are remembered.
    key_retention: Duration,
    /// Whether `message.sent` events carry the text.
    event_body: EventBody,
    /// How read markers are written, and those held for the next flush.
    read_markers: Arc<ReadMarkers>,
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore")
            .field("db", &self.db)
            .finish_non_exhaustive()
    }
}

impl PgStore {
    /// Sets up the connections and registers the pool and write metrics.
    pub fn new(
        config: &DbConfig,
        registry: &mut Registry,
        publisher: Arc<dyn EventPublisher>,
    ) -> Self {
        let db = Database::new(config, PoolMetrics::register(registry));
        Self {
            db,
            writes: WriteMetrics::register(registry),
            publisher,
            outbox_wakeup: Arc::new(Notify::new()),
            key_retention: config.idempotency_retention,
            event_body: EventBody::default(),
            read_markers: Arc::new(ReadMarkers::new(
                ReadMarkerMode::default(),
                MarkerMetrics::register(registry),
            )),
        }
    }

    /// The same store, writing read markers in `mode`
    /// (`READ_MARKER_MODE`). Markers held by the store it was made from
    /// stay there: call it before the store serves anything.
    pub fn with_read_markers(self, mode: ReadMarkerMode) -> Self {
        let metrics = self.read_markers.metrics().clone();
        Self {
            read_markers: Arc::new(ReadMarkers::new(mode, metrics)),
            ..self
        }
    }

    /// The event publisher.
    pub(crate) fn publisher(&self) -> &Arc<dyn EventPublisher> {
        &self.publisher
    }

    /// How read markers are written, and those held for the next flush.
    pub fn read_markers(&self) -> &Arc<ReadMarkers> {
        &self.read_markers
    }

    /// The same store, its `message.sent` events carrying the message's
    /// text or not (`LIVE_FRAME_BODY`).
    pub fn with_event_body(self, event_body: EventBody) -> Self {
        Self { event_body, ..self }
    }

    /// Notified after every commit that wrote an outbox row, so the relay
    /// of this process publishes at once instead of at its next poll.
    pub fn outbox_wakeup(&self) -> Arc<Notify> {
        self.outbox_wakeup.clone()
    }

    /// What one write in `mode` does with its event ([`Publishing`]).
    pub(crate) fn publishing(
        &self,
        mode: PublishMode,
        event: impl FnOnce() -> Event,
    ) -> Result<Publishing, RepositoryError> {
        Publishing::new(
            mode,
            event,
            self.publisher.clone(),
            self.outbox_wakeup.clone(),
        )
        .map_err(|e| RepositoryError::Internal(format!("the event does not serialise: {e}").into()))
    }

    /// How long idempotency keys are remembered.
    pub fn key_retention(&self) -> Duration {
        self.key_retention
    }

    /// The connections.
    pub fn db(&self) -> &Database {
        &self.db
    }

    pub(crate) fn writes(&self) -> &WriteMetrics {
        &self.writes
    }

    pub(crate) fn not_found(entity: Entity, id: impl Into<uuid::Uuid>) -> RepositoryError {
        RepositoryError::NotFound {
            entity,
            id: id.into(),
        }
    }
}

/// What createChat's unit of work hands back: rows written and how long
/// the connection was held, or why it failed.
struct Written {
    write: ChatWrite,
    held: std::time::Duration,
}

impl PgStore {
    /// Writes one user.
    pub async fn create_user(&self, user: NewUser) -> Result<User, RepositoryError> {
        let row = UserRow {
            id: user.id.as_uuid(),
            name: user.name,
            created_at: user.created_at,
        };
        self.db
            .run(move |s| {
                async move {
                    s.execute(diesel::insert_into(users::table).values(&row))
                        .await
                        .map_err(query_err)?;
                    Ok(row.into())
                }
                .boxed()
            })
            .await
    }

    /// Writes many users in one transaction through multi-row INSERTs (the
    /// batch path, for seeding load tests). All or none are written.
    #[instrument(skip_all, fields(count = new_users.len()))]
    pub async fn create_users(
        &self,
        new_users: Vec<NewUser>,
    ) -> Result<Vec<UserId>, RepositoryError> {
        let rows: Vec<UserRow> = new_users
            .into_iter()
            .map(|u| UserRow {
                id: u.id.as_uuid(),
                name: u.name,
                created_at: u.created_at,
            })
            .collect();
        let ids = rows.iter().map(|r| UserId::from_uuid(r.id)).collect();
        self.db
            .run(move |s| {
                async move {
                    s.transaction(async |s| {
                        for chunk in rows.chunks(USER_ROWS_PER_STATEMENT) {
                            s.execute(diesel::insert_into(users::table).values(chunk))
                                .await?;
                        }
                        Ok::<_, diesel::result::Error>(())
                    })
                    .await
                    .map_err(query_err)
                }
                .boxed()
            })
            .await?;
        Ok(ids)
    }

    /// Reads one user; `NotFound` if absent.
    pub async fn get_user(&self, id: UserId) -> Result<User, RepositoryError> {
        self.db
            .run(move |s| {
                async move { reads::user(s, id.as_uuid()).await.map_err(query_err) }.boxed()
            })
            .await?
            .map(User::from)
            .ok_or_else(|| Self::not_found(Entity::User, id))
    }
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
}

impl PgStore {
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

impl PgStore {
    /// The language a session's error messages come in (`lc_messages`):
    /// `C` where the role could pin it. Timeouts, deadlocks and ended
    /// sessions are told apart by English message text (see
    /// `error_mapping`), so startup warns about any other.
    pub async fn message_language(&self) -> Result<String, RepositoryError> {
        self.db
            .run(|s| {
                async move {
                    s.get_result::<_, String>(diesel::select(diesel::dsl::sql::<
                        diesel::sql_types::Text,
                    >(
                        "current_setting('lc_messages')"
                    )))
                    .await
                    .map_err(query_err)
                }
                .boxed()
            })
            .await
    }

    /// Succeeds when a pooled connection answers a query.
    pub async fn ping(&self) -> Result<(), RepositoryError> {
        self.db
            .run(|s| {
                async move {
                    s.get_result::<_, i32>(diesel::select(1.into_sql::<Integer>()))
                        .await
                        .map_err(query_err)?;
                    Ok(())
                }
                .boxed()
            })
            .await
    }
}
