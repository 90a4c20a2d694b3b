//! The rdkafka event publisher.

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use rdkafka::ClientConfig;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::error::RDKafkaErrorCode;
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::future_producer::OwnedDeliveryResult;
use rdkafka::producer::{DeliveryFuture, FutureProducer, FutureRecord, Producer};
use rdkafka::util::Timeout;
use tracing::field::Empty;
use tracing::{Instrument as _, info, warn};

use chatlab_domain::{AckedEvent, Event, EventPublisher, PublishError, PublishMode, Receipt};
use tokio::sync::mpsc;

use crate::KafkaSetupError;
use crate::config::KafkaConfig;
use crate::metrics::{EventMetrics, ModeLabel};
use crate::producer_slot::{Generation, ProducerSlot};

/// Publishes chat events to one topic; key = chat id, so one chat's events
/// stay in one partition, in order.
#[derive(Clone)]
pub struct KafkaPublisher {
    slot: Arc<ProducerSlot>,
    topic: String,
    metrics: EventMetrics,
    receipts: Option<mpsc::Sender<AckedEvent>>,
}

impl std::fmt::Debug for KafkaPublisher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KafkaPublisher")
            .field("topic", &self.topic)
            .finish_non_exhaustive()
    }
}

/// The producer settings chatlab relies on.
pub fn producer_config(bootstrap: &str, config: &KafkaConfig) -> ClientConfig {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", bootstrap)
        .set("client.id", "chatlab")
        // Every replica has it before the send counts as done, and retries
        // cannot duplicate or reorder within a partition.
        .set("acks", "all")
        .set("enable.idempotence", "true")
        // The bound on every wait for the broker, retries included.
        .set(
            "message.timeout.ms",
            config.send_timeout.as_millis().to_string(),
        )
        .set("linger.ms", config.linger.as_millis().to_string())
        // Come back quickly after an outage (librdkafka's default backs off
        // up to 10 s).
        .set("reconnect.backoff.max.ms", "1000");
    c
}

impl KafkaPublisher {
    /// Connects a producer to `bootstrap` and makes sure the topic exists.
    pub async fn connect(
        bootstrap: &str,
        config: &KafkaConfig,
        metrics: EventMetrics,
        create_topic: bool,
    ) -> Result<Self, KafkaSetupError> {
        let client_config = producer_config(bootstrap, config);
        let producer: FutureProducer = client_config.create()?;
        if create_topic {
            ensure_topic(bootstrap, &config.topic, config.partitions).await?;
        }
        wait_for_leaders(&producer, &config.topic, Duration::from_secs(15)).await;
        Ok(Self {
            slot: ProducerSlot::new(client_config, producer, metrics.producer_rebuilds.clone()),
            topic: config.topic.clone(),
            metrics,
            receipts: None,
        })
    }

    /// Hands every acknowledged event, with the partition and offset of its
    /// delivery report, to `receipts` (the receipt ledger). The hand-over
    /// never waits: when the channel is full the receipt is dropped and
    /// counted (`chatlab_event_receipts_dropped_total`).
    pub fn with_receipts(mut self, receipts: mpsc::Sender<AckedEvent>) -> Self {
        self.receipts = Some(receipts);
        self
    }

    /// Counts and keeps the receipt of an acknowledged event.
    fn acknowledged(&self, event: &Event, receipt: Receipt) {
        if let Some(tx) = &self.receipts
            && tx.try_send(AckedEvent::of(event, receipt)).is_err()
        {
            self.metrics.receipts_dropped.inc();
        }
    }

    /// Sends whatever is still queued, waiting up to `timeout` (shutdown).
    pub fn flush(&self, timeout: std::time::Duration) {
        if let Err(e) = self.slot.get().producer.flush(Timeout::After(timeout)) {
            warn!(error = %e, "events still queued at shutdown were not delivered");
        }
    }

    /// Hands the record to the current producer; answers the producer's
    /// generation with the delivery future. A refusal by a dead producer
    /// replaces it.
    fn enqueue_record(
        &self,
        event: &Event,
        mode: PublishMode,
    ) -> Result<(Generation, DeliveryFuture), PublishError> {
        let key = event.key();
        let payload = event
            .to_json()
            .map_err(|e| PublishError(format!("the event does not serialise: {e}")))?;
        let event_id = event.event_id.to_string();
        let mut headers = OwnedHeaders::new()
            .insert(Header {
                key: "event_type",
                value: Some(event.event_type()),
            })
            .insert(Header {
                key: "event_id",
                value: Some(event_id.as_str()),
            });
        for (key, value) in trace_headers(event, mode) {
            headers = headers.insert(Header {
                key,
                value: Some(value.as_str()),
            });
        }
        let record = FutureRecord::to(&self.topic)
            .key(&key)
            .payload(&payload)
            .headers(headers);
        let generation = self.slot.get();
        match generation.producer.send_result(record) {
            Ok(delivery) => Ok((generation, delivery)),
            Err((e, _)) => {
                self.slot.replace_if_dead(&generation, Some(&e));
                Err(PublishError(format!(
                    "the producer refused the record: {e}"
                )))
            }
        }
    }

    /// The receipt of a delivery report, or why there is none; a failure
    /// that left the producer dead replaces it.
    fn settle<Canceled>(
        &self,
        generation: &Generation,
        report: Result<OwnedDeliveryResult, Canceled>,
    ) -> Result<Receipt, PublishError> {
        match report {
            Ok(Ok(delivery)) => Ok(Receipt {
                partition: delivery.partition,
                offset: delivery.offset,
            }),
            Ok(Err((e, _))) => {
                self.slot.replace_if_dead(generation, Some(&e));
                Err(PublishError(format!("not acknowledged: {e}")))
            }
            Err(_) => {
                self.slot.replace_if_dead(generation, None);
                Err(PublishError("the producer was closed".into()))
            }
        }
    }

    fn label(mode: PublishMode) -> ModeLabel {
        ModeLabel {
            publish_mode: mode.as_str(),
        }
    }

    /// The span of one send, named after OpenTelemetry's messaging
    /// conventions; partition and offset are recorded on success.
    fn send_span(&self, event: &Event, mode: PublishMode) -> tracing::Span {
        let span = tracing::debug_span!(
            "kafka send",
            otel.name = Empty,
            otel.kind = "producer",
            otel.status_code = Empty,
            messaging.system = "kafka",
            messaging.operation.type = "send",
            messaging.operation.name = "send",
            messaging.destination.name = %self.topic,
            messaging.destination.partition.id = Empty,
            messaging.kafka.offset = Empty,
            messaging.message.id = Empty,
            chatlab.publish_mode = mode.as_str(),
            error.type = Empty,
        );
        if !span.is_disabled() {
            span.record("otel.name", format!("send {}", self.topic));
            span.record("messaging.message.id", event.event_id.to_string());
        }
        span
    }
}

/// Records a send's outcome on its span.
fn settled(span: &tracing::Span, outcome: &Result<Receipt, PublishError>) {
    if span.is_disabled() {
        return;
    }
    match outcome {
        Ok(receipt) => {
            span.record(
                "messaging.destination.partition.id",
                receipt.partition.to_string(),
            );
            span.record("messaging.kafka.offset", receipt.offset);
        }
        Err(_) => {
            span.record("otel.status_code", "ERROR");
            span.record("error.type", "not_acknowledged");
        }
    }
}

/// The record's W3C trace headers: the send span's own context, so a
/// consumer continues the trace under it; for an outbox event, relayed
/// long after its request ended, the context stored with its row, so the
/// record still continues the request's trace.
fn trace_headers(event: &Event, mode: PublishMode) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    match (&event.trace_parent, mode) {
        (Some(stored), PublishMode::Outbox) => {
            chatlab_telemetry::inject_traceparent(stored, |k, v| out.push((k, v)));
        }
        _ => chatlab_telemetry::inject_current(|k, v| out.push((k, v))),
    }
    out
}

#[async_trait]
impl EventPublisher for KafkaPublisher {
    async fn publish(&self, event: &Event, mode: PublishMode) -> Result<Receipt, PublishError> {
        let label = Self::label(mode);
        let started = Instant::now();
        let span = self.send_span(event, mode);
        let outcome = async {
            match self.enqueue_record(event, mode) {
                Ok((generation, delivery)) => self.settle(&generation, delivery.await),
                Err(e) => Err(e),
            }
        }
        .instrument(span.clone())
        .await;
        settled(&span, &outcome);
        self.metrics.record(&label, started, outcome.is_ok());
        if let Ok(receipt) = outcome {
            self.acknowledged(event, receipt);
        }
        outcome
    }

    fn enqueue(&self, event: &Event, mode: PublishMode) -> Result<(), PublishError> {
        let label = Self::label(mode);
        // The span lasts until the broker answers, after the request.
        let span = self.send_span(event, mode);
        let (generation, delivery) = match span.in_scope(|| self.enqueue_record(event, mode)) {
            Ok(d) => d,
            Err(e) => {
                settled(&span, &Err(e.clone()));
                self.metrics.failed.get_or_create(&label).inc();
                return Err(e);
            }
        };
        // Nobody waits for the outcome: it is only counted. This is the
        // seed's behaviour, and why a rollback after this point leaves a
        // phantom event and a crash before delivery loses one.
        let this = self.clone();
        let event = event.clone();
        let started = Instant::now();
        let sent = span.clone();
        tokio::spawn(async move {
            let outcome = this.settle(&generation, delivery.await);
            settled(&sent, &outcome);
            this.metrics.record(&label, started, outcome.is_ok());
            match outcome {
                Ok(receipt) => this.acknowledged(&event, receipt),
                Err(e) => {
                    warn!(event_id = %event.event_id, error = %e, "enqueued event was not delivered: lost")
                }
            }
        }.instrument(span));
        Ok(())
    }
}

/// Waits until the topic's metadata names a leader for every partition: a
/// broker may acknowledge CreateTopics before its partitions can take
/// writes, and the first events would then spend their delivery timeout
/// retrying. Gives up quietly after `timeout` (the producer retries anyway).
async fn wait_for_leaders(producer: &FutureProducer, topic: &str, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        let (p, t) = (producer.clone(), topic.to_owned());
        // fetch_metadata blocks; keep it off the async threads.
        let metadata = tokio::task::spawn_blocking(move || {
            p.client().fetch_metadata(Some(&t), Duration::from_secs(2))
        })
        .await;
        let ready = metadata.ok().and_then(Result::ok).is_some_and(|m| {
            m.topics().iter().any(|t| {
                t.name() == topic
                    && t.error().is_none()
                    && !t.partitions().is_empty()
                    && t.partitions()
                        .iter()
                        .all(|p| p.leader() >= 0 && p.error().is_none())
            })
        });
        if ready {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    warn!(
        topic,
        "the topic's partitions have no leader yet; sending anyway"
    );
}

/// Creates the topic unless it exists.
pub async fn ensure_topic(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
) -> Result<(), KafkaSetupError> {
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()?;
    let new_topic = NewTopic::new(topic, partitions, TopicReplication::Fixed(1));
    let results = admin
        .create_topics([&new_topic], &AdminOptions::new())
        .await?;
    for result in results {
        match result {
            Ok(name) => info!(topic = %name, partitions, "topic created"),
            Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
            Err((name, code)) => {
                return Err(KafkaSetupError::Kafka(rdkafka::error::KafkaError::AdminOp(
                    code,
                )))
                .inspect_err(|_| warn!(topic = %name, ?code, "could not create topic"));
            }
        }
    }
    Ok(())
}
