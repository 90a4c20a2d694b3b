//! The live streams' DTOs.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// A ticket that opens one live stream, once: `GET /v1/events?ticket=` or
/// `GET /v1/ws?ticket=`.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct LiveTicketResponse {
    /// The ticket (43 characters of base64url). Put it in the stream's URL
    /// and nowhere else; ask for a new one for every stream you open.
    pub ticket: String,
    /// When it stops opening anything (`LIVE_TICKET_TTL_SECS`, 30 s by
    /// default, after it was issued).
    pub expires_at: DateTime<Utc>,
}
