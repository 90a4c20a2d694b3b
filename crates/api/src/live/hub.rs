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

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;
use tokio::sync::mpsc;
use uuid::Uuid;

use chatlab_domain::{Event, EventPayload};

/// Event ids a connection remembers to drop duplicates (a broker may
/// deliver a record twice; an outbox relay may publish one twice).
const REMEMBERED_IDS: usize = 1024;

/// A frame ready for a connection's stream.
#[derive(Debug, Clone)]
pub struct Frame {
    /// The event's id.
    pub event_id: Uuid,
    /// The SSE text of the event.
    pub text: Bytes,
}

impl Frame {
    /// The SSE frame of `event`: its id, its type as the event name, its
    /// JSON as the data.
    pub fn of(event: &Event) -> Self {
        Self {
            event_id: event.event_id,
            text: Bytes::from(format!(
                "id: {}\nevent: {}\ndata: {}\n\n",
                event.event_id,
                event.event_type(),
                event.to_json()
            )),
        }
    }
}

/// What the hub tells a connection's stream besides frames.
#[derive(Debug, Default)]
pub struct ConnectionState {
    /// Its buffer overflowed and the hub let it go.
    pub overflowed: AtomicBool,
}

struct Connection {
    user: Uuid,
    chats: HashSet<Uuid>,
    frames: mpsc::Sender<Frame>,
    state: Arc<ConnectionState>,
    seen: HashSet<Uuid>,
    seen_order: VecDeque<Uuid>,
}

impl Connection {
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
    next_id: u64,
    connections: HashMap<u64, Connection>,
    by_chat: HashMap<Uuid, HashSet<u64>>,
    by_user: HashMap<Uuid, HashSet<u64>>,
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
}

/// The hub: every open connection of this instance.
#[derive(Default)]
pub struct Hub {
    state: Mutex<State>,
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
}

impl Hub {
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

    /// Registers a connection of `user` receiving `chats`, with a buffer
    /// of `buffer` frames.
    pub fn register(&self, user: Uuid, chats: &[Uuid], buffer: usize) -> Registration {
        let (tx, rx) = mpsc::channel(buffer.max(1));
        let state = Arc::new(ConnectionState::default());
        let mut s = self.lock();
        s.next_id += 1;
        let id = s.next_id;
        for chat in chats {
            s.by_chat.entry(*chat).or_default().insert(id);
        }
        s.by_user.entry(user).or_default().insert(id);
        s.connections.insert(
            id,
            Connection {
                user,
                chats: chats.iter().copied().collect(),
                frames: tx,
                state: state.clone(),
                seen: HashSet::new(),
                seen_order: VecDeque::new(),
            },
        );
        Registration {
            id,
            frames: rx,
            state,
        }
    }

    /// Connection `id` receives `chats` from now on.
    pub fn receive(&self, id: u64, chats: &[Uuid]) {
        let mut s = self.lock();
        let Some(c) = s.connections.get_mut(&id) else {
            return;
        };
        c.chats.extend(chats.iter().copied());
        for chat in chats {
            s.by_chat.entry(*chat).or_default().insert(id);
        }
    }

    /// Ends every connection (the server is stopping): each gets a last
    /// `closing` frame if its buffer has room, then its stream ends, so a
    /// graceful stop does not wait for open streams.
    pub fn close_all(&self) {
        let mut s = self.lock();
        let frame = Frame {
            event_id: Uuid::nil(),
            text: Bytes::from_static(
                b"event: closing\ndata: {\"reason\":\"the server is stopping; reconnect\"}\n\n",
            ),
        };
        for c in s.connections.values() {
            let _ = c.frames.try_send(frame.clone());
        }
        s.connections.clear();
        s.by_chat.clear();
        s.by_user.clear();
    }

    /// Forgets a connection.
    pub fn unregister(&self, id: u64) {
        let mut s = self.lock();
        remove(&mut s, id);
    }

    /// The users with an open connection here, among `users`.
    pub fn connected_among(&self, users: &[Uuid]) -> Vec<Uuid> {
        let s = self.lock();
        users
            .iter()
            .copied()
            .filter(|u| s.by_user.contains_key(u))
            .collect()
    }

    /// Every user with an open connection here.
    pub fn connected_users(&self) -> Vec<Uuid> {
        self.lock().by_user.keys().copied().collect()
    }

    /// Delivers `event` to the connections that receive its chat, after
    /// applying what it changes: `joined` are users (connected here) who
    /// receive the chat from this event on (the members of a new chat, the
    /// users added); a removed member receives its removal, then nothing
    /// more of the chat.
    pub fn fan_out(&self, event: &Event, joined: &[Uuid]) -> FanOut {
        let chat = event.chat_id();
        let frame = Frame::of(event);
        let mut s = self.lock();
        for user in joined {
            let ids: Vec<u64> = s
                .by_user
                .get(user)
                .map(|c| c.iter().copied().collect())
                .unwrap_or_default();
            for id in ids {
                if let Some(c) = s.connections.get_mut(&id) {
                    c.chats.insert(chat);
                }
                s.by_chat.entry(chat).or_default().insert(id);
            }
        }
        let targets: Vec<u64> = s
            .by_chat
            .get(&chat)
            .map(|c| c.iter().copied().collect())
            .unwrap_or_default();
        let mut done = FanOut::default();
        let mut full = Vec::new();
        for id in targets {
            let Some(c) = s.connections.get_mut(&id) else {
                continue;
            };
            if !c.first_sight(frame.event_id) {
                done.duplicates += 1;
                continue;
            }
            match c.frames.try_send(frame.clone()) {
                Ok(()) => done.delivered += 1,
                Err(mpsc::error::TrySendError::Full(_)) => full.push(id),
                // The stream ended; its guard unregisters it.
                Err(mpsc::error::TrySendError::Closed(_)) => {}
            }
        }
        for id in full {
            if let Some(c) = s.connections.get(&id) {
                c.state.overflowed.store(true, Ordering::Release);
            }
            remove(&mut s, id);
            done.dropped += 1;
        }
        if let EventPayload::MemberRemoved { user_id, .. } = event.payload {
            let ids: Vec<u64> = s
                .by_user
                .get(&user_id)
                .map(|c| c.iter().copied().collect())
                .unwrap_or_default();
            for id in ids {
                if let Some(c) = s.connections.get_mut(&id) {
                    c.chats.remove(&chat);
                }
                if let Some(set) = s.by_chat.get_mut(&chat) {
                    set.remove(&id);
                }
            }
        }
        done
    }
}

/// Removes connection `id` from every index (dropping its sender ends its
/// stream once the frames in its buffer are read).
fn remove(s: &mut State, id: u64) {
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
        let mut a = hub.register(ada, &[chat], 8);
        let mut b = hub.register(bob, &[other], 8);
        let event = message(chat, ada);
        assert_eq!(hub.fan_out(&event, &[]).delivered, 1);
        assert_eq!(hub.fan_out(&event, &[]).duplicates, 1, "the same id twice");
        assert_eq!(a.frames.try_recv().unwrap().event_id, event.event_id);
        assert!(a.frames.try_recv().is_err());
        assert!(b.frames.try_recv().is_err(), "bob is no member");
        // Bob joins with the event that adds him.
        let next = message(chat, ada);
        assert_eq!(hub.fan_out(&next, &[bob]).delivered, 2);
        assert_eq!(b.frames.try_recv().unwrap().event_id, next.event_id);
    }

    #[test]
    fn a_removed_member_gets_the_removal_and_then_nothing() {
        let hub = Hub::default();
        let (ada, bob, chat) = (Uuid::now_v7(), Uuid::now_v7(), Uuid::now_v7());
        let _a = hub.register(ada, &[chat], 8);
        let mut b = hub.register(bob, &[chat], 8);
        let removal = removed(chat, ada, bob);
        assert_eq!(hub.fan_out(&removal, &[]).delivered, 2);
        assert_eq!(b.frames.try_recv().unwrap().event_id, removal.event_id);
        assert_eq!(hub.fan_out(&message(chat, ada), &[]).delivered, 1);
        assert!(b.frames.try_recv().is_err());
    }

    #[test]
    fn closing_ends_every_stream_after_a_last_frame() {
        let hub = Hub::default();
        let chat = Uuid::now_v7();
        let mut a = hub.register(Uuid::now_v7(), &[chat], 8);
        hub.close_all();
        assert_eq!(hub.connections(), 0);
        let last = a.frames.try_recv().unwrap();
        assert!(last.text.starts_with(b"event: closing"));
        assert!(matches!(
            a.frames.try_recv(),
            Err(mpsc::error::TryRecvError::Disconnected)
        ));
    }

    #[test]
    fn a_full_buffer_drops_that_connection_only() {
        let hub = Hub::default();
        let (ada, bob, chat) = (Uuid::now_v7(), Uuid::now_v7(), Uuid::now_v7());
        let mut fast = hub.register(ada, &[chat], 8);
        let slow = hub.register(bob, &[chat], 1);
        assert_eq!(hub.fan_out(&message(chat, ada), &[]).delivered, 2);
        let _ = fast.frames.try_recv();
        let second = hub.fan_out(&message(chat, ada), &[]);
        assert_eq!((second.delivered, second.dropped), (1, 1));
        assert!(slow.state.overflowed.load(Ordering::Acquire));
        assert_eq!(hub.connections(), 1);
        assert!(fast.frames.try_recv().is_ok());
    }
}
