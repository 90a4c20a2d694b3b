//! Unread state: what a reader sees (here), how a message reaches its
//! recipients ([`fanout`]), and how a read marker's move is written
//! ([`read_marker`]).
//!
//! Read state: a member marking a chat read, what they have read of one
//! chat, and their chat list with its unread counts. The same whichever
//! fan-out ([`fanout::MessageFanout`]) computes it.

pub mod fanout;
pub mod read_marker;

use crate::entities::Message;
use crate::ids::{ChatId, MessageId, UserId};

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
