//! Events: what chatlab publishes (here), when a write publishes it
//! ([`publish_mode`]), and the audit that reconciles the topic with the
//! database ([`audit`]).
//!
//! The events chatlab publishes, and their JSON form on the topic.
//!
//! Every event has a UUIDv7 `event_id`, a `type`, `occurred_at` (the write's
//! own timestamp, so the audit can match windows exactly), a
//! `schema_version`, the `publish_mode` that produced it (the audit needs it
//! for events whose write never committed), and the chat it belongs to,
//! which is also its key: one chat's events land in one partition, in order.

pub mod audit;
pub mod publish_mode;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::commands::membership::{AddMembers, RemoveMember, TransferOwnership};
use crate::commands::{CreateChat, SendMessage};
use crate::events::publish_mode::PublishMode;

/// Version of the JSON layout below.
pub const EVENT_SCHEMA_VERSION: u32 = 1;

/// Whether a `message.sent` event carries the message's text
/// (`LIVE_FRAME_BODY`): with it, a live frame is all a client needs to
/// show the message; without it, the topic holds no message text and a
/// client reads the message back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EventBody {
    /// The text rides in the event.
    #[default]
    Carried,
    /// Only its length does.
    Withheld,
}

/// One event, as published.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    /// Unique per event (UUIDv7); duplicates on the topic share it.
    pub event_id: Uuid,
    /// When the write happened.
    pub occurred_at: DateTime<Utc>,
    /// [`EVENT_SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The mode that produced the event.
    pub publish_mode: String,
    /// What happened.
    #[serde(flatten)]
    pub payload: EventPayload,
    /// The W3C `traceparent` of the request that wrote the event, when it
    /// was traced: kept with an outbox row, so the relay can carry the
    /// request's trace to the record. Not part of the payload.
    #[serde(skip)]
    pub trace_parent: Option<String>,
}

/// The event types and their fields; `type` on the wire.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum EventPayload {
    /// A chat was created.
    #[serde(rename = "chat.created")]
    ChatCreated {
        /// The chat.
        chat_id: Uuid,
        /// Its name.
        name: String,
        /// Its creator.
        creator_id: Uuid,
        /// Members written, creator included.
        member_count: usize,
        /// The "room created" message.
        system_message_id: Uuid,
        /// Who the members are, creator included: what a live instance
        /// needs to start delivering the chat to its members' connections
        /// without asking the database (whose round trip, pool queue or
        /// outage would then delay every frame behind it). On the topic
        /// only: a client's frame leaves it out ([`Event::client_json`]),
        /// since a chat of thousands would send every member the list.
        /// Empty in events written before it was carried.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        member_ids: Vec<Uuid>,
    },
    /// A member posted a message.
    #[serde(rename = "message.sent")]
    MessageSent {
        /// The chat.
        chat_id: Uuid,
        /// The message.
        message_id: Uuid,
        /// Its author.
        sender_id: Uuid,
        /// Body length in characters.
        body_length: usize,
        /// The text, so a live frame carries what a client shows without
        /// reading it back; absent where the writer keeps message text
        /// off the topic (`LIVE_FRAME_BODY=false`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        body: Option<String>,
    },
    /// The owner added members.
    #[serde(rename = "members.added")]
    MembersAdded {
        /// The chat.
        chat_id: Uuid,
        /// The `membership` message recording it.
        message_id: Uuid,
        /// The owner.
        actor_id: Uuid,
        /// Who was added.
        user_ids: Vec<Uuid>,
    },
    /// A member left, or the owner removed one.
    #[serde(rename = "member.removed")]
    MemberRemoved {
        /// The chat.
        chat_id: Uuid,
        /// The `membership` message recording it.
        message_id: Uuid,
        /// Who removed (the member themself when leaving).
        actor_id: Uuid,
        /// Who went.
        user_id: Uuid,
    },
    /// The owner handed the chat over.
    #[serde(rename = "chat.owner_changed")]
    OwnerChanged {
        /// The chat.
        chat_id: Uuid,
        /// The `membership` message recording it.
        message_id: Uuid,
        /// The former owner.
        actor_id: Uuid,
        /// The new owner.
        owner_id: Uuid,
    },
    /// A member's read marker moved: for that member's own connections
    /// only (their other devices), never the chat's other members. It
    /// announces no row (a move may be held or logged, not yet on the
    /// member row) and is published best-effort after the answer, so the
    /// audit of writes and their events leaves it out.
    #[serde(rename = "chat.read")]
    ReadMarkerMoved {
        /// The chat.
        chat_id: Uuid,
        /// The reader.
        user_id: Uuid,
        /// The newest message the reader has read.
        read_up_to: Uuid,
        /// The reader's unread count after the move.
        unread_count: i64,
    },
}

impl Event {
    /// The `chat.created` event of a createChat.
    pub fn chat_created(command: &CreateChat, mode: PublishMode) -> Self {
        Self::new(
            command.created_at,
            mode,
            EventPayload::ChatCreated {
                chat_id: command.chat_id.as_uuid(),
                name: command.name.clone(),
                creator_id: command.creator_id.as_uuid(),
                member_count: command.member_ids.len(),
                system_message_id: command.system_message_id.as_uuid(),
                member_ids: command.member_ids.iter().map(|m| m.as_uuid()).collect(),
            },
        )
    }

    /// The `message.sent` event of a message, with its text when `body`
    /// says so.
    pub fn message_sent(command: &SendMessage, mode: PublishMode, body: EventBody) -> Self {
        Self::new(
            command.created_at,
            mode,
            EventPayload::MessageSent {
                chat_id: command.chat_id.as_uuid(),
                message_id: command.id.as_uuid(),
                sender_id: command.sender_id.as_uuid(),
                body_length: command.body.chars().count(),
                body: (body == EventBody::Carried).then(|| command.body.clone()),
            },
        )
    }

    /// The `members.added` event of an addition.
    pub fn members_added(command: &AddMembers, mode: PublishMode) -> Self {
        Self::new(
            command.created_at,
            mode,
            EventPayload::MembersAdded {
                chat_id: command.chat_id.as_uuid(),
                message_id: command.message_id.as_uuid(),
                actor_id: command.actor_id.as_uuid(),
                user_ids: command.user_ids.iter().map(|id| id.as_uuid()).collect(),
            },
        )
    }

    /// The `member.removed` event of a removal (or a member leaving).
    pub fn member_removed(command: &RemoveMember, mode: PublishMode) -> Self {
        Self::new(
            command.created_at,
            mode,
            EventPayload::MemberRemoved {
                chat_id: command.chat_id.as_uuid(),
                message_id: command.message_id.as_uuid(),
                actor_id: command.actor_id.as_uuid(),
                user_id: command.user_id.as_uuid(),
            },
        )
    }

    /// The `chat.owner_changed` event of a hand-over.
    pub fn owner_changed(command: &TransferOwnership, mode: PublishMode) -> Self {
        Self::new(
            command.created_at,
            mode,
            EventPayload::OwnerChanged {
                chat_id: command.chat_id.as_uuid(),
                message_id: command.message_id.as_uuid(),
                actor_id: command.actor_id.as_uuid(),
                owner_id: command.owner_id.as_uuid(),
            },
        )
    }

    /// The `chat.read` event of a marker move: `reader`'s state of the
    /// chat after it.
    pub fn read_marker_moved(
        chat_id: Uuid,
        reader: Uuid,
        read_up_to: Uuid,
        unread_count: i64,
        mode: PublishMode,
    ) -> Self {
        Self::new(
            Utc::now(),
            mode,
            EventPayload::ReadMarkerMoved {
                chat_id,
                user_id: reader,
                read_up_to,
                unread_count,
            },
        )
    }

    fn new(occurred_at: DateTime<Utc>, mode: PublishMode, payload: EventPayload) -> Self {
        Self {
            event_id: Uuid::now_v7(),
            occurred_at,
            schema_version: EVENT_SCHEMA_VERSION,
            publish_mode: mode.as_str().to_owned(),
            payload,
            trace_parent: None,
        }
    }

    /// The event, carrying the trace context of the request that wrote it.
    pub fn with_trace_parent(mut self, trace_parent: Option<String>) -> Self {
        self.trace_parent = trace_parent;
        self
    }

    /// The `type` field.
    pub fn event_type(&self) -> &'static str {
        match self.payload {
            EventPayload::ChatCreated { .. } => "chat.created",
            EventPayload::MessageSent { .. } => "message.sent",
            EventPayload::MembersAdded { .. } => "members.added",
            EventPayload::MemberRemoved { .. } => "member.removed",
            EventPayload::OwnerChanged { .. } => "chat.owner_changed",
            EventPayload::ReadMarkerMoved { .. } => "chat.read",
        }
    }

    /// The chat the event belongs to: its key on the topic.
    pub fn chat_id(&self) -> Uuid {
        match self.payload {
            EventPayload::ChatCreated { chat_id, .. }
            | EventPayload::MessageSent { chat_id, .. }
            | EventPayload::MembersAdded { chat_id, .. }
            | EventPayload::MemberRemoved { chat_id, .. }
            | EventPayload::OwnerChanged { chat_id, .. }
            | EventPayload::ReadMarkerMoved { chat_id, .. } => chat_id,
        }
    }

    /// The one user the event is for, when it is not for every member of
    /// its chat: the reader of a `chat.read`.
    pub fn only_for(&self) -> Option<Uuid> {
        match self.payload {
            EventPayload::ReadMarkerMoved { user_id, .. } => Some(user_id),
            _ => None,
        }
    }

    /// The users who receive the event's chat from this event on: a new
    /// chat's members, or the users added; none for the other types.
    pub fn joining(&self) -> &[Uuid] {
        match &self.payload {
            EventPayload::ChatCreated { member_ids, .. } => member_ids,
            EventPayload::MembersAdded { user_ids, .. } => user_ids,
            EventPayload::MessageSent { .. }
            | EventPayload::MemberRemoved { .. }
            | EventPayload::OwnerChanged { .. }
            | EventPayload::ReadMarkerMoved { .. } => &[],
        }
    }

    /// Whether the event announces a committed write (a row the audit
    /// matches it with): every type but `chat.read`.
    pub fn announces_a_write(&self) -> bool {
        !matches!(self.payload, EventPayload::ReadMarkerMoved { .. })
    }

    /// The row the event announces: the chat for `chat.created`, the
    /// message for `message.sent`, the `membership` message for the
    /// membership events; for `chat.read`, which announces none, the
    /// event itself.
    pub fn subject_id(&self) -> Uuid {
        match self.payload {
            EventPayload::ChatCreated { chat_id, .. } => chat_id,
            EventPayload::ReadMarkerMoved { .. } => self.event_id,
            EventPayload::MessageSent { message_id, .. }
            | EventPayload::MembersAdded { message_id, .. }
            | EventPayload::MemberRemoved { message_id, .. }
            | EventPayload::OwnerChanged { message_id, .. } => message_id,
        }
    }

    /// The record key: the chat id as text.
    pub fn key(&self) -> String {
        self.chat_id().to_string()
    }

    /// The JSON body, as the topic and the outbox carry it.
    pub fn to_json(&self) -> Result<String, serde_json::Error> {
        serde_json::to_string(self)
    }

    /// The JSON a client's live frame carries: the event as on the topic,
    /// less what only the live instances need (a new chat's member list;
    /// `member_count` stays).
    pub fn client_json(&self) -> Result<String, serde_json::Error> {
        match &self.payload {
            EventPayload::ChatCreated { member_ids, .. } if !member_ids.is_empty() => {
                let mut value = serde_json::to_value(self)?;
                if let Some(fields) = value.as_object_mut() {
                    fields.remove("member_ids");
                }
                serde_json::to_string(&value)
            }
            _ => serde_json::to_string(self),
        }
    }

    /// Parses a JSON body.
    pub fn from_json(bytes: &[u8]) -> Result<Self, serde_json::Error> {
        serde_json::from_slice(bytes)
    }
}

/// Where the broker says it stored a record: the partition and offset of
/// its delivery report. An offset below 0 means the broker acknowledged the
/// record without saying where (librdkafka reports that, for example, for a
/// send the broker answered as a duplicate of one it already holds).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Receipt {
    /// The partition.
    pub partition: i32,
    /// The offset there.
    pub offset: i64,
}

impl Receipt {
    /// Whether the broker named a position at all.
    pub const fn has_offset(&self) -> bool {
        self.offset >= 0
    }
}

impl std::fmt::Display for Receipt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.has_offset() {
            write!(f, "{}@{}", self.partition, self.offset)
        } else {
            write!(f, "{}@?", self.partition)
        }
    }
}

/// An event the broker acknowledged, with its receipt: what the receipt
/// ledger keeps, so the audit can tell an event chatlab never got
/// acknowledged (chatlab's loss) from one the broker acknowledged and does
/// not serve (the broker's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AckedEvent {
    /// The event.
    pub event_id: Uuid,
    /// The chat or message it announces.
    pub subject_id: Uuid,
    /// The mode that produced it.
    pub mode: PublishMode,
    /// The event's `occurred_at`, so the audit's window applies to receipts
    /// as it does to rows and records.
    pub occurred_at: DateTime<Utc>,
    /// Where the broker says it is.
    pub receipt: Receipt,
}

impl AckedEvent {
    /// The receipt of `event`. Events carry their mode as text; one this
    /// build cannot parse (none it produced) counts as `off`.
    pub fn of(event: &Event, receipt: Receipt) -> Self {
        Self {
            event_id: event.event_id,
            subject_id: event.subject_id(),
            mode: event.publish_mode.parse().unwrap_or(PublishMode::Off),
            occurred_at: event.occurred_at,
            receipt,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commands::NewChat;
    use crate::commands::limits::Limits;
    use crate::ids::UserId;

    #[test]
    fn json_has_the_documented_fields_and_round_trips() {
        let command = CreateChat::validate(
            NewChat {
                name: "r".into(),
                creator_id: UserId::generate(),
                member_ids: vec![UserId::generate()],
            },
            &Limits::default(),
        )
        .unwrap();
        let event = Event::chat_created(&command, PublishMode::Outbox);
        let json: serde_json::Value = serde_json::from_str(&event.to_json().unwrap()).unwrap();
        assert_eq!(json["type"], "chat.created");
        assert_eq!(json["schema_version"], 1);
        assert_eq!(json["publish_mode"], "outbox");
        assert_eq!(json["member_count"], 2);
        assert_eq!(json["chat_id"], command.chat_id.to_string());
        assert!(json["event_id"].is_string() && json["occurred_at"].is_string());
        assert_eq!(
            Event::from_json(event.to_json().unwrap().as_bytes()).unwrap(),
            event
        );
        assert_eq!(event.key(), command.chat_id.to_string());
        assert_eq!(event.subject_id(), command.chat_id.as_uuid());
    }

    #[test]
    fn a_new_chat_names_its_members_on_the_topic_but_not_to_clients() {
        let (creator, member) = (UserId::generate(), UserId::generate());
        let command = CreateChat::validate(
            NewChat {
                name: "r".into(),
                creator_id: creator,
                member_ids: vec![member],
            },
            &Limits::default(),
        )
        .unwrap();
        let event = Event::chat_created(&command, PublishMode::Outbox);
        let mut joining = event.joining().to_vec();
        joining.sort();
        let mut expected = vec![creator.as_uuid(), member.as_uuid()];
        expected.sort();
        assert_eq!(joining, expected);
        let topic: serde_json::Value = serde_json::from_str(&event.to_json().unwrap()).unwrap();
        assert_eq!(topic["member_ids"].as_array().map(Vec::len), Some(2));
        let client: serde_json::Value =
            serde_json::from_str(&event.client_json().unwrap()).unwrap();
        assert!(client.get("member_ids").is_none(), "{client}");
        assert_eq!(client["member_count"], 2);
        assert_eq!(client["chat_id"], topic["chat_id"]);
        // An event written before the list was carried still reads, with
        // nobody joining by it.
        let mut old = topic.clone();
        old.as_object_mut().unwrap().remove("member_ids");
        let old = Event::from_json(old.to_string().as_bytes()).unwrap();
        assert!(old.joining().is_empty());
    }

    #[test]
    fn a_read_event_is_for_its_reader_and_announces_no_write() {
        let (chat, reader, up_to) = (Uuid::now_v7(), Uuid::now_v7(), Uuid::now_v7());
        let event = Event::read_marker_moved(chat, reader, up_to, 3, PublishMode::AfterCommit);
        let json: serde_json::Value = serde_json::from_str(&event.to_json().unwrap()).unwrap();
        assert_eq!(json["type"], "chat.read");
        assert_eq!(json["user_id"], reader.to_string());
        assert_eq!(json["read_up_to"], up_to.to_string());
        assert_eq!(json["unread_count"], 3);
        assert_eq!(
            Event::from_json(event.to_json().unwrap().as_bytes()).unwrap(),
            event
        );
        assert_eq!((event.chat_id(), event.only_for()), (chat, Some(reader)));
        assert!(!event.announces_a_write());
        assert_eq!(event.subject_id(), event.event_id);
    }

    #[test]
    fn a_message_event_carries_its_text_unless_withheld() {
        let command = SendMessage::validate(crate::commands::NewMessage {
            chat_id: crate::ids::ChatId::generate(),
            sender_id: UserId::generate(),
            body: "grüße".into(),
        })
        .unwrap();
        let carried = Event::message_sent(&command, PublishMode::Outbox, EventBody::Carried);
        let json: serde_json::Value = serde_json::from_str(&carried.to_json().unwrap()).unwrap();
        assert_eq!(json["body"], "grüße");
        assert_eq!(json["body_length"], 5);
        assert_eq!(
            Event::from_json(carried.to_json().unwrap().as_bytes()).unwrap(),
            carried
        );
        let withheld = Event::message_sent(&command, PublishMode::Outbox, EventBody::Withheld);
        let json: serde_json::Value = serde_json::from_str(&withheld.to_json().unwrap()).unwrap();
        assert!(json.get("body").is_none(), "{json}");
        assert_eq!(json["body_length"], 5);
        // An event written before the field existed still reads.
        assert_eq!(
            Event::from_json(withheld.to_json().unwrap().as_bytes()).unwrap(),
            withheld
        );
    }
}
