//! The outbox relay as a background worker: a batch a run, at once again
//! while batches come full, else at its poll interval or when this process
//! commits an outbox row; after a failure, its backoff (see
//! [`chatlab_persistence::events::outbox_relay`]).

use std::sync::Arc;

use chatlab_persistence::events::outbox_relay::{OutboxRelay, Relayed};
use tokio::sync::Notify;

use super::{Next, Worker};

/// The relay, run by the workers.
pub struct Relay {
    relay: OutboxRelay,
    wakeup: Arc<Notify>,
}

impl Relay {
    /// Runs `relay`.
    pub fn new(relay: OutboxRelay) -> Self {
        let wakeup = relay.wakeup();
        Self { relay, wakeup }
    }
}

impl Worker for Relay {
    async fn run(&mut self) -> Next {
        match self.relay.relay_once().await {
            Relayed::More => Next::Now,
            Relayed::Drained => Next::Period,
            Relayed::Failed(pause) => Next::Retry(pause),
        }
    }

    async fn woken(&mut self) {
        self.wakeup.notified().await;
    }

    async fn finish(self) {
        tracing::info!("outbox relay stopped");
    }
}
