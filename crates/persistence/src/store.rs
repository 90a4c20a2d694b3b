//! [`PgStore`]: the domain's ports on PostgreSQL.

use std::sync::Arc;

use async_trait::async_trait;
use diesel::prelude::*;
use diesel::sql_types::Integer;
use diesel_async::{AsyncConnection, RunQueryDsl};
use prometheus_client::registry::Registry;
use tracing::instrument;

use chatlab_domain::{
    Chat, ChatCreated, ChatId, ChatRepository, CreateChat, Entity, Event, EventPublisher,
    HealthCheck, InsertStrategy, Member, Message, MessageId, MessageKind, MessageRepository,
    NewUser, Page, PageRequest, PublishMode, RepositoryError, SendMessage, UnavailableReason, User,
    UserId, UserRepository,
};
use tokio::sync::Notify;

use crate::config::DbConfig;
use crate::create_chat::{WriteCount, create_chat_inner, rows_per_statement};
use crate::error_mapping::is_foreign_key_violation;
use crate::errors::PersistenceError;
use crate::event_publishing::{TxError, publish_after_commit, publish_in_tx};
use crate::models::UserRow;
use crate::pool::DbPool;
use crate::pool_metrics::PoolMetrics;
use crate::queries::InsertTalkIfMember;
use crate::reads;
use crate::schema::users;
use crate::write_metrics::WriteMetrics;

/// Users per multi-row INSERT in bulk creation (three columns each).
const USER_ROWS_PER_STATEMENT: usize = rows_per_statement(3);

/// The PostgreSQL store: a pool, the event publisher and the write-path
/// metrics.
#[derive(Clone)]
pub struct PgStore {
    pool: DbPool,
    writes: Arc<WriteMetrics>,
    publisher: Arc<dyn EventPublisher>,
    outbox_wakeup: Arc<Notify>,
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore")
            .field("pool", &self.pool)
            .finish_non_exhaustive()
    }
}

impl PgStore {
    /// Builds the pool and registers the pool and write metrics.
    pub fn new(
        config: &DbConfig,
        registry: &mut Registry,
        publisher: Arc<dyn EventPublisher>,
    ) -> Self {
        let pool = DbPool::new(config, PoolMetrics::register(registry));
        Self {
            pool,
            writes: WriteMetrics::register(registry),
            publisher,
            outbox_wakeup: Arc::new(Notify::new()),
        }
    }

    /// Notified after every commit that wrote an outbox row, so the relay
    /// of this process publishes at once instead of at its next poll.
    pub fn outbox_wakeup(&self) -> Arc<Notify> {
        self.outbox_wakeup.clone()
    }

    fn after_commit(&self, mode: PublishMode) {
        if mode == PublishMode::Outbox {
            self.outbox_wakeup.notify_one();
        }
    }

    /// The connection pool.
    pub fn pool(&self) -> &DbPool {
        &self.pool
    }

    fn not_found(entity: Entity, id: impl Into<uuid::Uuid>) -> RepositoryError {
        RepositoryError::NotFound {
            entity,
            id: id.into(),
        }
    }
}

fn query_err(e: diesel::result::Error) -> RepositoryError {
    PersistenceError::Query(e).into()
}

fn tx_err(e: TxError) -> RepositoryError {
    match e {
        TxError::Db(e) => query_err(e),
        TxError::Publish(e) => RepositoryError::Unavailable {
            reason: UnavailableReason::EventBroker,
            source: Box::new(e),
        },
    }
}

#[async_trait]
impl UserRepository for PgStore {
    async fn create_user(&self, user: NewUser) -> Result<User, RepositoryError> {
        let mut conn = self.pool.checkout().await?;
        let row = UserRow {
            id: user.id.as_uuid(),
            name: user.name,
            created_at: user.created_at,
        };
        diesel::insert_into(users::table)
            .values(&row)
            .execute(&mut *conn)
            .await
            .map_err(query_err)?;
        Ok(row.into())
    }

    #[instrument(skip_all, fields(count = new_users.len()))]
    async fn create_users(&self, new_users: Vec<NewUser>) -> Result<Vec<UserId>, RepositoryError> {
        let rows: Vec<UserRow> = new_users
            .into_iter()
            .map(|u| UserRow {
                id: u.id.as_uuid(),
                name: u.name,
                created_at: u.created_at,
            })
            .collect();
        let mut conn = self.pool.checkout().await?;
        conn.transaction(async |c| {
            for chunk in rows.chunks(USER_ROWS_PER_STATEMENT) {
                diesel::insert_into(users::table)
                    .values(chunk)
                    .execute(c)
                    .await?;
            }
            Ok::<_, diesel::result::Error>(())
        })
        .await
        .map_err(query_err)?;
        Ok(rows.iter().map(|r| UserId::from_uuid(r.id)).collect())
    }

    async fn get_user(&self, id: UserId) -> Result<User, RepositoryError> {
        let mut conn = self.pool.checkout().await?;
        reads::user(&mut conn, id.as_uuid())
            .await
            .map_err(query_err)?
            .map(User::from)
            .ok_or_else(|| Self::not_found(Entity::User, id))
    }
}

#[async_trait]
impl ChatRepository for PgStore {
    #[instrument(skip_all, fields(
        chat_id = %command.chat_id,
        strategy = strategy.as_str(),
        publish_mode = mode.as_str(),
        members = command.member_ids.len(),
    ))]
    async fn create_chat(
        &self,
        command: CreateChat,
        strategy: InsertStrategy,
        mode: PublishMode,
    ) -> Result<ChatCreated, RepositoryError> {
        // Off publishes nothing: build no event on that path.
        let event = mode
            .publishes()
            .then(|| Event::chat_created(&command, mode));
        let publisher = self.publisher.as_ref();
        let mut conn = self.pool.checkout().await?;
        let outcome = conn
            .transaction(async |c| {
                let written = create_chat_inner(c, &command, strategy, mode).await?;
                publish_in_tx(c, publisher, event.as_ref(), mode).await?;
                Ok::<_, TxError>(written)
            })
            .await;
        let written: WriteCount = match outcome {
            Ok(written) => written,
            // An unknown creator or member: the transaction rolled back, so
            // nothing is written. Finding out which ids are unknown costs a
            // query only on this path, never on the happy one.
            Err(TxError::Db(e)) if is_foreign_key_violation(&e) => {
                let missing = reads::missing_users(&mut conn, &command.member_ids)
                    .await
                    .map_err(query_err)?;
                return Err(if missing.is_empty() {
                    query_err(e)
                } else {
                    RepositoryError::UnknownUsers(missing)
                });
            }
            Err(e) => return Err(tx_err(e)),
        };
        let held = conn.held_for();
        drop(conn);
        self.writes
            .record(strategy, mode, written.statements, written.rows, held);
        self.after_commit(mode);
        publish_after_commit(publisher, event.as_ref(), mode).await;
        Ok(ChatCreated {
            id: command.chat_id,
            name: command.name,
            member_count: command.member_ids.len(),
            system_message_id: command.system_message_id,
            created_at: command.created_at,
        })
    }

    async fn get_chat(&self, id: ChatId) -> Result<Chat, RepositoryError> {
        let mut conn = self.pool.checkout().await?;
        let row = reads::chat(&mut conn, id.as_uuid())
            .await
            .map_err(query_err)?
            .ok_or_else(|| Self::not_found(Entity::Chat, id))?;
        let member_count = reads::member_count(&mut conn, row.id)
            .await
            .map_err(query_err)?;
        Ok(Chat {
            id: row.id.into(),
            name: row.name,
            creator_id: row.creator_id.into(),
            member_count,
            created_at: row.created_at,
        })
    }

    async fn list_members(
        &self,
        chat_id: ChatId,
        page: PageRequest<UserId>,
    ) -> Result<Page<Member, UserId>, RepositoryError> {
        let mut conn = self.pool.checkout().await?;
        let rows = reads::members_page(
            &mut conn,
            chat_id.as_uuid(),
            page.cursor.map(|c| c.as_uuid()),
            page.limit,
        )
        .await
        .map_err(query_err)?;
        // Every chat has its creator as a member, so an empty first page
        // means there is no such chat; later pages may be empty legitimately.
        if rows.is_empty()
            && !reads::chat_exists(&mut conn, chat_id.as_uuid())
                .await
                .map_err(query_err)?
        {
            return Err(Self::not_found(Entity::Chat, chat_id));
        }
        let members: Vec<Member> = rows.into_iter().map(Member::from).collect();
        Ok(Page::from_overfetch(members, page.limit, |m| m.user_id))
    }
}

#[async_trait]
impl MessageRepository for PgStore {
    #[instrument(skip_all, fields(chat_id = %command.chat_id, publish_mode = mode.as_str()))]
    async fn send_message(
        &self,
        command: SendMessage,
        mode: PublishMode,
    ) -> Result<Message, RepositoryError> {
        let event = mode
            .publishes()
            .then(|| Event::message_sent(&command, mode));
        let publisher = self.publisher.as_ref();
        let insert = InsertTalkIfMember {
            id: command.id.as_uuid(),
            chat_id: command.chat_id.as_uuid(),
            sender_id: command.sender_id.as_uuid(),
            body: command.body.clone(),
            created_at: command.created_at,
            publish_mode: mode.as_str(),
        };
        let mut conn = self.pool.checkout().await?;
        let inserted = if mode == PublishMode::Off || mode == PublishMode::AfterCommit {
            // One statement: no transaction needed.
            insert.execute(&mut *conn).await.map_err(query_err)?
        } else {
            conn.transaction(async |c| {
                let inserted = insert.execute(c).await?;
                if inserted == 1 {
                    publish_in_tx(c, publisher, event.as_ref(), mode).await?;
                }
                Ok::<_, TxError>(inserted)
            })
            .await
            .map_err(tx_err)?
        };
        if inserted == 0 {
            let chat_exists = reads::chat_exists(&mut conn, command.chat_id.as_uuid())
                .await
                .map_err(query_err)?;
            return Err(if chat_exists {
                RepositoryError::NotAMember {
                    chat_id: command.chat_id,
                    user_id: command.sender_id,
                }
            } else {
                Self::not_found(Entity::Chat, command.chat_id)
            });
        }
        drop(conn);
        self.after_commit(mode);
        publish_after_commit(publisher, event.as_ref(), mode).await;
        Ok(Message {
            id: command.id,
            chat_id: command.chat_id,
            sender_id: Some(command.sender_id),
            kind: MessageKind::Talk,
            body: command.body,
            created_at: command.created_at,
        })
    }

    async fn list_messages(
        &self,
        chat_id: ChatId,
        page: PageRequest<MessageId>,
    ) -> Result<Page<Message, MessageId>, RepositoryError> {
        let mut conn = self.pool.checkout().await?;
        let rows = reads::messages_page(
            &mut conn,
            chat_id.as_uuid(),
            page.cursor.map(|c| c.as_uuid()),
            page.limit,
        )
        .await
        .map_err(query_err)?;
        // Every chat has its "room created" message.
        if rows.is_empty()
            && !reads::chat_exists(&mut conn, chat_id.as_uuid())
                .await
                .map_err(query_err)?
        {
            return Err(Self::not_found(Entity::Chat, chat_id));
        }
        let messages = reads::to_messages(rows)?;
        Ok(Page::from_overfetch(messages, page.limit, |m| m.id))
    }
}

#[async_trait]
impl HealthCheck for PgStore {
    async fn ping(&self) -> Result<(), RepositoryError> {
        let mut conn = self.pool.checkout().await?;
        diesel::select(1.into_sql::<Integer>())
            .get_result::<i32>(&mut *conn)
            .await
            .map_err(query_err)?;
        Ok(())
    }
}
