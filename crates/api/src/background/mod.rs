//! The server's background workers under one owner. [`start_all`] starts
//! every one of them, in one place: the receipt ledger, the idempotency key
//! sweeper, the read marker writer (outside `direct` mode), the live tail
//! and its fan-out, and the outbox relay. They start through [`Background`]
//! and stop through it, with one cancellation; dropping it without [`Background::stop`] cancels them too,
//! so no worker outlives its owner or waits on a signal that can no longer
//! come.
//!
//! Two stages, because one worker depends on the others' ending: the
//! receipt ledger writes the receipts of events the publisher acknowledges,
//! and the publisher's last queued events are flushed only once the relay
//! has stopped handing it more. So [`Background::stop`] cancels the first
//! stage, waits for it, runs the caller's flush, and only then cancels the
//! ledger.

pub mod key_sweeper;
pub mod marker_writer;
pub mod outbox_relay;
pub mod receipt_ledger;
mod start_all;
mod worker;

use std::future::Future;
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub use start_all::{Inputs, start_all};
pub use worker::{Next, Worker};

/// A running worker, named for the log.
struct Running {
    name: &'static str,
    task: JoinHandle<()>,
}

/// The background workers of one server. See the module documentation.
#[derive(Default)]
pub struct Background {
    first: CancellationToken,
    last: CancellationToken,
    first_stage: Vec<Running>,
    last_stage: Vec<Running>,
}

impl std::fmt::Debug for Background {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names = |stage: &[Running]| stage.iter().map(|w| w.name).collect::<Vec<_>>();
        f.debug_struct("Background")
            .field("first_stage", &names(&self.first_stage))
            .field("last_stage", &names(&self.last_stage))
            .finish()
    }
}

impl Background {
    /// No workers yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Starts a worker of the first stage: `spawn` gets the token that is
    /// cancelled when the workers stop (or their owner is dropped).
    pub fn start(
        &mut self,
        name: &'static str,
        spawn: impl FnOnce(CancellationToken) -> JoinHandle<()>,
    ) {
        let task = spawn(self.first.child_token());
        self.first_stage.push(Running { name, task });
    }

    /// Starts a first-stage worker that runs `job` at once and then as
    /// each run asks (see [`Worker`]), `period` apart when idle, and
    /// finishes it when the workers stop.
    pub fn run(&mut self, name: &'static str, period: Duration, job: impl Worker) {
        self.start(name, |stop| worker::spawn(period, job, stop));
    }

    /// As [`Self::run`], in the last stage (see [`Self::start_last`]).
    pub fn run_last(&mut self, name: &'static str, period: Duration, job: impl Worker) {
        self.start_last(name, |stop| worker::spawn(period, job, stop));
    }

    /// Starts a worker that stops last, after the flush given to
    /// [`Background::stop`] (the receipt ledger).
    pub fn start_last(
        &mut self,
        name: &'static str,
        spawn: impl FnOnce(CancellationToken) -> JoinHandle<()>,
    ) {
        let task = spawn(self.last.child_token());
        self.last_stage.push(Running { name, task });
    }

    /// Stops every worker: cancels the first stage and waits for it, runs
    /// `between` (the publisher's flush), then cancels the last stage and
    /// waits for it. A worker that panicked is logged, not propagated.
    pub async fn stop(mut self, between: impl Future<Output = ()>) {
        self.first.cancel();
        join(std::mem::take(&mut self.first_stage)).await;
        between.await;
        self.last.cancel();
        join(std::mem::take(&mut self.last_stage)).await;
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        self.first.cancel();
        self.last.cancel();
    }
}

async fn join(workers: Vec<Running>) {
    for Running { name, task } in workers {
        if let Err(e) = task.await {
            tracing::warn!(worker = name, error = %e, "background worker ended abnormally");
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use super::*;

    /// Records the order in which workers saw their cancellation.
    fn recording(
        log: &Arc<Mutex<Vec<&'static str>>>,
        name: &'static str,
    ) -> impl FnOnce(CancellationToken) -> JoinHandle<()> {
        let log = log.clone();
        move |stop| {
            tokio::spawn(async move {
                stop.cancelled().await;
                log.lock().expect("the log").push(name);
            })
        }
    }

    #[tokio::test]
    async fn stop_ends_the_first_stage_then_the_flush_then_the_last() {
        let log = Arc::new(Mutex::new(Vec::new()));
        let mut workers = Background::new();
        workers.start_last("ledger", recording(&log, "ledger"));
        workers.start("relay", recording(&log, "relay"));
        workers.start("tail", recording(&log, "tail"));
        let flushed = log.clone();
        tokio::time::timeout(
            Duration::from_secs(5),
            workers.stop(async move { flushed.lock().expect("the log").push("flush") }),
        )
        .await
        .expect("every worker stops");
        let order = log.lock().expect("the log").clone();
        assert_eq!(order.len(), 4, "{order:?}");
        assert_eq!(order[2..], ["flush", "ledger"], "{order:?}");
    }

    #[tokio::test]
    async fn dropping_the_owner_cancels_every_worker() {
        let log = Arc::new(Mutex::new(Vec::new()));
        let (first_done, last_done);
        {
            let mut workers = Background::new();
            let (tx1, rx1) = tokio::sync::oneshot::channel();
            let (tx2, rx2) = tokio::sync::oneshot::channel();
            let (l1, l2) = (log.clone(), log.clone());
            workers.start("relay", move |stop| {
                tokio::spawn(async move {
                    stop.cancelled().await;
                    l1.lock().expect("the log").push("relay");
                    let _ = tx1.send(());
                })
            });
            workers.start_last("ledger", move |stop| {
                tokio::spawn(async move {
                    stop.cancelled().await;
                    l2.lock().expect("the log").push("ledger");
                    let _ = tx2.send(());
                })
            });
            (first_done, last_done) = (rx1, rx2);
        }
        tokio::time::timeout(Duration::from_secs(5), async {
            first_done.await.expect("the relay ended");
            last_done.await.expect("the ledger ended");
        })
        .await
        .expect("both stop once their owner is gone");
        assert_eq!(log.lock().expect("the log").len(), 2);
    }
}
