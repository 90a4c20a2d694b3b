//! Pooled, async driver: a connection checked out of bb8.

use std::time::Instant;

use bb8::RunError;
use diesel_async::AsyncPgConnection;
use diesel_async::pooled_connection::AsyncDieselConnectionManager;
use futures_util::FutureExt as _;
use futures_util::future::BoxFuture;
use secrecy::ExposeSecret;
use tokio::time::timeout_at;

use super::source::{AsyncSource, Shared};
use crate::config::DbConfig;
use crate::database::connect_failures::ConnectFailures;
use crate::database::session_settings::manager_config;
use crate::errors::PersistenceError;
use crate::session::Conn;

type Pool = bb8::Pool<AsyncDieselConnectionManager<AsyncPgConnection>>;

/// A bb8 pool of diesel-async connections.
pub(crate) struct Bb8 {
    pool: Pool,
    failures: ConnectFailures,
}

impl Bb8 {
    pub(crate) fn new(config: &DbConfig, shared: &Shared) -> Self {
        let size = config.pool_max_size.max(1);
        let manager = AsyncDieselConnectionManager::<AsyncPgConnection>::new_with_config(
            config.url.expose_secret(),
            manager_config(
                &config.session,
                config.recycle,
                shared.metrics.clone(),
                shared.failures.clone(),
            ),
        );
        let pool = bb8::Pool::builder()
            .max_size(size)
            .min_idle(config.pool_min_idle)
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

impl AsyncSource for Bb8 {
    fn open(
        &self,
        started: Instant,
        deadline: Instant,
    ) -> BoxFuture<'_, Result<Conn, PersistenceError>> {
        async move {
            // bb8's own timeout would allow as long again: the caller's
            // deadline bounds the turn in the queue and this wait together.
            match timeout_at(deadline.into(), self.pool.get_owned()).await {
                Ok(Ok(conn)) => Ok(Conn::AsyncPooled(conn)),
                Ok(Err(RunError::User(e))) => Err(PersistenceError::Connect(Box::new(e))),
                // bb8 reports a checkout whose connects all failed as a
                // timeout: tell it from a busy pool by what happened.
                Ok(Err(RunError::TimedOut)) | Err(_) => Err(self.failures.timed_out(started)),
            }
        }
        .boxed()
    }

    fn state(&self) -> (u32, u32) {
        let s = self.pool.state();
        (s.connections, s.idle_connections)
    }
}
