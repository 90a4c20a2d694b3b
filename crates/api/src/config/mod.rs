//! Settings, read once at startup into typed structs.
//!
//! Each setting is declared once, in [`DeclaredSettings`]: env var, flag,
//! default and doc. [`parse`] reads the command line and the environment
//! through that declaration (a flag wins over its variable, an empty
//! variable counts as unset), refuses a misspelt variable under chatlab's
//! prefixes with the nearest real name ([`typos`]), and
//! [`Settings::from_declared`] turns the result into the structs the crates
//! take. `.env.example` and the README's table are rendered from the same
//! declaration ([`reference`]).

mod declared;
pub mod descriptors;
pub mod origins;
pub mod reference;
mod typos;

use std::collections::HashMap;
use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use clap::Parser;
use clap::error::{ContextKind, ContextValue, ErrorKind};

use chatlab_domain::{
    EventBody, InsertStrategy, Limits, MessageFanout, PublishMode, ReadMarkerMode,
};
use chatlab_kafka::KafkaConfig;
use chatlab_persistence::Driver;
use chatlab_persistence::config::default_pool_size;
use chatlab_persistence::events::outbox_relay::RelaySettings;
use chatlab_persistence::events::receipt_ledger::LedgerSettings;
use chatlab_persistence::{DbConfig, SessionSettings};

pub use declared::DeclaredSettings;

/// Connections per worker where the open-file limit cannot be read.
const DEFAULT_CONNECTIONS_PER_WORKER: usize = 2048;

/// A setting that stops startup, or a command line that does not parse.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A variable's (or its flag's) value does not parse.
    #[error("{var}={value:?} is invalid: {reason}")]
    Invalid {
        /// The variable.
        var: String,
        /// What it was set to.
        value: String,
        /// Why it is rejected.
        reason: String,
    },
    /// A variable under chatlab's prefixes that chatlab does not read.
    #[error("{var} is not a chatlab setting{}; `chatlab --help` lists them all", .nearest.as_ref().map(|n| format!(" (did you mean {n}?)")).unwrap_or_default())]
    Unknown {
        /// The variable.
        var: String,
        /// The declared variable nearest to it, if any is near.
        nearest: Option<String>,
    },
    /// A command line clap refuses, or `--help` / `--version` (clap prints
    /// those itself: [`clap::Error::exit`]).
    #[error(transparent)]
    Usage(#[from] clap::Error),
}

/// Log output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    /// Human-readable lines.
    Pretty,
    /// One JSON object per line.
    Json,
}

impl FromStr for LogFormat {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "pretty" | "text" => Ok(Self::Pretty),
            "json" => Ok(Self::Json),
            other => Err(format!("expected pretty or json, got {other:?}")),
        }
    }
}

/// What startup does when it finds a transaction pooler (PgBouncer in
/// transaction mode) between the server and PostgreSQL while settings
/// that cannot work there are on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PoolerCheck {
    /// Stop, naming the settings that work there.
    Refuse,
    /// Start anyway, with a warning (a pooler that keeps prepared
    /// statements per client, PgBouncer 1.21+ with
    /// `max_prepared_statements`, serves some of them).
    Warn,
    /// Do not probe.
    Off,
}

impl FromStr for PoolerCheck {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "refuse" => Ok(Self::Refuse),
            "warn" => Ok(Self::Warn),
            "off" => Ok(Self::Off),
            other => Err(format!("expected refuse, warn or off, got {other:?}")),
        }
    }
}

/// The one JWT algorithm the server accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JwtAlgorithm {
    /// HMAC-SHA256 with `CHATLAB_JWT_SECRET`.
    Hs256,
    /// Ed25519 with `CHATLAB_JWT_PUBLIC_KEY_FILE`.
    EdDsa,
    /// RSA-SHA256 with `CHATLAB_JWT_PUBLIC_KEY_FILE`.
    Rs256,
}

impl FromStr for JwtAlgorithm {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_uppercase().as_str() {
            "HS256" => Ok(Self::Hs256),
            "EDDSA" => Ok(Self::EdDsa),
            "RS256" => Ok(Self::Rs256),
            other => Err(format!("expected HS256, EdDSA or RS256, got {other:?}")),
        }
    }
}

/// Bearer tokens: where the keys come from, and what tokens must say.
#[derive(Debug, Clone)]
pub struct AuthSettings {
    /// The accepted algorithm.
    pub algorithm: JwtAlgorithm,
    /// HS256's shared secret; `None` generates one at startup.
    pub secret: Option<secrecy::SecretString>,
    /// EdDSA/RS256: the verifying key's PEM file.
    pub public_key_file: Option<PathBuf>,
    /// EdDSA/RS256: the signing key's PEM file, to issue tokens.
    pub private_key_file: Option<PathBuf>,
    /// The `iss` tokens carry.
    pub issuer: String,
    /// Lifetime of issued tokens.
    pub token_ttl: Duration,
    /// `POST /v1/tokens` issues tokens for any user (development only).
    pub dev_tokens: bool,
}

/// What browsers may do: call the API from other origins, load the web
/// client.
#[derive(Debug, Clone, Default)]
pub struct BrowserSettings {
    /// Origins whose pages may call the public API (CORS).
    pub allowed_origins: origins::AllowedOrigins,
    /// Whether `/web/` serves the web client.
    pub web_client: bool,
}

/// HTTP server settings.
#[derive(Debug, Clone)]
pub struct HttpSettings {
    /// Listen address.
    pub addr: SocketAddr,
    /// The operator listener's address (`/metrics`, `/audit`, bulk seeding).
    pub ops_addr: SocketAddr,
    /// Longest wait for a request's body once its headers arrived.
    pub body_timeout: Duration,
    /// Longest wait for a request's headers.
    pub header_timeout: Duration,
    /// Most open connections per worker.
    pub max_connections_per_worker: usize,
    /// Connections the kernel queues on each listener before they are accepted.
    pub backlog: u32,
    /// Worker threads.
    pub workers: usize,
    /// Largest JSON body, in bytes.
    pub json_limit_bytes: usize,
    /// Largest import job body, in bytes.
    pub import_limit_bytes: usize,
    /// Grace period for in-flight requests at shutdown.
    pub shutdown_timeout: Duration,
}

/// How writes choose their member insert strategy and publish mode.
#[derive(Debug, Clone, Copy)]
pub struct WriteSettings {
    /// Strategy when the request names none.
    pub default_strategy: InsertStrategy,
    /// Publish mode when the request names none.
    pub default_publish_mode: PublishMode,
    /// Message fan-out when the request names none.
    pub default_fanout: MessageFanout,
    /// How read markers are written.
    pub read_marker_mode: ReadMarkerMode,
    /// With `coalesced`, the period of the held markers' flush.
    pub read_marker_flush: Duration,
    /// Whether a request may name them (`X-Chatlab-Insert-Strategy`,
    /// `X-Chatlab-Publish-Mode`).
    pub allow_overrides: bool,
    /// Period of the expired-idempotency-key sweep.
    pub idempotency_sweep_every: Duration,
}

/// Live delivery (`GET /v1/events`).
#[derive(Debug, Clone, Copy)]
pub struct LiveSettings {
    /// Events a connection may have waiting.
    pub buffer: usize,
    /// Whether `message.sent` events (and so live frames) carry the text.
    pub frame_body: EventBody,
    /// Heartbeat period on an idle connection.
    pub heartbeat: Duration,
    /// Most topic records one reconnection's catch-up reads.
    pub catch_up_records: u64,
    /// Events kept in memory for catch-ups.
    pub recent_events: usize,
    /// Longest a live tail's fetch waits at the broker.
    pub fetch_wait: Duration,
    /// Most streams one user may hold on this instance.
    pub max_streams_per_user: usize,
    /// Most streams on this instance, all users together.
    pub max_streams: usize,
    /// How long a live ticket waits to open a stream.
    pub ticket_ttl: Duration,
}

/// Everything the server needs.
#[derive(Debug, Clone)]
pub struct Settings {
    /// HTTP server.
    pub http: HttpSettings,
    /// What browsers may do.
    pub browser: BrowserSettings,
    /// Bearer tokens.
    pub auth: AuthSettings,
    /// Database and pool.
    pub db: DbConfig,
    /// Apply migrations at startup.
    pub run_migrations: bool,
    /// Where they run, if not at `db.url` (a pooler's address).
    pub migration_url: Option<secrecy::SecretString>,
    /// What a transaction pooler found at startup does.
    pub pooler_check: PoolerCheck,
    /// Write-path choices.
    pub writes: WriteSettings,
    /// Live delivery.
    pub live: LiveSettings,
    /// Request limits.
    pub limits: Limits,
    /// Kafka.
    pub kafka: KafkaConfig,
    /// Outbox relay.
    pub outbox: RelaySettings,
    /// Receipt ledger.
    pub ledger: LedgerSettings,
    /// The widest window one event audit may read.
    pub audit_max_window: Duration,
    /// Log format.
    pub log_format: LogFormat,
    /// Log filter when `RUST_LOG` names none.
    pub log_filter: String,
}

impl HttpSettings {
    /// The listeners' settings, with the worker count already resolved.
    fn from_declared(d: &DeclaredSettings, workers: usize, per_worker: usize) -> Self {
        Self {
            addr: d.http_addr,
            ops_addr: d.ops_addr,
            body_timeout: Duration::from_millis(d.http_body_timeout_ms),
            header_timeout: Duration::from_millis(d.http_header_timeout_ms),
            max_connections_per_worker: per_worker,
            backlog: d.http_backlog,
            workers,
            json_limit_bytes: d.http_json_limit_bytes,
            import_limit_bytes: d.http_import_limit_bytes,
            shutdown_timeout: Duration::from_secs(d.http_shutdown_timeout_secs),
        }
    }
}

impl WriteSettings {
    /// The write path's defaults and whether requests may override them.
    fn from_declared(d: &DeclaredSettings) -> Self {
        Self {
            default_strategy: d.chat_insert_strategy,
            default_publish_mode: d.kafka_publish_mode,
            default_fanout: d.message_fanout,
            read_marker_mode: d.read_marker_mode,
            read_marker_flush: Duration::from_millis(d.read_marker_flush_ms),
            allow_overrides: d.chatlab_allow_overrides,
            idempotency_sweep_every: Duration::from_secs(d.chatlab_idempotency_sweep_secs),
        }
    }
}

impl LiveSettings {
    /// The live streams' settings; the total stream budget defaults to the
    /// connections the listeners admit less those kept for requests
    /// ([`descriptors::streams_for`]).
    fn from_declared(d: &DeclaredSettings, connections: usize) -> Self {
        Self {
            buffer: d.live_buffer_events as usize,
            frame_body: if d.live_frame_body {
                EventBody::Carried
            } else {
                EventBody::Withheld
            },
            heartbeat: Duration::from_secs(d.live_heartbeat_secs),
            catch_up_records: d.live_catch_up_records,
            recent_events: d.live_recent_events,
            fetch_wait: Duration::from_millis(d.live_fetch_wait_ms),
            max_streams_per_user: d.live_max_streams_per_user,
            max_streams: d
                .live_max_streams
                .unwrap_or_else(|| descriptors::streams_for(connections))
                .max(1),
            ticket_ttl: Duration::from_secs(d.live_ticket_ttl_secs),
        }
    }
}

impl Settings {
    /// Reads the given variables (tests pass their own).
    pub fn from_vars(vars: HashMap<String, String>) -> Result<Self, ConfigError> {
        let only: SettingsOnly = parse([OsString::from("chatlab")], &vars)?;
        Self::from_declared(only.settings)
    }

    /// The structs the crates take, from the declared settings, with the
    /// checks that span more than one setting.
    pub fn from_declared(d: DeclaredSettings) -> Result<Self, ConfigError> {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let workers = d.http_workers.unwrap_or(cores).max(1);
        let pool_max_size = d.db_pool_max_size.unwrap_or_else(default_pool_size);
        let per_worker = d.http_max_connections_per_worker.unwrap_or_else(|| {
            let pools = usize::try_from(pool_max_size).unwrap_or(usize::MAX);
            descriptors::open_file_limit().map_or(DEFAULT_CONNECTIONS_PER_WORKER, |files| {
                descriptors::connections_per_worker(files, workers, pools.saturating_mul(workers))
            })
        });
        let connections = workers.saturating_mul(per_worker);
        // Before the fields that move out of `d`.
        let http = HttpSettings::from_declared(&d, workers, per_worker);
        let writes = WriteSettings::from_declared(&d);
        let live = LiveSettings::from_declared(&d, connections);
        let mut db = DbConfig::with_url(d.database_url);
        db.driver = d.db_driver;
        db.pooling = d.db_pool;
        db.layout = d.db_pool_layout;
        db.blocking_threads = d.db_blocking_threads;
        db.pool_max_size = pool_max_size;
        db.pool_min_idle = (d.db_pool_min_idle > 0).then_some(d.db_pool_min_idle);
        db.acquire_timeout = Duration::from_millis(d.db_pool_acquire_timeout_ms);
        db.max_lifetime = optional_secs(d.db_pool_max_lifetime_secs);
        db.idle_timeout = optional_secs(d.db_pool_idle_timeout_secs);
        db.recycle = d.db_pool_recycle;
        db.idempotency_retention = Duration::from_secs(d.chatlab_idempotency_retention_secs);
        db.session = SessionSettings {
            application_name: d.db_application_name,
            statement_timeout: Duration::from_millis(d.db_statement_timeout_ms),
            lock_timeout: Duration::from_millis(d.db_lock_timeout_ms),
            idle_in_transaction_timeout: Duration::from_millis(d.db_idle_in_transaction_timeout_ms),
            apply_on_connect: d.db_session_settings,
            statement_cache: d.db_statement_cache,
        };
        let ledger = LedgerSettings {
            retention: Duration::from_secs(d.kafka_receipt_retention_secs),
            ..LedgerSettings::for_topic(&d.kafka_topic)
        };
        db.workers = workers;
        let settings = Self {
            http,
            browser: BrowserSettings {
                allowed_origins: d.cors_allowed_origins,
                web_client: d.web_client,
            },
            auth: AuthSettings {
                algorithm: d.chatlab_jwt_algorithm,
                secret: d
                    .chatlab_jwt_secret
                    .filter(|s| !s.is_empty())
                    .map(secrecy::SecretString::from),
                public_key_file: d.chatlab_jwt_public_key_file,
                private_key_file: d.chatlab_jwt_private_key_file,
                issuer: d.chatlab_jwt_issuer,
                token_ttl: Duration::from_secs(d.chatlab_token_ttl_secs),
                dev_tokens: d.chatlab_dev_tokens,
            },
            db,
            run_migrations: d.db_run_migrations,
            migration_url: d
                .db_migration_url
                .filter(|url| !url.is_empty())
                .map(secrecy::SecretString::from),
            writes,
            live,
            limits: Limits {
                chat_max_members: d.chat_max_members,
                users_bulk_max: d.users_bulk_max,
                import_max_rows: d.chat_import_max_rows,
            },
            kafka: KafkaConfig {
                brokers: d.kafka_brokers.filter(|b| !b.trim().is_empty()),
                topic: d.kafka_topic,
                partitions: d.kafka_topic_partitions,
                send_timeout: Duration::from_millis(d.kafka_send_timeout_ms),
                linger: Duration::from_millis(d.kafka_linger_ms),
                mock_broker_rtt: Duration::from_millis(d.kafka_mock_broker_rtt_ms),
            },
            outbox: RelaySettings {
                batch_size: d.outbox_batch_size,
                poll_interval: Duration::from_millis(d.outbox_poll_ms),
                retention: Duration::from_secs(d.outbox_retention_secs),
                ..RelaySettings::default()
            },
            ledger,
            audit_max_window: Duration::from_secs(d.chatlab_audit_max_window_secs),
            pooler_check: d.db_pooler_check,
            log_format: d.log_format,
            log_filter: d.rust_log,
        };
        settings.check_broker_wait_fits_in_a_transaction()?;
        settings.check_keys_match_the_algorithm()?;
        settings.check_streams_leave_room_for_requests()?;
        settings.check_the_driver_can_run_the_strategy()?;
        Ok(settings)
    }

    /// `copy` needs the blocking driver (diesel-async has no COPY): a
    /// default strategy the driver cannot run stops startup.
    fn check_the_driver_can_run_the_strategy(&self) -> Result<(), ConfigError> {
        let strategy = self.writes.default_strategy;
        if !strategy.needs_blocking_driver() || self.db.driver == Driver::Blocking {
            return Ok(());
        }
        Err(ConfigError::Invalid {
            var: "CHAT_INSERT_STRATEGY".to_owned(),
            value: strategy.as_str().to_owned(),
            reason: format!(
                "needs DB_DRIVER=blocking: diesel-async has no COPY, so the {} driver cannot \
                 send one",
                self.db.driver.as_str()
            ),
        })
    }

    /// A live stream holds its connection for as long as the client
    /// listens; were every connection a worker takes a stream, no request
    /// (`/healthz` included) would get in. So `LIVE_MAX_STREAMS` must stay
    /// below the connections the workers take.
    fn check_streams_leave_room_for_requests(&self) -> Result<(), ConfigError> {
        let connections = self
            .http
            .workers
            .saturating_mul(self.http.max_connections_per_worker);
        if self.live.max_streams < connections {
            return Ok(());
        }
        Err(ConfigError::Invalid {
            var: "LIVE_MAX_STREAMS".to_owned(),
            value: self.live.max_streams.to_string(),
            reason: format!(
                "must be below HTTP_WORKERS × HTTP_MAX_CONNECTIONS_PER_WORKER ({} × {} = \
                 {connections}): streams would take every connection and leave none for \
                 requests",
                self.http.workers, self.http.max_connections_per_worker
            ),
        })
    }

    /// HS256 takes a secret and no key file; EdDSA and RS256 take a public
    /// key file and no secret. A setting that would be silently ignored
    /// stops startup instead.
    fn check_keys_match_the_algorithm(&self) -> Result<(), ConfigError> {
        let a = &self.auth;
        let invalid = |var: &str, value: String, reason: &str| ConfigError::Invalid {
            var: var.to_owned(),
            value,
            reason: reason.to_owned(),
        };
        let file = |f: &Option<PathBuf>| f.as_ref().map(|p| p.display().to_string());
        match a.algorithm {
            JwtAlgorithm::Hs256 => {
                if let Some(f) = file(&a.public_key_file).or(file(&a.private_key_file)) {
                    return Err(invalid(
                        "CHATLAB_JWT_PUBLIC_KEY_FILE",
                        f,
                        "key files are for EdDSA or RS256; set CHATLAB_JWT_ALGORITHM, or use \
                         CHATLAB_JWT_SECRET for HS256",
                    ));
                }
                if let Some(secret) = &a.secret {
                    let len = secrecy::ExposeSecret::expose_secret(secret).len();
                    if len < chatlab_auth::MIN_SECRET_BYTES {
                        return Err(invalid(
                            "CHATLAB_JWT_SECRET",
                            format!("<{len} bytes, not shown>"),
                            "HS256 needs at least 32 bytes (e.g. `openssl rand -hex 32`)",
                        ));
                    }
                }
            }
            JwtAlgorithm::EdDsa | JwtAlgorithm::Rs256 => {
                if a.secret.is_some() {
                    return Err(invalid(
                        "CHATLAB_JWT_SECRET",
                        "<not shown>".to_owned(),
                        "a shared secret is for HS256; EdDSA and RS256 verify with \
                         CHATLAB_JWT_PUBLIC_KEY_FILE",
                    ));
                }
                if a.public_key_file.is_none() {
                    return Err(invalid(
                        "CHATLAB_JWT_PUBLIC_KEY_FILE",
                        String::new(),
                        "EdDSA and RS256 need the PEM public key that verifies tokens",
                    ));
                }
            }
        }
        Ok(())
    }

    /// The outbox relay, and in_tx_await requests, wait for the broker's
    /// acknowledgement with a transaction open. If that wait can outlast
    /// `DB_IDLE_IN_TRANSACTION_TIMEOUT_MS`, PostgreSQL ends the session
    /// after the broker acknowledged: the relay's rows stay pending and are
    /// published again, forever. So the send timeout, and a second for the
    /// rest of the batch, must fit inside the idle-in-transaction timeout
    /// (0 turns that timeout off, and with it the check).
    fn check_broker_wait_fits_in_a_transaction(&self) -> Result<(), ConfigError> {
        let idle = self.db.session.idle_in_transaction_timeout;
        let wait = self.kafka.send_timeout + Duration::from_secs(1);
        if idle.is_zero() || wait < idle {
            return Ok(());
        }
        Err(ConfigError::Invalid {
            var: "KAFKA_SEND_TIMEOUT_MS".to_owned(),
            value: self.kafka.send_timeout.as_millis().to_string(),
            reason: format!(
                "must be at least 1000 ms below DB_IDLE_IN_TRANSACTION_TIMEOUT_MS ({} ms): \
                 the outbox relay and in_tx_await wait for the broker inside a transaction, \
                 and PostgreSQL would end that session after the broker acknowledged",
                idle.as_millis()
            ),
        })
    }
}

/// The process's environment; a variable whose name or value is not UTF-8
/// is none of chatlab's.
pub fn process_vars() -> HashMap<String, String> {
    std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .collect()
}

fn optional_secs(secs: u64) -> Option<Duration> {
    (secs > 0).then(|| Duration::from_secs(secs))
}

/// A command line of the settings alone (what [`Settings::from_vars`] parses).
#[derive(Debug, Parser)]
#[command(name = "chatlab")]
struct SettingsOnly {
    #[command(flatten)]
    settings: DeclaredSettings,
}

/// Parses `P`, a command line that flattens [`DeclaredSettings`], from
/// `args` (the program name first) and the variables `vars`.
///
/// Every declared variable set to something other than blanks becomes its
/// flag, ahead of `args`, so a flag on the command line wins and an empty
/// variable counts as unset; clap then parses the one command line, so a
/// value means the same from either place. Before that, a variable under
/// chatlab's prefixes that is not declared stops with the nearest name.
pub fn parse<P: Parser>(
    args: impl IntoIterator<Item = OsString>,
    vars: &HashMap<String, String>,
) -> Result<P, ConfigError> {
    let args: Vec<OsString> = args.into_iter().collect();
    let declared: Vec<(String, String)> = P::command()
        .get_arguments()
        .filter_map(|a| {
            let var = a.get_env()?.to_string_lossy().into_owned();
            Some((var, a.get_long()?.to_owned()))
        })
        .collect();
    let known: Vec<&str> = declared.iter().map(|(var, _)| var.as_str()).collect();
    if let Some((var, nearest)) = typos::first_unknown(vars.keys().map(String::as_str), &known) {
        return Err(ConfigError::Unknown {
            var,
            nearest: nearest.map(str::to_owned),
        });
    }
    let mut argv: Vec<OsString> = args.iter().take(1).cloned().collect();
    if argv.is_empty() {
        argv.push("chatlab".into());
    }
    for (var, long) in &declared {
        if let Some(value) = vars.get(var).map(|v| v.trim()).filter(|v| !v.is_empty()) {
            argv.push(format!("--{long}={value}").into());
        }
    }
    argv.extend(args.iter().skip(1).cloned());
    let command = P::command()
        .mut_args(|a| a.env(None))
        .args_override_self(true);
    let matches = command
        .try_get_matches_from(argv)
        .map_err(|e| match e.kind() {
            // Help as the user sees it: with each flag's variable.
            ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
                let help = P::command().mut_args(|a| a.hide_env_values(true));
                ConfigError::Usage(help.try_get_matches_from(&args).err().unwrap_or(e))
            }
            _ => config_error(e),
        })?;
    P::from_arg_matches(&matches).map_err(config_error)
}

/// A value clap refused, as the variable it came from (the value name of
/// every declared flag is its variable); anything else as clap says it.
fn config_error(e: clap::Error) -> ConfigError {
    let text = |kind| match e.get(kind) {
        Some(ContextValue::String(s)) => Some(s.clone()),
        _ => None,
    };
    let var = text(ContextKind::InvalidArg)
        .and_then(|arg| Some(arg[arg.find('<')? + 1..arg.rfind('>')?].to_owned()));
    match (e.kind(), var, text(ContextKind::InvalidValue)) {
        (ErrorKind::ValueValidation | ErrorKind::InvalidValue, Some(var), Some(value)) => {
            let reason = std::error::Error::source(&e)
                .map(|s| s.to_string())
                .unwrap_or_else(|| e.kind().to_string());
            ConfigError::Invalid { var, value, reason }
        }
        _ => ConfigError::Usage(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chatlab_persistence::Recycle;

    fn vars(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn defaults_apply_when_nothing_is_set() {
        let s = Settings::from_vars(HashMap::new()).unwrap();
        assert_eq!(s.writes.default_strategy, InsertStrategy::Batch);
        assert!(!s.writes.allow_overrides);
        assert_eq!(s.db.pool_max_size, default_pool_size());
        assert_eq!(s.db.acquire_timeout, Duration::from_secs(5));
        assert_eq!(s.db.recycle, Recycle::Fast);
        assert_eq!(s.limits.chat_max_members, 10_000);
        assert_eq!(s.http.addr.port(), 8080);
        assert_eq!(s.writes.default_publish_mode, PublishMode::Outbox);
        assert_eq!(s.kafka.brokers, None);
        assert_eq!(s.kafka.send_timeout, Duration::from_secs(5));
    }

    #[test]
    fn a_broker_wait_longer_than_an_idle_transaction_is_refused() {
        let err = Settings::from_vars(vars(&[
            ("KAFKA_SEND_TIMEOUT_MS", "5000"),
            ("DB_IDLE_IN_TRANSACTION_TIMEOUT_MS", "5500"),
        ]))
        .unwrap_err()
        .to_string();
        assert!(err.contains("KAFKA_SEND_TIMEOUT_MS"), "{err}");
        assert!(
            err.contains("DB_IDLE_IN_TRANSACTION_TIMEOUT_MS (5500 ms)"),
            "{err}"
        );
        for ok in [
            [
                ("KAFKA_SEND_TIMEOUT_MS", "5000"),
                ("DB_IDLE_IN_TRANSACTION_TIMEOUT_MS", "6001"),
            ],
            [
                ("KAFKA_SEND_TIMEOUT_MS", "5000"),
                ("DB_IDLE_IN_TRANSACTION_TIMEOUT_MS", "0"),
            ],
        ] {
            assert!(Settings::from_vars(vars(&ok)).is_ok(), "{ok:?}");
        }
    }

    #[test]
    fn streams_take_all_but_the_requests_share_by_default_and_never_all() {
        let s = Settings::from_vars(vars(&[
            ("HTTP_WORKERS", "2"),
            ("HTTP_MAX_CONNECTIONS_PER_WORKER", "2048"),
        ]))
        .unwrap();
        assert_eq!(s.live.max_streams, 4096 - 256);
        assert_eq!(s.live.max_streams_per_user, 16);
        let err = Settings::from_vars(vars(&[
            ("HTTP_WORKERS", "2"),
            ("HTTP_MAX_CONNECTIONS_PER_WORKER", "100"),
            ("LIVE_MAX_STREAMS", "200"),
        ]))
        .unwrap_err();
        assert!(
            matches!(&err, ConfigError::Invalid { var, .. } if var == "LIVE_MAX_STREAMS"),
            "{err:?}"
        );
        assert!(err.to_string().contains("2 × 100 = 200"), "{err}");
        let ok = Settings::from_vars(vars(&[
            ("HTTP_WORKERS", "2"),
            ("HTTP_MAX_CONNECTIONS_PER_WORKER", "100"),
            ("LIVE_MAX_STREAMS", "199"),
        ]));
        assert_eq!(ok.map(|s| s.live.max_streams).ok(), Some(199));
    }

    #[test]
    fn connections_follow_the_open_file_limit_by_default() {
        let s = Settings::from_vars(vars(&[("HTTP_WORKERS", "2"), ("DB_POOL_MAX_SIZE", "10")]))
            .unwrap();
        let files = descriptors::open_file_limit().unwrap();
        assert_eq!(
            s.http.max_connections_per_worker,
            descriptors::connections_per_worker(files, 2, 20)
        );
        let connections = 2 * s.http.max_connections_per_worker;
        assert_eq!(s.live.max_streams, descriptors::streams_for(connections));
        // Every descriptor is accounted for: connections, pools, reserve.
        assert!(connections as u64 + 20 + descriptors::RESERVED <= files);
    }

    #[test]
    fn values_are_parsed() {
        let s = Settings::from_vars(vars(&[
            ("CHAT_INSERT_STRATEGY", "unnest"),
            ("CHATLAB_ALLOW_OVERRIDES", "true"),
            ("DB_POOL_MAX_SIZE", "20"),
            ("DB_POOL_RECYCLE", "verified"),
            ("DB_POOL_MAX_LIFETIME_SECS", "0"),
            ("HTTP_ADDR", "127.0.0.1:0"),
            ("KAFKA_PUBLISH_MODE", "after_commit"),
            ("KAFKA_BROKERS", "127.0.0.1:9092"),
            ("KAFKA_MOCK_BROKER_RTT_MS", "50"),
        ]))
        .unwrap();
        assert_eq!(s.writes.default_publish_mode, PublishMode::AfterCommit);
        assert_eq!(s.kafka.brokers.as_deref(), Some("127.0.0.1:9092"));
        assert_eq!(s.kafka.mock_broker_rtt, Duration::from_millis(50));
        assert_eq!(s.writes.default_strategy, InsertStrategy::Unnest);
        assert!(s.writes.allow_overrides);
        assert_eq!(s.db.pool_max_size, 20);
        assert_eq!(s.db.recycle, Recycle::Verified);
        assert_eq!(s.db.max_lifetime, None);
        assert_eq!(s.http.addr.port(), 0);
    }

    #[test]
    fn migrations_run_through_database_url_unless_told_where() {
        use secrecy::ExposeSecret;
        let through_pool = Settings::from_vars(vars(&[(
            "DATABASE_URL",
            "postgres://app@127.0.0.1:6432/chatlab",
        )]))
        .unwrap();
        assert!(through_pool.migration_url.is_none());
        let straight = Settings::from_vars(vars(&[
            ("DATABASE_URL", "postgres://app@127.0.0.1:6432/chatlab"),
            (
                "DB_MIGRATION_URL",
                "postgres://owner@127.0.0.1:5432/chatlab",
            ),
        ]))
        .unwrap();
        assert_eq!(
            straight.migration_url.as_ref().map(|u| u.expose_secret()),
            Some("postgres://owner@127.0.0.1:5432/chatlab")
        );
        assert_eq!(
            straight.db.url.expose_secret(),
            "postgres://app@127.0.0.1:6432/chatlab"
        );
    }

    #[test]
    fn copy_as_the_default_needs_the_blocking_driver() {
        let err = Settings::from_vars(vars(&[("CHAT_INSERT_STRATEGY", "copy")])).unwrap_err();
        assert!(
            matches!(&err, ConfigError::Invalid { var, value, .. } if var == "CHAT_INSERT_STRATEGY" && value == "copy"),
            "{err:?}"
        );
        assert!(err.to_string().contains("DB_DRIVER=blocking"), "{err}");
        let s = Settings::from_vars(vars(&[
            ("CHAT_INSERT_STRATEGY", "copy"),
            ("DB_DRIVER", "blocking"),
        ]))
        .unwrap();
        assert_eq!(s.writes.default_strategy, InsertStrategy::Copy);
    }

    #[test]
    fn malformed_values_name_the_variable() {
        let err = Settings::from_vars(vars(&[("CHAT_INSERT_STRATEGY", "bulk")])).unwrap_err();
        assert!(
            matches!(&err, ConfigError::Invalid { var, value, .. } if var == "CHAT_INSERT_STRATEGY" && value == "bulk"),
            "{err:?}"
        );
        assert!(
            err.to_string()
                .contains("per_row, batch, batch_prepared, unnest, single, pipeline"),
            "{err}"
        );
        for (var, value) in [
            ("DB_POOL_MAX_SIZE", "0"),
            ("HTTP_ADDR", "localhost"),
            ("DB_STATEMENT_TIMEOUT_MS", "5s"),
            ("CHATLAB_ALLOW_OVERRIDES", "yes please"),
            ("DB_DRIVER", "jdbc"),
        ] {
            let err = Settings::from_vars(vars(&[(var, value)])).unwrap_err();
            assert!(
                matches!(&err, ConfigError::Invalid { var: v, .. } if v == var),
                "{var}: {err:?}"
            );
            assert!(
                err.to_string().starts_with(&format!("{var}={value:?}")),
                "{err}"
            );
        }
    }

    #[test]
    fn an_empty_variable_counts_as_unset() {
        let s = Settings::from_vars(vars(&[
            ("KAFKA_BROKERS", ""),
            ("DB_POOL_MAX_SIZE", " "),
            ("HTTP_ADDR", ""),
        ]))
        .unwrap();
        assert_eq!(s.kafka.brokers, None);
        assert_eq!(s.db.pool_max_size, default_pool_size());
        assert_eq!(s.http.addr.port(), 8080);
    }

    #[test]
    fn a_flag_wins_over_its_variable() {
        let vars = vars(&[("DB_POOL_MAX_SIZE", "20"), ("KAFKA_PUBLISH_MODE", "off")]);
        let only: SettingsOnly = parse(
            ["chatlab", "--db-pool-max-size", "7"].map(OsString::from),
            &vars,
        )
        .unwrap();
        let s = Settings::from_declared(only.settings).unwrap();
        assert_eq!(s.db.pool_max_size, 7);
        assert_eq!(s.writes.default_publish_mode, PublishMode::Off);
    }

    #[test]
    fn a_misspelt_variable_names_the_nearest_setting() {
        let err = Settings::from_vars(vars(&[("DB_STATEMNT_TIMEOUT_MS", "100")])).unwrap_err();
        assert_eq!(
            err.to_string(),
            "DB_STATEMNT_TIMEOUT_MS is not a chatlab setting (did you mean \
             DB_STATEMENT_TIMEOUT_MS?); `chatlab --help` lists them all"
        );
        for (typo, nearest) in [
            ("DB_POOL_MAXSIZE", "DB_POOL_MAX_SIZE"),
            ("KAFKA_PUBLISH_MOD", "KAFKA_PUBLISH_MODE"),
            ("HTTP_WORKER", "HTTP_WORKERS"),
            ("OUTBOX_POLL_MSS", "OUTBOX_POLL_MS"),
            ("USERS_BULK_MAXX", "USERS_BULK_MAX"),
            ("LOG_FORMT", "LOG_FORMAT"),
            ("CHAT_MAX_MEMBER", "CHAT_MAX_MEMBERS"),
        ] {
            let err = Settings::from_vars(vars(&[(typo, "1")])).unwrap_err();
            assert!(
                matches!(&err, ConfigError::Unknown { var, nearest: Some(n) } if var == typo && n == nearest),
                "{typo}: {err:?}"
            );
        }
        // Other people's variables are none of our business.
        let others = vars(&[
            ("DB_HOST", "x"),
            ("DB_PORT", "5432"),
            ("HTTP_PROXY", "y"),
            ("KAFKA_NODE_ID", "1"),
            ("KAFKA_TEST_BROKERS", "127.0.0.1:9092"),
        ]);
        assert!(Settings::from_vars(others).is_ok());
    }
}
