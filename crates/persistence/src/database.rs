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

use crate::blocking_manager::{BlockingManager, connect_blocking};
use crate::config::{DbConfig, Driver, Pooling};
use crate::errors::PersistenceError;
use crate::pool_metrics::{PendingGuard, PoolMetrics, secs};
use crate::session::{Conn, DbSession};
use crate::session_settings::{connect, manager_config, set_statements};

type AsyncPool = bb8::Pool<AsyncDieselConnectionManager<AsyncPgConnection>>;
type BlockingPool = r2d2::Pool<BlockingManager>;

enum Source {
    AsyncPool(AsyncPool),
    BlockingPool(BlockingPool),
    /// A connection per unit of work.
    Unpooled {
        url: SecretString,
        set_sql: String,
    },
}

struct Inner {
    source: Source,
    driver: Driver,
    pooling: Pooling,
    metrics: Arc<PoolMetrics>,
    /// Pooled only: one permit per connection, FIFO.
    queue: Option<Arc<Semaphore>>,
    /// Blocking only: one permit per thread of the blocking pool.
    threads: Arc<Semaphore>,
    acquire_timeout: Duration,
    max_size: u32,
    /// Unpooled only: connections open right now.
    live: Arc<AtomicU32>,
}

/// The database connections of one process, with metrics on every
/// checkout. Cheap to clone.
#[derive(Clone)]
pub struct Database {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Database {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Database")
            .field("driver", &self.inner.driver)
            .field("pooling", &self.inner.pooling)
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
        let source = match (config.pooling, config.driver) {
            (Pooling::Off, _) => Source::Unpooled {
                url: config.url.clone(),
                set_sql,
            },
            (Pooling::On, Driver::Async) => {
                let manager = AsyncDieselConnectionManager::<AsyncPgConnection>::new_with_config(
                    config.url.expose_secret(),
                    manager_config(&config.session, config.recycle, metrics.clone()),
                );
                Source::AsyncPool(
                    bb8::Pool::builder()
                        .max_size(max_size)
                        .min_idle(config.pool_min_idle)
                        .connection_timeout(config.acquire_timeout)
                        .max_lifetime(config.max_lifetime)
                        .idle_timeout(config.idle_timeout)
                        .test_on_check_out(true)
                        .build_unchecked(manager),
                )
            }
            (Pooling::On, Driver::Blocking) => {
                let manager = BlockingManager::new(
                    config.url.expose_secret().to_owned(),
                    set_sql,
                    config.recycle,
                    metrics.clone(),
                );
                Source::BlockingPool(
                    r2d2::Pool::builder()
                        .max_size(max_size)
                        // r2d2 reads `None` as "keep max_size idle".
                        .min_idle(Some(config.pool_min_idle.unwrap_or(0)))
                        .connection_timeout(config.acquire_timeout)
                        .max_lifetime(config.max_lifetime)
                        .idle_timeout(config.idle_timeout)
                        .test_on_check_out(true)
                        .build_unchecked(manager),
                )
            }
        };
        let pooled = config.pooling == Pooling::On;
        metrics
            .max
            .set(if pooled { i64::from(max_size) } else { 0 });
        Self {
            inner: Arc::new(Inner {
                source,
                driver: config.driver,
                pooling: config.pooling,
                metrics,
                queue: pooled.then(|| Arc::new(Semaphore::new(max_size as usize))),
                threads: Arc::new(Semaphore::new(config.blocking_threads.max(1))),
                acquire_timeout: config.acquire_timeout,
                max_size: if pooled { max_size } else { 0 },
                live: Arc::new(AtomicU32::new(0)),
            }),
        }
    }

    /// The driver in use.
    pub fn driver(&self) -> Driver {
        self.inner.driver
    }

    /// Whether connections are pooled.
    pub fn pooling(&self) -> Pooling {
        self.inner.pooling
    }

    /// Runs one unit of work on one connection: checked out of the pool
    /// (or opened, unpooled) before `work` starts and given back (or
    /// closed) when it ends. On the blocking driver the whole unit runs on
    /// a thread of the blocking pool.
    ///
    /// Waiting for the connection counts as pending and is timed; a caller
    /// that waits longer than the acquire timeout gets
    /// [`PersistenceError::PoolTimeout`].
    pub async fn run<T, E, F>(&self, work: F) -> Result<T, E>
    where
        F: for<'s> FnOnce(&'s mut DbSession) -> BoxFuture<'s, Result<T, E>> + Send + 'static,
        T: Send + 'static,
        E: From<PersistenceError> + Send + 'static,
    {
        match self.inner.driver {
            Driver::Async => {
                let mut session = self.open_async().await?;
                work(&mut session).await
            }
            Driver::Blocking => self.run_blocking(work).await,
        }
    }

    async fn open_async(&self) -> Result<DbSession, PersistenceError> {
        let inner = &self.inner;
        let waiting = inner.metrics.enter_pending();
        let started = Instant::now();
        let deadline = tokio::time::Instant::from_std(started + inner.acquire_timeout);
        let permit = self.queue_turn(deadline).await;
        let opened = match (&inner.source, permit) {
            (_, Err(e)) => Err(e),
            (Source::AsyncPool(pool), Ok(permit)) => match pool.get_owned().await {
                Ok(conn) => Ok(DbSession::new(
                    Conn::AsyncPooled(conn),
                    permit,
                    inner.metrics.clone(),
                    None,
                )),
                Err(RunError::TimedOut) => Err(PersistenceError::PoolTimeout),
                Err(RunError::User(e)) => Err(PersistenceError::Connect(Box::new(e))),
            },
            (Source::Unpooled { url, set_sql }, Ok(permit)) => {
                let opened = connect(url.expose_secret(), set_sql).await;
                inner.metrics.create_time.observe(secs(started.elapsed()));
                match opened {
                    Ok(conn) => Ok(self.unpooled_session(Conn::AsyncOwned(conn), permit)),
                    Err(e) => {
                        inner.metrics.open_failures.inc();
                        Err(PersistenceError::Establish(e))
                    }
                }
            }
            (Source::BlockingPool(_), Ok(_)) => Err(PersistenceError::Worker(
                "the blocking pool cannot serve the async driver".into(),
            )),
        };
        self.waited(waiting, started, opened.as_ref().err());
        opened
    }

    async fn run_blocking<T, E, F>(&self, work: F) -> Result<T, E>
    where
        F: for<'s> FnOnce(&'s mut DbSession) -> BoxFuture<'s, Result<T, E>> + Send + 'static,
        T: Send + 'static,
        E: From<PersistenceError> + Send + 'static,
    {
        let waiting = self.inner.metrics.enter_pending();
        let started = Instant::now();
        let deadline = started + self.inner.acquire_timeout;
        let tokio_deadline = tokio::time::Instant::from_std(deadline);
        let before_thread = match self.queue_turn(tokio_deadline).await {
            Ok(permit) => {
                match timeout_at(tokio_deadline, self.inner.threads.clone().acquire_owned()).await {
                    Ok(Ok(thread)) => Ok((permit, thread)),
                    Ok(Err(_)) | Err(_) => Err(PersistenceError::PoolTimeout),
                }
            }
            Err(e) => Err(e),
        };
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
            let opened = db.open_blocking(deadline, permit, started);
            db.waited(waiting, started, opened.as_ref().err());
            let mut session = opened?;
            runtime.block_on(work(&mut session))
        })
        .await;
        joined.unwrap_or_else(|e| Err(PersistenceError::Worker(e.to_string()).into()))
    }

    /// On a blocking-pool thread: a connection from r2d2, or a new one.
    fn open_blocking(
        &self,
        deadline: Instant,
        permit: Option<OwnedSemaphorePermit>,
        started: Instant,
    ) -> Result<DbSession, PersistenceError> {
        let inner = &self.inner;
        match &inner.source {
            Source::BlockingPool(pool) => {
                let left = deadline.saturating_duration_since(Instant::now());
                match pool.get_timeout(left.max(Duration::from_millis(1))) {
                    Ok(conn) => Ok(DbSession::new(
                        Conn::BlockingPooled(conn),
                        permit,
                        inner.metrics.clone(),
                        None,
                    )),
                    // r2d2 says why only when a connect failed; a plain
                    // timeout carries no message.
                    Err(e) if e.to_string().contains(':') => {
                        Err(PersistenceError::Connect(Box::new(e)))
                    }
                    Err(_) => Err(PersistenceError::PoolTimeout),
                }
            }
            Source::Unpooled { url, set_sql } => {
                let opened = connect_blocking(url.expose_secret(), set_sql);
                inner.metrics.create_time.observe(secs(started.elapsed()));
                match opened {
                    Ok(conn) => Ok(self.unpooled_session(Conn::BlockingOwned(conn), permit)),
                    Err(e) => {
                        inner.metrics.open_failures.inc();
                        Err(PersistenceError::Establish(e))
                    }
                }
            }
            Source::AsyncPool(_) => Err(PersistenceError::Worker(
                "the async pool cannot serve the blocking driver".into(),
            )),
        }
    }

    fn unpooled_session(&self, conn: Conn, permit: Option<OwnedSemaphorePermit>) -> DbSession {
        self.inner.live.fetch_add(1, Ordering::Relaxed);
        DbSession::new(
            conn,
            permit,
            self.inner.metrics.clone(),
            Some(self.inner.live.clone()),
        )
    }

    /// Waits for a turn in the pool's FIFO queue (pooled only).
    async fn queue_turn(
        &self,
        deadline: tokio::time::Instant,
    ) -> Result<Option<OwnedSemaphorePermit>, PersistenceError> {
        let Some(queue) = &self.inner.queue else {
            return Ok(None);
        };
        match timeout_at(deadline, queue.clone().acquire_owned()).await {
            Ok(Ok(permit)) => Ok(Some(permit)),
            // Timed out in the queue (the semaphore is never closed).
            Ok(Err(_)) | Err(_) => Err(PersistenceError::PoolTimeout),
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
            Source::AsyncPool(pool) => {
                let s = pool.state();
                (s.connections, s.idle_connections)
            }
            Source::BlockingPool(pool) => {
                let s = pool.state();
                (s.connections, s.idle_connections)
            }
            Source::Unpooled { .. } => (self.inner.live.load(Ordering::Relaxed), 0),
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
