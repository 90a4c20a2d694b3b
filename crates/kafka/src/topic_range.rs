//! Reads the events between two positions of the topic: what a live
//! client missed between the last event it received and the moment it
//! reconnected.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::{Offset, TopicPartitionList};

use chatlab_domain::Event;

use crate::live_tail::TailedEvent;

/// How long the read waits for a record it has not read yet (tansu's
/// SQLite engine can take seconds to answer a fetch); a broker that serves
/// nothing new for this long fails the read rather than leave a gap.
const IDLE: Duration = Duration::from_secs(5);

/// Why a range could not be read.
#[derive(Debug, thiserror::Error)]
pub enum RangeError {
    /// The topic no longer holds the start of the range (retention deleted
    /// it).
    #[error("partition {partition} starts at offset {low} now; offset {from} is gone")]
    Gone {
        /// The partition.
        partition: i32,
        /// Where the range starts.
        from: i64,
        /// Where the partition starts now.
        low: i64,
    },
    /// The range starts past the partition's end: no reader of this topic
    /// was ever there (the topic started over, or the position was made
    /// up).
    #[error("offset {from} is past the end of partition {partition}, which ends at {end}")]
    PastEnd {
        /// The partition.
        partition: i32,
        /// Where the range starts.
        from: i64,
        /// The partition's high watermark.
        end: i64,
    },
    /// The range holds more records than the caller allows.
    #[error("{records} records to read, more than {limit}")]
    TooLong {
        /// Records in the range.
        records: i64,
        /// The bound.
        limit: i64,
    },
    /// The broker did not answer in time, or refused.
    #[error("broker: {0}")]
    Broker(String),
}

impl From<rdkafka::error::KafkaError> for RangeError {
    fn from(e: rdkafka::error::KafkaError) -> Self {
        Self::Broker(e.to_string())
    }
}

/// The events of `topic` at positions `from[p] <= offset < to[p]` of each
/// partition `p` named in both (next-offset form: `to` is where a reader
/// that read up to there would continue), ordered by partition and offset.
/// A partition that `from` does not name is not read. A partition where
/// `from` is ahead of `to` has nothing to read, unless `from` is past the
/// partition's end at the broker: then no reader was ever there, and the
/// read fails with [`RangeError::PastEnd`]. At most `limit` records in
/// all, within `timeout`; a record the broker counts and does not serve
/// fails the read. Blocking: call it from `spawn_blocking`.
pub fn read_range(
    bootstrap: &str,
    topic: &str,
    from: &HashMap<i32, i64>,
    to: &HashMap<i32, i64>,
    limit: i64,
    timeout: Duration,
) -> Result<Vec<TailedEvent>, RangeError> {
    let named: Vec<(i32, i64, i64)> = from
        .iter()
        .filter_map(|(p, &start)| to.get(p).map(|&end| (*p, start, end)))
        .collect();
    let ahead: Vec<(i32, i64)> = named
        .iter()
        .filter(|(_, start, end)| start > end)
        .map(|&(p, start, _)| (p, start))
        .collect();
    let todo: HashMap<i32, (i64, i64)> = named
        .iter()
        .filter(|(_, start, end)| start < end)
        .map(|&(p, start, end)| (p, (start, end)))
        .collect();
    if todo.is_empty() && ahead.is_empty() {
        return Ok(Vec::new());
    }
    let records: i64 = todo.values().map(|(start, end)| end - start).sum();
    if records > limit {
        return Err(RangeError::TooLong { records, limit });
    }
    let consumer: BaseConsumer =
        crate::topic_reader::reader_config(bootstrap, "chatlab-catch-up").create()?;
    let deadline = Instant::now() + timeout;
    for (p, start) in ahead {
        let (_, high) = consumer.fetch_watermarks(topic, p, timeout)?;
        if start > high {
            return Err(RangeError::PastEnd {
                partition: p,
                from: start,
                end: high,
            });
        }
    }
    if todo.is_empty() {
        return Ok(Vec::new());
    }
    let mut assignment = TopicPartitionList::new();
    for (&p, &(start, _)) in &todo {
        let (low, _) = consumer.fetch_watermarks(topic, p, timeout)?;
        if start < low {
            return Err(RangeError::Gone {
                partition: p,
                from: start,
                low,
            });
        }
        assignment.add_partition_offset(topic, p, Offset::Offset(start))?;
    }
    consumer.assign(&assignment)?;
    let mut open: HashMap<i32, i64> = todo.iter().map(|(p, (_, end))| (*p, *end)).collect();
    let mut events = Vec::new();
    let mut last_new = Instant::now();
    while !open.is_empty() {
        if Instant::now() >= deadline || last_new.elapsed() >= IDLE {
            return Err(RangeError::Broker(format!(
                "timed out reading {topic}: partitions {:?} not read to their position",
                open.keys().collect::<Vec<_>>()
            )));
        }
        let Some(message) = consumer.poll(Duration::from_millis(100)) else {
            continue;
        };
        let message = message?;
        let (partition, offset) = (message.partition(), message.offset());
        let Some(&end) = open.get(&partition) else {
            continue;
        };
        last_new = Instant::now();
        if offset < end
            && let Some(event) = message.payload().and_then(|p| Event::from_json(p).ok())
        {
            events.push(TailedEvent {
                event,
                partition,
                offset,
            });
        }
        if offset + 1 >= end {
            open.remove(&partition);
        }
    }
    events.sort_by_key(|e| (e.partition, e.offset));
    Ok(events)
}
