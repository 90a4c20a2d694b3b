//! The broker phase: the embedded mock cluster when `KAFKA_BROKERS` is
//! unset, and the publisher, whose acknowledgements flow to the receipt
//! ledger.

use std::sync::Arc;

use prometheus_client::registry::Registry;
use tokio::sync::mpsc;

use chatlab_domain::AckedEvent;
use chatlab_kafka::{EmbeddedBroker, EventMetrics, KafkaPublisher};
use chatlab_persistence::events::receipt_ledger;

use super::StartupError;
use crate::config::Settings;

/// The broker the server publishes to, and its publisher.
pub(super) struct Broker {
    /// The mock cluster, when the server started its own.
    pub embedded: Option<Arc<EmbeddedBroker>>,
    /// Where the publisher, the live tail and the catch-up connect.
    pub bootstrap: String,
    /// The producer, handing acknowledged events to `receipts`.
    pub publisher: KafkaPublisher,
    /// The acknowledged events, for the receipt ledger.
    pub receipts: mpsc::Receiver<AckedEvent>,
}

impl Broker {
    /// Starts the embedded broker where no broker is configured, then
    /// connects the publisher.
    pub async fn start(settings: &Settings, registry: &mut Registry) -> Result<Self, StartupError> {
        let (embedded, bootstrap) = match &settings.kafka.brokers {
            Some(brokers) => (None, brokers.clone()),
            None => {
                let broker = EmbeddedBroker::start(
                    &settings.kafka.topic,
                    settings.kafka.partitions,
                    settings.kafka.mock_broker_rtt,
                )?;
                let bootstrap = broker.bootstrap_servers().to_owned();
                (Some(Arc::new(broker)), bootstrap)
            }
        };
        let publisher = KafkaPublisher::connect(
            &bootstrap,
            &settings.kafka,
            EventMetrics::register(registry),
            embedded.is_none(),
        )
        .await?;
        let (acked, receipts) = mpsc::channel(receipt_ledger::CHANNEL_CAPACITY);
        Ok(Self {
            embedded,
            bootstrap,
            publisher: publisher.with_receipts(acked),
            receipts,
        })
    }
}
