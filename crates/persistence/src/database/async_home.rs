//! Where the async driver's units of work run: on one runtime, with the
//! connections they use.
//!
//! A diesel-async connection is driven by a task of its own (tokio-postgres'
//! `Connection`), spawned on whichever runtime opened it; bb8 opens
//! connections from the task that asked for one. actix-web runs each
//! worker on a runtime of its own thread, so a request's statements and its
//! connection's task would otherwise sit on different threads, and every
//! statement would cost two wake-ups across threads (a futex call and a
//! context switch each way). Checking out, opening and running the unit of
//! work on the runtime that built the [`crate::Database`] keeps the pool's
//! connection tasks and their users together; the request's thread is woken
//! once, for the answer.

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

use tokio::runtime::Handle;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// The caller still waits, and the unit of work has no connection yet.
const WAITING: u8 = 0;
/// The unit of work has its connection: it runs to its end.
const STARTED: u8 = 1;
/// The caller went away before the unit of work had its connection.
const ABANDONED: u8 = 2;

/// Whether a unit of work has started, told between the caller and the
/// task that runs it, so that exactly one of "the caller left first" and
/// "the work started first" wins.
#[derive(Clone, Default)]
pub(crate) struct Start(Arc<AtomicU8>);

impl Start {
    /// Called by the task once it holds its connection: `false` when the
    /// caller has already gone, and the task must give the connection back
    /// untouched.
    pub(crate) fn begin(&self) -> bool {
        self.0
            .compare_exchange(WAITING, STARTED, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    /// Called by a caller that goes away: `true` when the work had not
    /// started, so its task may be aborted mid-checkout.
    fn abandon(&self) -> bool {
        self.0
            .compare_exchange(WAITING, ABANDONED, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }
}

/// A unit of work handed to the home runtime, seen from the caller. Dropped
/// before the work started, it aborts the task (which then only waited for
/// a connection); dropped after, it lets the work run to its end.
pub(crate) struct Handoff<T> {
    answer: oneshot::Receiver<T>,
    start: Start,
    task: JoinHandle<()>,
}

impl<T: Send + 'static> Handoff<T> {
    /// Spawns `work` on `home` (or on the current runtime when there is
    /// none); `work` gets the [`Start`] to call once it holds a connection.
    pub(crate) fn spawn<W, Fut>(home: Option<&Handle>, work: W) -> Self
    where
        W: FnOnce(Start) -> Fut,
        Fut: Future<Output = Option<T>> + Send + 'static,
    {
        let start = Start::default();
        let (tx, answer) = oneshot::channel();
        let future = work(start.clone());
        let task = async move {
            if let Some(out) = future.await {
                let _ = tx.send(out);
            }
        };
        let task = match home {
            Some(handle) => handle.spawn(task),
            None => tokio::spawn(task),
        };
        Self {
            answer,
            start,
            task,
        }
    }

    /// The work's answer; `None` if its task ended without one (it
    /// panicked, or its runtime shut down).
    pub(crate) async fn answer(mut self) -> Option<T> {
        (&mut self.answer).await.ok()
    }
}

impl<T> Drop for Handoff<T> {
    fn drop(&mut self) {
        if self.start.abandon() {
            self.task.abort();
        }
    }
}
