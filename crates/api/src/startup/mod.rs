//! Building and running the server: the one function the binary and the
//! tests share. [`Application::build`] reads as the order of startup; each
//! phase is a function named for what it does, here or in a module of its
//! own (`servers`, `broker`, `checks`, and `crate::background::start_all`).

mod broker;
mod checks;
mod pooler;
mod servers;

use std::sync::Arc;

use actix_web::dev::Server;
use actix_web::web;
use prometheus_client::registry::Registry;

use chatlab_kafka::{EmbeddedBroker, KafkaPublisher, KafkaSetupError};
use chatlab_persistence::{PersistenceError, PgStore, migrations};

use crate::audit::AuditSource;
use crate::auth::{self, keys::AuthSetupError};
use crate::background::{self, Background};
use crate::config::Settings;
use crate::http::metrics::HttpMetrics;
use crate::live::{self, Live};
use crate::state::{AppState, MetricsEndpoint};
use crate::telemetry::export_metrics::ExportMetrics;
use crate::telemetry::process_metrics::ProcessMetrics;
use broker::Broker;
use servers::{Listeners, Servers};

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartupError {
    /// Migrations failed (often: the database is unreachable).
    #[error("could not migrate the database at {target} (DATABASE_URL)")]
    Migrate {
        /// Where the URL points: host, port and database, no credentials.
        target: String,
        /// Why.
        #[source]
        source: PersistenceError,
    },
    /// The broker could not be set up.
    #[error("could not set up Kafka")]
    Kafka(#[from] KafkaSetupError),
    /// The token keys could not be set up.
    #[error("could not set up bearer tokens (CHATLAB_JWT_*)")]
    Auth(#[from] AuthSetupError),
    /// DATABASE_URL leads to a transaction pooler and settings that cannot
    /// work there are on (`DB_POOLER_CHECK=refuse`).
    #[error(
        "DATABASE_URL leads to a transaction pooler (one connection's transactions ran on \
         backends {before} and {after}): set {needed} there (docs/operations.md, \"PgBouncer\"), \
         or DB_POOLER_CHECK=warn to start anyway"
    )]
    Pooler {
        /// The backend of the probe's first transaction.
        before: i32,
        /// The backend of a later one on the same connection.
        after: i32,
        /// The settings that work there, `NAME=value`, comma-separated.
        needed: String,
    },
    /// The listen address could not be bound.
    #[error("could not listen on {addr}")]
    Bind {
        /// The address.
        addr: std::net::SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// A built server, bound to its port, not yet running.
pub struct Application {
    port: u16,
    ops_port: u16,
    server: Server,
    ops_server: Server,
    background: Background,
    live_hub: Arc<live::Hub>,
    publisher: KafkaPublisher,
    embedded: Option<Arc<EmbeddedBroker>>,
}

impl Application {
    /// Binds the listeners, migrates (unless disabled), starts the broker
    /// and the store, starts the background workers and prepares both
    /// servers. `HTTP_ADDR` with port 0 binds a free port; see
    /// [`Application::port`].
    pub async fn build(settings: Settings) -> Result<Self, StartupError> {
        let started_at = chrono::Utc::now();
        // Before anything slow: a key that does not load stops startup at once.
        let auth = auth::keys::from_settings(&settings.auth)?;
        checks::warn_if_dev_tokens(&settings);
        checks::warn_if_backlog_is_capped(settings.http.backlog);
        checks::warn_if_sets_may_not_stick(&settings.db.session);
        checks::warn_if_connections_can_outrun_descriptors(&settings);
        // Before anything that takes a port of its own (the embedded broker's
        // listener, pooled connections): a port a caller picked free and
        // handed over in HTTP_ADDR is then still free when it is bound (seen:
        // the mock cluster's broker took it first, and startup failed).
        let listeners = Listeners::bind(&settings.http)?;
        // Before the migrations, which a transaction pooler would split
        // from their advisory lock.
        pooler::check_for_a_transaction_pooler(&settings).await?;
        migrate(&settings).await?;
        let mut registry = Registry::default();
        let broker = Broker::start(&settings, &mut registry).await?;
        let store = store(&settings, &broker, &mut registry).await;
        let live = live_streams(&settings, &broker, &mut registry);
        let Broker {
            embedded,
            bootstrap,
            publisher,
            receipts,
        } = broker;
        let inputs = background::Inputs {
            settings: &settings,
            store: &store,
            publisher: &publisher,
            receipts,
            bootstrap: &bootstrap,
            live: &live,
        };
        let background = background::start_all(inputs, &mut registry).await;
        log_configuration(&settings, &bootstrap);
        let http_metrics = HttpMetrics::register(&mut registry);
        ExportMetrics::register(&mut registry);
        ProcessMetrics::register(&mut registry);
        // The mock cluster holds nothing from before this start; a real
        // broker's topic is audited from its beginning.
        let audit_since = match embedded {
            Some(_) => started_at,
            None => chrono::DateTime::<chrono::Utc>::UNIX_EPOCH,
        };
        let audit = AuditSource::new(&settings, bootstrap, audit_since);
        let state = app_state(&settings, store, auth, audit, registry);
        let live_hub = live.hub.clone();
        let (port, ops_port) = (listeners.port, listeners.ops_port);
        let Servers { public, ops } = servers::serve(
            listeners,
            (&settings.http, &settings.browser),
            state,
            live,
            http_metrics,
        )?;
        Ok(Self {
            port,
            ops_port,
            server: public,
            ops_server: ops,
            background,
            live_hub,
            publisher,
            embedded,
        })
    }

    /// The embedded mock cluster, when `KAFKA_BROKERS` is unset: tests use
    /// it to inject outages and round-trip time.
    pub fn embedded_broker(&self) -> Option<Arc<EmbeddedBroker>> {
        self.embedded.clone()
    }

    /// The bound port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The operator listener's bound port.
    pub fn ops_port(&self) -> u16 {
        self.ops_port
    }

    /// A handle that can stop the server gracefully.
    pub fn handle(&self) -> actix_web::dev::ServerHandle {
        self.server.handle()
    }

    /// Serves until SIGTERM or SIGINT (or [`Application::handle`]'s stop),
    /// then ends the live streams (each with a last `closing` event), lets
    /// in-flight requests finish within the shutdown timeout,
    /// stops the outbox relay after its batch in hand, gives queued events
    /// five seconds to be delivered, and writes their receipts.
    pub async fn run_until_stopped(self) -> std::io::Result<()> {
        let ops = self.ops_server.handle();
        let ops_served = tokio::spawn(self.ops_server);
        let handle = self.server.handle();
        let hub = self.live_hub.clone();
        let on_signal = tokio::spawn(async move {
            stop_signal().await;
            tracing::info!("stop signal: closing the live streams, then stopping gracefully");
            hub.close_all();
            handle.stop(true).await;
        });
        let served = self.server.await;
        on_signal.abort();
        ops.stop(true).await;
        if let Ok(Err(e)) = ops_served.await {
            tracing::warn!(error = %e, "operator listener ended abnormally");
        }
        // The relay, sweeper and tail stop; queued events get five seconds
        // to be delivered; then the ledger writes their receipts and stops.
        let publisher = self.publisher;
        self.background
            .stop(async move {
                let _ = tokio::task::spawn_blocking(move || {
                    publisher.flush(std::time::Duration::from_secs(5))
                })
                .await;
            })
            .await;
        drop(self.embedded);
        served
    }
}

/// Runs the pending migrations unless `RUN_MIGRATIONS=false`, straight to
/// PostgreSQL when `DATABASE_URL` is a pooler's (`DB_MIGRATION_URL`).
async fn migrate(settings: &Settings) -> Result<(), StartupError> {
    if !settings.run_migrations {
        return Ok(());
    }
    let url = settings.migration_url.as_ref().unwrap_or(&settings.db.url);
    let applied = migrations::run_pending(url)
        .await
        .map_err(|source| StartupError::Migrate {
            target: url_target(secrecy::ExposeSecret::expose_secret(url)),
            source,
        })?;
    tracing::info!(applied, "database migrations are up to date");
    Ok(())
}

/// The store: the pool and the writes, publishing through the broker's
/// publisher; checked once for the database's message language before the
/// first request.
async fn store(settings: &Settings, broker: &Broker, registry: &mut Registry) -> PgStore {
    let store = PgStore::new(&settings.db, registry, Arc::new(broker.publisher.clone()))
        .with_event_body(settings.live.frame_body)
        .with_read_markers(settings.writes.read_marker_mode);
    checks::warn_unless_english_messages(&store).await;
    store
}

/// What the live streams share: this instance's hub, bounded by the stream
/// budget, and where a reconnecting client's catch-up reads.
fn live_streams(settings: &Settings, broker: &Broker, registry: &mut Registry) -> Live {
    let budget = live::StreamBudget {
        per_user: settings.live.max_streams_per_user,
        total: settings.live.max_streams,
    };
    let life = broker.embedded.as_ref().map(|broker| broker.life());
    Live {
        hub: Arc::new(live::Hub::new(budget, life).holding(settings.live.recent_events)),
        known: Arc::default(),
        metrics: live::LiveMetrics::register(registry),
        buffer: settings.live.buffer,
        heartbeat: settings.live.heartbeat,
        retry_after: settings.live.heartbeat * 2,
        source: live::catch_up::TopicSource {
            bootstrap: broker.bootstrap.clone(),
            topic: settings.kafka.topic.clone(),
            limit: settings.live.catch_up_records,
            readers: Arc::new(tokio::sync::Semaphore::new(live::catch_up::TOPIC_READERS)),
        },
        ticket_ttl: settings.live.ticket_ttl,
    }
}

/// What every handler shares, with the metrics registry every phase
/// registered into.
fn app_state(
    settings: &Settings,
    store: PgStore,
    auth: chatlab_auth::TokenKeys,
    audit: AuditSource,
    registry: Registry,
) -> web::Data<AppState> {
    let db = store.db().clone();
    web::Data::new(AppState {
        store,
        import_limit_bytes: settings.http.import_limit_bytes,
        audit,
        writes: settings.writes,
        limits: settings.limits,
        metrics: MetricsEndpoint {
            registry,
            refresh: Box::new(move || db.refresh_metrics()),
        },
        auth,
        dev_tokens: settings.auth.dev_tokens,
    })
}

/// One line with every setting that shapes the write path, for the log of
/// each run.
fn log_configuration(settings: &Settings, bootstrap: &str) {
    tracing::info!(
        driver = settings.db.driver.as_str(),
        pooling = settings.db.pooling.as_str(),
        layout = settings.db.layout.as_str(),
        blocking_threads = settings.db.blocking_threads,
        pool_max_size = settings.db.pool_max_size,
        cores = std::thread::available_parallelism().map_or(1, |n| n.get()),
        rule = "default is cores x 2 + 1 (HikariCP's formula), DB_POOL_MAX_SIZE overrides",
        acquire_timeout_ms = settings.db.acquire_timeout.as_millis() as u64,
        recycle = ?settings.db.recycle,
        insert_strategy = %settings.writes.default_strategy,
        publish_mode = %settings.writes.default_publish_mode,
        kafka = %bootstrap,
        topic = %settings.kafka.topic,
        allow_overrides = settings.writes.allow_overrides,
        "connection pool configured"
    );
}

/// SIGTERM or SIGINT.
async fn stop_signal() {
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut term) => {
                term.recv().await;
            }
            Err(e) => {
                tracing::warn!(error = %e, "SIGTERM cannot be caught; stop with SIGINT");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        _ = terminate => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}

/// `host:port/database` of a `postgres://` URL, without user, password or
/// query: what an error may show of it.
fn url_target(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let rest = rest.split(['?', '#']).next().unwrap_or_default();
    let (authority, database) = rest.split_once('/').unwrap_or((rest, ""));
    let host = authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host);
    format!("{host}/{database}")
}

#[cfg(test)]
mod tests {
    use super::url_target;

    #[test]
    fn url_targets_leave_out_credentials_and_options() {
        assert_eq!(
            url_target("postgres://app:s3cret@db.example:6432/chat?sslmode=require"),
            "db.example:6432/chat"
        );
        assert_eq!(
            url_target("postgres://127.0.0.1/chatlab"),
            "127.0.0.1/chatlab"
        );
    }
}
