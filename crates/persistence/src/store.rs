//! [`PgStore`]: the domain's ports on PostgreSQL.

use std::sync::Arc;
use std::time::Duration;

use diesel::prelude::*;
use diesel::sql_types::Integer;
use futures_util::FutureExt;
use prometheus_client::registry::Registry;
use tracing::instrument;

use chatlab_domain::{
    Entity, Event, EventBody, EventPublisher, NewUser, PublishMode, ReadMarkerMode,
    RepositoryError, User, UserId,
};
use tokio::sync::Notify;

use crate::config::DbConfig;
use crate::database::Database;
use crate::database::pool_metrics::PoolMetrics;
use crate::error_mapping::query_err;
use crate::events::publishing::Publishing;
use crate::models::UserRow;
use crate::reads;
use crate::schema::users;
use crate::writes::read_markers::{MarkerMetrics, ReadMarkers};
use crate::writes::write_metrics::WriteMetrics;

/// Users per multi-row INSERT in bulk creation (three columns each).
const USER_ROWS_PER_STATEMENT: usize = chatlab_domain::write_plan::rows_per_statement(3);

/// The PostgreSQL store: its connections (by driver and pooling), the
/// event publisher and the write-path metrics.
///
/// Every method is one unit of work on one connection, run through
/// [`Database::run`]: the same code and the same SQL on either driver.
/// This file holds the store's construction, its users and its health
/// probe; each other unit of work lives with its concern, the writes in
/// `writes/` (create_chat.rs, send_message.rs, membership.rs,
/// import_jobs.rs, mark_read.rs) and the reads in `reads/`
/// (chat_reads.rs, read_state.rs).
#[derive(Clone)]
pub struct PgStore {
    pub(crate) db: Database,
    pub(crate) writes: Arc<WriteMetrics>,
    publisher: Arc<dyn EventPublisher>,
    outbox_wakeup: Arc<Notify>,
    /// How long idempotency keys are remembered.
    pub(crate) key_retention: Duration,
    /// Whether `message.sent` events carry the text.
    pub(crate) event_body: EventBody,
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
