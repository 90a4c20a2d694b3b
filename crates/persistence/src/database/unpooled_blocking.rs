//! Unpooled, blocking driver: a libpq connection opened for one unit of
//! work, on the blocking thread that runs it, and closed after it.

use std::time::{Duration, Instant};

use secrecy::{ExposeSecret, SecretString};

use super::source::{BlockingSource, Shared};
use crate::config::DbConfig;
use crate::database::blocking_manager::connect_blocking;
use crate::database::pool_metrics::secs;
use crate::database::session_settings::Setup;
use crate::errors::PersistenceError;
use crate::session::Conn;

/// Opens a `PgConnection` per unit of work.
pub(crate) struct Connect {
    url: SecretString,
    setup: Setup,
    shared: Shared,
}

impl Connect {
    pub(crate) fn new(config: &DbConfig, setup: Setup, shared: &Shared) -> Self {
        Self {
            url: config.url.clone(),
            setup,
            shared: shared.clone(),
        }
    }
}

impl BlockingSource for Connect {
    fn open(&self, started: Instant, deadline: Instant) -> Result<Conn, PersistenceError> {
        // libpq bounds the open by `connect_timeout` (whole seconds, at
        // least 2): what is left of the acquire timeout, rounded up.
        let left = deadline.saturating_duration_since(Instant::now());
        let url = with_connect_timeout(self.url.expose_secret(), left);
        let opened = connect_blocking(&url, &self.setup);
        self.shared
            .metrics
            .create_time
            .observe(secs(started.elapsed()));
        opened.map(Conn::BlockingOwned).map_err(|e| {
            self.shared.metrics.open_failures.inc();
            PersistenceError::Establish(e)
        })
    }

    fn state(&self) -> (u32, u32) {
        (0, 0)
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
