//! [`Database`]: where every unit of work gets its connection, by driver
//! (async or blocking) and pooling (on or off), with the same metrics in
//! all four combinations.
//!
//! Pooled checkouts queue first-come first-served on a fair semaphore with
//! one permit per connection, and only then ask the pool. Neither bb8 nor
//! r2d2 queues fairly: a caller arriving just as a connection comes back can
//! take it ahead of callers already waiting, which under saturation
//! stretches the tail of the wait far beyond its mean. With the semaphore,
//! the wait of a saturated pool is close to "the queue ahead of me", for
//! everyone, and the two drivers queue alike, so comparing them compares
//! the drivers.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use bb8::RunError;
use diesel_async::AsyncPgConnection;
use diesel_async::pooled_connection::AsyncDieselConnectionManager;
use futures_util::future::BoxFuture;
use secrecy::{ExposeSecret, SecretString};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::timeout_at;
use tracing::Instrument as _;

use crate::async_home::Handoff;
use crate::blocking_manager::{BlockingManager, connect_blocking};
use crate::config::{DbConfig, Driver, Pooling};
use crate::connect_failures::ConnectFailures;
use crate::errors::PersistenceError;
use crate::pool_metrics::{PendingGuard, PoolMetrics, secs};
use crate::session::{Conn, DbSession};
use crate::session_settings::{connect, manager_config, set_statements};
use crate::spans;

type AsyncPool = bb8::Pool<AsyncDieselConnectionManager<AsyncPgConnection>>;
type BlockingPool = r2d2::Pool<BlockingManager>;

/// The driver, and its pool (`None`: a connection per unit of work).
enum Source {
    Async(Option<AsyncPool>),
    Blocking(Option<BlockingPool>),
}

struct Inner {
    source: Source,
    /// Unpooled connections are opened with these.
    url: SecretString,
    set_sql: String,
    metrics: Arc<PoolMetrics>,
    /// Pooled only: one permit per connection, FIFO.
    queue: Option<Arc<Semaphore>>,
    /// Blocking only: one permit per thread of the blocking pool.
    threads: Arc<Semaphore>,
    acquire_timeout: Duration,
    max_size: u32,
    /// Unpooled only: connections open right now.
    live: Arc<AtomicU32>,
    /// Pooled only: the pool manager's latest failed connect.
    connect_failures: ConnectFailures,
    /// The runtime that runs every unit of work and drives every
    /// connection on the async driver (see [`crate::async_home`]); `None`
    /// when built outside a runtime (the caller's is used then).
    home: Option<tokio::runtime::Handle>,
}

impl Inner {
    /// Why a wait for a connection that began at `since` timed out: a
    /// connect failed meanwhile (the database is unreachable), or every
    /// connection stayed busy. Neither pool tells the two apart itself.
    fn timed_out(&self, since: Instant) -> PersistenceError {
        match self.connect_failures.since(since) {
            Some(e) => PersistenceError::Connect(Box::new(e)),
            None => PersistenceError::PoolTimeout,
        }
    }
}

/// The database connections of one process, with metrics on every
/// checkout. Cheap to clone.
#[derive(Clone)]
pub struct Database {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Database {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (driver, pooled) = match &self.inner.source {
            Source::Async(pool) => (Driver::Async, pool.is_some()),
            Source::Blocking(pool) => (Driver::Blocking, pool.is_some()),
        };
        f.debug_struct("Database")
            .field("driver", &driver)
            .field("pooled", &pooled)
            .field("connections", &self.connections())
            .finish_non_exhaustive()
    }
}

impl Database {
    /// Sets up the connection source. It opens no connection up front
    /// (beyond `pool_min_idle`, in the background), so the server can start
    /// while the database is still coming up; `/readyz` tells when it
    /// answers.
    pub fn new(config: &DbConfig, metrics: Arc<PoolMetrics>) -> Self {
        let max_size = config.pool_max_size.max(1);
        let set_sql = set_statements(&config.session);
        let connect_failures = ConnectFailures::default();
        let source = match (config.pooling, config.driver) {
            (Pooling::Off, Driver::Async) => Source::Async(None),
            (Pooling::Off, Driver::Blocking) => Source::Blocking(None),
            (Pooling::On, Driver::Async) => {
                let manager = AsyncDieselConnectionManager::<AsyncPgConnection>::new_with_config(
                    config.url.expose_secret(),
                    manager_config(
                        &config.session,
                        config.recycle,
                        metrics.clone(),
                        connect_failures.clone(),
                    ),
                );
                Source::Async(Some(
                    bb8::Pool::builder()
                        .max_size(max_size)
                        .min_idle(config.pool_min_idle)
                        .connection_timeout(config.acquire_timeout)
                        .max_lifetime(config.max_lifetime)
                        .idle_timeout(config.idle_timeout)
                        .test_on_check_out(true)
                        .build_unchecked(manager),
                ))
            }
            (Pooling::On, Driver::Blocking) => {
                let manager = BlockingManager::new(
                    config.url.expose_secret().to_owned(),
                    set_sql.clone(),
                    config.recycle,
                    metrics.clone(),
                    connect_failures.clone(),
                );
                Source::Blocking(Some(
                    r2d2::Pool::builder()
                        .max_size(max_size)
                        // r2d2 reads `None` as "keep max_size idle".
                        .min_idle(Some(config.pool_min_idle.unwrap_or(0)))
                        .connection_timeout(config.acquire_timeout)
                        .max_lifetime(config.max_lifetime)
                        .idle_timeout(config.idle_timeout)
                        .test_on_check_out(true)
                        .build_unchecked(manager),
                ))
            }
        };
        let pooled = config.pooling == Pooling::On;
        metrics
            .max
            .set(if pooled { i64::from(max_size) } else { 0 });
        Self {
            inner: Arc::new(Inner {
                source,
                url: config.url.clone(),
                set_sql,
                metrics,
                queue: pooled.then(|| Arc::new(Semaphore::new(max_size as usize))),
                threads: Arc::new(Semaphore::new(config.blocking_threads.max(1))),
                acquire_timeout: config.acquire_timeout,
                max_size: if pooled { max_size } else { 0 },
                live: Arc::new(AtomicU32::new(0)),
                connect_failures,
                home: tokio::runtime::Handle::try_current().ok(),
            }),
        }
    }

    /// Runs one unit of work on one connection: checked out of the pool
    /// (or opened, unpooled) before `work` starts and given back (or
    /// closed) when it ends. On the blocking driver the whole unit runs on
    /// a thread of the blocking pool.
    ///
    /// Waiting for the connection counts as pending and is timed; a caller
    /// that waits longer than the acquire timeout gets
    /// [`PersistenceError::PoolTimeout`].
    ///
    /// A caller that goes away while it waits for the connection takes
    /// nothing; once `work` has its connection, it runs to its end whether
    /// the caller still waits or not (a task of its own on the async
    /// driver, a blocking thread on the other). On the async driver the
    /// checkout and the work run on the runtime that built this
    /// `Database`, beside the connections' own tasks ([`crate::async_home`]). A unit of work cut short
    /// between the broker's acknowledgement and COMMIT would leave an event
    /// on the topic for a write that rolls back (in_tx_await's phantom).
    pub async fn run<T, E, F>(&self, work: F) -> Result<T, E>
    where
        F: for<'s> FnOnce(&'s mut DbSession) -> BoxFuture<'s, Result<T, E>> + Send + 'static,
        T: Send + 'static,
        E: From<PersistenceError> + Send + 'static,
    {
        // The unit runs on another task (or thread): its spans name the
        // caller's span as their parent explicitly.
        let caller = tracing::Span::current();
        match &self.inner.source {
            Source::Async(pool) => {
                let (db, pool) = (self.clone(), pool.clone());
                let handoff = Handoff::spawn(self.inner.home.as_ref(), move |start| async move {
                    let wait = spans::connection_wait(&caller);
                    let mut session = match db.open_async(pool.as_ref()).instrument(wait).await {
                        Ok(session) => session,
                        Err(e) => return Some(Err(e.into())),
                    };
                    // The caller went away while this waited: give the
                    // connection back untouched.
                    if !start.begin() {
                        return None;
                    }
                    let held = spans::connection_use(&caller);
                    session.held_in(held.clone());
                    Some(work(&mut session).instrument(held).await)
                });
                handoff.answer().await.unwrap_or_else(|| {
                    Err(
                        PersistenceError::Worker("the unit of work ended without an answer".into())
                            .into(),
                    )
                })
            }
            Source::Blocking(pool) => self.run_blocking(pool.clone(), work, caller).await,
        }
    }

    async fn open_async(&self, pool: Option<&AsyncPool>) -> Result<DbSession, PersistenceError> {
        let inner = &self.inner;
        let waiting = inner.metrics.enter_pending();
        let started = Instant::now();
        let deadline = tokio::time::Instant::from_std(started + inner.acquire_timeout);
        let permit = self.queue_turn(deadline).await;
        // One deadline for the whole checkout: the turn in the queue, then
        // bb8's own wait (whose timeout alone would allow as long again),
        // or opening a connection without a pool (which has none at all:
        // a server that accepts and never answers would hold it forever).
        let opened = match (pool, permit) {
            (_, Err(e)) => Err(e),
            (Some(pool), Ok(permit)) => match timeout_at(deadline, pool.get_owned()).await {
                Ok(Ok(conn)) => Ok(DbSession::new(
                    Conn::AsyncPooled(conn),
                    permit,
                    inner.metrics.clone(),
                    None,
                )),
                Ok(Err(RunError::User(e))) => Err(PersistenceError::Connect(Box::new(e))),
                // bb8 reports a checkout whose connects all failed as a
                // timeout: tell it from a busy pool by what happened.
                Ok(Err(RunError::TimedOut)) | Err(_) => Err(inner.timed_out(started)),
            },
            (None, Ok(permit)) => {
                let opened =
                    match timeout_at(deadline, connect(inner.url.expose_secret(), &inner.set_sql))
                        .await
                    {
                        Ok(opened) => opened,
                        Err(_) => Err(diesel::ConnectionError::BadConnection(format!(
                            "no connection within the acquire timeout ({} ms)",
                            inner.acquire_timeout.as_millis()
                        ))),
                    };
                self.unpooled_session(opened.map(Conn::AsyncOwned), permit, started)
            }
        };
        self.waited(waiting, started, opened.as_ref().err());
        opened
    }

    async fn run_blocking<T, E, F>(
        &self,
        pool: Option<BlockingPool>,
        work: F,
        caller: tracing::Span,
    ) -> Result<T, E>
    where
        F: for<'s> FnOnce(&'s mut DbSession) -> BoxFuture<'s, Result<T, E>> + Send + 'static,
        T: Send + 'static,
        E: From<PersistenceError> + Send + 'static,
    {
        // The wait spans the queue and the thread here, then the checkout
        // on the blocking thread.
        let wait = spans::connection_wait(&caller);
        let waiting = self.inner.metrics.enter_pending();
        let started = Instant::now();
        let deadline = started + self.inner.acquire_timeout;
        let tokio_deadline = tokio::time::Instant::from_std(deadline);
        let before_thread = async {
            match self.queue_turn(tokio_deadline).await {
                Ok(permit) => {
                    match timeout_at(tokio_deadline, self.inner.threads.clone().acquire_owned())
                        .await
                    {
                        Ok(Ok(thread)) => Ok((permit, thread)),
                        Ok(Err(_)) | Err(_) => Err(PersistenceError::PoolTimeout),
                    }
                }
                Err(e) => Err(e),
            }
        }
        .instrument(wait.clone())
        .await;
        let (permit, thread) = match before_thread {
            Ok(turn) => turn,
            Err(e) => {
                self.waited(waiting, started, Some(&e));
                return Err(e.into());
            }
        };
        let db = self.clone();
        let runtime = tokio::runtime::Handle::current();
        let joined = tokio::task::spawn_blocking(move || {
            let _thread = thread;
            let opened =
                wait.in_scope(|| db.open_blocking(pool.as_ref(), deadline, permit, started));
            drop(wait);
            db.waited(waiting, started, opened.as_ref().err());
            let mut session = opened?;
            let held = spans::connection_use(&caller);
            session.held_in(held.clone());
            runtime.block_on(work(&mut session).instrument(held))
        })
        .await;
        joined.unwrap_or_else(|e| Err(PersistenceError::Worker(e.to_string()).into()))
    }

    /// On a blocking-pool thread: a connection from r2d2, or a new one.
    fn open_blocking(
        &self,
        pool: Option<&BlockingPool>,
        deadline: Instant,
        permit: Option<OwnedSemaphorePermit>,
        started: Instant,
    ) -> Result<DbSession, PersistenceError> {
        let inner = &self.inner;
        match pool {
            Some(pool) => {
                let asked = Instant::now();
                let left = deadline.saturating_duration_since(asked);
                match pool.get_timeout(left.max(Duration::from_millis(1))) {
                    Ok(conn) => Ok(DbSession::new(
                        Conn::BlockingPooled(conn),
                        permit,
                        inner.metrics.clone(),
                        None,
                    )),
                    // r2d2's error is only text: what happened decides.
                    Err(_) => Err(inner.timed_out(asked)),
                }
            }
            None => {
                // libpq bounds the open by `connect_timeout` (whole seconds,
                // at least 2): the acquire timeout, rounded up.
                let left = deadline.saturating_duration_since(Instant::now());
                let url = with_connect_timeout(inner.url.expose_secret(), left);
                let opened = connect_blocking(&url, &inner.set_sql);
                self.unpooled_session(opened.map(Conn::BlockingOwned), permit, started)
            }
        }
    }

    /// A connection opened for one unit of work: the open is timed (and a
    /// failed one counted), the open connection counted until it closes.
    fn unpooled_session(
        &self,
        opened: diesel::ConnectionResult<Conn>,
        permit: Option<OwnedSemaphorePermit>,
        started: Instant,
    ) -> Result<DbSession, PersistenceError> {
        let inner = &self.inner;
        inner.metrics.create_time.observe(secs(started.elapsed()));
        match opened {
            Ok(conn) => {
                inner.live.fetch_add(1, Ordering::Relaxed);
                Ok(DbSession::new(
                    conn,
                    permit,
                    inner.metrics.clone(),
                    Some(inner.live.clone()),
                ))
            }
            Err(e) => {
                inner.metrics.open_failures.inc();
                Err(PersistenceError::Establish(e))
            }
        }
    }

    /// Waits for a turn in the pool's FIFO queue (pooled only).
    async fn queue_turn(
        &self,
        deadline: tokio::time::Instant,
    ) -> Result<Option<OwnedSemaphorePermit>, PersistenceError> {
        let Some(queue) = &self.inner.queue else {
            return Ok(None);
        };
        let asked = Instant::now();
        match timeout_at(deadline, queue.clone().acquire_owned()).await {
            Ok(Ok(permit)) => Ok(Some(permit)),
            // Timed out in the queue (the semaphore is never closed): the
            // ones ahead held every turn.
            Ok(Err(_)) | Err(_) => Err(self.inner.timed_out(asked)),
        }
    }

    /// Ends a wait: no longer pending, wait time recorded, timeouts counted.
    fn waited(&self, waiting: PendingGuard, started: Instant, error: Option<&PersistenceError>) {
        drop(waiting);
        self.inner
            .metrics
            .wait_time
            .observe(secs(started.elapsed()));
        if matches!(error, Some(PersistenceError::PoolTimeout)) {
            self.inner.metrics.timeouts.inc();
        }
    }

    /// Connections open and idle right now (unpooled: open, none idle).
    pub fn connections(&self) -> (u32, u32) {
        match &self.inner.source {
            Source::Async(Some(pool)) => {
                let s = pool.state();
                (s.connections, s.idle_connections)
            }
            Source::Blocking(Some(pool)) => {
                let s = pool.state();
                (s.connections, s.idle_connections)
            }
            Source::Async(None) | Source::Blocking(None) => {
                (self.inner.live.load(Ordering::Relaxed), 0)
            }
        }
    }

    /// Most connections the pool may open (0: unpooled, no limit of ours).
    pub fn max_size(&self) -> u32 {
        self.inner.max_size
    }

    /// Copies the pool's state into the gauges; call before a scrape.
    pub fn refresh_metrics(&self) {
        let (connections, idle) = self.connections();
        self.inner
            .metrics
            .refresh(connections, idle, self.max_size());
    }

    /// The pool's metrics.
    pub fn metrics(&self) -> &Arc<PoolMetrics> {
        &self.inner.metrics
    }
}

/// `url` with libpq's `connect_timeout` set to `left`, rounded up to whole
/// seconds and at least 2 (libpq's minimum), unless the URL sets its own.
fn with_connect_timeout(url: &str, left: Duration) -> String {
    if url.contains("connect_timeout=") {
        return url.to_owned();
    }
    let secs = left.as_secs() + u64::from(left.subsec_nanos() > 0);
    let separator = if url.contains('?') { '&' } else { '?' };
    format!("{url}{separator}connect_timeout={}", secs.max(2))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_blocking_open_is_bounded_by_what_is_left_of_the_acquire_timeout() {
        let url = "postgres://u@h/db";
        assert_eq!(
            with_connect_timeout(url, Duration::from_millis(5200)),
            "postgres://u@h/db?connect_timeout=6"
        );
        assert_eq!(
            with_connect_timeout(
                "postgres://u@h/db?sslmode=disable",
                Duration::from_millis(300)
            ),
            "postgres://u@h/db?sslmode=disable&connect_timeout=2"
        );
        assert_eq!(
            with_connect_timeout("postgres://u@h/db?connect_timeout=9", Duration::ZERO),
            "postgres://u@h/db?connect_timeout=9"
        );
    }
}
