use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use chatlab_domain::User;

/// `POST /v1/users`.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateUserRequest {
    /// Display name, 1 to 100 characters (trimmed).
    #[schema(example = "ada")]
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
