//! One shape for every job the server runs on a timer: `run` each period
//! until the workers stop, then `finish` once.

use std::future::Future;
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio::time::MissedTickBehavior;
use tokio_util::sync::CancellationToken;

/// A job run every period (see [`super::Background::every`]). Its errors
/// are its own to log: the next period retries.
pub trait Periodic: Send + 'static {
    /// One run.
    fn run(&mut self) -> impl Future<Output = ()> + Send;

    /// Once, after the workers are told to stop (a last flush, say);
    /// nothing by default.
    fn finish(self) -> impl Future<Output = ()> + Send
    where
        Self: Sized,
    {
        async {}
    }
}

/// Runs `job` at once and then every `period` until `stop`, then finishes
/// it. A run that outlasts its period delays the next tick rather than
/// running twice in a row to catch up.
pub(super) fn spawn(
    period: Duration,
    mut job: impl Periodic,
    stop: CancellationToken,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut ticks = tokio::time::interval(period);
        ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                biased;
                _ = stop.cancelled() => break,
                _ = ticks.tick() => {}
            }
            job.run().await;
        }
        job.finish().await;
    })
}
