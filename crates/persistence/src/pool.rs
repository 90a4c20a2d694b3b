//! The bb8 pool of diesel-async connections, and the instrumented checkout
//! every repository call goes through.

use std::ops::{Deref, DerefMut};
use std::sync::Arc;
use std::time::Instant;

use bb8::RunError;
use diesel_async::AsyncPgConnection;
use diesel_async::pooled_connection::AsyncDieselConnectionManager;
use diesel_async::pooled_connection::bb8::{Pool, PooledConnection};
use secrecy::ExposeSecret;
use tokio::sync::{Semaphore, SemaphorePermit};

use crate::config::DbConfig;
use crate::errors::PersistenceError;
use crate::pool_metrics::{PoolMetrics, secs};
use crate::session_settings::manager_config;

/// A pool of PostgreSQL connections with metrics on every checkout.
///
/// Checkouts queue first-come first-served on a fair semaphore with one
/// permit per connection, and only then ask bb8. bb8 alone does not queue
/// fairly: a caller arriving just as a connection comes back can take it
/// ahead of callers already waiting, which under saturation stretches the
/// tail of the wait far beyond its mean. With the semaphore, the wait of a
/// saturated pool is close to "the queue ahead of me", for everyone.
#[derive(Clone)]
pub struct DbPool {
    pool: Pool<AsyncPgConnection>,
    queue: Arc<Semaphore>,
    acquire_timeout: std::time::Duration,
    metrics: Arc<PoolMetrics>,
}

impl std::fmt::Debug for DbPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DbPool")
            .field("state", &self.pool.state())
            .finish_non_exhaustive()
    }
}

impl DbPool {
    /// Builds the pool. It opens no connection up front (beyond
    /// `pool_min_idle`, in the background), so the server can start while
    /// the database is still coming up; `/readyz` tells when it answers.
    pub fn new(config: &DbConfig, metrics: Arc<PoolMetrics>) -> Self {
        let manager = AsyncDieselConnectionManager::<AsyncPgConnection>::new_with_config(
            config.url.expose_secret(),
            manager_config(&config.session, config.recycle, metrics.clone()),
        );
        let pool = Pool::builder()
            .max_size(config.pool_max_size.max(1))
            .min_idle(config.pool_min_idle)
            .connection_timeout(config.acquire_timeout)
            .max_lifetime(config.max_lifetime)
            .idle_timeout(config.idle_timeout)
            .test_on_check_out(true)
            .build_unchecked(manager);
        metrics.max.set(i64::from(config.pool_max_size.max(1)));
        Self {
            pool,
            queue: Arc::new(Semaphore::new(config.pool_max_size.max(1) as usize)),
            acquire_timeout: config.acquire_timeout,
            metrics,
        }
    }

    /// Checks a connection out, counting the caller as pending while it
    /// waits and recording wait time; the returned guard records use time
    /// when it is dropped (the moment the connection goes back).
    pub async fn checkout(&self) -> Result<CheckedOut<'_>, PersistenceError> {
        let waiting = self.metrics.enter_pending();
        let started = Instant::now();
        let turn = tokio::time::timeout(self.acquire_timeout, self.queue.acquire()).await;
        let result = match turn {
            Ok(Ok(permit)) => self.pool.get().await.map(|conn| (conn, permit)),
            // Timed out in the queue (the semaphore is never closed).
            Ok(Err(_)) | Err(_) => Err(RunError::TimedOut),
        };
        drop(waiting);
        self.metrics.wait_time.observe(secs(started.elapsed()));
        match result {
            Ok((conn, permit)) => Ok(CheckedOut {
                conn,
                _permit: permit,
                since: Instant::now(),
                metrics: &self.metrics,
            }),
            Err(RunError::TimedOut) => {
                self.metrics.timeouts.inc();
                Err(PersistenceError::PoolTimeout)
            }
            Err(RunError::User(e)) => Err(PersistenceError::Connect(e)),
        }
    }

    /// Connections open and idle right now.
    pub fn connections(&self) -> (u32, u32) {
        let s = self.pool.state();
        (s.connections, s.idle_connections)
    }

    /// Most connections the pool may open.
    pub fn max_size(&self) -> u32 {
        self.pool.config().max_size
    }

    /// Copies the pool's state into the gauges; call before a scrape.
    pub fn refresh_metrics(&self) {
        let (connections, idle) = self.connections();
        self.metrics.refresh(connections, idle, self.max_size());
    }

    /// The pool's metrics.
    pub fn metrics(&self) -> &Arc<PoolMetrics> {
        &self.metrics
    }
}

/// A checked-out connection. Dereferences to the connection; records the
/// connection's use time when dropped.
pub struct CheckedOut<'a> {
    // Fields drop in order: the connection goes back to bb8 before the
    // permit lets the next caller in the queue ask for one.
    conn: PooledConnection<'a, AsyncPgConnection>,
    _permit: SemaphorePermit<'a>,
    since: Instant,
    metrics: &'a PoolMetrics,
}

impl CheckedOut<'_> {
    /// How long this connection has been checked out.
    pub fn held_for(&self) -> std::time::Duration {
        self.since.elapsed()
    }
}

impl Deref for CheckedOut<'_> {
    type Target = AsyncPgConnection;

    fn deref(&self) -> &Self::Target {
        &self.conn
    }
}

impl DerefMut for CheckedOut<'_> {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.conn
    }
}

impl Drop for CheckedOut<'_> {
    fn drop(&mut self) {
        self.metrics.use_time.observe(secs(self.since.elapsed()));
    }
}
