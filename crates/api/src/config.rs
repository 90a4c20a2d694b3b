//! Settings, read once from env vars at startup into typed structs.
//!
//! | variable | default | meaning |
//! |---|---|---|
//! | `DATABASE_URL` | `postgres://postgres@127.0.0.1:5432/chatlab` | PostgreSQL to use |
//! | `HTTP_ADDR` | `127.0.0.1:8080` | listen address (port 0 picks a free port) |
//! | `HTTP_WORKERS` | cores | actix worker threads |
//! | `HTTP_JSON_LIMIT_BYTES` | 4194304 | largest JSON body accepted |
//! | `HTTP_SHUTDOWN_TIMEOUT_SECS` | 30 | grace period for in-flight requests on SIGTERM/SIGINT |
//! | `CHAT_INSERT_STRATEGY` | `batch` | member inserts: `per_row`, `batch` or `unnest` |
//! | `CHATLAB_ALLOW_OVERRIDES` | `false` | honour `X-Chatlab-Insert-Strategy` and `X-Chatlab-Publish-Mode` per request |
//! | `CHATLAB_AUDIT_MAX_WINDOW_SECS` | 86400 | widest window one event audit reads (`GET /audit`, `chatlab audit`); one audit runs at a time |
//! | `CHAT_MAX_MEMBERS` | 10000 | most members of a new chat, creator included |
//! | `USERS_BULK_MAX` | 100000 | most users one bulk request may create |
//! | `CHAT_IMPORT_MAX_ROWS` | 100000 | most rows one import job may write |
//! | `HTTP_IMPORT_LIMIT_BYTES` | 33554432 | largest import job body accepted |
//! | `DB_DRIVER` | `async` | `async` (diesel-async on bb8) or `blocking` (diesel's libpq `PgConnection` on r2d2, run on blocking threads) |
//! | `DB_POOL` | `on` | `off`: every request opens its own connection and closes it after |
//! | `DB_BLOCKING_THREADS` | 200 | blocking driver: most units of work running at once, one thread each |
//! | `DB_POOL_MAX_SIZE` | cores × 2 + 1 | most pooled connections (HikariCP's formula) |
//! | `DB_POOL_MIN_IDLE` | 0 | idle connections kept open |
//! | `DB_POOL_ACQUIRE_TIMEOUT_MS` | 5000 | wait for a connection before answering 503 (unpooled: bound on the open) |
//! | `DB_POOL_MAX_LIFETIME_SECS` | 1800 | close connections older than this (0: never) |
//! | `DB_POOL_IDLE_TIMEOUT_SECS` | 600 | close idle connections after this (0: never) |
//! | `DB_POOL_RECYCLE` | `fast` | checkout check: `fast` (no round trip) or `verified` (`SELECT 1`) |
//! | `DB_STATEMENT_TIMEOUT_MS` | 30000 | PostgreSQL `statement_timeout` (0: off) |
//! | `DB_LOCK_TIMEOUT_MS` | 5000 | PostgreSQL `lock_timeout` (0: off) |
//! | `DB_IDLE_IN_TRANSACTION_TIMEOUT_MS` | 60000 | PostgreSQL `idle_in_transaction_session_timeout` (0: off) |
//! | `DB_APPLICATION_NAME` | `chatlab` | PostgreSQL `application_name` |
//! | `DB_RUN_MIGRATIONS` | `true` | apply pending migrations at startup |
//! | `KAFKA_BROKERS` | unset | `host:port,...`; unset starts librdkafka's in-process mock cluster |
//! | `KAFKA_TOPIC` | `chatlab.chat-events` | topic of chat events |
//! | `KAFKA_TOPIC_PARTITIONS` | 3 | partitions when chatlab creates the topic |
//! | `KAFKA_PUBLISH_MODE` | `outbox` | `off`, `in_tx_await`, `in_tx_enqueue`, `after_commit`, `outbox` |
//! | `KAFKA_SEND_TIMEOUT_MS` | 5000 | bound on one delivery (`message.timeout.ms`); at least 1 s below `DB_IDLE_IN_TRANSACTION_TIMEOUT_MS` (checked at startup) |
//! | `KAFKA_LINGER_MS` | 0 | producer batching delay (`linger.ms`) |
//! | `KAFKA_MOCK_BROKER_RTT_MS` | 0 | round-trip time injected into the mock cluster |
//! | `KAFKA_RECEIPT_RETENTION_SECS` | 86400 | receipts (partition, offset) of acknowledged events are kept this long for the audit |
//! | `OUTBOX_BATCH_SIZE` | 500 | rows per relay batch |
//! | `OUTBOX_POLL_MS` | 100 | relay poll period (it also wakes on every local outbox commit) |
//! | `OUTBOX_RETENTION_SECS` | 3600 | published outbox rows are deleted after this |
//! | `LOG_FORMAT` | `pretty` | `pretty` or `json` |
//! | `RUST_LOG` | `info` | log filter |
//!
//! A malformed value, or an unknown variable under one of chatlab's own
//! prefixes (`CHATLAB_`, `CHAT_`, `DB_POOL_`, `KAFKA_`, `OUTBOX_`), stops startup with a message
//! naming the variable: a typo must not silently run the default.

use std::collections::HashMap;
use std::fmt::Display;
use std::net::SocketAddr;
use std::str::FromStr;
use std::time::Duration;

use chatlab_domain::{InsertStrategy, Limits, PublishMode};
use chatlab_kafka::KafkaConfig;
use chatlab_persistence::config::{DEFAULT_BLOCKING_THREADS, default_pool_size};
use chatlab_persistence::outbox_relay::RelaySettings;
use chatlab_persistence::receipt_ledger::LedgerSettings;
use chatlab_persistence::{DbConfig, Driver, Pooling, Recycle, SessionSettings};

/// Every variable this module reads; anything else under our prefixes is a typo.
const KNOWN: &[&str] = &[
    "DATABASE_URL",
    "DB_DRIVER",
    "DB_POOL",
    "DB_BLOCKING_THREADS",
    "HTTP_ADDR",
    "HTTP_WORKERS",
    "HTTP_JSON_LIMIT_BYTES",
    "HTTP_IMPORT_LIMIT_BYTES",
    "CHAT_IMPORT_MAX_ROWS",
    "HTTP_SHUTDOWN_TIMEOUT_SECS",
    "CHAT_INSERT_STRATEGY",
    "CHATLAB_ALLOW_OVERRIDES",
    "CHATLAB_AUDIT_MAX_WINDOW_SECS",
    "CHAT_MAX_MEMBERS",
    "USERS_BULK_MAX",
    "DB_POOL_MAX_SIZE",
    "DB_POOL_MIN_IDLE",
    "DB_POOL_ACQUIRE_TIMEOUT_MS",
    "DB_POOL_MAX_LIFETIME_SECS",
    "DB_POOL_IDLE_TIMEOUT_SECS",
    "DB_POOL_RECYCLE",
    "DB_STATEMENT_TIMEOUT_MS",
    "DB_LOCK_TIMEOUT_MS",
    "DB_IDLE_IN_TRANSACTION_TIMEOUT_MS",
    "DB_APPLICATION_NAME",
    "DB_RUN_MIGRATIONS",
    "KAFKA_BROKERS",
    "KAFKA_TOPIC",
    "KAFKA_TOPIC_PARTITIONS",
    "KAFKA_PUBLISH_MODE",
    "KAFKA_SEND_TIMEOUT_MS",
    "KAFKA_LINGER_MS",
    "KAFKA_MOCK_BROKER_RTT_MS",
    "KAFKA_RECEIPT_RETENTION_SECS",
    "OUTBOX_BATCH_SIZE",
    "OUTBOX_POLL_MS",
    "OUTBOX_RETENTION_SECS",
    "LOG_FORMAT",
];

/// Prefixes chatlab owns.
const OWNED_PREFIXES: &[&str] = &["CHATLAB_", "CHAT_", "DB_POOL_", "KAFKA_", "OUTBOX_"];

/// A setting that stops startup.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ConfigError {
    /// A variable's value does not parse.
    #[error("{var}={value:?} is invalid: {reason}")]
    Invalid {
        /// The variable.
        var: &'static str,
        /// What it was set to.
        value: String,
        /// Why it is rejected.
        reason: String,
    },
    /// A variable under chatlab's prefixes that chatlab does not read.
    #[error("{0} is not a chatlab setting (misspelt?); known settings: see the README")]
    Unknown(String),
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

/// HTTP server settings.
#[derive(Debug, Clone)]
pub struct HttpSettings {
    /// Listen address.
    pub addr: SocketAddr,
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
    /// Whether a request may name them (`X-Chatlab-Insert-Strategy`,
    /// `X-Chatlab-Publish-Mode`).
    pub allow_overrides: bool,
}

/// Everything the server needs.
#[derive(Debug, Clone)]
pub struct Settings {
    /// HTTP server.
    pub http: HttpSettings,
    /// Database and pool.
    pub db: DbConfig,
    /// Apply migrations at startup.
    pub run_migrations: bool,
    /// Write-path choices.
    pub writes: WriteSettings,
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
}

impl Settings {
    /// Reads the process environment.
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_vars(std::env::vars().collect())
    }

    /// Reads the given variables (tests pass their own).
    pub fn from_vars(vars: HashMap<String, String>) -> Result<Self, ConfigError> {
        if let Some(unknown) = vars.keys().find(|k| {
            OWNED_PREFIXES.iter().any(|p| k.starts_with(p)) && !KNOWN.contains(&k.as_str())
        }) {
            return Err(ConfigError::Unknown(unknown.clone()));
        }
        let env = Env(&vars);
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let mut db = DbConfig::with_url(
            env.string("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/chatlab"),
        );
        db.driver = env.parse("DB_DRIVER", Driver::Async)?;
        db.pooling = env.parse("DB_POOL", Pooling::On)?;
        db.blocking_threads = env.parse("DB_BLOCKING_THREADS", DEFAULT_BLOCKING_THREADS)?;
        if db.blocking_threads == 0 {
            return Err(env.invalid("DB_BLOCKING_THREADS", "must be at least 1"));
        }
        db.pool_max_size = env.parse("DB_POOL_MAX_SIZE", default_pool_size())?;
        if db.pool_max_size == 0 {
            return Err(env.invalid("DB_POOL_MAX_SIZE", "must be at least 1"));
        }
        db.pool_min_idle = match env.parse::<u32>("DB_POOL_MIN_IDLE", 0)? {
            0 => None,
            n => Some(n),
        };
        db.acquire_timeout = Duration::from_millis(env.parse("DB_POOL_ACQUIRE_TIMEOUT_MS", 5000)?);
        db.max_lifetime = optional_secs(env.parse("DB_POOL_MAX_LIFETIME_SECS", 1800)?);
        db.idle_timeout = optional_secs(env.parse("DB_POOL_IDLE_TIMEOUT_SECS", 600)?);
        db.recycle = env.parse("DB_POOL_RECYCLE", Recycle::Fast)?;
        db.session = SessionSettings {
            application_name: env.string("DB_APPLICATION_NAME", "chatlab"),
            statement_timeout: Duration::from_millis(env.parse("DB_STATEMENT_TIMEOUT_MS", 30_000)?),
            lock_timeout: Duration::from_millis(env.parse("DB_LOCK_TIMEOUT_MS", 5_000)?),
            idle_in_transaction_timeout: Duration::from_millis(
                env.parse("DB_IDLE_IN_TRANSACTION_TIMEOUT_MS", 60_000)?,
            ),
        };
        let limits = Limits {
            chat_max_members: env.parse("CHAT_MAX_MEMBERS", 10_000)?,
            users_bulk_max: env.parse("USERS_BULK_MAX", 100_000)?,
            import_max_rows: env.parse("CHAT_IMPORT_MAX_ROWS", 100_000)?,
        };
        if limits.chat_max_members == 0 {
            return Err(env.invalid("CHAT_MAX_MEMBERS", "must be at least 1"));
        }
        let topic = env.string("KAFKA_TOPIC", "chatlab.chat-events");
        let ledger = LedgerSettings {
            retention: Duration::from_secs(env.parse("KAFKA_RECEIPT_RETENTION_SECS", 86_400)?),
            ..LedgerSettings::for_topic(&topic)
        };
        let settings = Self {
            http: HttpSettings {
                addr: env.parse("HTTP_ADDR", SocketAddr::from(([127, 0, 0, 1], 8080)))?,
                workers: env.parse("HTTP_WORKERS", cores)?.max(1),
                json_limit_bytes: env.parse("HTTP_JSON_LIMIT_BYTES", 4 * 1024 * 1024)?,
                import_limit_bytes: env.parse("HTTP_IMPORT_LIMIT_BYTES", 32 * 1024 * 1024)?,
                shutdown_timeout: Duration::from_secs(env.parse("HTTP_SHUTDOWN_TIMEOUT_SECS", 30)?),
            },
            db,
            run_migrations: env.parse("DB_RUN_MIGRATIONS", true)?,
            writes: WriteSettings {
                default_strategy: env.parse("CHAT_INSERT_STRATEGY", InsertStrategy::Batch)?,
                default_publish_mode: env.parse("KAFKA_PUBLISH_MODE", PublishMode::Outbox)?,
                allow_overrides: env.parse("CHATLAB_ALLOW_OVERRIDES", false)?,
            },
            limits,
            kafka: KafkaConfig {
                brokers: non_empty(env.string("KAFKA_BROKERS", "")),
                topic,
                partitions: env.parse("KAFKA_TOPIC_PARTITIONS", 3)?,
                send_timeout: Duration::from_millis(env.parse("KAFKA_SEND_TIMEOUT_MS", 5000)?),
                linger: Duration::from_millis(env.parse("KAFKA_LINGER_MS", 0)?),
                mock_broker_rtt: Duration::from_millis(env.parse("KAFKA_MOCK_BROKER_RTT_MS", 0)?),
            },
            outbox: RelaySettings {
                batch_size: env.parse("OUTBOX_BATCH_SIZE", 500)?,
                poll_interval: Duration::from_millis(env.parse("OUTBOX_POLL_MS", 100)?),
                retention: Duration::from_secs(env.parse("OUTBOX_RETENTION_SECS", 3600)?),
                ..RelaySettings::default()
            },
            ledger,
            audit_max_window: Duration::from_secs(
                env.parse("CHATLAB_AUDIT_MAX_WINDOW_SECS", 86_400)?,
            ),
            log_format: env.parse("LOG_FORMAT", LogFormat::Pretty)?,
        };
        settings.check_broker_wait_fits_in_a_transaction(&env)?;
        Ok(settings)
    }

    /// The outbox relay, and in_tx_await requests, wait for the broker's
    /// acknowledgement with a transaction open. If that wait can outlast
    /// `DB_IDLE_IN_TRANSACTION_TIMEOUT_MS`, PostgreSQL ends the session
    /// after the broker acknowledged: the relay's rows stay pending and are
    /// published again, forever. So the send timeout, and a second for the
    /// rest of the batch, must fit inside the idle-in-transaction timeout
    /// (0 turns that timeout off, and with it the check).
    fn check_broker_wait_fits_in_a_transaction(&self, env: &Env<'_>) -> Result<(), ConfigError> {
        let idle = self.db.session.idle_in_transaction_timeout;
        let wait = self.kafka.send_timeout + Duration::from_secs(1);
        if idle.is_zero() || wait < idle {
            return Ok(());
        }
        Err(env.invalid(
            "KAFKA_SEND_TIMEOUT_MS",
            &format!(
                "must be at least 1000 ms below DB_IDLE_IN_TRANSACTION_TIMEOUT_MS ({} ms): \
                 the outbox relay and in_tx_await wait for the broker inside a transaction, \
                 and PostgreSQL would end that session after the broker acknowledged",
                idle.as_millis()
            ),
        ))
    }
}

fn non_empty(s: String) -> Option<String> {
    (!s.trim().is_empty()).then_some(s)
}

fn optional_secs(secs: u64) -> Option<Duration> {
    (secs > 0).then(|| Duration::from_secs(secs))
}

struct Env<'a>(&'a HashMap<String, String>);

impl Env<'_> {
    fn string(&self, var: &'static str, default: &str) -> String {
        self.0
            .get(var)
            .filter(|v| !v.trim().is_empty())
            .cloned()
            .unwrap_or_else(|| default.to_owned())
    }

    fn parse<T>(&self, var: &'static str, default: T) -> Result<T, ConfigError>
    where
        T: FromStr,
        T::Err: Display,
    {
        match self.0.get(var).map(|v| v.trim()).filter(|v| !v.is_empty()) {
            None => Ok(default),
            Some(value) => value.parse().map_err(|e: T::Err| ConfigError::Invalid {
                var,
                value: value.to_owned(),
                reason: e.to_string(),
            }),
        }
    }

    fn invalid(&self, var: &'static str, reason: &str) -> ConfigError {
        ConfigError::Invalid {
            var,
            value: self.0.get(var).cloned().unwrap_or_default(),
            reason: reason.to_owned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn malformed_values_name_the_variable() {
        let err = Settings::from_vars(vars(&[("CHAT_INSERT_STRATEGY", "bulk")])).unwrap_err();
        assert!(matches!(
            err,
            ConfigError::Invalid {
                var: "CHAT_INSERT_STRATEGY",
                ..
            }
        ));
        assert!(err.to_string().contains("CHAT_INSERT_STRATEGY"));
        let err = Settings::from_vars(vars(&[("DB_POOL_MAX_SIZE", "0")])).unwrap_err();
        assert!(err.to_string().contains("DB_POOL_MAX_SIZE"));
        let err = Settings::from_vars(vars(&[("HTTP_ADDR", "localhost")])).unwrap_err();
        assert!(err.to_string().contains("HTTP_ADDR"));
    }

    #[test]
    fn unknown_variables_under_our_prefixes_are_rejected() {
        let err = Settings::from_vars(vars(&[("DB_POOL_MAXSIZE", "20")])).unwrap_err();
        assert_eq!(err, ConfigError::Unknown("DB_POOL_MAXSIZE".into()));
        let err = Settings::from_vars(vars(&[("KAFKA_PUBLISH_MOD", "off")])).unwrap_err();
        assert_eq!(err, ConfigError::Unknown("KAFKA_PUBLISH_MOD".into()));
        // Other people's variables are none of our business.
        assert!(Settings::from_vars(vars(&[("DB_HOST", "x"), ("HTTP_PROXY", "y")])).is_ok());
    }
}
