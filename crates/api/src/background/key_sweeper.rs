//! The job that deletes expired idempotency keys, so the table holds about
//! one retention's worth of keyed writes.

use chatlab_persistence::PgStore;
use chatlab_persistence::writes::idempotency;

use super::{Next, Worker};

/// Deletes the keys older than the store's retention, each period
/// (`CHATLAB_IDEMPOTENCY_SWEEP_SECS`); the first sweep runs at startup, so
/// keys a stopped server left behind go soon, and a sweep that fails is
/// retried by the next.
pub struct KeySweeper {
    /// The store whose keys it deletes.
    pub store: PgStore,
}

impl Worker for KeySweeper {
    async fn run(&mut self) -> Next {
        match idempotency::sweep(self.store.db(), self.store.key_retention()).await {
            Ok(0) => {}
            Ok(deleted) => tracing::info!(deleted, "expired idempotency keys deleted"),
            Err(e) => tracing::warn!(error = %e, "idempotency key sweep failed; next one retries"),
        }
        Next::Period
    }
}
