//! Every setting of the server, declared once: its env var, its flag, its
//! default and its doc. `chatlab --help` prints them, `.env.example` and the
//! README's table are rendered from them ([`super::reference`]), and the
//! typo check knows them ([`super::typos`]).
//!
//! A field is named after its variable (`db_pool_max_size` is
//! `DB_POOL_MAX_SIZE` and `--db-pool-max-size`), so clap's value name, which
//! its errors print, is the variable's name. To add a setting, add a field
//! here and read it in [`super::Settings`]'s conversion.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::builder::RangedU64ValueParser;
use clap::{ArgAction, Args};

use chatlab_domain::{InsertStrategy, MessageFanout, PublishMode, ReadMarkerMode};
use chatlab_persistence::{Driver, PoolLayout, Pooling, Recycle};

use super::{JwtAlgorithm, LogFormat, PoolerCheck};

/// The server's settings as flags and env vars (a flag wins over its
/// variable). Global, so they may follow any subcommand.
#[derive(Debug, Clone, Args)]
pub struct DeclaredSettings {
    /// PostgreSQL to use
    #[arg(
        long,
        global = true,
        env = "DATABASE_URL",
        hide_env_values = true,
        default_value = "postgres://postgres@127.0.0.1:5432/chatlab",
        help_heading = "Database"
    )]
    pub database_url: String,

    /// `async`: diesel-async (tokio-postgres, pure Rust) on bb8; `blocking`: diesel's
    /// `PgConnection` (libpq) on r2d2, each unit of work on a thread of a bounded blocking
    /// pool
    #[arg(
        long,
        global = true,
        env = "DB_DRIVER",
        default_value = "async",
        help_heading = "Database"
    )]
    pub db_driver: Driver,

    /// `off`: every request opens its own connection (TCP, startup, auth, session `SET`s) and
    /// closes it after; PostgreSQL's `max_connections` is then the only limit, and a refused
    /// connection ("too many clients") answers 503
    #[arg(
        long,
        global = true,
        env = "DB_POOL",
        default_value = "on",
        help_heading = "Database"
    )]
    pub db_pool: Pooling,

    /// `per_worker`: each HTTP worker owns a slice of `DB_POOL_MAX_SIZE` (as even as it
    /// splits) and runs its requests' statements on its own thread; a request cannot borrow an
    /// idle connection of another worker's slice. `shared`: one pool for the process, its
    /// connections driven on one runtime, each request's unit of work handed there from its
    /// worker's thread and back
    #[arg(
        long,
        global = true,
        env = "DB_POOL_LAYOUT",
        default_value = "per_worker",
        help_heading = "Database"
    )]
    pub db_pool_layout: PoolLayout,

    /// Blocking driver: most units of work running at once, one thread each (Tomcat's default
    /// `maxThreads`); pooled, the pool's queue admits at most `DB_POOL_MAX_SIZE` of them
    /// anyway
    #[arg(
        long,
        global = true,
        env = "DB_BLOCKING_THREADS",
        default_value = "200",
        value_parser = RangedU64ValueParser::<usize>::new().range(1..),
        help_heading = "Database"
    )]
    pub db_blocking_threads: usize,

    /// Most pooled connections; the default is HikariCP's formula, logged at startup
    /// [default: cores × 2 + 1]
    #[arg(
        long,
        global = true,
        env = "DB_POOL_MAX_SIZE",
        value_parser = clap::value_parser!(u32).range(1..),
        help_heading = "Database"
    )]
    pub db_pool_max_size: Option<u32>,

    /// Idle connections kept open
    #[arg(
        long,
        global = true,
        env = "DB_POOL_MIN_IDLE",
        default_value = "0",
        help_heading = "Database"
    )]
    pub db_pool_min_idle: u32,

    /// Wait for a connection before answering 503: one deadline for the queue and the pool
    /// together, and the bound on opening a connection with `DB_POOL=off`
    #[arg(
        long,
        global = true,
        env = "DB_POOL_ACQUIRE_TIMEOUT_MS",
        default_value = "5000",
        help_heading = "Database"
    )]
    pub db_pool_acquire_timeout_ms: u64,

    /// Close connections older than this (0: never)
    #[arg(
        long,
        global = true,
        env = "DB_POOL_MAX_LIFETIME_SECS",
        default_value = "1800",
        help_heading = "Database"
    )]
    pub db_pool_max_lifetime_secs: u64,

    /// Close idle connections after this (0: never)
    #[arg(
        long,
        global = true,
        env = "DB_POOL_IDLE_TIMEOUT_SECS",
        default_value = "600",
        help_heading = "Database"
    )]
    pub db_pool_idle_timeout_secs: u64,

    /// Checkout check: `fast` (no round trip) or `verified` (`SELECT 1` on every checkout)
    #[arg(
        long,
        global = true,
        env = "DB_POOL_RECYCLE",
        default_value = "fast",
        help_heading = "Database"
    )]
    pub db_pool_recycle: Recycle,

    /// PostgreSQL `statement_timeout` of every connection (0: off)
    #[arg(
        long,
        global = true,
        env = "DB_STATEMENT_TIMEOUT_MS",
        default_value = "30000",
        help_heading = "Database"
    )]
    pub db_statement_timeout_ms: u64,

    /// `lock_timeout` (0: off)
    #[arg(
        long,
        global = true,
        env = "DB_LOCK_TIMEOUT_MS",
        default_value = "5000",
        help_heading = "Database"
    )]
    pub db_lock_timeout_ms: u64,

    /// `idle_in_transaction_session_timeout` (0: off)
    #[arg(
        long,
        global = true,
        env = "DB_IDLE_IN_TRANSACTION_TIMEOUT_MS",
        default_value = "60000",
        help_heading = "Database"
    )]
    pub db_idle_in_transaction_timeout_ms: u64,

    /// Send the session settings above (timeouts, `application_name`) as `SET`s when a
    /// connection opens. `false` behind a transaction pooler (PgBouncer, `pool_mode =
    /// transaction`), where a `SET` stays on whichever server connection ran it: set them on
    /// the role or database instead (docs/operations.md, "PgBouncer")
    #[arg(
        long,
        global = true,
        env = "DB_SESSION_SETTINGS",
        default_value = "true",
        action = ArgAction::Set,
        help_heading = "Database"
    )]
    pub db_session_settings: bool,

    /// Keep each connection's statements prepared, saving a round trip per statement.
    /// `false` behind a transaction pooler that does not track prepared statements
    /// (PgBouncer before 1.21), where a statement prepared on one server connection is unknown
    /// on the next
    #[arg(
        long,
        global = true,
        env = "DB_STATEMENT_CACHE",
        default_value = "true",
        action = ArgAction::Set,
        help_heading = "Database"
    )]
    pub db_statement_cache: bool,

    /// At startup, ask whether DATABASE_URL leads to a transaction pooler (two transactions
    /// of one connection served by different backends). `refuse`: stop when settings that
    /// cannot work there are on (the async driver, the statement cache, session SETs,
    /// migrations through it), naming the ones that do; `warn`: start anyway; `off`: do not
    /// ask
    #[arg(
        long,
        global = true,
        env = "DB_POOLER_CHECK",
        default_value = "refuse",
        help_heading = "Database"
    )]
    pub db_pooler_check: PoolerCheck,

    /// `application_name`, as seen in `pg_stat_activity`
    #[arg(
        long,
        global = true,
        env = "DB_APPLICATION_NAME",
        default_value = "chatlab",
        help_heading = "Database"
    )]
    pub db_application_name: String,

    /// Apply pending migrations at startup (under an advisory lock, so several instances can
    /// start at once)
    #[arg(
        long,
        global = true,
        env = "DB_RUN_MIGRATIONS",
        default_value = "true",
        action = ArgAction::Set,
        help_heading = "Database"
    )]
    pub db_run_migrations: bool,

    /// Where the migrations run, when not through DATABASE_URL: PostgreSQL itself, when
    /// DATABASE_URL is a transaction pooler (PgBouncer), which would split the migrations'
    /// session advisory lock from its unlock (empty: DATABASE_URL)
    #[arg(
        long,
        global = true,
        env = "DB_MIGRATION_URL",
        hide_env_values = true,
        help_heading = "Database"
    )]
    pub db_migration_url: Option<String>,

    /// Listen address (port 0 picks a free port)
    #[arg(
        long,
        global = true,
        env = "HTTP_ADDR",
        default_value = "127.0.0.1:8080",
        help_heading = "HTTP"
    )]
    pub http_addr: SocketAddr,

    /// Operator listener: `/metrics`, `GET /audit`, `POST /v1/users/bulk` (and the health
    /// probes) answer here and not on `HTTP_ADDR`; keep it on loopback or a private network
    /// (port 0 picks a free port)
    #[arg(
        long,
        global = true,
        env = "OPS_ADDR",
        default_value = "127.0.0.1:9464",
        help_heading = "HTTP"
    )]
    pub ops_addr: SocketAddr,

    /// A request body must arrive within this long of its headers, on both listeners (408
    /// beyond, and the connection closes); a client that trickles it holds no database
    /// connection meanwhile
    #[arg(
        long,
        global = true,
        env = "HTTP_BODY_TIMEOUT_MS",
        default_value = "10000",
        value_parser = clap::value_parser!(u64).range(1..),
        help_heading = "HTTP"
    )]
    pub http_body_timeout_ms: u64,

    /// Request headers must arrive within this long of the connection's first byte, on both
    /// listeners (408 beyond; actix's `client_request_timeout`)
    #[arg(
        long,
        global = true,
        env = "HTTP_HEADER_TIMEOUT_MS",
        default_value = "5000",
        value_parser = clap::value_parser!(u64).range(1..),
        help_heading = "HTTP"
    )]
    pub http_header_timeout_ms: u64,

    /// Most open connections per worker; beyond it new connections wait in the kernel's
    /// backlog [default: the process's open-file limit (its soft limit raised to the hard one),
    /// less 256 and the pools' connections, shared by the workers]
    #[arg(
        long,
        global = true,
        env = "HTTP_MAX_CONNECTIONS_PER_WORKER",
        value_parser = RangedU64ValueParser::<usize>::new().range(1..),
        help_heading = "HTTP"
    )]
    pub http_max_connections_per_worker: Option<usize>,

    /// Connections the kernel queues on each listener until the server accepts them (the
    /// `listen(2)` backlog, as actix-server's own default; Linux caps it at
    /// `net.core.somaxconn`). Past it a new connection's handshake is dropped and its client
    /// retries a second later
    #[arg(
        long,
        global = true,
        env = "HTTP_BACKLOG",
        default_value = "2048",
        value_parser = clap::value_parser!(u32).range(1..=65535),
        help_heading = "HTTP"
    )]
    pub http_backlog: u32,

    /// Actix worker threads [default: cores]
    #[arg(
        long,
        global = true,
        env = "HTTP_WORKERS",
        value_parser = RangedU64ValueParser::<usize>::new().range(1..),
        help_heading = "HTTP"
    )]
    pub http_workers: Option<usize>,

    /// Largest JSON body (413 beyond)
    #[arg(
        long,
        global = true,
        env = "HTTP_JSON_LIMIT_BYTES",
        default_value = "4194304",
        help_heading = "HTTP"
    )]
    pub http_json_limit_bytes: usize,

    /// Largest import job body (413 beyond)
    #[arg(
        long,
        global = true,
        env = "HTTP_IMPORT_LIMIT_BYTES",
        default_value = "33554432",
        help_heading = "HTTP"
    )]
    pub http_import_limit_bytes: usize,

    /// On SIGTERM/SIGINT, in-flight requests get this long to finish
    #[arg(
        long,
        global = true,
        env = "HTTP_SHUTDOWN_TIMEOUT_SECS",
        default_value = "30",
        help_heading = "HTTP"
    )]
    pub http_shutdown_timeout_secs: u64,

    /// HS256 secret of bearer tokens, at least 32 bytes; unset (and no key file) makes a
    /// random one at startup, so tokens die with the process
    #[arg(
        long,
        global = true,
        env = "CHATLAB_JWT_SECRET",
        hide_env_values = true,
        help_heading = "Auth"
    )]
    pub chatlab_jwt_secret: Option<String>,

    /// `HS256` (shared secret), `EdDSA` or `RS256` (public key file); the only algorithm
    /// accepted
    #[arg(
        long,
        global = true,
        env = "CHATLAB_JWT_ALGORITHM",
        default_value = "HS256",
        help_heading = "Auth"
    )]
    pub chatlab_jwt_algorithm: JwtAlgorithm,

    /// EdDSA/RS256: PEM public key that verifies tokens (your identity provider's)
    #[arg(
        long,
        global = true,
        env = "CHATLAB_JWT_PUBLIC_KEY_FILE",
        help_heading = "Auth"
    )]
    pub chatlab_jwt_public_key_file: Option<PathBuf>,

    /// EdDSA/RS256: PEM private key, so that chatlab issues tokens too (`POST /v1/users`,
    /// `POST /v1/tokens`); without it chatlab only verifies
    #[arg(
        long,
        global = true,
        env = "CHATLAB_JWT_PRIVATE_KEY_FILE",
        help_heading = "Auth"
    )]
    pub chatlab_jwt_private_key_file: Option<PathBuf>,

    /// `iss` that tokens must carry, and that issued tokens carry
    #[arg(
        long,
        global = true,
        env = "CHATLAB_JWT_ISSUER",
        default_value = "chatlab",
        help_heading = "Auth"
    )]
    pub chatlab_jwt_issuer: String,

    /// Lifetime of the tokens chatlab issues
    #[arg(
        long,
        global = true,
        env = "CHATLAB_TOKEN_TTL_SECS",
        default_value = "3600",
        value_parser = clap::value_parser!(u64).range(1..),
        help_heading = "Auth"
    )]
    pub chatlab_token_ttl_secs: u64,

    /// Development only: `POST /v1/tokens` issues a token for any existing user id, no
    /// questions asked
    #[arg(
        long,
        global = true,
        env = "CHATLAB_DEV_TOKENS",
        default_value = "false",
        action = ArgAction::Set,
        help_heading = "Auth"
    )]
    pub chatlab_dev_tokens: bool,

    /// `per_row`, `batch`, `batch_prepared`, `unnest`, `single`, `pipeline` or `copy` (binary
    /// COPY; needs DB_DRIVER=blocking)
    #[arg(
        long,
        global = true,
        env = "CHAT_INSERT_STRATEGY",
        default_value = "batch",
        help_heading = "Writes"
    )]
    pub chat_insert_strategy: InsertStrategy,

    /// Honour `X-Chatlab-Insert-Strategy`, `X-Chatlab-Publish-Mode` and `X-Chatlab-Message-Fanout`
    /// per request
    #[arg(
        long,
        global = true,
        env = "CHATLAB_ALLOW_OVERRIDES",
        default_value = "false",
        action = ArgAction::Set,
        help_heading = "Writes"
    )]
    pub chatlab_allow_overrides: bool,

    /// `none`: a message is its one row, and unread counts are counted from the messages and the
    /// read markers when read; `inbox`: a message also writes one row per member but the sender
    /// (read and mentioned flags) in its transaction, by the insert strategy, and unread counts
    /// read those rows. Both answer every read the same
    #[arg(
        long,
        global = true,
        env = "MESSAGE_FANOUT",
        default_value = "none",
        help_heading = "Writes"
    )]
    pub message_fanout: MessageFanout,

    /// `direct`: `POST /v1/chats/{id}/read` updates the member row (and with `inbox` the reader's
    /// read flags) at once; `log`: each move is one INSERT into an append-only log, folded into
    /// the member rows every READ_MARKER_FLUSH_MS by a compaction, reads taking the newer of both
    /// (a crash loses nothing); `coalesced`: moves are held per instance and written every
    /// READ_MARKER_FLUSH_MS as one UPDATE, the newest per member (a crash loses at most one window)
    #[arg(
        long,
        global = true,
        env = "READ_MARKER_MODE",
        default_value = "direct",
        help_heading = "Writes"
    )]
    pub read_marker_mode: ReadMarkerMode,

    /// With READ_MARKER_MODE=coalesced, how often the held read markers are written (ms, 10 to
    /// 60000): how stale a marker may be in the database, and at most what a crash loses; with
    /// `log`, how often the log is compacted into the member rows
    #[arg(
        long,
        global = true,
        env = "READ_MARKER_FLUSH_MS",
        default_value = "500",
        value_parser = clap::value_parser!(u64).range(10..=60_000),
        help_heading = "Writes"
    )]
    pub read_marker_flush_ms: u64,

    /// Events a live connection (`GET /v1/events`) may have waiting; a client slower than that is disconnected
    #[arg(
        long,
        global = true,
        env = "LIVE_BUFFER_EVENTS",
        default_value = "256",
        value_parser = clap::value_parser!(u32).range(1..=65536),
        help_heading = "Live delivery"
    )]
    pub live_buffer_events: u32,

    /// `message.sent` events carry the message's text, so a live frame is all a client needs to
    /// show it; `false` keeps message text off the event topic (and the outbox), and a client
    /// reads the message back
    #[arg(
        long,
        global = true,
        env = "LIVE_FRAME_BODY",
        default_value = "true",
        action = ArgAction::Set,
        help_heading = "Live delivery"
    )]
    pub live_frame_body: bool,

    /// Period of the heartbeat comment on an idle live connection
    #[arg(
        long,
        global = true,
        env = "LIVE_HEARTBEAT_SECS",
        default_value = "15",
        value_parser = clap::value_parser!(u64).range(1..),
        help_heading = "Live delivery"
    )]
    pub live_heartbeat_secs: u64,

    /// Most topic records a reconnecting live client's catch-up reads (from its `Last-Event-ID` to now, all chats); further behind, it is told to reload (`reset`)
    #[arg(
        long,
        global = true,
        env = "LIVE_CATCH_UP_RECORDS",
        default_value = "100000",
        value_parser = clap::value_parser!(u64).range(1..=10_000_000),
        help_heading = "Live delivery"
    )]
    pub live_catch_up_records: u64,

    /// Events the instance keeps in memory from its live tail, so a reconnecting client's catch-up is served without reading the topic (a new chat's event weighs one more per 32 members it names); a cursor older than these is read from the topic, two catch-ups at a time. 0 keeps none
    #[arg(
        long,
        global = true,
        env = "LIVE_RECENT_EVENTS",
        default_value = "20000",
        value_parser = RangedU64ValueParser::<usize>::new().range(0..=10_000_000),
        help_heading = "Live delivery"
    )]
    pub live_recent_events: usize,

    /// Longest a live tail's fetch may wait at the broker when nothing is new (librdkafka's fetch.wait.max.ms, 500 by default there); tansu answers a fetch only when it expires, so each delivery waits up to this long
    #[arg(
        long,
        global = true,
        env = "LIVE_FETCH_WAIT_MS",
        default_value = "50",
        value_parser = clap::value_parser!(u64).range(1..=5000),
        help_heading = "Live delivery"
    )]
    pub live_fetch_wait_ms: u64,

    /// Most live streams (`GET /v1/events` and `GET /v1/ws` together) one user may hold on
    /// this instance, for their few devices; one more is a 429 with `Retry-After`
    #[arg(
        long,
        global = true,
        env = "LIVE_MAX_STREAMS_PER_USER",
        default_value = "16",
        value_parser = RangedU64ValueParser::<usize>::new().range(1..=4096),
        help_heading = "Live delivery"
    )]
    pub live_max_streams_per_user: usize,

    /// Most live streams of all users on this instance; one more is a 429 with `Retry-After`.
    /// Must be below `HTTP_WORKERS` × `HTTP_MAX_CONNECTIONS_PER_WORKER`, so that streams
    /// always leave connections for requests [default: HTTP_WORKERS ×
    /// HTTP_MAX_CONNECTIONS_PER_WORKER less a twentieth of it (at least 256, at most half)]
    #[arg(
        long,
        global = true,
        env = "LIVE_MAX_STREAMS",
        value_parser = RangedU64ValueParser::<usize>::new().range(1..),
        help_heading = "Live delivery"
    )]
    pub live_max_streams: Option<usize>,

    /// How long a live ticket (`POST /v1/live/tickets`) may wait before it opens a stream; it
    /// opens one, once
    #[arg(
        long,
        global = true,
        env = "LIVE_TICKET_TTL_SECS",
        default_value = "30",
        value_parser = clap::value_parser!(u64).range(1..=300),
        help_heading = "Live delivery"
    )]
    pub live_ticket_ttl_secs: u64,

    /// Origins whose pages may call the public API (CORS), comma-separated, each
    /// `scheme://host[:port]` (e.g. `https://chat.example,http://localhost:5173`); empty: same
    /// origin only. Credentials are never allowed (tokens travel in `Authorization`)
    #[arg(
        long,
        global = true,
        env = "CORS_ALLOWED_ORIGINS",
        default_value = "",
        value_parser = super::origins::parse,
        help_heading = "Browsers"
    )]
    pub cors_allowed_origins: super::origins::AllowedOrigins,

    /// Serve the web client (the repository's `web/`, built into the binary) at `/web/`
    #[arg(
        long,
        global = true,
        env = "WEB_CLIENT",
        default_value = "false",
        action = ArgAction::Set,
        help_heading = "Browsers"
    )]
    pub web_client: bool,

    /// How long an `Idempotency-Key` is remembered; a retry after it writes again
    #[arg(
        long,
        global = true,
        env = "CHATLAB_IDEMPOTENCY_RETENTION_SECS",
        default_value = "86400",
        value_parser = clap::value_parser!(u64).range(1..),
        help_heading = "Writes"
    )]
    pub chatlab_idempotency_retention_secs: u64,

    /// Period of the sweep that deletes expired idempotency keys
    #[arg(
        long,
        global = true,
        env = "CHATLAB_IDEMPOTENCY_SWEEP_SECS",
        default_value = "300",
        value_parser = clap::value_parser!(u64).range(1..),
        help_heading = "Writes"
    )]
    pub chatlab_idempotency_sweep_secs: u64,

    /// Most members of a new chat, creator included
    #[arg(
        long,
        global = true,
        env = "CHAT_MAX_MEMBERS",
        default_value = "10000",
        value_parser = RangedU64ValueParser::<usize>::new().range(1..),
        help_heading = "Limits"
    )]
    pub chat_max_members: usize,

    /// Most users one bulk request creates
    #[arg(
        long,
        global = true,
        env = "USERS_BULK_MAX",
        default_value = "100000",
        help_heading = "Limits"
    )]
    pub users_bulk_max: usize,

    /// Most rows one import job writes
    #[arg(
        long,
        global = true,
        env = "CHAT_IMPORT_MAX_ROWS",
        default_value = "100000",
        help_heading = "Limits"
    )]
    pub chat_import_max_rows: usize,

    /// Widest window one event audit reads (`GET /audit`, `chatlab audit`); one audit runs at
    /// a time
    #[arg(
        long,
        global = true,
        env = "CHATLAB_AUDIT_MAX_WINDOW_SECS",
        default_value = "86400",
        help_heading = "Limits"
    )]
    pub chatlab_audit_max_window_secs: u64,

    /// `host:port,...`; unset starts librdkafka's in-process mock cluster
    #[arg(long, global = true, env = "KAFKA_BROKERS", help_heading = "Events")]
    pub kafka_brokers: Option<String>,

    /// Topic of chat events (created when missing)
    #[arg(
        long,
        global = true,
        env = "KAFKA_TOPIC",
        default_value = "chatlab.chat-events",
        help_heading = "Events"
    )]
    pub kafka_topic: String,

    /// Partitions when chatlab creates the topic
    #[arg(
        long,
        global = true,
        env = "KAFKA_TOPIC_PARTITIONS",
        default_value = "3",
        value_parser = clap::value_parser!(i32).range(1..),
        help_heading = "Events"
    )]
    pub kafka_topic_partitions: i32,

    /// `off`, `in_tx_await`, `in_tx_enqueue`, `after_commit`, `outbox`
    #[arg(
        long,
        global = true,
        env = "KAFKA_PUBLISH_MODE",
        default_value = "outbox",
        help_heading = "Events"
    )]
    pub kafka_publish_mode: PublishMode,

    /// Bound on one delivery, retries included; at least 1 s below
    /// `DB_IDLE_IN_TRANSACTION_TIMEOUT_MS` (checked at startup)
    #[arg(
        long,
        global = true,
        env = "KAFKA_SEND_TIMEOUT_MS",
        default_value = "5000",
        help_heading = "Events"
    )]
    pub kafka_send_timeout_ms: u64,

    /// Producer batching delay; every `in_tx_await` send waits it inside the transaction
    #[arg(
        long,
        global = true,
        env = "KAFKA_LINGER_MS",
        default_value = "0",
        help_heading = "Events"
    )]
    pub kafka_linger_ms: u64,

    /// Broker round-trip time injected into the mock cluster
    #[arg(
        long,
        global = true,
        env = "KAFKA_MOCK_BROKER_RTT_MS",
        default_value = "0",
        help_heading = "Events"
    )]
    pub kafka_mock_broker_rtt_ms: u64,

    /// Receipts (partition and offset) of acknowledged events are kept this long for the
    /// audit
    #[arg(
        long,
        global = true,
        env = "KAFKA_RECEIPT_RETENTION_SECS",
        default_value = "86400",
        help_heading = "Events"
    )]
    pub kafka_receipt_retention_secs: u64,

    /// Rows per relay batch
    #[arg(
        long,
        global = true,
        env = "OUTBOX_BATCH_SIZE",
        default_value = "500",
        value_parser = clap::value_parser!(i64).range(1..),
        help_heading = "Events"
    )]
    pub outbox_batch_size: i64,

    /// Relay poll period for other instances' rows
    #[arg(
        long,
        global = true,
        env = "OUTBOX_POLL_MS",
        default_value = "100",
        help_heading = "Events"
    )]
    pub outbox_poll_ms: u64,

    /// Published outbox rows are deleted after this
    #[arg(
        long,
        global = true,
        env = "OUTBOX_RETENTION_SECS",
        default_value = "3600",
        help_heading = "Events"
    )]
    pub outbox_retention_secs: u64,

    /// `pretty` or `json`
    #[arg(
        long,
        global = true,
        env = "LOG_FORMAT",
        default_value = "pretty",
        help_heading = "Logs"
    )]
    pub log_format: LogFormat,

    /// Log filter; successful requests log at `debug`, 4xx at `warn`, 5xx at `error` with the
    /// whole error chain
    #[arg(
        long,
        global = true,
        env = "RUST_LOG",
        default_value = "info",
        help_heading = "Logs"
    )]
    pub rust_log: String,
}
