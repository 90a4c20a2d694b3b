//! The receipt ledger as a background worker: it writes what the publisher
//! acknowledged as soon as receipts arrive, at least every flush interval;
//! after a failed write, it waits its backoff; it finishes when every
//! sender is gone or the workers stop, writing what it still holds (see
//! [`chatlab_persistence::events::receipt_ledger`]).

use std::time::Duration;

use chatlab_persistence::events::receipt_ledger::ReceiptLedger;

use super::{Next, Worker};

/// The ledger, run by the workers (in their last stage, after the
/// publisher's last flush).
pub struct Receipts(pub ReceiptLedger);

impl Worker for Receipts {
    async fn run(&mut self) -> Next {
        let pause = self.0.write_received().await;
        if pause > Duration::ZERO {
            Next::Retry(pause)
        } else if self.0.is_open() {
            Next::Period
        } else {
            Next::Done
        }
    }

    async fn woken(&mut self) {
        self.0.receive().await;
    }

    async fn finish(self) {
        self.0.close().await;
        tracing::info!("receipt ledger stopped");
    }
}
