//! The background task that deletes expired idempotency keys, so the
//! table holds about one retention's worth of keyed writes.

use std::time::Duration;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use chatlab_persistence::PgStore;
use chatlab_persistence::idempotency;

/// Sweeps every `every` until `stop` is cancelled; one sweep runs at
/// startup, so keys a stopped server left behind go soon.
pub fn spawn(store: PgStore, every: Duration, stop: CancellationToken) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut ticks = tokio::time::interval(every);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                biased;
                _ = stop.cancelled() => return,
                _ = ticks.tick() => {}
            }
            match idempotency::sweep(store.db(), store.key_retention()).await {
                Ok(0) => {}
                Ok(deleted) => tracing::info!(deleted, "expired idempotency keys deleted"),
                Err(e) => {
                    tracing::warn!(error = %e, "idempotency key sweep failed; next one retries")
                }
            }
        }
    })
}
