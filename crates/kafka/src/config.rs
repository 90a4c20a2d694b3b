//! Kafka settings, filled in by the caller from env vars.

use std::time::Duration;

/// How to reach the broker and produce.
#[derive(Debug, Clone)]
pub struct KafkaConfig {
    /// `host:port,...`; `None` starts the embedded mock cluster.
    pub brokers: Option<String>,
    /// Topic of chat events (`KAFKA_TOPIC`, default `chatlab.chat-events`).
    pub topic: String,
    /// Partitions when chatlab creates the topic.
    pub partitions: i32,
    /// Upper bound of one delivery, queueing and retries included
    /// (`KAFKA_SEND_TIMEOUT_MS`, librdkafka's `message.timeout.ms`).
    pub send_timeout: Duration,
    /// How long the producer waits to fill a batch (`KAFKA_LINGER_MS`).
    /// Every `in_tx_await` send waits this long too, inside the transaction.
    pub linger: Duration,
    /// Injected broker round-trip time of the embedded cluster
    /// (`KAFKA_MOCK_BROKER_RTT_MS`).
    pub mock_broker_rtt: Duration,
}
