//! Errors as `application/problem+json` (RFC 9457).
//!
//! Policy: handlers return [`ApiError`]. Each variant has one status and a
//! stable `type` URI (`urn:chatlab:problem:<slug>`) that clients can match
//! on; `title` is fixed per type, `detail` says what happened to this
//! request. Errors a client can fix say exactly what to fix (every invalid
//! field, every unknown user id). A 5xx never echoes internals: the full
//! `source()` chain goes to the log, the client gets a generic detail.

pub(crate) mod rejections;

use std::error::Error as StdError;
use std::fmt;

use actix_web::http::StatusCode;
use actix_web::http::header::{self, HeaderValue};
use actix_web::{HttpResponse, ResponseError};
use serde::Serialize;
use utoipa::ToSchema;
use uuid::Uuid;

use chatlab_auth::TokenRejection;
use chatlab_domain::{RepositoryError, UnavailableReason, ValidationErrors};

use crate::dto::ChunkResponse;

/// The problem+json media type.
pub const PROBLEM_JSON: &str = "application/problem+json";

/// Seconds a client should wait before retrying a 503.
const RETRY_AFTER_SECS: u32 = 1;

/// An RFC 9457 problem document.
#[derive(Debug, Serialize, ToSchema)]
pub struct Problem {
    /// Stable identifier of the problem type.
    #[serde(rename = "type")]
    #[schema(example = "urn:chatlab:problem:validation")]
    pub problem_type: String,
    /// Short summary, the same for every occurrence of the type.
    pub title: String,
    /// HTTP status code.
    pub status: u16,
    /// What went wrong with this request.
    pub detail: String,
    /// Every invalid field, for validation problems.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub errors: Option<Vec<FieldProblem>>,
    /// The unknown user ids, for `unknown-users` problems (and an
    /// `import-stopped` one caused by unknown users).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unknown_user_ids: Option<Vec<Uuid>>,
    /// The ids that are members already, for `already-members` problems.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub already_member_ids: Option<Vec<Uuid>>,
    /// `import-stopped`: what caused the stop (`urn:chatlab:problem:...`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cause_type: Option<String>,
    /// `import-stopped`: rows committed before the job stopped.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rows_written: Option<usize>,
    /// `import-stopped`: the committed chunks, by index.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub committed_chunks: Option<Vec<ChunkResponse>>,
    /// `import-stopped`: the chunk that failed; none of its rows were
    /// written.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failed_chunk: Option<ChunkResponse>,
    /// The trace this request belongs to (32 hex digits), when it belongs
    /// to one: the server's own when tracing is on, else the caller's
    /// `traceparent`. Also in the `X-Trace-Id` header.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(example = "4bf92f3577b34da6a3ce929d0e0e4736")]
    pub trace_id: Option<String>,
}

/// One invalid field.
#[derive(Debug, Serialize, ToSchema)]
pub struct FieldProblem {
    /// The field, as named in the request.
    pub field: String,
    /// What is wrong with it.
    pub message: String,
}

/// Everything a handler can fail with.
#[derive(Debug)]
pub enum ApiError {
    /// The request could not be read: malformed JSON, a bad path or query
    /// parameter, a bad header.
    BadRequest(String),
    /// The body is not JSON (wrong `Content-Type`).
    UnsupportedMediaType(String),
    /// The body is larger than `HTTP_JSON_LIMIT_BYTES`.
    PayloadTooLarge(String),
    /// Fields failed validation.
    Validation(ValidationErrors),
    /// The request names users that do not exist.
    UnknownUsers(Vec<Uuid>),
    /// The resource does not exist.
    NotFound(String),
    /// No route matches the path.
    NoRoute(String),
    /// The path exists, but not with this method; `Allow` lists those it
    /// takes.
    MethodNotAllowed {
        /// The methods the path takes.
        allow: Vec<&'static str>,
    },
    /// The body did not arrive within `HTTP_BODY_TIMEOUT_MS`.
    RequestTimeout(String),
    /// The request's URI is longer than the server reads.
    UriTooLong(String),
    /// The request's headers are larger than the server reads.
    HeadersTooLarge(String),
    /// A live stream refused by a stream limit.
    TooManyStreams {
        /// Which limit, and what to do.
        detail: String,
        /// Seconds after which a retry may be admitted (`Retry-After`).
        retry_after_secs: u64,
    },
    /// No valid bearer token.
    Unauthorized(TokenRejection),
    /// The caller is a member but only the owner may do this.
    NotTheOwner(String),
    /// The caller may not do this (not a member of the chat).
    Forbidden(String),
    /// The write collides with existing data.
    Conflict(String),
    /// Users to add are members already.
    AlreadyMembers(Vec<Uuid>),
    /// The owner asked to leave without handing over.
    OwnerCannotLeave(String),
    /// The `Idempotency-Key` was used before for another request.
    IdempotencyKeyReused,
    /// A request with the same `Idempotency-Key` is still running.
    IdempotencyKeyInFlight,
    /// Storage cannot serve now; retry.
    Unavailable {
        /// What ran out or broke.
        reason: UnavailableReason,
        /// The underlying error, logged.
        source: Box<dyn StdError + Send + Sync>,
    },
    /// A bug or unexpected failure; logged, never shown.
    Internal(Box<dyn StdError + Send + Sync>),
    /// An import job stopped at a failed chunk after committing others.
    /// The status is the cause's.
    ImportStopped {
        /// Why the chunk failed.
        cause: Box<ApiError>,
        /// The chunk that failed.
        failed: ChunkResponse,
        /// The chunks committed, by index.
        committed: Vec<ChunkResponse>,
    },
}

impl ApiError {
    fn slug_and_title(&self) -> (&'static str, &'static str) {
        match self {
            Self::BadRequest(_) => ("bad-request", "The request could not be read"),
            Self::UnsupportedMediaType(_) => ("unsupported-media-type", "Unsupported media type"),
            Self::PayloadTooLarge(_) => ("payload-too-large", "Request body too large"),
            Self::Validation(_) => ("validation", "The request is invalid"),
            Self::UnknownUsers(_) => ("unknown-users", "Unknown users"),
            Self::NotFound(_) => ("not-found", "Resource not found"),
            Self::NoRoute(_) => ("no-route", "No such endpoint"),
            Self::MethodNotAllowed { .. } => ("method-not-allowed", "Method not allowed"),
            Self::RequestTimeout(_) => ("request-timeout", "The request body came too slowly"),
            Self::UriTooLong(_) => ("uri-too-long", "The request URI is too long"),
            Self::HeadersTooLarge(_) => (
                "header-fields-too-large",
                "The request headers are too large",
            ),
            Self::TooManyStreams { .. } => ("too-many-streams", "Too many live streams"),
            Self::Unauthorized(_) => ("unauthorized", "Authentication required"),
            Self::NotTheOwner(_) => ("not-the-owner", "Only the chat's owner may do this"),
            Self::Forbidden(_) => ("not-a-member", "Not a member of the chat"),
            Self::Conflict(_) => ("conflict", "Conflict"),
            Self::AlreadyMembers(_) => ("already-members", "Already members of the chat"),
            Self::OwnerCannotLeave(_) => (
                "owner-cannot-leave",
                "The owner must hand the chat over before leaving",
            ),
            Self::IdempotencyKeyReused => (
                "idempotency-key-reused",
                "The idempotency key was used for another request",
            ),
            Self::IdempotencyKeyInFlight => (
                "idempotency-key-in-flight",
                "A request with this idempotency key is still in progress",
            ),
            Self::Unavailable { .. } => ("unavailable", "Service temporarily unavailable"),
            Self::Internal(_) => ("internal", "Internal error"),
            Self::ImportStopped { .. } => (
                "import-stopped",
                "The import stopped at a failed chunk; earlier chunks are committed",
            ),
        }
    }

    fn detail(&self) -> String {
        match self {
            Self::BadRequest(d)
            | Self::UnsupportedMediaType(d)
            | Self::PayloadTooLarge(d)
            | Self::NotFound(d)
            | Self::NoRoute(d)
            | Self::RequestTimeout(d)
            | Self::UriTooLong(d)
            | Self::HeadersTooLarge(d)
            | Self::TooManyStreams { detail: d, .. }
            | Self::NotTheOwner(d)
            | Self::Forbidden(d)
            | Self::Conflict(d)
            | Self::OwnerCannotLeave(d) => d.clone(),
            Self::AlreadyMembers(ids) => format!(
                "{} user id(s) are members already: {}; nothing was written",
                ids.len(),
                ids.iter()
                    .map(Uuid::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            Self::Validation(errors) => errors.to_string(),
            Self::IdempotencyKeyReused => "this Idempotency-Key was sent before with another \
                 operation, path or body; nothing was written: use a new key for a new request"
                .to_owned(),
            Self::IdempotencyKeyInFlight => "a request with this Idempotency-Key is still being \
                 written; retry it shortly to get its response"
                .to_owned(),
            Self::MethodNotAllowed { allow } => {
                format!("this path takes {}", allow.join(", "))
            }
            Self::Unauthorized(why) => why.to_string(),
            Self::UnknownUsers(ids) => format!(
                "{} user id(s) do not exist: {}; nothing was written",
                ids.len(),
                ids.iter()
                    .map(Uuid::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            Self::Unavailable { reason, .. } => format!("{reason}; retry shortly"),
            Self::Internal(_) => "an unexpected error occurred; it has been logged".to_owned(),
            Self::ImportStopped {
                cause,
                failed,
                committed,
            } => {
                format!(
                    "chunk {} (rows {} to {}) failed and wrote nothing: {}; {} chunk(s) with {} \
                     row(s) are committed (committed_chunks)",
                    failed.index,
                    failed.first_row,
                    failed.first_row + failed.rows.saturating_sub(1),
                    cause.detail(),
                    committed.len(),
                    rows_in(committed),
                )
            }
        }
    }

    /// The problem document for this error.
    pub fn problem(&self) -> Problem {
        let (slug, title) = self.slug_and_title();
        let mut problem = Problem {
            problem_type: format!("urn:chatlab:problem:{slug}"),
            title: title.to_owned(),
            status: self.status_code().as_u16(),
            detail: self.detail(),
            errors: match self {
                Self::Validation(errors) => Some(
                    errors
                        .0
                        .iter()
                        .map(|e| FieldProblem {
                            field: e.field.to_owned(),
                            message: e.message.clone(),
                        })
                        .collect(),
                ),
                _ => None,
            },
            unknown_user_ids: match self {
                Self::UnknownUsers(ids) => Some(ids.clone()),
                _ => None,
            },
            already_member_ids: match self {
                Self::AlreadyMembers(ids) => Some(ids.clone()),
                _ => None,
            },
            cause_type: None,
            rows_written: None,
            committed_chunks: None,
            failed_chunk: None,
            trace_id: None,
        };
        if let Self::ImportStopped {
            cause,
            failed,
            committed,
        } = self
        {
            if let Self::UnknownUsers(ids) = cause.as_ref() {
                problem.unknown_user_ids = Some(ids.clone());
            }
            problem.cause_type = Some(format!("urn:chatlab:problem:{}", cause.slug_and_title().0));
            problem.rows_written = Some(rows_in(committed));
            problem.committed_chunks = Some(committed.clone());
            problem.failed_chunk = Some(*failed);
        }
        problem
    }
}

/// `WWW-Authenticate` for a refused token (RFC 6750 §3): the scheme and
/// realm, and the error code and its description when credentials came.
fn www_authenticate(why: TokenRejection) -> String {
    match why.error_code() {
        None => r#"Bearer realm="chatlab""#.to_owned(),
        Some(code) => {
            format!(r#"Bearer realm="chatlab", error="{code}", error_description="{why}""#)
        }
    }
}

/// Rows in these chunks.
fn rows_in(chunks: &[ChunkResponse]) -> usize {
    chunks.iter().map(|c| c.rows).sum()
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.detail())?;
        let mut source = StdError::source(self);
        while let Some(s) = source {
            write!(f, ": {s}")?;
            source = s.source();
        }
        Ok(())
    }
}

impl StdError for ApiError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        match self {
            Self::Unavailable { source, .. } | Self::Internal(source) => Some(source.as_ref()),
            Self::ImportStopped { cause, .. } => cause.source(),
            _ => None,
        }
    }
}

impl ResponseError for ApiError {
    fn status_code(&self) -> StatusCode {
        match self {
            Self::BadRequest(_) => StatusCode::BAD_REQUEST,
            Self::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Self::PayloadTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            Self::Validation(_) | Self::UnknownUsers(_) | Self::IdempotencyKeyReused => {
                StatusCode::UNPROCESSABLE_ENTITY
            }
            Self::NotFound(_) | Self::NoRoute(_) => StatusCode::NOT_FOUND,
            Self::MethodNotAllowed { .. } => StatusCode::METHOD_NOT_ALLOWED,
            Self::RequestTimeout(_) => StatusCode::REQUEST_TIMEOUT,
            Self::UriTooLong(_) => StatusCode::URI_TOO_LONG,
            Self::HeadersTooLarge(_) => StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            Self::TooManyStreams { .. } => StatusCode::TOO_MANY_REQUESTS,
            Self::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            Self::Forbidden(_) | Self::NotTheOwner(_) => StatusCode::FORBIDDEN,
            Self::Conflict(_)
            | Self::AlreadyMembers(_)
            | Self::OwnerCannotLeave(_)
            | Self::IdempotencyKeyInFlight => StatusCode::CONFLICT,
            Self::Unavailable { .. } => StatusCode::SERVICE_UNAVAILABLE,
            Self::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
            Self::ImportStopped { cause, .. } => cause.status_code(),
        }
    }

    fn error_response(&self) -> HttpResponse {
        let status = self.status_code();
        if status.is_server_error() {
            tracing::error!(error = %self, status = status.as_u16(), "request failed");
        }
        let mut response = HttpResponse::build(status);
        response.insert_header((header::CONTENT_TYPE, HeaderValue::from_static(PROBLEM_JSON)));
        match self {
            Self::Unavailable { .. } | Self::IdempotencyKeyInFlight => {
                response.insert_header((header::RETRY_AFTER, RETRY_AFTER_SECS.to_string()));
            }
            Self::Unauthorized(why) => {
                response.insert_header((header::WWW_AUTHENTICATE, www_authenticate(*why)));
            }
            Self::MethodNotAllowed { allow } => {
                response.insert_header((header::ALLOW, allow.join(", ")));
            }
            Self::RequestTimeout(_) | Self::UriTooLong(_) | Self::HeadersTooLarge(_) => {
                // The rest of the request may still be on its way. (actix
                // writes the `Connection` header from the response's
                // connection type, never from a header set here.)
                response.force_close();
            }
            Self::TooManyStreams {
                retry_after_secs, ..
            } => {
                response.insert_header((header::RETRY_AFTER, retry_after_secs.to_string()));
                // Its client is told to come back later: the connection is
                // not kept for it meanwhile.
                response.force_close();
            }
            _ => {}
        }
        let body = serde_json::to_vec(&self.problem()).unwrap_or_else(|_| b"{}".to_vec());
        response.body(body)
    }
}

impl From<ValidationErrors> for ApiError {
    fn from(errors: ValidationErrors) -> Self {
        Self::Validation(errors)
    }
}

impl From<RepositoryError> for ApiError {
    fn from(err: RepositoryError) -> Self {
        match err {
            RepositoryError::NotFound { entity, id } => {
                Self::NotFound(format!("{entity} {id} does not exist"))
            }
            RepositoryError::UnknownUsers(ids) => {
                Self::UnknownUsers(ids.into_iter().map(Into::into).collect())
            }
            e @ RepositoryError::NotAMember { .. } => Self::Forbidden(e.to_string()),
            e @ RepositoryError::NotTheOwner { .. } => Self::NotTheOwner(e.to_string()),
            RepositoryError::Conflict(what) => Self::Conflict(what),
            RepositoryError::AlreadyMembers(ids) => {
                Self::AlreadyMembers(ids.into_iter().map(Into::into).collect())
            }
            e @ RepositoryError::OwnerCannotLeave(_) => Self::OwnerCannotLeave(e.to_string()),
            RepositoryError::IdempotencyKeyReused => Self::IdempotencyKeyReused,
            RepositoryError::IdempotencyKeyInFlight => Self::IdempotencyKeyInFlight,
            RepositoryError::Unavailable { reason, source } => Self::Unavailable { reason, source },
            RepositoryError::Internal(source) => Self::Internal(source),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chatlab_domain::FieldError;

    #[test]
    fn validation_lists_every_field() {
        let err = ApiError::Validation(ValidationErrors(vec![
            FieldError {
                field: "name",
                message: "must not be empty".into(),
            },
            FieldError {
                field: "member_ids",
                message: "too many".into(),
            },
        ]));
        let p = err.problem();
        assert_eq!(p.status, 422);
        assert_eq!(p.problem_type, "urn:chatlab:problem:validation");
        assert_eq!(p.errors.as_ref().map(Vec::len), Some(2));
    }

    #[test]
    fn internal_errors_do_not_leak_their_source() {
        let err = ApiError::Internal("password=hunter2 in connection string".into());
        let p = err.problem();
        assert_eq!(p.status, 500);
        assert!(!p.detail.contains("hunter2"));
        // The log line does carry it.
        assert!(err.to_string().contains("hunter2"));
    }

    #[test]
    fn unavailable_says_retry_after() {
        let err = ApiError::Unavailable {
            reason: UnavailableReason::PoolTimeout,
            source: "timed out".into(),
        };
        let resp = err.error_response();
        assert_eq!(resp.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(
            resp.headers()
                .get(header::RETRY_AFTER)
                .and_then(|v| v.to_str().ok()),
            Some("1")
        );
        assert_eq!(
            resp.headers()
                .get(header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok()),
            Some(PROBLEM_JSON)
        );
    }
}
