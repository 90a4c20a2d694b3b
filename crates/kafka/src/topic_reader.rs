//! Reads a whole topic from the beginning up to its current end: the
//! audit's view of what was published, and the tests' too.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::{ClientConfig, Offset, TopicPartitionList};

use chatlab_domain::Event;

use crate::KafkaSetupError;

/// One record of the topic.
#[derive(Debug, Clone)]
pub struct TopicRecord {
    /// Its partition.
    pub partition: i32,
    /// Its offset there.
    pub offset: i64,
    /// Its key, as text.
    pub key: Option<String>,
    /// The event, or why the payload is not one.
    pub event: Result<Event, String>,
}

/// Every record of `topic` present when the call starts, ordered by
/// partition and offset. Blocking: call it from `spawn_blocking`.
pub fn read_all(
    bootstrap: &str,
    topic: &str,
    timeout: Duration,
) -> Result<Vec<TopicRecord>, KafkaSetupError> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set(
            "group.id",
            format!("chatlab-audit-{}", uuid::Uuid::now_v7()),
        )
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "false")
        .create()?;
    let deadline = Instant::now() + timeout;
    let metadata = consumer.fetch_metadata(Some(topic), timeout)?;
    let partitions: Vec<i32> = metadata
        .topics()
        .iter()
        .filter(|t| t.name() == topic)
        .flat_map(|t| t.partitions().iter().map(|p| p.id()))
        .collect();
    // Read every partition from its low watermark to its high watermark;
    // then ask for the watermarks again and read on if they moved (a broker
    // may report a high watermark that lags a record it already acked).
    let mut positions: HashMap<i32, i64> = HashMap::new();
    let mut records = Vec::new();
    // Three passes at most: a topic still being written to is read up to
    // where it stood on the third look, not chased forever.
    for _pass in 0..3 {
        let mut ends: HashMap<i32, i64> = HashMap::new();
        let mut assignment = TopicPartitionList::new();
        for &p in &partitions {
            let (low, high) = consumer.fetch_watermarks(topic, p, timeout)?;
            let from = positions.get(&p).copied().unwrap_or(low).max(low);
            if high > from {
                ends.insert(p, high);
                assignment.add_partition_offset(topic, p, Offset::Offset(from))?;
            }
        }
        if ends.is_empty() {
            break;
        }
        consumer.assign(&assignment)?;
        while !ends.is_empty() && Instant::now() < deadline {
            let Some(message) = consumer.poll(Duration::from_millis(200)) else {
                continue;
            };
            let message = message?;
            let partition = message.partition();
            let offset = message.offset();
            if positions.get(&partition).is_some_and(|&next| offset < next) {
                continue;
            }
            positions.insert(partition, offset + 1);
            records.push(TopicRecord {
                partition,
                offset,
                key: message
                    .key()
                    .map(|k| String::from_utf8_lossy(k).into_owned()),
                event: message
                    .payload()
                    .ok_or_else(|| "empty payload".to_owned())
                    .and_then(|p| Event::from_json(p).map_err(|e| e.to_string())),
            });
            if ends.get(&partition).is_some_and(|&end| offset + 1 >= end) {
                ends.remove(&partition);
            }
        }
        if !ends.is_empty() {
            return Err(KafkaSetupError::Broker(format!(
                "timed out reading {topic}: partitions {:?} not read to their end",
                ends.keys().collect::<Vec<_>>()
            )));
        }
    }
    records.sort_by_key(|r| (r.partition, r.offset));
    Ok(records)
}
