//! The ways of getting a connection, one small implementation each:
//! pooled or unpooled, on the async driver or the blocking one. They only
//! open or check out; the queue in front of them, the deadline, the
//! metrics of the wait and the running of the unit of work are
//! [`super::Database`]'s, done once for all four.

use std::sync::Arc;
use std::sync::atomic::AtomicU32;
use std::time::Instant;

use futures_util::future::BoxFuture;

use super::{pooled_async, pooled_blocking, unpooled_async, unpooled_blocking};
use crate::config::{DbConfig, Driver, Pooling};
use crate::database::connect_failures::ConnectFailures;
use crate::database::pool_metrics::PoolMetrics;
use crate::database::session_settings::Setup;
use crate::errors::PersistenceError;
use crate::session::Conn;

/// Opens (or checks out) a connection on the async driver, on the runtime
/// that polls the returned future; its connection task runs there too.
pub(crate) trait AsyncSource: Send + Sync {
    /// A connection by `deadline`; `started` is when the caller began to
    /// wait (a pool's timeout is told apart from an unreachable database by
    /// the connect failures since then).
    fn open(
        &self,
        started: Instant,
        deadline: Instant,
    ) -> BoxFuture<'_, Result<Conn, PersistenceError>>;

    /// Connections open and idle right now.
    fn state(&self) -> (u32, u32);
}

/// Opens (or checks out) a connection on the blocking driver, on the
/// calling thread (a thread of the blocking pool).
pub(crate) trait BlockingSource: Send + Sync {
    /// A connection by `deadline`, as [`AsyncSource::open`].
    fn open(&self, started: Instant, deadline: Instant) -> Result<Conn, PersistenceError>;

    /// Connections open and idle right now.
    fn state(&self) -> (u32, u32);
}

/// One way of getting a connection.
#[derive(Clone)]
pub(crate) enum Source {
    /// On the async driver: the unit of work runs on a runtime.
    Async(Arc<dyn AsyncSource>),
    /// On the blocking driver: the unit of work runs on a blocking thread.
    Blocking(Arc<dyn BlockingSource>),
}

impl Source {
    /// Connections open and idle right now.
    pub(crate) fn state(&self) -> (u32, u32) {
        match self {
            Self::Async(s) => s.state(),
            Self::Blocking(s) => s.state(),
        }
    }
}

/// What every source of one [`super::Database`] shares.
#[derive(Clone)]
pub(crate) struct Shared {
    pub(crate) metrics: Arc<PoolMetrics>,
    pub(crate) failures: ConnectFailures,
    /// Unpooled only: connections open right now, in every slice.
    pub(crate) live: Arc<AtomicU32>,
}

/// The source `config` asks for, holding at most `pool_max_size`
/// connections when pooled. A pool opens nothing here (beyond
/// `pool_min_idle`, in the background, on the current runtime).
pub(crate) fn build(config: &DbConfig, shared: &Shared) -> Source {
    let setup = Setup::of(&config.session);
    match (config.pooling, config.driver) {
        (Pooling::On, Driver::Async) => {
            Source::Async(Arc::new(pooled_async::Bb8::new(config, shared)))
        }
        (Pooling::Off, Driver::Async) => Source::Async(Arc::new(unpooled_async::Connect::new(
            config, setup, shared,
        ))),
        (Pooling::On, Driver::Blocking) => {
            Source::Blocking(Arc::new(pooled_blocking::R2d2::new(config, setup, shared)))
        }
        (Pooling::Off, Driver::Blocking) => Source::Blocking(Arc::new(
            unpooled_blocking::Connect::new(config, setup, shared),
        )),
    }
}
