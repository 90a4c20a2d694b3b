//! Building and running the server: the one function the binary and the
//! tests share.

use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;

use actix_web::dev::Server;
use actix_web::middleware::from_fn;
use actix_web::{App, web};
use prometheus_client::registry::Registry;
use tracing_actix_web::TracingLogger;
use utoipa_actix_web::AppExt;
use utoipa_swagger_ui::SwaggerUi;

use chatlab_kafka::{EmbeddedBroker, EventMetrics, KafkaPublisher, KafkaSetupError};
use chatlab_persistence::outbox_relay::{OutboxMetrics, OutboxRelay};
use chatlab_persistence::receipt_ledger::{self, LedgerMetrics, ReceiptLedger};
use chatlab_persistence::{PersistenceError, PgStore, migrations};
use tokio::sync::mpsc;

use crate::audit::AuditSource;
use crate::auth::{self, keys::AuthSetupError};
use crate::background::Background;
use crate::config::{HttpSettings, Settings};
use crate::http_limits::{self, BodyTimeout, KnownPaths};
use crate::http_metrics::{self, HttpMetrics};
use crate::listener;
use crate::openapi;
use crate::problem::rejections;
use crate::process_metrics::ProcessMetrics;
use crate::routes;
use crate::state::{AppState, MetricsEndpoint};
use crate::telemetry::export_metrics::ExportMetrics;
use crate::telemetry::{RequestSpan, trace_headers};

/// Events read from the topic and waiting for the fan-out; when full, the
/// tail waits (the broker keeps the rest).
const LIVE_TAIL_CAPACITY: usize = 4096;

/// How long startup waits for the live tail to follow the topic.
const LIVE_TAIL_START: std::time::Duration = std::time::Duration::from_secs(10);

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
    live_hub: Arc<crate::live::Hub>,
    publisher: KafkaPublisher,
    embedded: Option<Arc<EmbeddedBroker>>,
}

impl Application {
    /// Binds the listeners, migrates (unless disabled), builds the pool and
    /// prepares the server. `HTTP_ADDR` with port 0 binds a free port; see
    /// [`Application::port`].
    pub async fn build(settings: Settings) -> Result<Self, StartupError> {
        let started_at = chrono::Utc::now();
        // Before anything slow: a key that does not load stops startup at once.
        let auth = auth::keys::from_settings(&settings.auth)?;
        if settings.auth.dev_tokens {
            tracing::warn!(
                "CHATLAB_DEV_TOKENS=true: POST /v1/tokens issues a token for any user id to \
                 anyone who asks; never run this way where others can reach the port"
            );
        }
        // Before anything that takes a port of its own (the embedded broker's
        // listener, pooled connections): a port a caller picked free and
        // handed over in HTTP_ADDR is then still free when it is bound (seen:
        // the mock cluster's broker took it first, and startup failed).
        warn_if_backlog_is_capped(settings.http.backlog);
        warn_if_sets_may_not_stick(&settings.db.session);
        let (listener, port) = bind(settings.http.addr, settings.http.backlog)?;
        let (ops_listener, ops_port) = bind(settings.http.ops_addr, settings.http.backlog)?;
        if settings.run_migrations {
            // Straight to PostgreSQL when DATABASE_URL is a pooler's.
            let url = settings.migration_url.as_ref().unwrap_or(&settings.db.url);
            let applied =
                migrations::run_pending(url)
                    .await
                    .map_err(|source| StartupError::Migrate {
                        target: url_target(secrecy::ExposeSecret::expose_secret(url)),
                        source,
                    })?;
            tracing::info!(applied, "database migrations are up to date");
        }
        let mut registry = Registry::default();
        let (embedded, bootstrap) = match &settings.kafka.brokers {
            Some(brokers) => (None, brokers.clone()),
            None => {
                let broker = EmbeddedBroker::start(
                    &settings.kafka.topic,
                    settings.kafka.partitions,
                    settings.kafka.mock_broker_rtt,
                )?;
                let bootstrap = broker.bootstrap_servers().to_owned();
                (Some(Arc::new(broker)), bootstrap)
            }
        };
        let publisher = KafkaPublisher::connect(
            &bootstrap,
            &settings.kafka,
            EventMetrics::register(&mut registry),
            embedded.is_none(),
        )
        .await?;
        let (receipts, receipts_rx) = mpsc::channel(receipt_ledger::CHANNEL_CAPACITY);
        let publisher = publisher.with_receipts(receipts);
        let ledger = ReceiptLedger::new(
            settings.db.url.clone(),
            &settings.db.session,
            receipts_rx,
            LedgerMetrics::register(&mut registry),
            settings.ledger.clone(),
        );
        let mut background = Background::new();
        background.start_last("receipt ledger", |stop| ledger.spawn(stop));
        let store = PgStore::new(&settings.db, &mut registry, Arc::new(publisher.clone()))
            .with_event_body(settings.live.frame_body)
            .with_read_markers(settings.writes.read_marker_mode);
        warn_unless_english_messages(&store).await;
        let relay = OutboxRelay::new(
            settings.db.url.clone(),
            &settings.db.session,
            Arc::new(publisher.clone()),
            store.outbox_wakeup(),
            OutboxMetrics::register(&mut registry),
            settings.outbox.clone(),
        );
        let (sweep_store, sweep_every) = (store.clone(), settings.writes.idempotency_sweep_every);
        background.start("idempotency key sweeper", |stop| {
            crate::key_sweeper::spawn(sweep_store, sweep_every, stop)
        });
        // `coalesced` flushes what it holds, `log` compacts its log; `direct`
        // writes at once and needs neither.
        if settings.writes.read_marker_mode != chatlab_domain::ReadMarkerMode::Direct {
            let flusher = chatlab_persistence::MarkerFlusher::new(
                settings.db.url.clone(),
                &settings.db.session,
                store.read_markers().clone(),
            );
            let every = settings.writes.read_marker_flush;
            background.start("read marker flusher", |stop| {
                crate::marker_flusher::spawn(flusher, every, stop)
            });
        }
        let budget = crate::live::StreamBudget {
            per_user: settings.live.max_streams_per_user,
            total: settings.live.max_streams,
        };
        let live = crate::live::Live {
            hub: Arc::new(crate::live::Hub::new(
                budget,
                embedded.as_ref().map(|broker| broker.life()),
            )),
            known: Arc::default(),
            metrics: crate::live::LiveMetrics::register(&mut registry),
            buffer: settings.live.buffer,
            heartbeat: settings.live.heartbeat,
            retry_after: settings.live.heartbeat * 2,
            source: crate::live::catch_up::TopicSource {
                bootstrap: bootstrap.clone(),
                topic: settings.kafka.topic.clone(),
                limit: settings.live.catch_up_records,
            },
        };
        let (tailed, to_fan_out) = mpsc::channel(LIVE_TAIL_CAPACITY);
        let (following, tail_follows) = tokio::sync::oneshot::channel();
        background.start("live tail", |stop| {
            chatlab_kafka::live_tail::spawn(
                &bootstrap,
                &settings.kafka.topic,
                settings.live.fetch_wait,
                live.metrics.lag.clone(),
                tailed,
                following,
                stop,
            )
        });
        // Listen once the tail follows the topic, so that a member who
        // connects to a ready server misses nothing written after; a
        // broker that does not answer delays the start by 10 s at most.
        if tokio::time::timeout(LIVE_TAIL_START, tail_follows)
            .await
            .is_err()
        {
            tracing::warn!(
                "live delivery: the topic cannot be followed yet; members receive events once the broker answers"
            );
        }
        // Ends once the tail does (its channel closes).
        let (hub, dispatch_store, dispatch_metrics) =
            (live.hub.clone(), store.clone(), live.metrics.clone());
        background.start("live fan-out", |_| {
            crate::live::dispatch::spawn(to_fan_out, hub, dispatch_store, dispatch_metrics)
        });
        let live_hub = live.hub.clone();
        let live = web::Data::new(live);
        background.start("outbox relay", |stop| relay.spawn(stop));
        let http_metrics = web::Data::new(HttpMetrics::register(&mut registry));
        ExportMetrics::register(&mut registry);
        ProcessMetrics::register(&mut registry);
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

        let db = store.db().clone();
        let state = web::Data::new(AppState {
            store,
            import_limit_bytes: settings.http.import_limit_bytes,
            audit: AuditSource::new(
                &settings,
                bootstrap,
                if embedded.is_some() {
                    started_at
                } else {
                    chrono::DateTime::<chrono::Utc>::UNIX_EPOCH
                },
            ),
            writes: settings.writes,
            limits: settings.limits,
            metrics: MetricsEndpoint {
                registry,
                refresh: Box::new(move || db.refresh_metrics()),
            },
            auth,
            dev_tokens: settings.auth.dev_tokens,
        });

        warn_if_connections_can_outrun_descriptors(&settings);
        let json_limit = settings.http.json_limit_bytes;
        let body_timeout = web::Data::new(BodyTimeout(settings.http.body_timeout));
        // Built once, here and for `chatlab openapi` alike; each worker
        // serves a copy.
        let built = openapi::document();
        let known_paths = web::Data::new(KnownPaths::from_document(&built));
        let doc = openapi::render(&built);
        let public_state = state.clone();
        let public_limits = listener::Limits {
            workers: settings.http.workers,
            max_connections_per_worker: settings.http.max_connections_per_worker,
            header_timeout: settings.http.header_timeout,
            shutdown_timeout_secs: settings.http.shutdown_timeout.as_secs(),
        };
        // Signals are taken in `run_until_stopped`, which first ends the
        // live streams (they would hold a graceful stop to its timeout).
        let server = listener::serve("public", listener, public_limits, move || {
            // On each worker's thread, in its runtime: with
            // DB_POOL_LAYOUT=per_worker the worker takes its slice here.
            if let Some(slice) = public_state.store.db().adopt_slice() {
                tracing::debug!(slice, "this worker owns a slice of the pool");
            }
            App::new()
                .into_utoipa_app()
                .app_data(public_state.clone())
                .app_data(live.clone())
                .app_data(http_metrics.clone())
                .app_data(body_timeout.clone())
                .app_data(known_paths.clone())
                .app_data(rejections::json_config(json_limit))
                .app_data(rejections::path_config())
                .app_data(rejections::query_config())
                .configure(routes::configure)
                .into_app()
                .service(
                    SwaggerUi::new("/docs/{_:.*}")
                        .external_url_unchecked("/openapi.json", doc.clone()),
                )
                .default_service(web::to(rejections::no_route))
                .wrap(from_fn(http_limits::head_as_get))
                .wrap(from_fn(http_limits::bound_head))
                // Outside `bound_head`: a request answered there has its
                // body kept too.
                .wrap(from_fn(http_limits::bound_body))
                .wrap(from_fn(http_metrics::record))
                .wrap(from_fn(trace_headers::add))
                .wrap(TracingLogger::<RequestSpan>::new())
                .wrap(from_fn(http_limits::count_in_flight))
        })
        .map_err(|source| StartupError::Bind {
            addr: settings.http.addr,
            source,
        })?;
        tracing::info!(addr = %settings.http.addr, port, "listening");
        let ops_server = ops_server(state, &settings.http, ops_listener)?;
        tracing::info!(addr = %settings.http.ops_addr, port = ops_port,
            "operator endpoints (/metrics, /audit, /v1/users/bulk) listening");
        Ok(Self {
            port,
            ops_port,
            server,
            ops_server,
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

/// The connection limit bounds open sockets only below the process's file
/// descriptor limit: past that, `accept` fails and the server stops taking
/// anyone, `/healthz` included. Say so at startup when the limit is lower
/// than workers × `HTTP_MAX_CONNECTIONS_PER_WORKER` plus room for the
/// pool, the broker and the logs.
fn warn_if_connections_can_outrun_descriptors(settings: &Settings) {
    let Some(max_fds) = crate::process_metrics::read().and_then(|r| r.max_fds) else {
        return;
    };
    let connections = (settings.http.workers * settings.http.max_connections_per_worker) as u64;
    let needed = connections + u64::from(settings.db.pool_max_size) + 256;
    if max_fds < needed {
        tracing::warn!(
            max_open_files = max_fds,
            connections,
            needed,
            "the open-file limit is below what HTTP_MAX_CONNECTIONS_PER_WORKER admits: under a \
             flood of idle connections the server could run out of descriptors before the \
             limit applies; raise `ulimit -n` or lower HTTP_MAX_CONNECTIONS_PER_WORKER"
        );
    }
}

/// Linux silently caps a listener's backlog at `net.core.somaxconn`: say
/// so at startup when `HTTP_BACKLOG` asks for more, since a burst of
/// connects then overflows the smaller queue.
fn warn_if_backlog_is_capped(backlog: u32) {
    let Some(somaxconn) = listener::somaxconn() else {
        return;
    };
    if somaxconn < backlog {
        tracing::warn!(
            backlog,
            somaxconn,
            "the kernel caps HTTP_BACKLOG at net.core.somaxconn: raise it (sysctl) or lower HTTP_BACKLOG"
        );
    }
}

/// A statement cache turned off means a transaction pooler, most likely;
/// there the session `SET`s chatlab sends stay on whichever server
/// connection ran them, so the timeouts would hold on some connections
/// and not others, silently. Say so at startup.
fn warn_if_sets_may_not_stick(session: &chatlab_persistence::SessionSettings) {
    if !session.statement_cache && session.apply_on_connect {
        tracing::warn!(
            "DB_STATEMENT_CACHE=false with DB_SESSION_SETTINGS=true: behind a transaction \
             pooler the session SETs (timeouts, application_name) do not follow the \
             connection; set them on the database and DB_SESSION_SETTINGS=false \
             (docs/operations.md, \"PgBouncer\")"
        );
    }
}

/// Binds `addr` (port 0 picks one) with `backlog`, answering the bound port.
fn bind(addr: SocketAddr, backlog: u32) -> Result<(TcpListener, u16), StartupError> {
    let listener =
        listener::bind(addr, backlog).map_err(|source| StartupError::Bind { addr, source })?;
    let port = listener
        .local_addr()
        .map_err(|source| StartupError::Bind { addr, source })?
        .port();
    Ok((listener, port))
}

/// The operator listener: one worker, its own connections, so neither a
/// scrape nor an audit takes a public worker, and the public port answers
/// none of its paths. Its heads and bodies have the public listener's
/// deadlines. It stops when the public server stops (it handles no
/// signals itself).
fn ops_server(
    state: web::Data<AppState>,
    http: &HttpSettings,
    listener: TcpListener,
) -> Result<Server, StartupError> {
    let (addr, json_limit) = (http.ops_addr, http.json_limit_bytes);
    let body_timeout = web::Data::new(BodyTimeout(http.body_timeout));
    let limits = listener::Limits {
        workers: 1,
        // actix's default.
        max_connections_per_worker: 25_000,
        header_timeout: http.header_timeout,
        shutdown_timeout_secs: 5,
    };
    listener::serve("operator", listener, limits, move || {
        App::new()
            .app_data(state.clone())
            .app_data(body_timeout.clone())
            .app_data(rejections::json_config(json_limit))
            .app_data(rejections::path_config())
            .app_data(rejections::query_config())
            .configure(routes::configure_ops)
            .default_service(web::to(rejections::no_route))
            .wrap(from_fn(http_limits::bound_head))
            .wrap(from_fn(http_limits::bound_body))
            .wrap(from_fn(http_limits::count_in_flight))
    })
    .map_err(|source| StartupError::Bind { addr, source })
}

/// Statement and lock timeouts, deadlocks and ended sessions are told apart
/// by PostgreSQL's English message text (diesel hands out no SQLSTATE for
/// them). Sessions pin `lc_messages = C` where their role may; when it may
/// not and the server speaks another language, those errors would answer
/// 500 instead of 503: say so once, before serving. Bounded by a second,
/// so a database that is not up yet delays startup by that at most (and is
/// then not asked); done before the first request, so the connection it
/// opens never mixes with the requests' in the pool's figures.
async fn warn_unless_english_messages(store: &PgStore) {
    let asked =
        tokio::time::timeout(std::time::Duration::from_secs(1), store.message_language()).await;
    match asked {
        Ok(Ok(lang)) if lang == "C" || lang == "POSIX" || lang.starts_with("en") => {}
        Ok(Ok(lang)) => tracing::warn!(
            lc_messages = %lang,
            "PostgreSQL answers this role in {lang:?} and it may not set lc_messages: \
             timeouts and deadlocks will answer 500, not 503; grant it \
             `GRANT SET ON PARAMETER lc_messages TO <role>` (PostgreSQL 15+) or set \
             lc_messages = 'C' for the database"
        ),
        Ok(Err(e)) => tracing::debug!(error = %e, "could not read lc_messages at startup"),
        Err(_) => tracing::debug!("lc_messages not read: the database did not answer within 1 s"),
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
