//! The connections of one instance and which chats each receives.
//!
//! A connection belongs to a user and holds the set of chats it receives:
//! loaded when it opens, then kept by the membership events themselves (a
//! user added starts receiving the chat with the event that adds them, a
//! user removed receives that event and nothing after it). Delivery never
//! waits: each connection has a bounded buffer, and a connection whose
//! buffer is full is dropped (its stream then ends with an `overflow`
//! frame naming the last event it got), so no connection waits for
//! another.
//!
//! A connection registers before it reads its chats from the database,
//! and the events fanned out meanwhile are held for it: once it knows its
//! chats it gets those of them that are its own, as if it had known them
//! from the start ([`Membership`]), so an event of one of its chats that
//! the tail reads while it loads them is not lost.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::mpsc;
use uuid::Uuid;

use chatlab_domain::{Event, EventPayload};

use super::budget::{Refusal, StreamBudget};
use super::cursor::Cursor;
pub use super::frame::Frame;
use super::membership::{Membership, change_of};
use super::recent::{Recent, Recorded};

/// Event ids a connection remembers to drop duplicates (a broker may
/// deliver a record twice; an outbox relay may publish one twice).
const REMEMBERED_IDS: usize = 1024;

/// Events held for a connection while it reads its chats; one that sees
/// more (the database was that slow under that many events) is dropped as
/// if its buffer had overflowed.
const HELD_WHILE_LOADING: usize = 16_384;

/// What the hub tells a connection's stream besides frames.
#[derive(Debug, Default)]
pub struct ConnectionState {
    /// Its buffer overflowed and the hub let it go.
    pub overflowed: AtomicBool,
}

/// An event fanned out while a connection read its chats.
struct Held {
    chat: Uuid,
    /// Whether it adds (`true`) or removes the connection's user.
    change: Option<bool>,
    /// Its frame; `None` when the connection's floor says it was given on
    /// an earlier connection.
    frame: Option<Frame>,
}

struct Connection {
    user: Uuid,
    chats: HashSet<Uuid>,
    /// While it reads its chats: the events fanned out meanwhile.
    loading: Option<Vec<Held>>,
    /// A resumed connection's cursor while this instance's tail is behind
    /// it: events before it were given on an earlier connection.
    floor: Option<Cursor>,
    frames: mpsc::Sender<Frame>,
    state: Arc<ConnectionState>,
    seen: HashSet<Uuid>,
    seen_order: VecDeque<Uuid>,
}

impl Connection {
    /// Puts `frame` in its buffer unless it had that event already,
    /// counting it in `done`; `false` if the buffer is full.
    fn hand_over(&mut self, frame: Frame, done: &mut FanOut) -> bool {
        if !self.first_sight(frame.event_id) {
            done.duplicates += 1;
            return true;
        }
        match self.frames.try_send(frame) {
            Ok(()) => done.delivered += 1,
            Err(mpsc::error::TrySendError::Full(_)) => return false,
            // The stream ended; its guard unregisters it.
            Err(mpsc::error::TrySendError::Closed(_)) => {}
        }
        true
    }

    /// Whether the event is new to this connection; remembers it.
    fn first_sight(&mut self, id: Uuid) -> bool {
        if !self.seen.insert(id) {
            return false;
        }
        self.seen_order.push_back(id);
        if self.seen_order.len() > REMEMBERED_IDS
            && let Some(old) = self.seen_order.pop_front()
        {
            self.seen.remove(&old);
        }
        true
    }
}

#[derive(Default)]
struct State {
    /// Where the tail is: every event before it has been fanned out. Empty
    /// until the tail follows the topic.
    position: Cursor,
    next_id: u64,
    connections: HashMap<u64, Connection>,
    /// Connections reading their chats.
    loading: HashSet<u64>,
    by_chat: HashMap<Uuid, HashSet<u64>>,
    by_user: HashMap<Uuid, HashSet<u64>>,
    /// The events read lately, for catch-ups.
    recent: Recent,
}

/// What one fan-out did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct FanOut {
    /// Frames handed to connections.
    pub delivered: u64,
    /// Connections dropped because their buffer was full.
    pub dropped: u64,
    /// Duplicates not delivered again.
    pub duplicates: u64,
    /// Events whose frame could not be written, delivered to nobody.
    pub unencodable: u64,
}

/// The hub: every open connection of this instance.
#[derive(Default)]
pub struct Hub {
    state: Mutex<State>,
    budget: StreamBudget,
}

impl std::fmt::Debug for Hub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hub")
            .field("connections", &self.connections())
            .finish()
    }
}

/// A registered connection: its id, frames and state. Dropping it does not
/// unregister (the stream's guard does).
#[derive(Debug)]
pub struct Registration {
    /// Its id in the hub.
    pub id: u64,
    /// Its frames.
    pub frames: mpsc::Receiver<Frame>,
    /// What the hub tells it.
    pub state: Arc<ConnectionState>,
    /// Where the tail was when it registered (`None` before the tail
    /// follows the topic): the live frames are those after it.
    pub at: Option<Cursor>,
}

impl Hub {
    /// A hub admitting the streams `budget` allows, on a topic in its life
    /// `life` (the embedded broker's; `None` for an outside broker): every
    /// cursor it hands out names that life.
    pub fn new(budget: StreamBudget, life: Option<u64>) -> Self {
        Self {
            state: Mutex::new(State {
                position: Cursor::default().in_life(life),
                ..State::default()
            }),
            budget,
        }
    }

    /// The same hub, holding the last `events` events it fans out for
    /// catch-ups ([`Recent`]).
    pub fn holding(self, events: usize) -> Self {
        self.lock().recent = Recent::new(events);
        self
    }

    /// The events between `from` and `to`, if this hub still holds every
    /// one of them.
    pub fn recent_between(&self, from: &Cursor, to: &Cursor) -> Option<Vec<Recorded>> {
        self.lock().recent.between(from, to)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while the lock was held leaves plain maps behind: use them.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Open connections.
    pub fn connections(&self) -> usize {
        self.lock().connections.len()
    }

    /// The tail follows the topic from `starts` (or has read up to them).
    pub fn follow(&self, starts: &Cursor) {
        let mut s = self.lock();
        s.position = s.position.max(starts);
        for (partition, offset) in starts.positions() {
            s.recent.follow(partition, offset);
        }
    }

    /// The id a heartbeat of connection `id` may carry: where the tail is,
    /// or the connection's own cursor where that is further. Valid only if
    /// the connection's buffer is empty once this returned (every frame
    /// before it was handed over inside the same lock).
    pub fn position_for(&self, id: u64) -> Option<Cursor> {
        let s = self.lock();
        if s.position.is_empty() {
            return None;
        }
        let c = s.connections.get(&id)?;
        Some(match &c.floor {
            Some(floor) => s.position.max(floor),
            None => s.position.clone(),
        })
    }

    /// Connection `id` is given these events by its catch-up: the live
    /// feed drops them if the broker repeats them. Returns those it was
    /// handed already (a record the broker repeated on both sides of the
    /// catch-up's end), which the catch-up must not give again.
    pub fn remember(&self, id: u64, events: &[Uuid]) -> HashSet<Uuid> {
        let mut s = self.lock();
        let Some(c) = s.connections.get_mut(&id) else {
            return HashSet::new();
        };
        events
            .iter()
            .copied()
            .filter(|event| !c.first_sight(*event))
            .collect()
    }

    /// Connection `id` gets every live event from now on, whatever cursor
    /// it resumed from (it was told to reload).
    pub fn clear_floor(&self, id: u64) {
        if let Some(c) = self.lock().connections.get_mut(&id) {
            c.floor = None;
        }
    }

    /// Registers a connection of `user`, with a buffer of `buffer` frames;
    /// `floor` is a resumed client's cursor (what is before it is not
    /// delivered again). It receives nothing until [`Hub::receive`] tells
    /// it its chats; what is fanned out until then is held for it. Refused
    /// when the user, or the instance, holds as many connections as the
    /// budget allows.
    pub fn register(
        &self,
        user: Uuid,
        buffer: usize,
        floor: Option<Cursor>,
    ) -> Result<Registration, Refusal> {
        let mut s = self.lock();
        let of_user = s.by_user.get(&user).map_or(0, HashSet::len);
        self.budget.admits(of_user, s.connections.len())?;
        let (tx, rx) = mpsc::channel(buffer.max(1));
        let state = Arc::new(ConnectionState::default());
        let at = (!s.position.is_empty()).then(|| s.position.clone());
        let floor = floor.filter(|f| !s.position.covers(f));
        s.next_id += 1;
        let id = s.next_id;
        s.by_user.entry(user).or_default().insert(id);
        s.loading.insert(id);
        s.connections.insert(
            id,
            Connection {
                user,
                chats: HashSet::new(),
                loading: Some(Vec::new()),
                floor,
                frames: tx,
                state: state.clone(),
                seen: HashSet::new(),
                seen_order: VecDeque::new(),
            },
        );
        Ok(Registration {
            id,
            frames: rx,
            state,
            at,
        })
    }

    /// Connection `id` is a member of `chats` (as the database said while
    /// it registered): it gets the events held for it that are its own,
    /// then every event of its chats from now on.
    pub fn receive(&self, id: u64, chats: &[Uuid]) -> FanOut {
        let mut s = self.lock();
        s.loading.remove(&id);
        let mut done = FanOut::default();
        let Some(c) = s.connections.get_mut(&id) else {
            return done;
        };
        let held = c.loading.take().unwrap_or_default();
        let changes = held.iter().filter_map(|h| h.change.map(|j| (h.chat, j)));
        let mut membership = Membership::before(chats.iter().copied(), changes);
        let mut overflowed = false;
        for h in held {
            let receives = membership.step(h.chat, h.change);
            if let Some(frame) = h.frame.filter(|_| receives)
                && !c.hand_over(frame, &mut done)
            {
                overflowed = true;
                break;
            }
        }
        if overflowed {
            c.state.overflowed.store(true, Ordering::Release);
            remove(&mut s, id);
            done.dropped += 1;
            return done;
        }
        c.chats = membership.into_chats();
        let chats: Vec<Uuid> = c.chats.iter().copied().collect();
        for chat in chats {
            s.by_chat.entry(chat).or_default().insert(id);
        }
        done
    }

    /// Ends every connection (the server is stopping): each gets a last
    /// `closing` frame if its buffer has room, then its stream ends, so a
    /// graceful stop does not wait for open streams.
    pub fn close_all(&self) {
        let mut s = self.lock();
        let frame = Frame::control(
            "closing",
            None,
            &serde_json::json!({"reason": "the server is stopping; reconnect"}),
        );
        for c in s.connections.values() {
            let _ = c.frames.try_send(frame.clone());
        }
        s.connections.clear();
        s.loading.clear();
        s.by_chat.clear();
        s.by_user.clear();
    }

    /// Forgets a connection.
    pub fn unregister(&self, id: u64) {
        let mut s = self.lock();
        remove(&mut s, id);
    }

    /// Delivers `event`, read at `offset` of `partition`, to the
    /// connections that receive its chat, after applying what it changes,
    /// as the event itself says: its joining users (a new chat's members,
    /// the users added) receive the chat from this event on; a removed
    /// member receives its removal, then nothing more of the chat. Nothing
    /// here waits on anything but the hub's lock.
    pub fn fan_out(&self, event: Arc<Event>, partition: i32, offset: i64) -> FanOut {
        let chat = event.chat_id();
        // Written before the lock is taken: a new chat's JSON may be long.
        let data: Arc<str> = match event.client_json() {
            Ok(data) => data.into(),
            Err(e) => {
                tracing::error!(event_id = %event.event_id, error = %e,
                    "live delivery: the event's frame could not be written; delivered to nobody");
                let mut s = self.lock();
                s.position.advance(partition, offset + 1);
                return FanOut {
                    unencodable: 1,
                    ..FanOut::default()
                };
            }
        };
        let mut s = self.lock();
        s.position.advance(partition, offset + 1);
        let shared = Frame::at(&event, &data, &s.position);
        subscribe(&mut s, chat, event.joining());
        let targets: Vec<u64> = s
            .by_chat
            .get(&chat)
            .map(|c| c.iter().copied().collect())
            .unwrap_or_default();
        let delivery = Delivery {
            event: &event,
            data: &data,
            at: (partition, offset),
            shared: &shared,
        };
        let mut done = FanOut::default();
        let mut full = hold_while_loading(&mut s, &delivery);
        full.extend(hand_over(&mut s, targets, &delivery, &mut done));
        for id in full {
            if let Some(c) = s.connections.get(&id) {
                c.state.overflowed.store(true, Ordering::Release);
            }
            remove(&mut s, id);
            done.dropped += 1;
        }
        if let EventPayload::MemberRemoved { user_id, .. } = event.payload {
            unsubscribe(&mut s, chat, user_id);
        }
        s.recent.push(Recorded {
            partition,
            offset,
            event,
            data,
        });
        done
    }
}

/// The connections of `users` receive `chat` from now on; one still
/// loading learns it from what is held for it.
fn subscribe(s: &mut State, chat: Uuid, users: &[Uuid]) {
    for user in users {
        for id in connections_of(s, *user) {
            if let Some(c) = s.connections.get_mut(&id)
                && c.loading.is_none()
            {
                c.chats.insert(chat);
                s.by_chat.entry(chat).or_default().insert(id);
            }
        }
    }
}

/// The connections of `user` receive nothing more of `chat`.
fn unsubscribe(s: &mut State, chat: Uuid, user: Uuid) {
    for id in connections_of(s, user) {
        if let Some(c) = s.connections.get_mut(&id) {
            c.chats.remove(&chat);
        }
        if let Some(set) = s.by_chat.get_mut(&chat) {
            set.remove(&id);
        }
    }
}

/// The ids of `user`'s connections here.
fn connections_of(s: &State, user: Uuid) -> Vec<u64> {
    s.by_user
        .get(&user)
        .map(|c| c.iter().copied().collect())
        .unwrap_or_default()
}

/// The frame connection `c` gets for `event` (with its client JSON), read
/// at `partition:offset` (`at`): `shared`, unless a resumed connection's own cursor is ahead of
/// the tail (then a frame naming it), or the event lies before that cursor
/// (then none: it was given on the connection this one resumes).
/// One event on its way to the connections: its frame's data (written
/// once), where it was read, and the frame most connections get.
struct Delivery<'a> {
    event: &'a Event,
    data: &'a str,
    at: (i32, i64),
    shared: &'a Frame,
}

impl Delivery<'_> {
    /// Whether `c` is addressed: an event for one user (a read marker's
    /// move) reaches only that user's connections.
    fn addressed(&self, c: &Connection) -> bool {
        self.event.only_for().is_none_or(|u| u == c.user)
    }

    /// `c`'s frame of the event, `None` where `c` was given it on the
    /// connection it resumes.
    fn frame_for(&self, c: &mut Connection, position: &Cursor) -> Option<Frame> {
        frame_for(c, position, (self.event, self.data), self.at, self.shared)
    }
}

/// Holds the event for each connection still reading its chats, with what
/// it changes of the connection's chats (a joining user joins, as the
/// event says), until the reading is done; answers the connections whose
/// hold is full.
fn hold_while_loading(s: &mut State, d: &Delivery<'_>) -> Vec<u64> {
    let State {
        position,
        connections,
        loading,
        ..
    } = s;
    // Looked up once per loading connection: a new chat may name
    // thousands of members.
    let joining: HashSet<Uuid> = if loading.is_empty() {
        HashSet::new()
    } else {
        d.event.joining().iter().copied().collect()
    };
    let chat = d.event.chat_id();
    let mut full = Vec::new();
    for id in loading.iter() {
        let Some(c) = connections.get_mut(id) else {
            continue;
        };
        if !d.addressed(c) {
            continue;
        }
        let change = if joining.contains(&c.user) {
            Some(true)
        } else {
            change_of(c.user, d.event)
        };
        let frame = d.frame_for(c, position);
        let Some(held) = c.loading.as_mut() else {
            continue;
        };
        if held.len() >= HELD_WHILE_LOADING {
            full.push(*id);
        } else {
            held.push(Held {
                chat,
                change,
                frame,
            });
        }
    }
    full
}

/// Hands the event to each of `targets` (the connections that receive its
/// chat) it is addressed to, counting into `done`; answers the
/// connections whose buffer is full.
fn hand_over(s: &mut State, targets: Vec<u64>, d: &Delivery<'_>, done: &mut FanOut) -> Vec<u64> {
    let State {
        position,
        connections,
        ..
    } = s;
    let mut full = Vec::new();
    for id in targets {
        let Some(c) = connections.get_mut(&id) else {
            continue;
        };
        if !d.addressed(c) {
            continue;
        }
        let Some(frame) = d.frame_for(c, position) else {
            continue;
        };
        if !c.hand_over(frame, done) {
            full.push(id);
        }
    }
    full
}

fn frame_for(
    c: &mut Connection,
    position: &Cursor,
    (event, data): (&Event, &str),
    (partition, offset): (i32, i64),
    shared: &Frame,
) -> Option<Frame> {
    if let Some(floor) = &c.floor {
        if floor.get(partition).is_some_and(|f| offset < f) {
            return None;
        }
        if position.covers(floor) {
            c.floor = None;
        } else {
            return Some(Frame::at(event, data, &position.max(floor)));
        }
    }
    Some(shared.clone())
}

/// Removes connection `id` from every index (dropping its sender ends its
/// stream once the frames in its buffer are read).
fn remove(s: &mut State, id: u64) {
    s.loading.remove(&id);
    let Some(c) = s.connections.remove(&id) else {
        return;
    };
    for chat in &c.chats {
        if let Some(set) = s.by_chat.get_mut(chat) {
            set.remove(&id);
            if set.is_empty() {
                s.by_chat.remove(chat);
            }
        }
    }
    if let Some(set) = s.by_user.get_mut(&c.user) {
        set.remove(&id);
        if set.is_empty() {
            s.by_user.remove(&c.user);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chatlab_domain::{ChatId, MessageId, PublishMode, SendMessage, UserId};

    /// A connection of `user` that has loaded `chats`.
    pub(super) fn connect(
        hub: &Hub,
        user: Uuid,
        chats: &[Uuid],
        buffer: usize,
        floor: Option<Cursor>,
    ) -> Registration {
        let registration = hub.register(user, buffer, floor).unwrap();
        hub.receive(registration.id, chats);
        registration
    }

    /// Fans `event` out as if read at the next offset of partition 0.
    fn fan(hub: &Hub, event: &Event) -> FanOut {
        let next = hub.lock().position.get(0).unwrap_or(0);
        hub.fan_out(Arc::new(event.clone()), 0, next)
    }

    fn message(chat: Uuid, sender: Uuid) -> Event {
        Event::message_sent(
            &SendMessage {
                id: MessageId::generate(),
                chat_id: ChatId::from_uuid(chat),
                sender_id: UserId::from_uuid(sender),
                body: "hi".into(),
                created_at: chrono::Utc::now(),
            },
            PublishMode::Outbox,
            chatlab_domain::EventBody::Carried,
        )
    }

    fn removed(chat: Uuid, actor: Uuid, user: Uuid) -> Event {
        Event::member_removed(
            &chatlab_domain::RemoveMember::new(
                ChatId::from_uuid(chat),
                UserId::from_uuid(actor),
                UserId::from_uuid(user),
            ),
            PublishMode::Outbox,
        )
    }

    #[test]
    fn members_receive_their_chats_once_and_others_nothing() {
        let hub = Hub::default();
        let (ada, bob, chat, other) = (
            Uuid::now_v7(),
            Uuid::now_v7(),
            Uuid::now_v7(),
            Uuid::now_v7(),
        );
        let mut a = connect(&hub, ada, &[chat], 8, None);
        let mut b = connect(&hub, bob, &[other], 8, None);
        let event = message(chat, ada);
        assert_eq!(fan(&hub, &event).delivered, 1);
        assert_eq!(fan(&hub, &event).duplicates, 1, "the same id twice");
        assert_eq!(a.frames.try_recv().unwrap().event_id, event.event_id);
        assert!(a.frames.try_recv().is_err());
        assert!(b.frames.try_recv().is_err(), "bob is no member");
        // Bob joins a new chat with the event that creates it, which names
        // him: nothing is asked of the database.
        let new_chat = Uuid::now_v7();
        let next = crate::live::test_events::created(new_chat, &[ada, bob]);
        assert_eq!(fan(&hub, &next).delivered, 2);
        assert_eq!(b.frames.try_recv().unwrap().event_id, next.event_id);
        let after = message(new_chat, ada);
        assert_eq!(fan(&hub, &after).delivered, 2);
        assert_eq!(b.frames.try_recv().unwrap().event_id, after.event_id);
    }

    #[test]
    fn a_marker_move_reaches_the_readers_connections_only() {
        let hub = Hub::default();
        let (ada, bob, chat) = (Uuid::now_v7(), Uuid::now_v7(), Uuid::now_v7());
        let mut a = connect(&hub, ada, &[chat], 8, None);
        let mut phone = connect(&hub, bob, &[chat], 8, None);
        let mut laptop = connect(&hub, bob, &[chat], 8, None);
        let read = Event::read_marker_moved(chat, bob, Uuid::now_v7(), 0, PublishMode::Outbox);
        assert_eq!(fan(&hub, &read).delivered, 2);
        assert_eq!(phone.frames.try_recv().unwrap().event_id, read.event_id);
        assert_eq!(laptop.frames.try_recv().unwrap().event_id, read.event_id);
        assert!(a.frames.try_recv().is_err(), "ada is not the reader");
    }

    #[test]
    fn a_removed_member_gets_the_removal_and_then_nothing() {
        let hub = Hub::default();
        let (ada, bob, chat) = (Uuid::now_v7(), Uuid::now_v7(), Uuid::now_v7());
        let _a = connect(&hub, ada, &[chat], 8, None);
        let mut b = connect(&hub, bob, &[chat], 8, None);
        let removal = removed(chat, ada, bob);
        assert_eq!(fan(&hub, &removal).delivered, 2);
        assert_eq!(b.frames.try_recv().unwrap().event_id, removal.event_id);
        assert_eq!(fan(&hub, &message(chat, ada)).delivered, 1);
        assert!(b.frames.try_recv().is_err());
    }

    #[test]
    fn closing_ends_every_stream_after_a_last_frame() {
        let hub = Hub::default();
        let chat = Uuid::now_v7();
        let mut a = connect(&hub, Uuid::now_v7(), &[chat], 8, None);
        hub.close_all();
        assert_eq!(hub.connections(), 0);
        let last = a.frames.try_recv().unwrap();
        assert!(last.sse.starts_with(b"event: closing"));
        assert!(matches!(
            a.frames.try_recv(),
            Err(mpsc::error::TryRecvError::Disconnected)
        ));
    }

    #[test]
    fn a_full_buffer_drops_that_connection_only() {
        let hub = Hub::default();
        let (ada, bob, chat) = (Uuid::now_v7(), Uuid::now_v7(), Uuid::now_v7());
        let mut fast = connect(&hub, ada, &[chat], 8, None);
        let slow = connect(&hub, bob, &[chat], 1, None);
        assert_eq!(fan(&hub, &message(chat, ada)).delivered, 2);
        let _ = fast.frames.try_recv();
        let second = fan(&hub, &message(chat, ada));
        assert_eq!((second.delivered, second.dropped), (1, 1));
        assert!(slow.state.overflowed.load(Ordering::Acquire));
        assert_eq!(hub.connections(), 1);
        assert!(fast.frames.try_recv().is_ok());
    }
}

#[cfg(test)]
mod loading_tests {
    use super::tests::connect;
    use super::*;
    use crate::live::test_events::message_in as message;
    use chatlab_domain::{AddMembers, ChatId, MessageId, PublishMode, RemoveMember, UserId};

    fn ids(registration: &mut Registration) -> Vec<Uuid> {
        std::iter::from_fn(|| registration.frames.try_recv().ok())
            .map(|f| f.event_id)
            .collect()
    }

    #[test]
    fn what_is_fanned_out_while_a_connection_loads_its_chats_is_not_lost() {
        let hub = Hub::default();
        hub.follow(&Cursor::parse("0:0").unwrap());
        let (bob, chat, other) = (Uuid::now_v7(), Uuid::now_v7(), Uuid::now_v7());
        let mut b = hub.register(bob, 8, None).unwrap();
        let (first, foreign) = (message(chat), message(other));
        hub.fan_out(Arc::new(first.clone()), 0, 0);
        hub.fan_out(Arc::new(foreign.clone()), 0, 1);
        assert!(b.frames.try_recv().is_err(), "nothing before its chats");
        // The database said: bob is in `chat`.
        let done = hub.receive(b.id, &[chat]);
        assert_eq!(done.delivered, 1);
        let live = message(chat);
        hub.fan_out(Arc::new(live.clone()), 0, 2);
        assert_eq!(ids(&mut b), vec![first.event_id, live.event_id]);
        assert_eq!(hub.lock().loading.len(), 0);
    }

    #[test]
    fn membership_changed_while_loading_wins_over_what_the_database_said() {
        let hub = Hub::default();
        hub.follow(&Cursor::parse("0:0").unwrap());
        let (ada, bob, joined, left, created) = (
            Uuid::now_v7(),
            Uuid::now_v7(),
            Uuid::now_v7(),
            Uuid::now_v7(),
            Uuid::now_v7(),
        );
        let mut b = hub.register(bob, 8, None).unwrap();
        let before_join = message(joined);
        let addition = Event::members_added(
            &AddMembers {
                chat_id: ChatId::from_uuid(joined),
                actor_id: UserId::from_uuid(ada),
                user_ids: vec![UserId::from_uuid(bob)],
                message_id: MessageId::generate(),
                created_at: chrono::Utc::now(),
            },
            PublishMode::Outbox,
        );
        let removal = Event::member_removed(
            &RemoveMember::new(
                ChatId::from_uuid(left),
                UserId::from_uuid(ada),
                UserId::from_uuid(bob),
            ),
            PublishMode::Outbox,
        );
        let after_removal = message(left);
        let in_new_chat = crate::live::test_events::created(created, &[ada, bob]);
        let events = [&before_join, &addition, &removal, &after_removal];
        for (offset, event) in (0..).zip(events) {
            hub.fan_out(Arc::new((*event).clone()), 0, offset);
        }
        // The new chat's event names bob among its members.
        hub.fan_out(Arc::new(in_new_chat.clone()), 0, 4);
        // The database was read after the addition and before the removal.
        hub.receive(b.id, &[joined, left]);
        assert_eq!(
            ids(&mut b),
            vec![addition.event_id, removal.event_id, in_new_chat.event_id]
        );
        for (offset, chat) in (5..).zip([joined, left, created]) {
            hub.fan_out(Arc::new(message(chat)), 0, offset);
        }
        assert_eq!(ids(&mut b).len(), 2, "joined and created, not left");
    }

    #[test]
    fn a_connection_that_holds_too_much_while_loading_overflows() {
        let hub = Hub::default();
        hub.follow(&Cursor::parse("0:0").unwrap());
        let chat = Uuid::now_v7();
        let _other = connect(&hub, Uuid::now_v7(), &[chat], 8, None);
        let b = hub.register(Uuid::now_v7(), 8, None).unwrap();
        let event = message(Uuid::now_v7());
        for offset in 0..=i64::try_from(HELD_WHILE_LOADING).unwrap() {
            hub.fan_out(Arc::new(event.clone()), 0, offset);
        }
        assert!(b.state.overflowed.load(Ordering::Acquire));
        assert_eq!(hub.connections(), 1);
        assert_eq!(hub.receive(b.id, &[chat]), FanOut::default());
    }
}

#[cfg(test)]
mod resume_tests {
    use super::tests::connect;
    use super::*;
    use crate::live::test_events::message_in as message;

    fn id_of(frame: &Frame) -> String {
        let text = std::str::from_utf8(&frame.sse).unwrap();
        text.lines()
            .next()
            .unwrap()
            .strip_prefix("id: ")
            .unwrap()
            .to_owned()
    }

    #[test]
    fn each_frame_names_the_position_after_it() {
        let hub = Hub::default();
        hub.follow(&Cursor::parse("0:10,1:4").unwrap());
        let chat = Uuid::now_v7();
        let mut a = connect(&hub, Uuid::now_v7(), &[chat], 8, None);
        assert_eq!(a.at.as_ref().unwrap().to_string(), "0:10,1:4");
        hub.fan_out(Arc::new(message(chat)), 1, 4);
        hub.fan_out(Arc::new(message(Uuid::now_v7())), 0, 10);
        hub.fan_out(Arc::new(message(chat)), 0, 11);
        assert_eq!(id_of(&a.frames.try_recv().unwrap()), "0:10,1:5");
        assert_eq!(id_of(&a.frames.try_recv().unwrap()), "0:12,1:5");
        assert_eq!(hub.position_for(a.id).unwrap().to_string(), "0:12,1:5");
    }

    #[test]
    fn a_resumed_connection_gets_nothing_before_its_cursor() {
        let hub = Hub::default();
        hub.follow(&Cursor::parse("0:10").unwrap());
        let chat = Uuid::now_v7();
        // The client came from an instance that had read up to 12.
        let mut a = connect(&hub, Uuid::now_v7(), &[chat], 8, Cursor::parse("0:12").ok());
        assert_eq!(hub.position_for(a.id).unwrap().to_string(), "0:12");
        for offset in 10..13 {
            hub.fan_out(Arc::new(message(chat)), 0, offset);
        }
        let only = a.frames.try_recv().unwrap();
        assert_eq!(id_of(&only), "0:13");
        assert!(a.frames.try_recv().is_err(), "10 and 11 were given before");
    }

    #[test]
    fn an_event_given_in_the_catch_up_is_not_given_again() {
        let hub = Hub::default();
        hub.follow(&Cursor::parse("0:0").unwrap());
        let chat = Uuid::now_v7();
        let mut a = connect(&hub, Uuid::now_v7(), &[chat], 8, None);
        let event = message(chat);
        hub.remember(a.id, &[event.event_id]);
        assert_eq!(hub.fan_out(Arc::new(event.clone()), 0, 0).duplicates, 1);
        assert!(a.frames.try_recv().is_err());
    }

    #[test]
    fn the_budget_refuses_a_users_stream_past_its_limit_until_one_ends() {
        let budget = StreamBudget {
            per_user: 2,
            total: 3,
        };
        let hub = Hub::new(budget, None);
        let (ada, bob, eve) = (Uuid::now_v7(), Uuid::now_v7(), Uuid::now_v7());
        let first = hub.register(ada, 8, None).unwrap();
        let _second = hub.register(ada, 8, None).unwrap();
        assert_eq!(
            hub.register(ada, 8, None).err(),
            Some(Refusal::User { limit: 2 })
        );
        let _bobs = hub.register(bob, 8, None).unwrap();
        assert_eq!(
            hub.register(eve, 8, None).err(),
            Some(Refusal::Instance { limit: 3 })
        );
        hub.unregister(first.id);
        assert!(
            hub.register(ada, 8, None).is_ok(),
            "its place is free again"
        );
    }

    #[test]
    fn every_cursor_names_the_topics_life() {
        let hub = Hub::new(StreamBudget::default(), Some(42));
        hub.follow(&Cursor::parse("0:0").unwrap());
        let chat = Uuid::now_v7();
        let mut a = connect(&hub, Uuid::now_v7(), &[chat], 8, None);
        assert_eq!(a.at.as_ref().unwrap().to_string(), "0:0@42");
        hub.fan_out(Arc::new(message(chat)), 0, 0);
        assert_eq!(id_of(&a.frames.try_recv().unwrap()), "0:1@42");
        assert_eq!(hub.position_for(a.id).unwrap().to_string(), "0:1@42");
    }

    #[test]
    fn before_the_tail_follows_there_is_no_position() {
        let hub = Hub::default();
        let a = connect(&hub, Uuid::now_v7(), &[], 8, None);
        assert!(a.at.is_none() && hub.position_for(a.id).is_none());
    }
}
