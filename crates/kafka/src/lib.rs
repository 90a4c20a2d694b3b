//! chatlab's Kafka adapter.
//!
//! - [`publisher::KafkaPublisher`]: the domain's `EventPublisher` on
//!   rdkafka's `FutureProducer` (idempotent, `acks=all`, a bounded delivery
//!   timeout so no publish mode can hold a database connection forever),
//!   which replaces its producer when librdkafka declares it dead.
//! - [`embedded_broker::EmbeddedBroker`]: librdkafka's in-process mock
//!   cluster, the zero-setup default when `KAFKA_BROKERS` is unset, with
//!   injectable round-trip time and broker outages.
//! - [`topic_reader`]: reads a whole topic, for the event audit and tests.
//! - [`live_tail`]: follows the topic from its end, for live delivery, and
//!   [`topic_range`] reads what a reconnecting client missed.

pub mod config;
pub mod embedded_broker;
pub mod live_tail;
pub mod metrics;
mod producer_slot;
pub mod publisher;
pub mod topic_range;
pub mod topic_reader;

pub use config::KafkaConfig;
pub use embedded_broker::EmbeddedBroker;
pub use metrics::EventMetrics;
pub use publisher::KafkaPublisher;

/// What can go wrong setting up Kafka.
#[derive(Debug, thiserror::Error)]
pub enum KafkaSetupError {
    /// librdkafka refused a configuration or an operation.
    #[error("kafka: {0}")]
    Kafka(#[from] rdkafka::error::KafkaError),
    /// The broker did not do what was asked (the embedded one did not
    /// start, a topic could not be read to its end in time).
    #[error("broker: {0}")]
    Broker(String),
}
