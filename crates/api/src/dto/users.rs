use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use chatlab_domain::User;

/// `POST /v1/users`.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateUserRequest {
    /// Display name, 1 to 100 characters (trimmed), no control character.
    #[schema(
        example = "ada",
        min_length = 1,
        max_length = 100,
        pattern = r"^[^\u0000-\u001f\u007f-\u009f]*[^\s\u0000-\u001f\u007f-\u009f][^\u0000-\u001f\u007f-\u009f]*$"
    )]
    pub name: String,
}

/// A user.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct UserResponse {
    /// The user's id (UUIDv7).
    pub id: Uuid,
    /// Display name.
    pub name: String,
    /// Creation time.
    pub created_at: DateTime<Utc>,
}

impl From<User> for UserResponse {
    fn from(u: User) -> Self {
        Self {
            id: u.id.into(),
            name: u.name,
            created_at: u.created_at,
        }
    }
}

/// `POST /v1/users`'s answer: the user and, when the server holds a
/// signing key, a bearer token for them.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct CreatedUserResponse {
    /// The user's id (UUIDv7).
    pub id: Uuid,
    /// Display name.
    pub name: String,
    /// Creation time.
    pub created_at: DateTime<Utc>,
    /// A bearer token acting as this user; absent when the server only
    /// verifies tokens (EdDSA or RS256 without a private key).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    /// When `token` expires.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token_expires_at: Option<DateTime<Utc>>,
}

/// `POST /v1/tokens` (development mode only).
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TokenRequest {
    /// An existing user's id.
    pub user_id: Uuid,
}

/// A bearer token.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct TokenResponse {
    /// The JWT, for `Authorization: Bearer <token>`.
    pub token: String,
    /// Always `Bearer`.
    #[schema(example = "Bearer")]
    pub token_type: String,
    /// When it expires.
    pub expires_at: DateTime<Utc>,
}

/// `POST /v1/users/bulk`: either `names`, or `count` users named
/// `{name_prefix}{n}`.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BulkUsersRequest {
    /// Explicit names, each 1 to 100 characters.
    #[serde(default)]
    pub names: Option<Vec<String>>,
    /// How many users to generate instead of listing names.
    #[serde(default)]
    #[schema(example = 1000)]
    pub count: Option<usize>,
    /// Prefix of generated names (default `user-`).
    #[serde(default)]
    pub name_prefix: Option<String>,
}

/// The ids of the users created, in request order.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct BulkUsersResponse {
    /// How many were created.
    pub count: usize,
    /// Their ids.
    pub ids: Vec<Uuid>,
}
