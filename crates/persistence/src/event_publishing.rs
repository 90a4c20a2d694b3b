//! What a write does with its event, by publish mode, on either side of
//! COMMIT. The store calls [`publish_in_tx`] as the transaction's last step
//! and [`publish_after_commit`] once the connection is back in the pool.

use tracing::warn;

use chatlab_domain::{Event, EventPublisher, PublishError, PublishMode};

use crate::queries::{InsertOutboxRow, lock_key};
use crate::session::DbSession;

/// Why a transaction with an event rolled back.
#[derive(Debug)]
pub(crate) enum TxError {
    /// A statement failed.
    Db(diesel::result::Error),
    /// `in_tx_await` / `in_tx_enqueue`: the broker did not take the event.
    Publish(PublishError),
}

impl From<diesel::result::Error> for TxError {
    fn from(e: diesel::result::Error) -> Self {
        Self::Db(e)
    }
}

/// The in-transaction step of each mode (`None`: the mode publishes
/// nothing, no event was built). Placed last, just before COMMIT:
/// `in_tx_await` then holds the connection for exactly one broker round
/// trip, and `in_tx_enqueue` hands over a record whose transaction can
/// still fail at COMMIT (a phantom event, which the audit reports).
pub(crate) async fn publish_in_tx(
    s: &mut DbSession,
    publisher: &dyn EventPublisher,
    event: Option<&Event>,
    mode: PublishMode,
) -> Result<(), TxError> {
    let Some(event) = event else {
        return Ok(());
    };
    match mode {
        PublishMode::Off | PublishMode::AfterCommit => Ok(()),
        PublishMode::InTxAwait => publisher
            .publish(event, mode)
            .await
            .map(|_receipt| ())
            .map_err(TxError::Publish),
        PublishMode::InTxEnqueue => publisher.enqueue(event, mode).map_err(TxError::Publish),
        PublishMode::Outbox => {
            s.execute(InsertOutboxRow {
                event_id: event.event_id,
                chat_id: event.chat_id(),
                lock_key: lock_key(event.chat_id()),
                event_type: event.event_type(),
                payload: event.to_json(),
                created_at: event.occurred_at,
            })
            .await?;
            Ok(())
        }
    }
}

/// `after_commit`: the write is committed and its connection released;
/// a failed send now loses the event. The publisher counts it; the log says
/// which one.
pub(crate) async fn publish_after_commit(
    publisher: &dyn EventPublisher,
    event: Option<&Event>,
    mode: PublishMode,
) {
    let Some(event) = event.filter(|_| mode == PublishMode::AfterCommit) else {
        return;
    };
    if let Err(e) = publisher.publish(event, mode).await {
        warn!(
            event_id = %event.event_id,
            event_type = event.event_type(),
            chat_id = %event.chat_id(),
            error = %e,
            "event lost: the write is committed but its event was not published"
        );
    }
}
