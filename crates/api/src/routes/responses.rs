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
