//! Fan-out: whether a message also writes one row per recipient (fan-out
//! on write) or unread counts are computed from the messages and the read
//! markers (fan-out on read), and what a mention is. What a reader sees of
//! it is in [`crate::read_state`].

use std::fmt;
use std::str::FromStr;

use crate::ids::UserId;

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
