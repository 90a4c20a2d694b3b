use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

use chatlab_domain::{Chat, ChatCreated, Member, Page, UserId};

/// `POST /v1/chats`.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateChatRequest {
    /// Room name, 1 to 200 characters (trimmed), no control character.
    #[schema(
        example = "general",
        min_length = 1,
        max_length = 200,
        pattern = r"^[^\u0000-\u001f\u007f-\u009f]*[^\s\u0000-\u001f\u007f-\u009f][^\u0000-\u001f\u007f-\u009f]*$"
    )]
    pub name: String,
    /// Other members. The creator, the token's subject, is always made a
    /// member (and owns the chat); repeated ids and the creator's own id
    /// collapse into one membership each.
    #[serde(default)]
    #[schema(max_items = 10000)]
    pub member_ids: Vec<Uuid>,
}

/// What createChat wrote.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ChatCreatedResponse {
    /// The new chat's id.
    pub id: Uuid,
    /// Room name.
    pub name: String,
    /// Members written, creator included.
    pub member_count: usize,
    /// The "room created" system message.
    pub system_message_id: Uuid,
    /// Creation time.
    pub created_at: DateTime<Utc>,
}

impl From<ChatCreated> for ChatCreatedResponse {
    fn from(c: ChatCreated) -> Self {
        Self {
            id: c.id.into(),
            name: c.name,
            member_count: c.member_count,
            system_message_id: c.system_message_id.into(),
            created_at: c.created_at,
        }
    }
}

/// A chat.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ChatResponse {
    /// The chat's id.
    pub id: Uuid,
    /// Room name.
    pub name: String,
    /// Its creator.
    pub creator_id: Uuid,
    /// Its owner, who adds and removes members: the creator until they
    /// hand it over.
    pub owner_id: Uuid,
    /// Members, creator included.
    pub member_count: i64,
    /// Creation time.
    pub created_at: DateTime<Utc>,
}

impl From<Chat> for ChatResponse {
    fn from(c: Chat) -> Self {
        Self {
            id: c.id.into(),
            name: c.name,
            creator_id: c.creator_id.into(),
            owner_id: c.owner_id.into(),
            member_count: c.member_count,
            created_at: c.created_at,
        }
    }
}

/// `GET /v1/chats/{id}/members` query.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct MembersQuery {
    /// Cursor: the `next_cursor` of the previous page (members are ordered by user id).
    pub after: Option<Uuid>,
    /// Page size, 1 to 100 (default 50).
    #[param(minimum = 1, maximum = 100)]
    pub limit: Option<u32>,
}

/// One member.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct MemberResponse {
    /// The member's user id.
    pub user_id: Uuid,
    /// When they joined.
    pub joined_at: DateTime<Utc>,
}

/// A page of members.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct MembersPage {
    /// Members ordered by user id.
    pub items: Vec<MemberResponse>,
    /// Pass as `after` for the next page; absent on the last page.
    pub next_cursor: Option<Uuid>,
}

impl From<Page<Member, UserId>> for MembersPage {
    fn from(p: Page<Member, UserId>) -> Self {
        Self {
            items: p
                .items
                .into_iter()
                .map(|m| MemberResponse {
                    user_id: m.user_id.into(),
                    joined_at: m.joined_at,
                })
                .collect(),
            next_cursor: p.next_cursor.map(Into::into),
        }
    }
}
