//! The client's own share of a delivery's latency: how late a 10 ms timer
//! fires in the load tool while it reads every stream. A frame that
//! arrived while the process was busy waits at least that long to be
//! read, and the delivery latency it reports carries the wait.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::load::latency::Latencies;

/// The timer's period.
const PERIOD: Duration = Duration::from_millis(10);

/// A running watch of the timer's lateness.
pub(super) struct Watch {
    running: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<Latencies>,
}

impl Watch {
    /// Starts sleeping [`PERIOD`] after [`PERIOD`], recording how much
    /// later than asked each sleep ended.
    pub(super) fn start() -> Self {
        let running = Arc::new(AtomicBool::new(true));
        let task = tokio::spawn({
            let running = Arc::clone(&running);
            async move {
                let mut lag = Latencies::default();
                while running.load(Ordering::Relaxed) {
                    let asked = Instant::now();
                    tokio::time::sleep(PERIOD).await;
                    let late = asked.elapsed().saturating_sub(PERIOD);
                    lag.record_micros(late.as_micros() as u64);
                }
                lag
            }
        });
        Self { running, task }
    }

    /// Stops the watch: every lateness it recorded.
    pub(super) async fn stop(self) -> Latencies {
        self.running.store(false, Ordering::Relaxed);
        self.task.await.unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_blocked_runtime_shows_as_lag() {
        let watch = Watch::start();
        tokio::time::sleep(Duration::from_millis(30)).await;
        // Hold this (current-thread) runtime's only thread for 50 ms.
        std::thread::sleep(Duration::from_millis(50));
        tokio::time::sleep(Duration::from_millis(30)).await;
        let lag = watch.stop().await;
        assert!(lag.max_ms() >= 30.0, "max lag {} ms", lag.max_ms());
    }
}
