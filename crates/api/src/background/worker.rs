//! One shape for every background worker: a job run once at start and
//! then again and again until the workers stop, then finished once. Between
//! runs it waits for what the last run asked ([`Next`]): its period (or
//! less, when something wakes it: a committed outbox row, a receipt), a
//! backoff after a failure, or nothing when more work is waiting.

use std::future::Future;
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// What a worker asks for after a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Run again at once (more work is waiting).
    Now,
    /// Run again one period after this run started, or sooner when woken.
    Period,
    /// Something failed: run again after this long, not sooner.
    Retry(Duration),
    /// Nothing more will come (its input closed): finish.
    Done,
}

/// A background job (see [`super::Background::run`]). Its errors are its
/// own to log and count; what it answers says when to run it again.
pub trait Worker: Send + 'static {
    /// One run.
    fn run(&mut self) -> impl Future<Output = Next> + Send;

    /// Resolves when there is work before the period is up; never, by
    /// default. Must be cancel-safe: the wait is given up when the period
    /// ends or the workers stop.
    fn woken(&mut self) -> impl Future<Output = ()> + Send {
        std::future::pending()
    }

    /// Once, after the workers are told to stop (a last flush, say);
    /// nothing by default.
    fn finish(self) -> impl Future<Output = ()> + Send
    where
        Self: Sized,
    {
        async {}
    }
}

/// Runs `job` at once and then as each run asks, its period being
/// `period`, until `stop`; then finishes it. A run that outlasts its period
/// is followed by the next at once, never by two to catch up.
pub(super) fn spawn(
    period: Duration,
    mut job: impl Worker,
    stop: CancellationToken,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut next = Next::Now;
        let mut started = Instant::now();
        loop {
            match next {
                Next::Done => break,
                Next::Now if stop.is_cancelled() => break,
                Next::Now => {}
                Next::Period => {
                    tokio::select! {
                        biased;
                        _ = stop.cancelled() => break,
                        _ = tokio::time::sleep_until(started + period) => {}
                        _ = job.woken() => {}
                    }
                }
                Next::Retry(pause) => {
                    tokio::select! {
                        biased;
                        _ = stop.cancelled() => break,
                        _ = tokio::time::sleep(pause) => {}
                    }
                }
            }
            started = Instant::now();
            next = job.run().await;
        }
        job.finish().await;
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use tokio::sync::Notify;

    use super::*;

    /// Answers its script's steps in turn, then `Period`; counts its runs
    /// and whether it finished.
    struct Scripted {
        steps: Vec<Next>,
        runs: Arc<AtomicUsize>,
        wake: Arc<Notify>,
        finished: Arc<Notify>,
    }

    impl Worker for Scripted {
        async fn run(&mut self) -> Next {
            self.runs.fetch_add(1, Ordering::SeqCst);
            if self.steps.is_empty() {
                Next::Period
            } else {
                self.steps.remove(0)
            }
        }

        async fn woken(&mut self) {
            self.wake.notified().await;
        }

        async fn finish(self) {
            self.finished.notify_one();
        }
    }

    fn scripted(steps: Vec<Next>) -> (Scripted, Arc<AtomicUsize>, Arc<Notify>, Arc<Notify>) {
        let (runs, wake, finished) = Default::default();
        let job = Scripted {
            steps,
            runs: Arc::clone(&runs),
            wake: Arc::clone(&wake),
            finished: Arc::clone(&finished),
        };
        (job, runs, wake, finished)
    }

    const HOUR: Duration = Duration::from_secs(3600);
    const BOUND: Duration = Duration::from_secs(5);

    async fn runs_reach(runs: &AtomicUsize, n: usize) {
        tokio::time::timeout(BOUND, async {
            while runs.load(Ordering::SeqCst) < n {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await
        .unwrap_or_else(|_| panic!("{n} runs, saw {}", runs.load(Ordering::SeqCst)));
    }

    #[tokio::test]
    async fn more_work_runs_at_once_and_an_idle_worker_waits_to_be_woken() {
        let (job, runs, wake, _) = scripted(vec![Next::Now, Next::Now]);
        let stop = CancellationToken::new();
        let task = spawn(HOUR, job, stop.clone());
        // The first run, then two more at once; the third asks for its
        // period, an hour.
        runs_reach(&runs, 3).await;
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(runs.load(Ordering::SeqCst), 3, "idle until its period");
        wake.notify_one();
        runs_reach(&runs, 4).await;
        stop.cancel();
        tokio::time::timeout(BOUND, task).await.ok();
    }

    #[tokio::test]
    async fn a_retry_is_not_cut_short_by_a_wake_up_but_stopping_ends_it() {
        let (job, runs, wake, finished) = scripted(vec![Next::Retry(HOUR)]);
        let stop = CancellationToken::new();
        let task = spawn(Duration::ZERO, job, stop.clone());
        runs_reach(&runs, 1).await;
        wake.notify_one();
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(runs.load(Ordering::SeqCst), 1, "the backoff holds");
        stop.cancel();
        tokio::time::timeout(BOUND, finished.notified())
            .await
            .expect("finished once stopped");
        tokio::time::timeout(BOUND, task).await.ok();
    }

    #[tokio::test]
    async fn a_worker_that_is_done_finishes_without_being_stopped() {
        let (job, runs, _, finished) = scripted(vec![Next::Now, Next::Done]);
        let task = spawn(HOUR, job, CancellationToken::new());
        tokio::time::timeout(BOUND, finished.notified())
            .await
            .expect("finished by itself");
        assert_eq!(runs.load(Ordering::SeqCst), 2);
        tokio::time::timeout(BOUND, task).await.ok();
    }
}
