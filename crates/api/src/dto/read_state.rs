//! Read markers and unread state: `POST /v1/chats/{id}/read`,
//! `GET /v1/me/chats` and `GET /v1/me/chats/{id}`.

use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

use chatlab_domain::{ChatSummary, MessageId, Page, ReadState};

use super::MessageResponse;

/// `POST /v1/chats/{id}/read`: the caller has read the chat up to and
/// including this message. A marker only moves forward: an older message
/// changes nothing.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MarkReadRequest {
    /// One of the chat's messages.
    pub up_to: Uuid,
}

/// A member's read state of one chat.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ReadStateResponse {
    /// The chat.
    pub chat_id: Uuid,
    /// The newest message the member has read; absent before their first
    /// read.
    pub read_up_to: Option<Uuid>,
    /// Talk messages by others, sent after the member joined and newer
    /// than the marker.
    #[schema(minimum = 0)]
    pub unread_count: i64,
}

impl From<ReadState> for ReadStateResponse {
    fn from(r: ReadState) -> Self {
        Self {
            chat_id: r.chat_id.into(),
            read_up_to: r.read_up_to.map(Into::into),
            unread_count: r.unread_count,
        }
    }
}

/// One chat of the caller's chat list.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ChatSummaryResponse {
    /// The chat.
    pub chat_id: Uuid,
    /// Room name.
    pub name: String,
    /// The chat's newest message.
    pub last_message: MessageResponse,
    /// The newest message the caller has read; absent before their first
    /// read.
    pub read_up_to: Option<Uuid>,
    /// Talk messages by others, sent after the caller joined and newer
    /// than the marker.
    #[schema(minimum = 0)]
    pub unread_count: i64,
}

impl From<ChatSummary> for ChatSummaryResponse {
    fn from(c: ChatSummary) -> Self {
        Self {
            chat_id: c.chat_id.into(),
            name: c.name,
            last_message: c.last_message.into(),
            read_up_to: c.read.read_up_to.map(Into::into),
            unread_count: c.read.unread_count,
        }
    }
}

/// `GET /v1/me/chats` query.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct MyChatsQuery {
    /// Cursor: chats whose newest message is older than this message id
    /// (the previous page's `next_cursor`).
    pub before: Option<Uuid>,
    /// Page size, 1 to 100 (default 50).
    #[param(minimum = 1, maximum = 100)]
    pub limit: Option<u32>,
}

/// A page of the caller's chats, newest activity first.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct MyChatsPage {
    /// Chats, the one with the newest message first.
    pub items: Vec<ChatSummaryResponse>,
    /// Pass as `before` for the next page; absent on the last page.
    pub next_cursor: Option<Uuid>,
}

impl From<Page<ChatSummary, MessageId>> for MyChatsPage {
    fn from(p: Page<ChatSummary, MessageId>) -> Self {
        Self {
            items: p.items.into_iter().map(Into::into).collect(),
            next_cursor: p.next_cursor.map(Into::into),
        }
    }
}
