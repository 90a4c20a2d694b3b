//! What chatlab stores, as read back from storage.

use chrono::{DateTime, Utc};

use crate::commands::{CreateChat, SendMessage};
use crate::ids::{ChatId, MessageId, UserId};

/// A registered user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    /// The user's id.
    pub id: UserId,
    /// Display name, 1 to 100 characters.
    pub name: String,
    /// When the user was created.
    pub created_at: DateTime<Utc>,
}

/// A chat room with its member count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chat {
    /// The chat's id.
    pub id: ChatId,
    /// Room name, 1 to 200 characters.
    pub name: String,
    /// Who created it (a member no longer, if they left).
    pub creator_id: UserId,
    /// Who owns it: the creator until they hand it over.
    pub owner_id: UserId,
    /// Number of members, creator included.
    pub member_count: i64,
    /// When it was created.
    pub created_at: DateTime<Utc>,
}

/// What createChat wrote, returned to the caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatCreated {
    /// The new chat's id.
    pub id: ChatId,
    /// Room name.
    pub name: String,
    /// Members written, creator included, duplicates collapsed.
    pub member_count: usize,
    /// The "room created" system message.
    pub system_message_id: MessageId,
    /// When the chat was created.
    pub created_at: DateTime<Utc>,
}

impl ChatCreated {
    /// What `command` writes when it commits: every field is known before
    /// the write, so a keyed write can store its response with its key.
    pub fn of(command: &CreateChat) -> Self {
        Self {
            id: command.chat_id,
            name: command.name.clone(),
            member_count: command.member_ids.len(),
            system_message_id: command.system_message_id,
            created_at: command.created_at,
        }
    }
}

/// One membership row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    /// The member.
    pub user_id: UserId,
    /// When they joined.
    pub joined_at: DateTime<Utc>,
}

/// Whether a message was written by the system or by a member.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MessageKind {
    /// Written by chatlab itself ("room created"); has no sender.
    System,
    /// Written by a member.
    Talk,
    /// A change of membership (members added, one removed or leaving, the
    /// ownership handed over); its sender made the change.
    Membership,
}

impl MessageKind {
    /// The stored name: `system`, `talk` or `membership`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::System => "system",
            Self::Talk => "talk",
            Self::Membership => "membership",
        }
    }

    /// Parses the stored name.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "system" => Some(Self::System),
            "talk" => Some(Self::Talk),
            "membership" => Some(Self::Membership),
            _ => None,
        }
    }
}

/// A message in a chat.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// The message's id; ordering by it is ordering by time.
    pub id: MessageId,
    /// The chat it belongs to.
    pub chat_id: ChatId,
    /// Its author; `None` for system messages.
    pub sender_id: Option<UserId>,
    /// System or talk.
    pub kind: MessageKind,
    /// The text, 1 to 4,000 characters.
    pub body: String,
    /// When it was written.
    pub created_at: DateTime<Utc>,
}

impl Message {
    /// The talk message `command` writes when it commits.
    pub fn sent(command: &SendMessage) -> Self {
        Self {
            id: command.id,
            chat_id: command.chat_id,
            sender_id: Some(command.sender_id),
            kind: MessageKind::Talk,
            body: command.body.clone(),
            created_at: command.created_at,
        }
    }
}
