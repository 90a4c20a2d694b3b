//! Answers many operations document alike, written once and named in each
//! operation's `responses(...)`.

use utoipa::IntoResponses;

use crate::problem::Problem;

/// The caller's token is missing, malformed, expired or not ours.
#[derive(IntoResponses)]
#[response(
    status = 401,
    description = "No valid bearer token",
    content_type = "application/problem+json"
)]
pub(crate) struct Unauthenticated(#[allow(dead_code)] Problem);

/// A body that must be JSON came as something else.
#[derive(IntoResponses)]
#[response(
    status = 415,
    description = "The body is not sent as application/json",
    content_type = "application/problem+json"
)]
pub(crate) struct NotJson(#[allow(dead_code)] Problem);

/// A live stream's refusals (`GET /v1/events`, `GET /v1/ws`): no valid
/// credential, one stream too many, or the caller's chats unreadable.
// Documented, never built: the handlers answer these as `ApiError`s.
#[allow(dead_code)]
#[derive(IntoResponses)]
pub(crate) enum StreamRefusals {
    /// No valid token or ticket.
    #[response(
        status = 401,
        description = "No valid bearer token or live ticket (unknown, used, expired, or another user's than the token's), or its user does not exist",
        content_type = "application/problem+json"
    )]
    Unauthenticated(Problem),
    /// One stream too many.
    #[response(
        status = 429,
        description = "The caller holds `LIVE_MAX_STREAMS_PER_USER` streams already, or this instance `LIVE_MAX_STREAMS`; retry after `Retry-After` seconds",
        content_type = "application/problem+json",
        headers(("Retry-After" = u64, description = "Seconds to wait before opening a stream again"))
    )]
    TooMany(Problem),
    /// The database did not answer.
    #[response(
        status = 503,
        description = "Database unavailable: the caller's chats could not be read",
        content_type = "application/problem+json"
    )]
    Unavailable(Problem),
}
