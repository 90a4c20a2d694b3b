//! Unread state: whether a message also writes one row per recipient
//! (fan-out on write) or unread counts are computed from the messages and
//! the read markers (fan-out on read), and what a reader sees of it.

use std::fmt;
use std::str::FromStr;

use crate::entities::Message;
use crate::ids::{ChatId, MessageId, UserId};

/// How a talk message reaches its recipients' unread state
/// (`MESSAGE_FANOUT`).
///
/// Both modes answer every read the same: the chats of a user with their
/// unread counts, and one chat's unread count. They differ in what a send
/// writes and what a read scans.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum MessageFanout {
    /// Nothing more than the message: an unread count is the chat's talk
    /// messages by others after the reader's marker (and after they
    /// joined), counted when read.
    #[default]
    None,
    /// One `inbox` row per member but the sender (message, user, read and
    /// mentioned flags) in the message's own transaction, written by the
    /// insert strategy: an unread count is the reader's unread rows of the
    /// chat. Reading sets the flag on the reader's rows up to the marker.
    Inbox,
}

impl MessageFanout {
    /// Every mode, in a stable order.
    pub const ALL: [MessageFanout; 2] = [Self::None, Self::Inbox];

    /// The name used in env vars, headers, metric labels and logs.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Inbox => "inbox",
        }
    }
}

impl fmt::Display for MessageFanout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A fan-out name that is not one of [`MessageFanout::ALL`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown message fan-out {0:?}: expected none or inbox")]
pub struct UnknownFanout(pub String);

impl FromStr for MessageFanout {
    type Err = UnknownFanout;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "none" => Ok(Self::None),
            "inbox" => Ok(Self::Inbox),
            _ => Err(UnknownFanout(s.to_owned())),
        }
    }
}

/// `POST /v1/chats/{id}/read`: the caller has read the chat up to and
/// including `up_to`, one of its messages. A marker only moves forward.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MarkRead {
    /// The chat.
    pub chat_id: ChatId,
    /// Who read.
    pub reader: UserId,
    /// The newest message read.
    pub up_to: MessageId,
}

/// A member's read state of one chat.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadState {
    /// The chat.
    pub chat_id: ChatId,
    /// The newest message the member has read; `None` before their first
    /// read.
    pub read_up_to: Option<MessageId>,
    /// Talk messages by others, sent after the member joined and newer
    /// than the marker.
    pub unread_count: i64,
}

/// One chat as its member's chat list shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatSummary {
    /// The chat's id.
    pub chat_id: ChatId,
    /// Room name.
    pub name: String,
    /// The chat's newest message (every chat has one: "room created").
    pub last_message: Message,
    /// The member's read state.
    pub read: ReadState,
}

/// Whether `body` mentions `user` (`@` followed by the user's id, as
/// hyphenated lowercase text): the `mentioned` flag of the user's inbox
/// row. The SQL of the server-side fan-out tests the same.
pub fn mentions(body: &str, user: UserId) -> bool {
    body.contains(&format!("@{}", user.as_uuid()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for f in MessageFanout::ALL {
            assert_eq!(f.as_str().parse::<MessageFanout>(), Ok(f));
        }
        assert_eq!(" Inbox ".parse::<MessageFanout>(), Ok(MessageFanout::Inbox));
        assert!("outbox".parse::<MessageFanout>().is_err());
    }

    #[test]
    fn a_mention_is_the_users_id_after_an_at_sign() {
        let user = UserId::generate();
        let id = user.as_uuid().to_string();
        assert!(mentions(&format!("hi @{id}!"), user));
        assert!(!mentions(&format!("hi {id}"), user));
        assert!(!mentions("hi @someone", user));
    }
}
