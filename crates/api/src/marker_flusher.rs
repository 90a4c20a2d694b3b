//! The background task that writes the read markers held per instance
//! (`READ_MARKER_MODE=coalesced`), or compacts the read marker log
//! (`READ_MARKER_MODE=log`), every `READ_MARKER_FLUSH_MS`, and once more
//! when the server stops, after its last request, on a connection of its
//! own (see [`chatlab_persistence::MarkerFlusher`]).

use std::time::Duration;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use chatlab_persistence::MarkerFlusher;

/// Attempts of the last flush at shutdown before the held markers are
/// given up (and logged as lost).
const LAST_FLUSH_ATTEMPTS: u32 = 3;

/// Flushes every `every` until `stop` is cancelled, then once more.
pub fn spawn(
    mut flusher: MarkerFlusher,
    every: Duration,
    stop: CancellationToken,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut ticks = tokio::time::interval(every);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                biased;
                _ = stop.cancelled() => break,
                _ = ticks.tick() => {}
            }
            if let Err(e) = flusher.flush().await {
                tracing::warn!(error = %e, held = flusher.markers().held(), "read marker flush failed; the next one retries");
            }
        }
        for attempt in 1..=LAST_FLUSH_ATTEMPTS {
            match flusher.flush().await {
                Ok(flushed) => {
                    tracing::info!(flushed, "held read markers written at shutdown");
                    return;
                }
                Err(e) if attempt < LAST_FLUSH_ATTEMPTS => {
                    tracing::warn!(error = %e, attempt, "last read marker flush failed; retrying");
                    tokio::time::sleep(every.min(Duration::from_secs(1))).await;
                }
                Err(e) => tracing::error!(
                    error = %e,
                    lost = flusher.markers().held(),
                    "last read marker flush failed; the held markers are lost"
                ),
            }
        }
    })
}
