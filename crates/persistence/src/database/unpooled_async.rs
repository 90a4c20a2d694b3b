//! Unpooled, async driver: a connection opened for one unit of work and
//! closed after it.

use std::time::Instant;

use futures_util::FutureExt as _;
use futures_util::future::BoxFuture;
use secrecy::{ExposeSecret, SecretString};
use tokio::time::timeout_at;

use super::source::{AsyncSource, Shared};
use crate::config::DbConfig;
use crate::database::pool_metrics::secs;
use crate::database::session_settings::Setup;
use crate::database::session_settings::connect;
use crate::errors::PersistenceError;
use crate::session::Conn;

/// Opens a diesel-async connection per unit of work.
pub(crate) struct Connect {
    url: SecretString,
    setup: Setup,
    acquire_timeout_ms: u128,
    shared: Shared,
}

impl Connect {
    pub(crate) fn new(config: &DbConfig, setup: Setup, shared: &Shared) -> Self {
        Self {
            url: config.url.clone(),
            setup,
            acquire_timeout_ms: config.acquire_timeout.as_millis(),
            shared: shared.clone(),
        }
    }
}

impl AsyncSource for Connect {
    fn open(
        &self,
        started: Instant,
        deadline: Instant,
    ) -> BoxFuture<'_, Result<Conn, PersistenceError>> {
        async move {
            // Bounded by the deadline: a server that accepts and never
            // answers would otherwise hold the caller forever.
            let opened = match timeout_at(
                deadline.into(),
                connect(self.url.expose_secret(), &self.setup),
            )
            .await
            {
                Ok(opened) => opened,
                Err(_) => Err(diesel::ConnectionError::BadConnection(format!(
                    "no connection within the acquire timeout ({} ms)",
                    self.acquire_timeout_ms
                ))),
            };
            self.shared
                .metrics
                .create_time
                .observe(secs(started.elapsed()));
            opened.map(Conn::AsyncOwned).map_err(|e| {
                self.shared.metrics.open_failures.inc();
                PersistenceError::Establish(e)
            })
        }
        .boxed()
    }

    fn state(&self) -> (u32, u32) {
        (0, 0)
    }
}
