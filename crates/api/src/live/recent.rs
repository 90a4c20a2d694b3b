//! The events this instance's tail read lately, kept in memory so that a
//! reconnecting client's catch-up is served without a consumer of its own.
//!
//! A reconnect storm (an instance died, a balancer cut its streams) brings
//! thousands of clients back at once, each with a cursor a few seconds
//! old. Were each catch-up a consumer reading the topic, the storm would
//! open as many connections to the broker as clients (1,026 seen for
//! 1,000 reconnections) and, at 18,000 streams, need more descriptors than
//! the process may hold. The tail has read every one of those events
//! already: kept here, with the JSON a frame carries, a catch-up is a copy
//! of a few pointers under the hub's lock.
//!
//! What is held is, per partition, every event from a first offset on to
//! where the tail is, as many as `LIVE_RECENT_EVENTS` in all, the oldest
//! dropped first; a new chat's event counts once more for every
//! [`IDS_PER_EVENT`] members it names, so a run of large chats cannot hold
//! more memory than that many ordinary events would. A cursor older than
//! what is held (or from before this instance followed the topic) is read
//! from the topic instead.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use chatlab_domain::Event;

use super::cursor::Cursor;

/// Member ids a held event may name for the room of one ordinary event
/// (32 ids are about the size of a `message.sent` with its text).
pub const IDS_PER_EVENT: usize = 32;

/// One event as read, with the JSON its frames carry.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// Its partition.
    pub partition: i32,
    /// Its offset there.
    pub offset: i64,
    /// The event.
    pub event: Arc<Event>,
    /// Its client JSON ([`Event::client_json`]), written once.
    pub data: Arc<str>,
}

/// The events of every partition from where each is held on.
#[derive(Debug, Default)]
pub struct Recent {
    /// Most events held.
    capacity: usize,
    /// Per partition, the first offset from which every event the tail
    /// read is held (records that are no chatlab event are not, but lie
    /// within), and the events, in offset order.
    partitions: HashMap<i32, Held>,
    /// The partition of each event held and its weight, oldest first:
    /// which to drop next.
    arrivals: VecDeque<(i32, usize)>,
    /// The weights held.
    weight: usize,
}

/// One partition's events.
#[derive(Debug)]
struct Held {
    from: i64,
    events: VecDeque<Recorded>,
}

impl Recent {
    /// Holds at most `capacity` events (0 holds none: every catch-up reads
    /// the topic).
    pub fn new(capacity: usize) -> Self {
        Self {
            capacity,
            ..Self::default()
        }
    }

    /// The tail follows `partition` from `offset`: what comes next there is
    /// held from it on (a partition already held keeps its first offset).
    pub fn follow(&mut self, partition: i32, offset: i64) {
        if self.capacity > 0 {
            self.partitions.entry(partition).or_insert(Held {
                from: offset,
                events: VecDeque::new(),
            });
        }
    }

    /// Keeps an event the tail read; drops the oldest past the capacity.
    pub fn push(&mut self, recorded: Recorded) {
        if self.capacity == 0 {
            return;
        }
        let partition = recorded.partition;
        let weight = 1 + recorded.event.joining().len() / IDS_PER_EVENT;
        self.partitions
            .entry(partition)
            .or_insert(Held {
                from: recorded.offset,
                events: VecDeque::new(),
            })
            .events
            .push_back(recorded);
        self.arrivals.push_back((partition, weight));
        self.weight += weight;
        while self.weight > self.capacity {
            let Some((oldest, weight)) = self.arrivals.pop_front() else {
                break;
            };
            self.weight -= weight;
            if let Some(held) = self.partitions.get_mut(&oldest)
                && let Some(gone) = held.events.pop_front()
            {
                held.from = gone.offset + 1;
            }
        }
    }

    /// The events between `from` and `to` (each partition `to` names, from
    /// `from`'s offset up to `to`'s), ordered by partition and offset;
    /// `None` when some of them are not held (older than what is kept, a
    /// partition not followed, or `from` ahead of `to`, which only the
    /// broker can judge).
    pub fn between(&self, from: &Cursor, to: &Cursor) -> Option<Vec<Recorded>> {
        let mut ranges: Vec<(i32, i64, i64)> = Vec::new();
        for (partition, end) in to.positions() {
            let start = from.get(partition)?;
            let held = self.partitions.get(&partition)?;
            if start > end || start < held.from {
                return None;
            }
            ranges.push((partition, start, end));
        }
        ranges.sort_unstable();
        let mut found = Vec::new();
        for (partition, start, end) in ranges {
            let Some(held) = self.partitions.get(&partition) else {
                continue;
            };
            let first = held.events.partition_point(|r| r.offset < start);
            let last = held.events.partition_point(|r| r.offset < end);
            found.extend(held.events.range(first..last).cloned());
        }
        Some(found)
    }

    /// Events held now.
    pub fn len(&self) -> usize {
        self.arrivals.len()
    }

    /// Whether none is held.
    pub fn is_empty(&self) -> bool {
        self.arrivals.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::live::test_events::message_in;
    use uuid::Uuid;

    fn at(partition: i32, offset: i64) -> Recorded {
        let event = message_in(Uuid::now_v7());
        let data = event.client_json().unwrap();
        Recorded {
            partition,
            offset,
            event: Arc::new(event),
            data: data.into(),
        }
    }

    fn offsets(found: &[Recorded]) -> Vec<(i32, i64)> {
        found.iter().map(|r| (r.partition, r.offset)).collect()
    }

    #[test]
    fn a_range_it_holds_is_given_in_topic_order() {
        let mut recent = Recent::new(10);
        recent.follow(0, 5);
        recent.follow(1, 2);
        for r in [at(0, 5), at(1, 2), at(0, 6), at(1, 3), at(0, 7)] {
            recent.push(r);
        }
        let from = Cursor::parse("0:6,1:2").unwrap();
        let to = Cursor::parse("0:8,1:3").unwrap();
        let found = recent.between(&from, &to).unwrap();
        assert_eq!(offsets(&found), vec![(0, 6), (0, 7), (1, 2)]);
        let nothing = recent.between(&to, &to).unwrap();
        assert!(nothing.is_empty(), "a cursor at the end misses nothing");
    }

    #[test]
    fn what_it_no_longer_holds_or_never_followed_is_not_given() {
        let mut recent = Recent::new(2);
        recent.follow(0, 5);
        for r in [at(0, 5), at(0, 6), at(0, 7)] {
            recent.push(r);
        }
        assert_eq!(recent.len(), 2);
        let to = Cursor::parse("0:8").unwrap();
        assert!(
            recent
                .between(&Cursor::parse("0:5").unwrap(), &to)
                .is_none()
        );
        let held = recent.between(&Cursor::parse("0:6").unwrap(), &to).unwrap();
        assert_eq!(offsets(&held), vec![(0, 6), (0, 7)]);
        assert!(
            recent
                .between(
                    &Cursor::parse("0:6,1:0").unwrap(),
                    &Cursor::parse("0:8,1:1").unwrap()
                )
                .is_none(),
            "partition 1 was never followed"
        );
        assert!(
            recent
                .between(&Cursor::parse("0:9").unwrap(), &to)
                .is_none(),
            "ahead of the tail: the broker judges"
        );
        assert!(
            recent
                .between(&Cursor::parse("1:0").unwrap(), &to)
                .is_none(),
            "the cursor does not name partition 0"
        );
    }

    #[test]
    fn a_large_new_chat_weighs_as_much_as_the_events_its_size_would() {
        let mut recent = Recent::new(10);
        recent.follow(0, 0);
        let members: Vec<Uuid> = (0..IDS_PER_EVENT * 5).map(|_| Uuid::now_v7()).collect();
        let big = crate::live::test_events::created(Uuid::now_v7(), &members);
        let data = big.client_json().unwrap();
        for offset in 0..5 {
            recent.push(at(0, offset));
        }
        recent.push(Recorded {
            partition: 0,
            offset: 5,
            event: Arc::new(big),
            data: data.into(),
        });
        // 5 events of 1 and one of 6: the oldest goes.
        assert_eq!(recent.len(), 5);
        let to = Cursor::parse("0:6").unwrap();
        assert!(
            recent
                .between(&Cursor::parse("0:0").unwrap(), &to)
                .is_none()
        );
        assert_eq!(
            offsets(&recent.between(&Cursor::parse("0:1").unwrap(), &to).unwrap()),
            vec![(0, 1), (0, 2), (0, 3), (0, 4), (0, 5)]
        );
    }

    #[test]
    fn a_capacity_of_zero_holds_nothing() {
        let mut recent = Recent::new(0);
        recent.follow(0, 0);
        recent.push(at(0, 0));
        assert!(recent.is_empty());
        let to = Cursor::parse("0:1").unwrap();
        assert!(
            recent
                .between(&Cursor::parse("0:0").unwrap(), &to)
                .is_none()
        );
    }
}
