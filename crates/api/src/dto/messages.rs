use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

use chatlab_domain::{Message, MessageId, Page};

/// `POST /v1/chats/{id}/messages`. The sender is the token's subject, and
/// must be a member of the chat.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SendMessageRequest {
    /// The text, 1 to 4,000 characters; no control character but tab and
    /// line breaks.
    #[schema(
        example = "hello",
        min_length = 1,
        max_length = 4000,
        pattern = r"^[^\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f-\u009f]*[^\s\u0000-\u001f\u007f-\u009f][^\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f-\u009f]*$"
    )]
    pub body: String,
}

/// A message.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct MessageResponse {
    /// The message's id (UUIDv7: ordering by id is ordering by time).
    pub id: Uuid,
    /// Its chat.
    pub chat_id: Uuid,
    /// Its author (for a membership message, who made the change); absent
    /// for system messages.
    pub sender_id: Option<Uuid>,
    /// `system` (written by chatlab), `talk` (written by a member) or
    /// `membership` (a change of members or owner, by its sender).
    #[schema(example = "talk", pattern = "^(system|talk|membership)$")]
    pub kind: String,
    /// The text.
    pub body: String,
    /// Creation time.
    pub created_at: DateTime<Utc>,
}

impl From<Message> for MessageResponse {
    fn from(m: Message) -> Self {
        Self {
            id: m.id.into(),
            chat_id: m.chat_id.into(),
            sender_id: m.sender_id.map(Into::into),
            kind: m.kind.as_str().to_owned(),
            body: m.body,
            created_at: m.created_at,
        }
    }
}

/// `GET /v1/chats/{id}/messages` query.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct MessagesQuery {
    /// Cursor: return messages older than this message id (the previous
    /// page's `next_cursor`).
    pub before: Option<Uuid>,
    /// Page size, 1 to 100 (default 50).
    #[param(minimum = 1, maximum = 100)]
    pub limit: Option<u32>,
}

/// A page of messages, newest first.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct MessagesPage {
    /// Messages, newest first.
    pub items: Vec<MessageResponse>,
    /// Pass as `before` for the next (older) page; absent on the last page.
    pub next_cursor: Option<Uuid>,
}

impl From<Page<Message, MessageId>> for MessagesPage {
    fn from(p: Page<Message, MessageId>) -> Self {
        Self {
            items: p.items.into_iter().map(Into::into).collect(),
            next_cursor: p.next_cursor.map(Into::into),
        }
    }
}
