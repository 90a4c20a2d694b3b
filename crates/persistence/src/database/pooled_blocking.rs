//! Pooled, blocking driver: a connection checked out of r2d2, on the
//! blocking thread that runs the unit of work.

use std::time::{Duration, Instant};

use secrecy::ExposeSecret;

use super::source::{BlockingSource, Shared};
use crate::config::DbConfig;
use crate::database::blocking_manager::BlockingManager;
use crate::database::connect_failures::ConnectFailures;
use crate::database::session_settings::Setup;
use crate::errors::PersistenceError;
use crate::session::Conn;

/// An r2d2 pool of diesel's `PgConnection`s.
pub(crate) struct R2d2 {
    pool: r2d2::Pool<BlockingManager>,
    failures: ConnectFailures,
}

impl R2d2 {
    pub(crate) fn new(config: &DbConfig, setup: Setup, shared: &Shared) -> Self {
        let size = config.pool_max_size.max(1);
        let manager = BlockingManager::new(
            config.url.expose_secret().to_owned(),
            setup,
            config.recycle,
            shared.metrics.clone(),
            shared.failures.clone(),
        );
        let pool = r2d2::Pool::builder()
            .max_size(size)
            // r2d2 reads `None` as "keep max_size idle".
            .min_idle(Some(config.pool_min_idle.unwrap_or(0)))
            .connection_timeout(config.acquire_timeout)
            .max_lifetime(config.max_lifetime)
            .idle_timeout(config.idle_timeout)
            .test_on_check_out(true)
            .build_unchecked(manager);
        Self {
            pool,
            failures: shared.failures.clone(),
        }
    }
}

impl BlockingSource for R2d2 {
    fn open(&self, _started: Instant, deadline: Instant) -> Result<Conn, PersistenceError> {
        let asked = Instant::now();
        let left = deadline.saturating_duration_since(asked);
        self.pool
            .get_timeout(left.max(Duration::from_millis(1)))
            .map(Conn::BlockingPooled)
            // r2d2's error is only text: what happened decides.
            .map_err(|_| self.failures.timed_out(asked))
    }

    fn state(&self) -> (u32, u32) {
        let s = self.pool.state();
        (s.connections, s.idle_connections)
    }
}
