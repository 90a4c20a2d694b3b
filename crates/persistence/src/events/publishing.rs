//! What a write does with its event, by publish mode, on either side of
//! COMMIT: the one place that knows the modes' behaviour. A write builds a
//! [`Publishing`], runs [`Publishing::before_commit`] as its
//! transaction's last step, and [`Publishing::after_commit`] once its
//! connection is back in the pool; [`Publishing::has_step_before_commit`]
//! and [`Publishing::outbox_row`] tell [`crate::writes::transaction`] what
//! the write's transaction must share. Adding a mode means
//! a variant of [`PublishMode`] and an arm in each method here.

use std::sync::Arc;

use tokio::sync::Notify;
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
    /// The write's idempotency key is refused (see [`crate::writes::idempotency`]).
    Refused(chatlab_domain::RepositoryError),
}

impl From<TxError> for chatlab_domain::RepositoryError {
    /// A rolled-back transaction's error as the domain's: a failed
    /// statement mapped as every query's, a refusal as it was, a broker
    /// that did not take the event as the broker unavailable.
    fn from(e: TxError) -> Self {
        match e {
            TxError::Db(e) => crate::error_mapping::query_err(e),
            TxError::Refused(e) => e,
            TxError::Publish(e) => Self::Unavailable {
                reason: chatlab_domain::UnavailableReason::EventBroker,
                source: Box::new(e),
            },
        }
    }
}

impl From<crate::writes::idempotency::ClaimError> for TxError {
    fn from(e: crate::writes::idempotency::ClaimError) -> Self {
        match e {
            crate::writes::idempotency::ClaimError::Db(e) => Self::Db(e),
            crate::writes::idempotency::ClaimError::Refused(e) => Self::Refused(e),
        }
    }
}

impl From<diesel::result::Error> for TxError {
    fn from(e: diesel::result::Error) -> Self {
        Self::Db(e)
    }
}

/// One write's event and what its mode does with it. Cheap to clone: the
/// unit of work takes one copy onto its task, the caller keeps the other
/// for after COMMIT.
#[derive(Clone)]
pub(crate) struct Publishing {
    mode: PublishMode,
    /// `None` when the mode publishes nothing: no event is built.
    event: Option<Arc<Event>>,
    /// In outbox mode, the event's outbox row, built once: written by
    /// [`Self::before_commit`], or by a write that carries it in its own
    /// statements ([`Self::outbox_row`]).
    outbox: Option<InsertOutboxRow>,
    publisher: Arc<dyn EventPublisher>,
    /// Wakes this process's outbox relay.
    outbox_wakeup: Arc<Notify>,
}

impl Publishing {
    /// What a write in `mode` does with its event; `event` is called only
    /// when the mode publishes. Fails when the event does not serialise
    /// for its outbox row.
    pub(crate) fn new(
        mode: PublishMode,
        event: impl FnOnce() -> Event,
        publisher: Arc<dyn EventPublisher>,
        outbox_wakeup: Arc<Notify>,
    ) -> Result<Self, String> {
        let event = mode.publishes().then(|| Arc::new(event()));
        let outbox = match event.as_deref() {
            Some(event) if mode == PublishMode::Outbox => Some(outbox_row(event)?),
            _ => None,
        };
        Ok(Self {
            mode,
            event,
            outbox,
            publisher,
            outbox_wakeup,
        })
    }

    /// Whether the mode has a step between the write's statements and
    /// COMMIT that is not SQL (a send, an enqueue), which the write's
    /// transaction must share ([`crate::writes::transaction::Shared`]).
    pub(crate) fn has_step_before_commit(&self) -> bool {
        match self.mode {
            PublishMode::InTxAwait | PublishMode::InTxEnqueue => true,
            PublishMode::Off | PublishMode::AfterCommit | PublishMode::Outbox => false,
        }
    }

    /// The event's outbox row, in outbox mode: what [`Self::before_commit`]
    /// writes, for a write that puts it into its own statement instead.
    pub(crate) fn outbox_row(&self) -> Option<InsertOutboxRow> {
        self.outbox.clone()
    }

    /// Whether the write has an outbox row to write.
    pub(crate) fn writes_outbox_row(&self) -> bool {
        self.outbox.is_some()
    }

    /// The in-transaction step, placed last, just before COMMIT:
    /// `in_tx_await` then holds the connection for exactly one broker round
    /// trip, `in_tx_enqueue` hands over a record whose transaction can still
    /// fail at COMMIT (a phantom event, which the audit reports), and
    /// `outbox` writes the event's row in the same transaction.
    pub(crate) async fn before_commit(&self, s: &mut DbSession) -> Result<(), TxError> {
        let Some(event) = self.event.as_deref() else {
            return Ok(());
        };
        match self.mode {
            PublishMode::Off | PublishMode::AfterCommit => Ok(()),
            PublishMode::InTxAwait => {
                let published = self.publisher.publish(event, self.mode).await;
                // The broker answered: the unit is not stalled.
                s.answered();
                published.map(|_receipt| ()).map_err(TxError::Publish)
            }
            PublishMode::InTxEnqueue => self
                .publisher
                .enqueue(event, self.mode)
                .map_err(TxError::Publish),
            PublishMode::Outbox => {
                if let Some(row) = &self.outbox {
                    s.execute(row.clone()).await?;
                }
                Ok(())
            }
        }
    }

    /// The step after COMMIT, with the connection released. `outbox` wakes
    /// this process's relay, so the row is published at once instead of at
    /// the next poll. `after_commit` produces and awaits now: a failed send
    /// loses the event, which the publisher counts and the log names.
    pub(crate) async fn after_commit(&self) {
        let Some(event) = self.event.as_deref() else {
            return;
        };
        match self.mode {
            PublishMode::Off | PublishMode::InTxAwait | PublishMode::InTxEnqueue => {}
            PublishMode::Outbox => self.outbox_wakeup.notify_one(),
            PublishMode::AfterCommit => {
                if let Err(e) = self.publisher.publish(event, self.mode).await {
                    warn!(
                        event_id = %event.event_id,
                        event_type = event.event_type(),
                        chat_id = %event.chat_id(),
                        error = %e,
                        "event lost: the write is committed but its event was not published"
                    );
                }
            }
        }
    }
}

/// The outbox row of `event`.
fn outbox_row(event: &Event) -> Result<InsertOutboxRow, String> {
    Ok(InsertOutboxRow {
        event_id: event.event_id,
        chat_id: event.chat_id(),
        lock_key: lock_key(event.chat_id()),
        event_type: event.event_type(),
        payload: event.to_json().map_err(|e| e.to_string())?,
        created_at: event.occurred_at,
        trace_parent: event.trace_parent.clone(),
    })
}
