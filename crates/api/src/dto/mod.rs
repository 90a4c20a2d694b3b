//! Request and response bodies: serde for the wire, utoipa for the spec.
//! Requests reject unknown fields, so a misspelt `member_ids` is a 400 and
//! not a chat with no members.

mod chats;
mod import_jobs;
mod live;
mod members;
mod messages;
mod read_state;
mod users;

pub use chats::{
    ChatCreatedResponse, ChatResponse, CreateChatRequest, MemberResponse, MembersPage, MembersQuery,
};
pub use import_jobs::{
    ChunkResponse, ImportMembersRequest, ImportMessagesRequest, ImportResponse,
    ImportedMessageRequest,
};
pub use live::LiveTicketResponse;
pub use members::{
    AddMembersRequest, MembersAddedResponse, OwnerChangedResponse, TransferOwnershipRequest,
};
pub use messages::{MessageResponse, MessagesPage, MessagesQuery, SendMessageRequest};
pub use read_state::{
    ChatSummaryResponse, MarkReadRequest, MyChatsPage, MyChatsQuery, ReadStateResponse,
};
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

/// JSON Schema's `integer` is any number with no fractional part, so
/// `1000.0` is one; serde's integers refuse it. Counts in request bodies
/// read through this take both forms, and refuse a fraction or a negative
/// number as a malformed body.
pub(crate) mod integral {
    use serde::de::{Deserialize, Deserializer, Error};

    /// An optional count: absent, `null`, `1000` or `1000.0`.
    pub(crate) fn option_usize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<usize>, D::Error> {
        let Some(n) = Option::<serde_json::Number>::deserialize(d)? else {
            return Ok(None);
        };
        if let Some(u) = n.as_u64() {
            return usize::try_from(u)
                .map(Some)
                .map_err(|_| D::Error::custom(format!("{n} is too large")));
        }
        match n.as_f64() {
            Some(f) if f.fract() == 0.0 && f >= 0.0 && f <= u32::MAX as f64 => Ok(Some(f as usize)),
            _ => Err(D::Error::custom(format!(
                "expected a non-negative integer, got {n}"
            ))),
        }
    }

    #[cfg(test)]
    mod tests {
        #[derive(serde::Deserialize)]
        struct Count {
            #[serde(default, deserialize_with = "super::option_usize")]
            n: Option<usize>,
        }

        fn read(json: &str) -> Result<Option<usize>, String> {
            serde_json::from_str::<Count>(json)
                .map(|c| c.n)
                .map_err(|e| e.to_string())
        }

        #[test]
        fn integral_numbers_in_either_form_are_counts() {
            assert_eq!(read(r#"{"n": 1000}"#), Ok(Some(1000)));
            assert_eq!(read(r#"{"n": 1000.0}"#), Ok(Some(1000)));
            assert_eq!(read(r#"{"n": 1e3}"#), Ok(Some(1000)));
            assert_eq!(read(r#"{"n": null}"#), Ok(None));
            assert_eq!(read("{}"), Ok(None));
            assert!(read(r#"{"n": 1.5}"#).is_err());
            assert!(read(r#"{"n": -1}"#).is_err());
            assert!(read(r#"{"n": 1e300}"#).is_err());
            assert!(read(r#"{"n": "7"}"#).is_err());
        }
    }
}
