//! The ports: the traits through which chatlab's layers take more than one
//! implementation.
//!
//! The rule: a trait here only where a second implementation exists or a
//! test needs a double. [`EventPublisher`] earns it: the Kafka publisher on
//! a real broker or the embedded cluster, and the tests' publishers that
//! refuse, stall or count. Storage does not: PostgreSQL is its only
//! implementation and every test runs against it for real, so the API calls
//! `chatlab_persistence::PgStore` directly (its writes keep their
//! transaction boundary inside, so one call is one atomic write). Add a
//! trait when a second implementation arrives, not before.

use async_trait::async_trait;

use crate::events::publish_mode::PublishMode;
use crate::events::{Event, Receipt};

/// Why an event was not acknowledged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("event not published: {0}")]
pub struct PublishError(pub String);

/// The event broker. Implementations bound every wait by their send
/// timeout, so no mode can hold a database connection forever.
#[async_trait]
pub trait EventPublisher: Send + Sync {
    /// Produces the event and waits for the broker's acknowledgement;
    /// answers where the broker says it stored the event. `mode` labels the
    /// metrics.
    async fn publish(&self, event: &Event, mode: PublishMode) -> Result<Receipt, PublishError>;

    /// Hands the event to the producer's queue and returns at once; the
    /// delivery outcome is only counted. Fails only when the queue refuses
    /// the record (full, or the producer is closed).
    fn enqueue(&self, event: &Event, mode: PublishMode) -> Result<(), PublishError>;
}
