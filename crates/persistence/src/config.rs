//! Database settings, filled in by the caller (the `api` crate reads them
//! from env vars; tests build them directly).

use std::time::Duration;

use secrecy::SecretString;

/// How a pooled connection is checked when it is handed out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Recycle {
    /// No round trip: only check that no transaction was left open and,
    /// with the async driver, that the driver has not seen the socket close
    /// (a session the database ended while the connection sat idle). A
    /// connection that died unseen (or any, with the blocking driver) fails
    /// its first statement instead; bb8 then drops it as broken and the
    /// request answers 503. The default,
    /// because `verified` adds a round trip to every request, and that round
    /// trip would sit inside the very connection use time chatlab measures.
    #[default]
    Fast,
    /// Also run `SELECT 1` on every checkout: one more round trip per
    /// request, in exchange for never handing out a dead connection.
    Verified,
}

impl std::str::FromStr for Recycle {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "fast" => Ok(Self::Fast),
            "verified" => Ok(Self::Verified),
            other => Err(format!("expected fast or verified, got {other:?}")),
        }
    }
}

/// Which PostgreSQL driver runs the statements.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Driver {
    /// diesel-async (tokio-postgres, pure Rust): statements are awaited on
    /// the server's async workers, and a pooled connection comes from bb8.
    #[default]
    Async,
    /// diesel's synchronous `PgConnection` (libpq): each unit of work runs
    /// on a thread of a bounded blocking pool, and a pooled connection comes
    /// from r2d2. The thread is held for the whole unit of work, like a
    /// JDBC request thread.
    Blocking,
}

impl Driver {
    /// The name used in env vars and reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Async => "async",
            Self::Blocking => "blocking",
        }
    }
}

impl std::str::FromStr for Driver {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "async" => Ok(Self::Async),
            "blocking" => Ok(Self::Blocking),
            other => Err(format!("expected async or blocking, got {other:?}")),
        }
    }
}

/// Whether connections are pooled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Pooling {
    /// Connections are kept open and reused, up to `pool_max_size`.
    #[default]
    On,
    /// Every unit of work opens its own connection and closes it after:
    /// no limit on open connections but PostgreSQL's own
    /// `max_connections`, and a connect (TCP, startup, auth, session
    /// settings) on every request.
    Off,
}

impl Pooling {
    /// The name used in env vars and reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::On => "on",
            Self::Off => "off",
        }
    }
}

impl std::str::FromStr for Pooling {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "on" | "true" => Ok(Self::On),
            "off" | "false" => Ok(Self::Off),
            other => Err(format!("expected on or off, got {other:?}")),
        }
    }
}

/// How the pool's connections are laid out among the server's workers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PoolLayout {
    /// One pool for the whole process, on the runtime that built it: a
    /// request's unit of work is handed from its worker's thread to that
    /// runtime and its answer back, and any idle connection serves any
    /// request.
    Shared,
    /// Each worker owns a slice of `pool_max_size` (split as evenly as it
    /// goes): checkout, statements and answer stay on the worker's thread,
    /// and a request cannot borrow an idle connection of another worker's
    /// slice. Callers that are no worker (background tasks) take the
    /// slices in turn. The default: it halves the context switches per
    /// request (`make loadtest-layout`, `make profile`).
    #[default]
    PerWorker,
}

impl PoolLayout {
    /// The name used in env vars and reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Shared => "shared",
            Self::PerWorker => "per_worker",
        }
    }
}

impl std::str::FromStr for PoolLayout {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().replace('-', "_").as_str() {
            "shared" => Ok(Self::Shared),
            "per_worker" => Ok(Self::PerWorker),
            other => Err(format!("expected shared or per_worker, got {other:?}")),
        }
    }
}

/// PostgreSQL session settings applied to every new connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionSettings {
    /// `application_name`, shown in `pg_stat_activity`.
    pub application_name: String,
    /// `statement_timeout`; zero disables it.
    pub statement_timeout: Duration,
    /// `lock_timeout`; zero disables it.
    pub lock_timeout: Duration,
    /// `idle_in_transaction_session_timeout`; zero disables it.
    pub idle_in_transaction_timeout: Duration,
    /// Send the settings above (and `lc_messages`) as `SET`s when a
    /// connection opens. Off behind a transaction pooler (PgBouncer's
    /// `pool_mode = transaction`), where a `SET` lands on whichever server
    /// connection ran it and stays there for its next client: set them on
    /// the role or database there instead.
    pub apply_on_connect: bool,
    /// Keep each connection's statements prepared (a round trip saved per
    /// statement). Off behind a transaction pooler that does not track
    /// prepared statements (PgBouncer before 1.21), where a statement
    /// prepared on one server connection is unknown on the next.
    pub statement_cache: bool,
}

impl Default for SessionSettings {
    fn default() -> Self {
        Self {
            application_name: "chatlab".to_owned(),
            statement_timeout: Duration::from_secs(30),
            lock_timeout: Duration::from_secs(5),
            idle_in_transaction_timeout: Duration::from_secs(60),
            apply_on_connect: true,
            statement_cache: true,
        }
    }
}

/// Connection pool and database settings.
#[derive(Debug, Clone)]
pub struct DbConfig {
    /// `postgres://` URL; secret because it may hold a password.
    pub url: SecretString,
    /// The driver.
    pub driver: Driver,
    /// Pooled, or a connection per unit of work.
    pub pooling: Pooling,
    /// One pool, or a slice of it per worker.
    pub layout: PoolLayout,
    /// With [`PoolLayout::PerWorker`], the workers that take a slice each
    /// (at most `pool_max_size` slices: a worker beyond takes the slices in
    /// turn, as a background task does).
    pub workers: usize,
    /// Most units of work the blocking driver runs at once, each on its own
    /// thread; further ones wait in line. Unused by the async driver.
    pub blocking_threads: usize,
    /// Most connections the pool opens.
    pub pool_max_size: u32,
    /// Idle connections the pool keeps open; `None` lets it shrink to zero.
    pub pool_min_idle: Option<u32>,
    /// How long a request waits for a free connection before it gets 503.
    pub acquire_timeout: Duration,
    /// Connections older than this are closed when returned.
    pub max_lifetime: Option<Duration>,
    /// Idle connections beyond `pool_min_idle` are closed after this long.
    pub idle_timeout: Option<Duration>,
    /// Checkout check.
    pub recycle: Recycle,
    /// Session settings for each new connection.
    pub session: SessionSettings,
    /// How long an idempotency key is remembered (24 hours by default).
    pub idempotency_retention: Duration,
}

impl DbConfig {
    /// Settings with chatlab's defaults for everything but the URL.
    pub fn with_url(url: impl Into<String>) -> Self {
        Self {
            url: SecretString::from(url.into()),
            driver: Driver::default(),
            pooling: Pooling::default(),
            layout: PoolLayout::default(),
            workers: std::thread::available_parallelism().map_or(1, |n| n.get()),
            blocking_threads: DEFAULT_BLOCKING_THREADS,
            pool_max_size: default_pool_size(),
            pool_min_idle: None,
            acquire_timeout: Duration::from_millis(5000),
            max_lifetime: Some(Duration::from_secs(30 * 60)),
            idle_timeout: Some(Duration::from_secs(10 * 60)),
            recycle: Recycle::default(),
            session: SessionSettings::default(),
            idempotency_retention: Duration::from_secs(
                chatlab_domain::idempotency::DEFAULT_KEY_RETENTION_SECS,
            ),
        }
    }
}

/// Blocking threads by default: Tomcat's default `maxThreads`, the request
/// thread count of the Spring services the seed documents measured.
pub const DEFAULT_BLOCKING_THREADS: usize = 200;

/// [`hikari_pool_size`](chatlab_domain::limits::hikari_pool_size) for this
/// machine's cores.
pub fn default_pool_size() -> u32 {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    chatlab_domain::limits::hikari_pool_size(cores)
}
