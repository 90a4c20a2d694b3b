//! Reads a whole topic from the beginning up to its current end: the
//! audit's view of what was published, and the tests' too.

use std::collections::{BTreeSet, HashMap};
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{BorrowedMessage, Headers as _, Message};
use rdkafka::{ClientConfig, Offset, TopicPartitionList};

use chatlab_domain::audit::PartitionEnds;
use chatlab_domain::{Event, Receipt};

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
    /// Its W3C `traceparent` header: the trace of the request that wrote
    /// it, when that request was traced.
    pub traceparent: Option<String>,
}

impl TopicRecord {
    /// Where it is, in the form of a delivery receipt.
    pub fn position(&self) -> Receipt {
        Receipt {
            partition: self.partition,
            offset: self.offset,
        }
    }
}

/// What one read of a topic found.
#[derive(Debug, Clone, Default)]
pub struct TopicSnapshot {
    /// Every record read, ordered by partition and offset, each once.
    pub records: Vec<TopicRecord>,
    /// Each partition's watermarks at the last look: records live in
    /// `[low, high)`.
    pub ends: Vec<PartitionEnds>,
    /// Offsets inside the watermarks that no pass could read (the broker
    /// served a gap), by partition. Empty on a broker that serves every
    /// offset it counts.
    pub gaps: Vec<(i32, i64)>,
}

/// Passes over the topic at most: each reads from the first offset not yet
/// read (a gap, or the previous end) to the high watermark of that moment.
const PASSES: usize = 5;

/// How long a pass waits for a record it has not read yet (tansu's SQLite
/// engine can take seconds to answer a fetch of a partition it holds many
/// records of).
const IDLE: Duration = Duration::from_secs(5);

/// Every record of `topic` present when the call starts, ordered by
/// partition and offset. Blocking: call it from `spawn_blocking`.
///
/// A broker may count an offset in its high watermark before it serves the
/// record there (tansu advances the watermark, then stores the batch), and
/// a fetch then returns the records after it and not it. So the reader
/// keeps every offset it read, and each further pass starts at the first
/// offset of `[low, high)` it is missing, not after the last one it got;
/// what is still missing after the last pass is reported as a gap.
pub fn read_all(
    bootstrap: &str,
    topic: &str,
    timeout: Duration,
) -> Result<TopicSnapshot, KafkaSetupError> {
    let consumer: BaseConsumer = reader_config(bootstrap, "chatlab-audit").create()?;
    let deadline = Instant::now() + timeout;
    let metadata = consumer.fetch_metadata(Some(topic), timeout)?;
    let partitions: Vec<i32> = metadata
        .topics()
        .iter()
        .filter(|t| t.name() == topic)
        .flat_map(|t| t.partitions().iter().map(|p| p.id()))
        .collect();
    let mut read: HashMap<i32, BTreeSet<i64>> = HashMap::new();
    let mut ends: HashMap<i32, (i64, i64)> = HashMap::new();
    let mut records = Vec::new();
    for _pass in 0..PASSES {
        // Where each partition's pass ends.
        let mut todo: HashMap<i32, i64> = HashMap::new();
        let mut assignment = TopicPartitionList::new();
        for &p in &partitions {
            let (low, high) = consumer.fetch_watermarks(topic, p, timeout)?;
            ends.insert(p, (low, high));
            let have = read.entry(p).or_default();
            if let Some(from) = first_missing(have, low, high) {
                todo.insert(p, high);
                assignment.add_partition_offset(topic, p, Offset::Offset(from))?;
            }
        }
        if todo.is_empty() {
            break;
        }
        consumer.assign(&assignment)?;
        // A pass ends when every partition is read to its end, or when
        // nothing new arrived for `IDLE` (the broker does not serve an
        // offset it counts: the next pass asks again, and what is still
        // missing after the last one is a gap).
        let mut last_new = Instant::now();
        while !todo.is_empty() && Instant::now() < deadline && last_new.elapsed() < IDLE {
            let Some(message) = consumer.poll(Duration::from_millis(100)) else {
                continue;
            };
            let message = message?;
            let partition = message.partition();
            let offset = message.offset();
            let have = read.entry(partition).or_default();
            if have.insert(offset) {
                last_new = Instant::now();
                records.push(record_of(&message));
            }
            if todo.get(&partition).is_some_and(|&end| offset + 1 >= end) {
                todo.remove(&partition);
            }
        }
        if Instant::now() >= deadline {
            return Err(KafkaSetupError::Broker(format!(
                "timed out reading {topic}: partitions {:?} not read to their end",
                todo.keys().collect::<Vec<_>>()
            )));
        }
    }
    Ok(snapshot(records, &read, &ends))
}

/// The record `message` holds; a payload that is not an event is kept as
/// the reason it is not.
fn record_of(message: &BorrowedMessage<'_>) -> TopicRecord {
    let traceparent = message.headers().and_then(|headers| {
        headers
            .iter()
            .find(|h| h.key == "traceparent")
            .and_then(|h| h.value)
            .map(|v| String::from_utf8_lossy(v).into_owned())
    });
    TopicRecord {
        partition: message.partition(),
        offset: message.offset(),
        traceparent,
        key: message
            .key()
            .map(|k| String::from_utf8_lossy(k).into_owned()),
        event: message
            .payload()
            .ok_or_else(|| "empty payload".to_owned())
            .and_then(|p| Event::from_json(p).map_err(|e| e.to_string())),
    }
}

/// The snapshot of what was read: records in order, each partition's ends,
/// and every offset within them that was never served.
fn snapshot(
    mut records: Vec<TopicRecord>,
    read: &HashMap<i32, BTreeSet<i64>>,
    ends: &HashMap<i32, (i64, i64)>,
) -> TopicSnapshot {
    records.sort_by_key(|r| (r.partition, r.offset));
    let mut gaps = Vec::new();
    let mut snapshot_ends = Vec::new();
    for (&partition, &(low, high)) in ends {
        snapshot_ends.push(PartitionEnds {
            partition,
            low,
            high,
        });
        let have = read.get(&partition);
        gaps.extend(
            (low..high)
                .filter(|o| !have.is_some_and(|h| h.contains(o)))
                .map(|o| (partition, o)),
        );
    }
    snapshot_ends.sort_by_key(|e| e.partition);
    gaps.sort_unstable();
    TopicSnapshot {
        records,
        ends: snapshot_ends,
        gaps,
    }
}

/// A consumer that reads assigned partitions from given offsets: a group of
/// its own named after `purpose` (librdkafka wants one; nothing is
/// committed), failing on an offset the broker no longer has rather than
/// jumping to the end, and reading what the broker holds (nothing chatlab
/// writes is transactional).
pub(crate) fn reader_config(bootstrap: &str, purpose: &str) -> ClientConfig {
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", bootstrap)
        .set("group.id", format!("{purpose}-{}", uuid::Uuid::now_v7()))
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "false")
        .set("auto.offset.reset", "error")
        .set("isolation.level", "read_uncommitted");
    config
}

/// The first offset of `[low, high)` not in `have`.
fn first_missing(have: &BTreeSet<i64>, low: i64, high: i64) -> Option<i64> {
    let mut next = low;
    for &o in have.range(low..high) {
        if o != next {
            return Some(next);
        }
        next = o + 1;
    }
    (next < high).then_some(next)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_next_pass_starts_at_the_first_gap() {
        let have: BTreeSet<i64> = [0, 1, 3, 4].into_iter().collect();
        assert_eq!(first_missing(&have, 0, 5), Some(2));
        assert_eq!(first_missing(&have, 0, 2), None);
        assert_eq!(first_missing(&have, 3, 7), Some(5));
        assert_eq!(first_missing(&BTreeSet::new(), 4, 4), None);
        assert_eq!(first_missing(&BTreeSet::new(), 4, 6), Some(4));
    }
}
