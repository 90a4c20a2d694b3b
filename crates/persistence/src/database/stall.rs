//! How long a caller waits for a unit of work that PostgreSQL stopped
//! answering. A dead network (a cable, a failed switch, a hypervisor that
//! froze the database's VM) neither closes nor resets the connection: a
//! statement in flight waits until the network comes back. TCP keepalive
//! does not see it (it probes idle connections only), and the server's own
//! `statement_timeout` cancels the statement but cannot send its error.
//!
//! So the caller watches the unit: every answer from PostgreSQL (a
//! statement's result, BEGIN, COMMIT) and its start count as progress, and
//! when none came for the statement timeout and a margin, the caller stops
//! waiting and answers "the database could not be reached". The unit itself
//! runs on to its end (it may hold the broker's acknowledgement of an
//! `in_tx_await` event, which only its COMMIT makes true): when the network
//! returns it commits, or fails and rolls back, and its connection goes
//! back to the pool by itself.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Added to the statement timeout: the time for the server's own
/// cancellation to arrive over a working network.
const MARGIN: Duration = Duration::from_millis(500);

/// The longest a caller waits for a unit of work with no answer from
/// PostgreSQL; `None` when the statement timeout is off.
pub(crate) fn limit(statement_timeout: Duration) -> Option<Duration> {
    (!statement_timeout.is_zero()).then(|| statement_timeout + MARGIN)
}

/// When a unit of work last heard from PostgreSQL.
#[derive(Debug)]
pub(crate) struct Progress {
    base: Instant,
    /// Nanoseconds after `base` of the last answer, plus one; 0: the unit
    /// has not started.
    last: AtomicU64,
}

impl Progress {
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Self {
            base: Instant::now(),
            last: AtomicU64::new(0),
        })
    }

    /// An answer came (or the unit started, holding its connection).
    pub(crate) fn answered(&self) {
        let nanos = self.base.elapsed().as_nanos() as u64;
        self.last.store(nanos.saturating_add(1), Ordering::Relaxed);
    }

    /// How long since the last answer; `None` before the unit started (its
    /// wait for a connection has a deadline of its own).
    fn quiet_for(&self) -> Option<Duration> {
        match self.last.load(Ordering::Relaxed) {
            0 => None,
            n => Some(
                self.base
                    .elapsed()
                    .saturating_sub(Duration::from_nanos(n - 1)),
            ),
        }
    }
}

/// `answer`, unless the unit `progress` watches goes `limit` without an
/// answer from PostgreSQL first: then `Err(limit)`.
pub(crate) async fn within<T>(
    limit: Option<Duration>,
    progress: &Progress,
    answer: impl Future<Output = T>,
) -> Result<T, Duration> {
    let Some(limit) = limit else {
        return Ok(answer.await);
    };
    let mut answer = std::pin::pin!(answer);
    loop {
        let wait = match progress.quiet_for() {
            Some(quiet) if quiet >= limit => return Err(limit),
            Some(quiet) => limit - quiet,
            // Not started: look again soon.
            None => Duration::from_millis(100).min(limit),
        };
        tokio::select! {
            out = &mut answer => return Ok(out),
            () = tokio::time::sleep(wait) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_unit_that_keeps_answering_is_waited_for_and_a_silent_one_is_not() {
        let limit = Some(Duration::from_millis(150));
        // Answers every 50 ms for 400 ms: longer than the limit, never quiet.
        let progress = Progress::new();
        let busy = async {
            progress.answered();
            for _ in 0..8 {
                tokio::time::sleep(Duration::from_millis(50)).await;
                progress.answered();
            }
            "done"
        };
        assert_eq!(within(limit, &progress, busy).await, Ok("done"));
        // Starts, then hears nothing.
        let progress = Progress::new();
        let silent = async {
            progress.answered();
            tokio::time::sleep(Duration::from_secs(5)).await;
            "late"
        };
        let began = Instant::now();
        assert_eq!(
            within(limit, &progress, silent).await,
            Err(Duration::from_millis(150))
        );
        assert!(began.elapsed() < Duration::from_secs(1));
        // No statement timeout: no limit.
        assert_eq!(super::limit(Duration::ZERO), None);
        let progress = Progress::new();
        assert_eq!(within(None, &progress, async { 7 }).await, Ok(7));
    }

    #[tokio::test]
    async fn the_wait_for_a_connection_is_not_counted_as_silence() {
        let progress = Progress::new();
        let queued = async {
            tokio::time::sleep(Duration::from_millis(300)).await;
            progress.answered();
            "ran"
        };
        assert_eq!(
            within(Some(Duration::from_millis(150)), &progress, queued).await,
            Ok("ran")
        );
    }
}
