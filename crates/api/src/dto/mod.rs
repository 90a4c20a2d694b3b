//! Request and response bodies: serde for the wire, utoipa for the spec.
//! Requests reject unknown fields, so a misspelt `member_ids` is a 400 and
//! not a chat with no members.

mod chats;
mod import_jobs;
mod messages;
mod users;

pub use chats::{
    ChatCreatedResponse, ChatResponse, CreateChatRequest, MemberResponse, MembersPage, MembersQuery,
};
pub use import_jobs::{
    ChunkResponse, ImportMembersRequest, ImportMessagesRequest, ImportResponse,
    ImportedMessageRequest,
};
pub use messages::{MessageResponse, MessagesPage, MessagesQuery, SendMessageRequest};
pub use users::{
    BulkUsersRequest, BulkUsersResponse, CreateUserRequest, CreatedUserResponse, TokenRequest,
    TokenResponse, UserResponse,
};

/// Service status, for `/healthz` and `/readyz`.
#[derive(Debug, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct StatusResponse {
    /// `ok` or `ready`.
    pub status: String,
}
