//! Follows the event topic from its end, every partition: one instance's
//! live feed for the members connected to it.
//!
//! No consumer group: every instance reads every partition (instances share
//! nothing but the database and the broker), and nothing is committed, so a
//! restarted instance starts at the end again; what its clients missed
//! meanwhile is theirs to ask for. Records are parsed into events; one that
//! is not a chatlab event is counted and skipped.

use std::collections::HashMap;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use rdkafka::client::ClientContext;
use rdkafka::consumer::{Consumer, ConsumerContext, StreamConsumer};
use rdkafka::message::Message;
use rdkafka::statistics::Statistics;
use rdkafka::{ClientConfig, Offset, TopicPartitionList};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use chatlab_domain::Event;

use crate::KafkaSetupError;

/// How long the tail waits for the topic's metadata at startup.
const METADATA_TIMEOUT: Duration = Duration::from_secs(10);

/// How often librdkafka reports the tail's statistics (and so its lag).
const STATISTICS_EVERY: Duration = Duration::from_secs(5);

/// Label of the lag gauge: the partition.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PartitionLabel {
    /// The partition number.
    pub partition: String,
}

/// Records of the topic the tail has not read yet, per partition: the
/// partition's high watermark less the tail's position, as librdkafka last
/// reported them (every 5 s).
pub type TailLag = Family<PartitionLabel, Gauge>;

/// The tail consumer's context: turns librdkafka's statistics into the lag
/// gauges.
struct TailContext {
    topic: String,
    lag: TailLag,
}

impl ClientContext for TailContext {
    fn stats(&self, statistics: Statistics) {
        let Some(topic) = statistics.topics.get(&self.topic) else {
            return;
        };
        for (id, p) in &topic.partitions {
            // -1 is librdkafka's internal "unassigned" partition.
            if *id < 0 || p.hi_offset < 0 {
                continue;
            }
            // Before the first record reaches the tail its position is the
            // fetch position.
            let at = if p.app_offset >= 0 {
                p.app_offset
            } else {
                p.next_offset
            };
            if at < 0 {
                continue;
            }
            self.lag
                .get_or_create(&PartitionLabel {
                    partition: id.to_string(),
                })
                .set((p.hi_offset - at).max(0));
        }
    }
}

impl ConsumerContext for TailContext {}

/// One event as the tail read it.
#[derive(Debug, Clone)]
pub struct TailedEvent {
    /// The event.
    pub event: Event,
    /// Its partition.
    pub partition: i32,
    /// Its offset there.
    pub offset: i64,
}

/// What the tail hands on.
#[derive(Debug, Clone)]
pub enum Tailed {
    /// The tail is assigned: the offset it starts at in each partition.
    /// Comes first, once.
    Following(HashMap<i32, i64>),
    /// An event read.
    Event(TailedEvent),
}

/// Starts following `topic` at `bootstrap` from each partition's end at
/// the moment it is assigned, sending where it starts, then every event,
/// to `sink` (waiting when it is full) until `stop` is cancelled. A broker
/// that cannot be asked for the topic's partitions is asked again every
/// second (logged), so a server starts without its broker and delivers
/// once it is back.
///
/// `following` is told once the tail is assigned: every event written from
/// then on is read. `fetch_wait` bounds how long the broker may hold a fetch
/// that has nothing new (librdkafka's `fetch.wait.max.ms`): a broker that
/// answers only when it expires, as tansu does, delays each delivery by up
/// to that much. Its lag per partition goes to `lag`.
pub fn spawn(
    bootstrap: &str,
    topic: &str,
    fetch_wait: Duration,
    lag: TailLag,
    sink: mpsc::Sender<Tailed>,
    following: oneshot::Sender<()>,
    stop: CancellationToken,
) -> JoinHandle<()> {
    let (bootstrap, topic) = (bootstrap.to_owned(), topic.to_owned());
    tokio::spawn(async move {
        let mut following = Some(following);
        let consumer = loop {
            match assigned(&bootstrap, &topic, fetch_wait, lag.clone()).await {
                Ok((consumer, starts)) => {
                    if sink.send(Tailed::Following(starts)).await.is_err() {
                        return;
                    }
                    if let Some(tell) = following.take() {
                        let _ = tell.send(());
                    }
                    break consumer;
                }
                Err(e) => {
                    tracing::warn!(error = %e, topic, "live tail: cannot follow the topic yet; asking again in 1 s");
                    tokio::select! {
                        _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                        _ = stop.cancelled() => return,
                    }
                }
            }
        };
        loop {
            let received = tokio::select! {
                m = consumer.recv() => m,
                _ = stop.cancelled() => return,
            };
            let message = match received {
                Ok(m) => m,
                Err(e) => {
                    tracing::warn!(error = %e, "live tail: the broker answered an error");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    continue;
                }
            };
            let Some(event) = message.payload().and_then(|p| Event::from_json(p).ok()) else {
                tracing::debug!(
                    partition = message.partition(),
                    offset = message.offset(),
                    "live tail: a record that is not a chatlab event"
                );
                continue;
            };
            let tailed = TailedEvent {
                event,
                partition: message.partition(),
                offset: message.offset(),
            };
            if sink.send(Tailed::Event(tailed)).await.is_err() {
                return;
            }
        }
    })
}

/// A consumer assigned every partition of `topic` at its high watermark
/// of this moment (asked explicitly, so the position is fixed before the
/// tail says it follows, not at its first fetch).
async fn assigned(
    bootstrap: &str,
    topic: &str,
    fetch_wait: Duration,
    lag: TailLag,
) -> Result<(StreamConsumer<TailContext>, HashMap<i32, i64>), KafkaSetupError> {
    let consumer: StreamConsumer<TailContext> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("fetch.wait.max.ms", fetch_wait.as_millis().to_string())
        // Required by librdkafka; unique, so no two instances share one.
        .set("group.id", format!("chatlab-live-{}", uuid::Uuid::now_v7()))
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "false")
        .set("auto.offset.reset", "latest")
        .set("isolation.level", "read_uncommitted")
        // Back within a second of a broker's return, as the producer is
        // (librdkafka's default backs off up to 10 s, and every member's
        // feed waits that long).
        .set("reconnect.backoff.max.ms", "1000")
        .set(
            "statistics.interval.ms",
            STATISTICS_EVERY.as_millis().to_string(),
        )
        .create_with_context(TailContext {
            topic: topic.to_owned(),
            lag,
        })?;
    let topic_name = topic.to_owned();
    let (consumer, partitions) = tokio::task::spawn_blocking(move || {
        let metadata = consumer.fetch_metadata(Some(&topic_name), METADATA_TIMEOUT)?;
        let partitions: Vec<i32> = metadata
            .topics()
            .iter()
            .filter(|t| t.name() == topic_name)
            .flat_map(|t| t.partitions().iter().map(|p| p.id()))
            .collect();
        let mut ends = Vec::with_capacity(partitions.len());
        for p in partitions {
            let (_, high) = consumer.fetch_watermarks(&topic_name, p, METADATA_TIMEOUT)?;
            ends.push((p, high));
        }
        Ok::<_, KafkaSetupError>((consumer, ends))
    })
    .await
    .map_err(|e| KafkaSetupError::Broker(format!("live tail setup: {e}")))??;
    if partitions.is_empty() {
        return Err(KafkaSetupError::Broker(format!(
            "topic {topic} has no partitions to follow"
        )));
    }
    let mut assignment = TopicPartitionList::new();
    for (p, high) in &partitions {
        assignment.add_partition_offset(topic, *p, Offset::Offset(*high))?;
    }
    consumer.assign(&assignment)?;
    Ok((consumer, partitions.into_iter().collect()))
}
