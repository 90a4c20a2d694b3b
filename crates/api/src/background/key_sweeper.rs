//! The job that deletes expired idempotency keys, so the table holds about
//! one retention's worth of keyed writes.

use chatlab_persistence::writes::idempotency::KeySweep;

use super::{Next, Worker};

/// Deletes the keys older than the retention, each period
/// (`CHATLAB_IDEMPOTENCY_SWEEP_SECS`), on a connection of its own (the
/// request pool's figures count requests only); the first sweep runs at
/// startup, so keys a stopped server left behind go soon, and a sweep that
/// fails is retried by the next.
pub struct KeySweeper {
    /// The sweep it runs.
    pub sweep: KeySweep,
}

impl Worker for KeySweeper {
    async fn run(&mut self) -> Next {
        match self.sweep.sweep().await {
            Ok(0) => {}
            Ok(deleted) => tracing::info!(deleted, "expired idempotency keys deleted"),
            Err(e) => tracing::warn!(error = %e, "idempotency key sweep failed; next one retries"),
        }
        Next::Period
    }
}
