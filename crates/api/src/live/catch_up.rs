//! What a reconnecting client missed: the events of its chats between its
//! `Last-Event-ID` and the moment its new connection registered, from the
//! events this instance holds in memory ([`super::recent`]) or, for a
//! cursor older than those, read from the topic by one of a few readers
//! ([`TopicSource::readers`]), so a storm of reconnections opens no more
//! consumers than that.
//!
//! The boundary with the live feed is exact because both speak in topic
//! offsets: the connection registers first and learns where the tail is
//! (`at`); the live feed gives it what comes after `at`, the catch-up what
//! lies between the client's cursor and `at`. Event ids are remembered
//! across the two, so a record the broker repeats is not given twice.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Semaphore;
use uuid::Uuid;

use chatlab_kafka::topic_range::{self, RangeError};

use super::cursor::Cursor;
use super::hub::{Frame, Hub};
use super::membership::{Membership, change_of};
use super::recent::Recorded;

/// How long a catch-up may read the topic.
const READ_TIMEOUT: Duration = Duration::from_secs(10);

/// Where the catch-up reads.
#[derive(Debug, Clone)]
pub struct TopicSource {
    /// The brokers.
    pub bootstrap: String,
    /// The event topic.
    pub topic: String,
    /// Most records one catch-up reads.
    pub limit: u64,
    /// Catch-ups reading the topic at once, each with a consumer of its
    /// own; the others wait for a turn.
    pub readers: Arc<Semaphore>,
}

/// Catch-ups that may read the topic at once.
pub const TOPIC_READERS: usize = 2;

/// Where a catch-up's events came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Served {
    /// The events this instance holds.
    Memory,
    /// The topic, by a reader.
    Topic,
}

impl Served {
    /// Its label on `/metrics`.
    pub fn label(self) -> &'static str {
        match self {
            Self::Memory => "memory",
            Self::Topic => "topic",
        }
    }
}

/// What a reconnecting client gets before the live feed.
#[derive(Debug)]
pub enum CatchUp {
    /// The events it missed, as frames in order, their ids, and where they
    /// came from.
    Frames(Vec<Frame>, Vec<Uuid>, Served),
    /// Its cursor cannot be caught up from the topic (too far behind, gone
    /// from the topic, past its end, of an earlier life of it, or the
    /// broker did not answer): it must reload what it shows through the
    /// REST API. The reason, for the client.
    Reset(String),
}

/// Reads what `user`, a member of `chats_now`, missed between `from` and
/// `to` (where the live feed starts): from `hub`'s recent events when it
/// holds them all, else from the topic.
pub async fn read(
    source: &TopicSource,
    hub: &Hub,
    user: Uuid,
    from: &Cursor,
    to: Option<&Cursor>,
    chats_now: &HashSet<Uuid>,
) -> CatchUp {
    let Some(to) = to else {
        return CatchUp::Reset(
            "this server does not follow the event topic yet; reload and reconnect".to_owned(),
        );
    };
    if from.life() != to.life() {
        return CatchUp::Reset(
            "Last-Event-ID is from an earlier life of the event topic, or another topic (an \
             embedded broker's topic starts again with every server start); reload and reconnect"
                .to_owned(),
        );
    }
    let (bootstrap, topic) = (source.bootstrap.clone(), source.topic.clone());
    let (from_p, to_p) = (from.positions(), to.positions());
    let limit = i64::try_from(source.limit).unwrap_or(i64::MAX);
    if let Some(p) = to_p.keys().find(|p| !from_p.contains_key(p)) {
        return CatchUp::Reset(format!(
            "Last-Event-ID does not name partition {p} of the topic; reload and reconnect"
        ));
    }
    if let Some(held) = hub.recent_between(from, to) {
        let frames = frames_for(user, &held, chats_now, from);
        let ids = frames.iter().map(|f| f.event_id).collect();
        return CatchUp::Frames(frames, ids, Served::Memory);
    }
    // Never closed, so the permit always comes.
    let _turn = source.readers.acquire().await;
    let read = tokio::task::spawn_blocking(move || {
        topic_range::read_range(&bootstrap, &topic, &from_p, &to_p, limit, READ_TIMEOUT)
    })
    .await;
    match read {
        Ok(Ok(events)) => {
            let held: Vec<Recorded> = events
                .into_iter()
                .filter_map(|tailed| match tailed.event.client_json() {
                    Ok(data) => Some(Recorded {
                        partition: tailed.partition,
                        offset: tailed.offset,
                        event: Arc::new(tailed.event),
                        data: data.into(),
                    }),
                    Err(e) => {
                        tracing::error!(event_id = %tailed.event.event_id, error = %e,
                            "live catch-up: the event's frame could not be written; left out");
                        None
                    }
                })
                .collect();
            let frames = frames_for(user, &held, chats_now, from);
            let ids = frames.iter().map(|f| f.event_id).collect();
            CatchUp::Frames(frames, ids, Served::Topic)
        }
        Ok(Err(e @ (RangeError::Gone { .. } | RangeError::TooLong { .. }))) => {
            CatchUp::Reset(format!(
                "the events after Last-Event-ID cannot be replayed ({e}); reload and reconnect"
            ))
        }
        Ok(Err(e @ RangeError::PastEnd { .. })) => CatchUp::Reset(format!(
            "Last-Event-ID is ahead of the event topic ({e}): it was not sent for the topic as \
             it is now; reload and reconnect"
        )),
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "live catch-up: the topic could not be read");
            CatchUp::Reset(
                "the event topic could not be read to catch up; reload and reconnect".to_owned(),
            )
        }
        Err(e) => {
            tracing::warn!(error = %e, "live catch-up: the read task failed");
            CatchUp::Reset("the catch-up failed; reload and reconnect".to_owned())
        }
    }
}

/// The frames `user` gets out of `events` (ordered by partition and
/// offset): those of the chats it was a member of at each event, where who
/// was a member when the range started follows from who is one now
/// (`chats_now`) and the membership events in the range
/// ([`Membership`]); an event for one user (a read marker's move) only if
/// it is `user`'s. Each frame's id is the cursor after it.
pub fn frames_for(
    user: Uuid,
    events: &[Recorded],
    chats_now: &HashSet<Uuid>,
    from: &Cursor,
) -> Vec<Frame> {
    let changes = events
        .iter()
        .filter_map(|r| change_of(user, &r.event).map(|joined| (r.event.chat_id(), joined)));
    let mut membership = Membership::before(chats_now.iter().copied(), changes);
    let mut cursor = from.clone();
    let mut frames = Vec::new();
    for r in events {
        cursor.advance(r.partition, r.offset + 1);
        let change = change_of(user, &r.event);
        let addressed = r.event.only_for().is_none_or(|u| u == user);
        if membership.step(r.event.chat_id(), change) && addressed {
            frames.push(Frame::at(&r.event, &r.data, &cursor));
        }
    }
    frames
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::live::test_events::message_in as message;
    use chatlab_domain::{AddMembers, ChatId, Event, MessageId, PublishMode, RemoveMember, UserId};

    fn at(event: Event, offset: i64) -> Recorded {
        let data = event.client_json().unwrap();
        Recorded {
            event: Arc::new(event),
            data: data.into(),
            partition: 0,
            offset,
        }
    }

    fn removal(chat: Uuid, user: Uuid) -> Event {
        Event::member_removed(
            &RemoveMember::new(
                ChatId::from_uuid(chat),
                UserId::from_uuid(user),
                UserId::from_uuid(user),
            ),
            PublishMode::Outbox,
        )
    }

    fn read(chat: Uuid, reader: Uuid) -> Event {
        Event::read_marker_moved(chat, reader, Uuid::now_v7(), 0, PublishMode::Outbox)
    }

    fn addition(chat: Uuid, owner: Uuid, user: Uuid) -> Event {
        Event::members_added(
            &AddMembers {
                chat_id: ChatId::from_uuid(chat),
                actor_id: UserId::from_uuid(owner),
                user_ids: vec![UserId::from_uuid(user)],
                message_id: MessageId::generate(),
                created_at: chrono::Utc::now(),
            },
            PublishMode::Outbox,
        )
    }

    #[test]
    fn membership_in_the_range_decides_what_is_given() {
        let (bob, kept, left, joined, foreign) = (
            Uuid::now_v7(),
            Uuid::now_v7(),
            Uuid::now_v7(),
            Uuid::now_v7(),
            Uuid::now_v7(),
        );
        let events = vec![
            at(message(kept), 5),
            at(message(left), 6),
            at(removal(left, bob), 7),
            at(message(left), 8),
            at(message(joined), 9),
            at(addition(joined, Uuid::now_v7(), bob), 10),
            at(message(joined), 11),
            at(message(foreign), 12),
            // Bob's own marker move is his; another member's is not.
            at(read(kept, bob), 13),
            at(read(kept, Uuid::now_v7()), 14),
        ];
        // Now bob is in `kept` and `joined`, no longer in `left`.
        let now: HashSet<Uuid> = [kept, joined].into_iter().collect();
        let frames = frames_for(bob, &events, &now, &Cursor::parse("0:5").unwrap());
        let given: Vec<Uuid> = frames.iter().map(|f| f.event_id).collect();
        let expected: Vec<Uuid> = [0, 1, 2, 5, 6, 8]
            .iter()
            .map(|&i| events[i].event.event_id)
            .collect();
        assert_eq!(given, expected);
        let last = std::str::from_utf8(&frames[5].sse).unwrap();
        assert!(last.starts_with("id: 0:14\n"), "{last}");
    }
}
