use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use chatlab_domain::{AddMembers, TransferOwnership};

/// `POST /v1/chats/{id}/members`.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AddMembersRequest {
    /// Users to add; repeated ids collapse into one.
    #[schema(min_items = 1, max_items = 10000)]
    pub user_ids: Vec<Uuid>,
}

/// What an addition wrote.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct MembersAddedResponse {
    /// The chat.
    pub chat_id: Uuid,
    /// The users added, each once.
    pub user_ids: Vec<Uuid>,
    /// The `membership` message recording the change.
    pub message_id: Uuid,
    /// When.
    pub created_at: DateTime<Utc>,
}

impl From<&AddMembers> for MembersAddedResponse {
    fn from(c: &AddMembers) -> Self {
        Self {
            chat_id: c.chat_id.into(),
            user_ids: c.user_ids.iter().map(|id| id.as_uuid()).collect(),
            message_id: c.message_id.into(),
            created_at: c.created_at,
        }
    }
}

/// `PUT /v1/chats/{id}/owner`.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TransferOwnershipRequest {
    /// The new owner: a member of the chat.
    pub user_id: Uuid,
}

/// What a hand-over wrote.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct OwnerChangedResponse {
    /// The chat.
    pub chat_id: Uuid,
    /// The new owner.
    pub owner_id: Uuid,
    /// The `membership` message recording the change.
    pub message_id: Uuid,
    /// When.
    pub created_at: DateTime<Utc>,
}

impl From<&TransferOwnership> for OwnerChangedResponse {
    fn from(c: &TransferOwnership) -> Self {
        Self {
            chat_id: c.chat_id.into(),
            owner_id: c.owner_id.into(),
            message_id: c.message_id.into(),
            created_at: c.created_at,
        }
    }
}
