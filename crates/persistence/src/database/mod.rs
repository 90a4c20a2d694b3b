//! Connections: where every unit of work gets one ([`Database`], its
//! acquire timeout and queue), how each is opened and set up, and the pool's metrics.
//!
//! [`Database`]: where every unit of work gets its connection. The ways of
//! getting one (async or blocking driver, pooled or not) are small
//! implementations of their own ([`source`]); the layout ([`slices`]) says
//! whether one pool serves the whole process or each worker owns a slice;
//! the queue, the deadline, the metrics and the running of the unit of
//! work are done here, once, for all of them.
//!
//! Pooled checkouts queue first-come first-served on a fair semaphore with
//! one permit per connection of their slice, and only then ask the pool.
//! Neither bb8 nor r2d2 queues fairly: a caller arriving just as a
//! connection comes back can take it ahead of callers already waiting,
//! which under saturation stretches the tail of the wait far beyond its
//! mean. With the semaphore, the wait of a saturated pool is close to "the
//! queue ahead of me", for everyone, and the two drivers queue alike, so
//! comparing them compares the drivers.

pub(crate) mod async_home;
pub mod blocking_manager;
pub(crate) mod connect_failures;
pub mod dedicated;
pub mod pool_metrics;
mod pooled_async;
mod pooled_blocking;
pub mod pooler_probe;
pub(crate) mod session_settings;
mod slices;
mod source;
mod stall;
mod unpooled_async;
mod unpooled_blocking;

pub(crate) use stall::Progress;

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::time::Instant;

use futures_util::future::BoxFuture;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::timeout_at;
use tracing::Instrument as _;

use crate::config::{DbConfig, Driver, PoolLayout, Pooling};
use crate::database::async_home::Handoff;
use crate::database::connect_failures::ConnectFailures;
use crate::database::pool_metrics::{PendingGuard, PoolMetrics, secs};
use crate::errors::PersistenceError;
use crate::session::{Conn, DbSession};
use crate::spans;
use slices::Slice;
use source::{AsyncSource, BlockingSource, Shared, Source};

/// Tells one [`Database`] from another in a thread's record of the slices
/// it owns (a test process runs many).
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

struct Inner {
    id: u64,
    config: DbConfig,
    layout: PoolLayout,
    slices: Vec<Slice>,
    shared: Shared,
    /// Slices adopted by workers so far.
    adopted: AtomicUsize,
    /// The next slice for a caller that owns none.
    next: AtomicUsize,
    /// Blocking only: one permit per thread of the blocking pool.
    threads: Arc<Semaphore>,
    max_size: u32,
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
            .field("driver", &self.inner.config.driver)
            .field("pooling", &self.inner.config.pooling)
            .field("layout", &self.inner.layout)
            .field("slices", &self.inner.slices.len())
            .field("connections", &self.connections())
            .finish_non_exhaustive()
    }
}

impl Database {
    /// Sets up the connection sources. It opens no connection up front
    /// (beyond `pool_min_idle`, in the background), so the server can start
    /// while the database is still coming up; `/readyz` tells when it
    /// answers. With [`PoolLayout::PerWorker`], the slices wait for their
    /// workers ([`Database::adopt_slice`]); until then they serve whoever
    /// calls, in turn.
    pub fn new(config: &DbConfig, metrics: Arc<PoolMetrics>) -> Self {
        let max_size = config.pool_max_size.max(1);
        let pooled = config.pooling == Pooling::On;
        let shared = Shared {
            metrics,
            failures: ConnectFailures::default(),
            live: Arc::new(AtomicU32::new(0)),
        };
        // Shared: the runtime that builds the pool runs every unit of work
        // and drives every connection ([`crate::database::async_home`]). Per worker:
        // the worker that adopts a slice does, for that slice.
        let home = match config.layout {
            PoolLayout::Shared => tokio::runtime::Handle::try_current().ok(),
            PoolLayout::PerWorker => None,
        };
        let slices = slices::slice_configs(config)
            .into_iter()
            .map(|c| Slice::new(source::build(&c, &shared), c, pooled, home.clone()))
            .collect();
        shared
            .metrics
            .max
            .set(if pooled { i64::from(max_size) } else { 0 });
        Self {
            inner: Arc::new(Inner {
                id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
                config: config.clone(),
                layout: config.layout,
                slices,
                shared,
                adopted: AtomicUsize::new(0),
                next: AtomicUsize::new(0),
                threads: Arc::new(Semaphore::new(config.blocking_threads.max(1))),
                max_size: if pooled { max_size } else { 0 },
            }),
        }
    }

    /// With [`PoolLayout::PerWorker`], gives the calling thread (a server
    /// worker, inside its runtime) the next slice of its own: the slice's
    /// connections are opened and driven on this runtime from now on, and
    /// this thread's units of work take them without leaving it. Answers
    /// the slice's index; `None` in the shared layout, outside a runtime,
    /// or when every slice is taken (this worker then takes them in turn).
    pub fn adopt_slice(&self) -> Option<usize> {
        let inner = &self.inner;
        if inner.layout != PoolLayout::PerWorker {
            return None;
        }
        let home = tokio::runtime::Handle::try_current().ok()?;
        let index = inner.adopted.fetch_add(1, Ordering::Relaxed);
        let slice = inner.slices.get(index)?;
        slice.adopt(source::build(&slice.config, &inner.shared), home);
        slices::own_here(inner.id, index);
        Some(index)
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
    /// A caller that hears nothing from PostgreSQL for the statement
    /// timeout and a margin once `work` has its connection stops waiting
    /// and gets [`PersistenceError::NoAnswer`] ([`stall`]: a dead network).
    ///
    /// A caller that goes away while it waits for the connection takes
    /// nothing; once `work` has its connection, it runs to its end whether
    /// the caller still waits or not (a task of its own on the async
    /// driver, a blocking thread on the other). On the async driver the
    /// unit runs on its slice's runtime: the caller's own, when the caller
    /// is the worker that owns the slice (no thread is crossed), else the
    /// runtime that built or adopted the slice ([`crate::database::async_home`]). A
    /// unit of work cut short between the broker's acknowledgement and
    /// COMMIT would leave an event on the topic for a write that rolls back
    /// (in_tx_await's phantom).
    pub async fn run<T, E, F>(&self, work: F) -> Result<T, E>
    where
        F: for<'s> FnOnce(&'s mut DbSession) -> BoxFuture<'s, Result<T, E>> + Send + 'static,
        T: Send + 'static,
        E: From<PersistenceError> + Send + 'static,
    {
        // The unit runs on another task (or thread): its spans name the
        // caller's span as their parent explicitly.
        let caller = tracing::Span::current();
        let (index, own) = self.pick();
        let state = self.inner.slices[index].state();
        let progress = stall::Progress::new();
        let watched = progress.clone();
        let limit = stall::limit(self.inner.config.session.statement_timeout);
        let answer = async move {
            match state.source {
                Source::Async(source) => {
                    let db = self.clone();
                    let home = if own { None } else { state.home };
                    let handoff = Handoff::spawn(home.as_ref(), move |start| async move {
                        let wait = spans::connection_wait(&caller);
                        let opened = db.open_async(index, source.as_ref()).instrument(wait).await;
                        let mut session = match opened {
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
                        session.watched_by(watched);
                        Some(work(&mut session).instrument(held).await)
                    });
                    handoff.answer().await.unwrap_or_else(|| {
                        Err(PersistenceError::Worker(
                            "the unit of work ended without an answer".into(),
                        )
                        .into())
                    })
                }
                Source::Blocking(source) => {
                    self.run_blocking(index, source, work, caller, watched)
                        .await
                }
            }
        };
        stall::within(limit, &progress, answer)
            .await
            .unwrap_or_else(|waited| Err(PersistenceError::NoAnswer(waited).into()))
    }

    /// The slice for this call, and whether the calling thread owns it.
    fn pick(&self) -> (usize, bool) {
        let inner = &self.inner;
        if let Some(index) = slices::owned_here(inner.id) {
            return (index, true);
        }
        match inner.slices.len() {
            1 => (0, false),
            n => (inner.next.fetch_add(1, Ordering::Relaxed) % n, false),
        }
    }

    async fn open_async(
        &self,
        index: usize,
        source: &dyn AsyncSource,
    ) -> Result<DbSession, PersistenceError> {
        let waiting = self.inner.shared.metrics.enter_pending();
        let started = Instant::now();
        // One deadline for the whole checkout: the turn in the queue, then
        // the pool's own wait or the open.
        let deadline = started + self.inner.config.acquire_timeout;
        let opened = match self.queue_turn(index, deadline).await {
            Ok(permit) => source
                .open(started, deadline)
                .await
                .map(|conn| self.session(conn, permit)),
            Err(e) => Err(e),
        };
        self.waited(waiting, started, opened.as_ref().err());
        opened
    }

    async fn run_blocking<T, E, F>(
        &self,
        index: usize,
        source: Arc<dyn BlockingSource>,
        work: F,
        caller: tracing::Span,
        progress: Arc<stall::Progress>,
    ) -> Result<T, E>
    where
        F: for<'s> FnOnce(&'s mut DbSession) -> BoxFuture<'s, Result<T, E>> + Send + 'static,
        T: Send + 'static,
        E: From<PersistenceError> + Send + 'static,
    {
        // The wait spans the queue and the thread here, then the checkout
        // on the blocking thread.
        let wait = spans::connection_wait(&caller);
        let waiting = self.inner.shared.metrics.enter_pending();
        let started = Instant::now();
        let deadline = started + self.inner.config.acquire_timeout;
        let before_thread = async {
            let permit = self.queue_turn(index, deadline).await?;
            let thread = self.inner.threads.clone().acquire_owned();
            match timeout_at(deadline.into(), thread).await {
                Ok(Ok(thread)) => Ok((permit, thread)),
                Ok(Err(_)) | Err(_) => Err(PersistenceError::PoolTimeout),
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
            let opened = wait.in_scope(|| source.open(started, deadline));
            drop(wait);
            let opened = opened.map(|conn| db.session(conn, permit));
            db.waited(waiting, started, opened.as_ref().err());
            let mut session = opened?;
            let held = spans::connection_use(&caller);
            session.held_in(held.clone());
            session.watched_by(progress);
            runtime.block_on(work(&mut session).instrument(held))
        })
        .await;
        joined.unwrap_or_else(|e| Err(PersistenceError::Worker(e.to_string()).into()))
    }

    /// A session on `conn`, holding the queue's `permit` until it ends; an
    /// unpooled connection is counted open until it closes.
    fn session(&self, conn: Conn, permit: Option<OwnedSemaphorePermit>) -> DbSession {
        let shared = &self.inner.shared;
        let live = (self.inner.config.pooling == Pooling::Off).then(|| {
            shared.live.fetch_add(1, Ordering::Relaxed);
            shared.live.clone()
        });
        DbSession::new(conn, permit, shared.metrics.clone(), live)
    }

    /// Waits for a turn in slice `index`'s FIFO queue (pooled only). A
    /// wait while another slice has a free connection is counted: the
    /// price of the `per_worker` layout.
    async fn queue_turn(
        &self,
        index: usize,
        deadline: Instant,
    ) -> Result<Option<OwnedSemaphorePermit>, PersistenceError> {
        let inner = &self.inner;
        let Some(queue) = &inner.slices[index].queue else {
            return Ok(None);
        };
        // Free only when nobody waits: tokio's semaphore hands returned
        // permits to its waiters first, so this keeps the queue's order.
        if let Ok(permit) = queue.clone().try_acquire_owned() {
            return Ok(Some(permit));
        }
        let asked = Instant::now();
        let free_elsewhere = inner
            .slices
            .iter()
            .enumerate()
            .any(|(i, s)| i != index && s.has_free());
        let turn = timeout_at(deadline.into(), queue.clone().acquire_owned()).await;
        if free_elsewhere {
            let metrics = &inner.shared.metrics;
            metrics.imbalanced_waits.inc();
            metrics.imbalanced_wait_time.inc_by(secs(asked.elapsed()));
        }
        match turn {
            Ok(Ok(permit)) => Ok(Some(permit)),
            // Timed out in the queue (the semaphore is never closed): the
            // ones ahead held every turn.
            Ok(Err(_)) | Err(_) => Err(inner.shared.failures.timed_out(asked)),
        }
    }

    /// Ends a wait: no longer pending, wait time recorded, timeouts counted.
    fn waited(&self, waiting: PendingGuard, started: Instant, error: Option<&PersistenceError>) {
        drop(waiting);
        let metrics = &self.inner.shared.metrics;
        metrics.wait_time.observe(secs(started.elapsed()));
        if matches!(error, Some(PersistenceError::PoolTimeout)) {
            metrics.timeouts.inc();
        }
    }

    /// Connections open and idle right now (unpooled: open, none idle).
    pub fn connections(&self) -> (u32, u32) {
        let inner = &self.inner;
        if inner.config.pooling == Pooling::Off {
            return (inner.shared.live.load(Ordering::Relaxed), 0);
        }
        inner.slices.iter().fold((0, 0), |(open, idle), slice| {
            let (o, i) = slice.state().source.state();
            (open + o, idle + i)
        })
    }

    /// Most connections the pool may open (0: unpooled, no limit of ours).
    pub fn max_size(&self) -> u32 {
        self.inner.max_size
    }

    /// The driver.
    pub fn driver(&self) -> Driver {
        self.inner.config.driver
    }

    /// The layout.
    pub fn layout(&self) -> PoolLayout {
        self.inner.layout
    }

    /// The most connections of each slice (one slice in the shared layout).
    pub fn slice_sizes(&self) -> Vec<u32> {
        self.inner
            .slices
            .iter()
            .map(|s| s.config.pool_max_size)
            .collect()
    }

    /// Copies the pool's state into the gauges; call before a scrape.
    pub fn refresh_metrics(&self) {
        let (connections, idle) = self.connections();
        self.inner
            .shared
            .metrics
            .refresh(connections, idle, self.max_size());
    }

    /// The pool's metrics.
    pub fn metrics(&self) -> &Arc<PoolMetrics> {
        &self.inner.shared.metrics
    }
}
