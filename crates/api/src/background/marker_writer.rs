//! The job that writes the read markers held per instance
//! (`READ_MARKER_MODE=coalesced`), or compacts the read marker log
//! (`READ_MARKER_MODE=log`), every `READ_MARKER_FLUSH_MS`, and once more
//! when the server stops, after its last request, on a connection of its
//! own (see [`chatlab_persistence::MarkerWriter`]).

use std::time::Duration;

use chatlab_persistence::MarkerWriter;

use super::{Next, Worker};

/// Attempts of the last flush at shutdown before the held markers are
/// given up (and logged as lost).
const LAST_FLUSH_ATTEMPTS: u32 = 3;

/// Writes (or compacts) each period, then once more when the workers stop.
pub struct MarkerWrites {
    /// What writes the markers.
    pub writer: MarkerWriter,
    /// The period, also the longest pause between the last flush's attempts
    /// (at most a second).
    pub every: Duration,
}

impl Worker for MarkerWrites {
    async fn run(&mut self) -> Next {
        if let Err(e) = self.writer.flush().await {
            tracing::warn!(error = %e, held = self.writer.markers().held(),
                "read marker flush failed; the next one retries");
        }
        Next::Period
    }

    async fn finish(mut self) {
        for attempt in 1..=LAST_FLUSH_ATTEMPTS {
            match self.writer.flush().await {
                Ok(flushed) => {
                    tracing::info!(flushed, "held read markers written at shutdown");
                    return;
                }
                Err(e) if attempt < LAST_FLUSH_ATTEMPTS => {
                    tracing::warn!(error = %e, attempt, "last read marker flush failed; retrying");
                    tokio::time::sleep(self.every.min(Duration::from_secs(1))).await;
                }
                Err(e) => tracing::error!(
                    error = %e,
                    lost = self.writer.markers().held(),
                    "last read marker flush failed; the held markers are lost"
                ),
            }
        }
    }
}
