//! `Idempotency-Key` on writes: the header, the request's fingerprint, and
//! the response a keyed write stores and a retry gets back.
//!
//! A write sent with a key builds its response before it writes (every id
//! and timestamp is the application's), and the store keeps it with the
//! key in the write's transaction. A retry under the same key gets that
//! response byte for byte, with `Idempotent-Replayed: true`, and nothing is
//! written or published again. The fingerprint is a SHA-256 over the
//! operation, the path and the request re-serialized from its parsed form
//! (so whitespace and key order do not count); the same key with another
//! fingerprint is a 422.

use std::future::{Ready, ready};

use actix_web::dev::Payload;
use actix_web::http::StatusCode;
use actix_web::http::header::ContentType;
use actix_web::{FromRequest, HttpRequest, HttpResponse, HttpResponseBuilder};
use serde::Serialize;
use sha2::{Digest, Sha256};
use utoipa::openapi::RefOr;
use utoipa::openapi::schema::{ObjectBuilder, Schema, Type};

use chatlab_domain::{IdempotencyKey, KeyClaim, Keyed, StoredResponse, UserId};

use crate::problem::ApiError;

/// The request header.
pub const IDEMPOTENCY_KEY_HEADER: &str = "idempotency-key";

/// The response header on a replayed response.
pub const REPLAYED_HEADER: &str = "idempotent-replayed";

/// What `Idempotency-Key` takes, for the OpenAPI document: 1 to 255
/// visible ASCII characters.
#[derive(Debug)]
pub struct IdempotencyKeyValue;

impl utoipa::PartialSchema for IdempotencyKeyValue {
    fn schema() -> RefOr<Schema> {
        ObjectBuilder::new()
            .schema_type(Type::String)
            .min_length(Some(1))
            .max_length(Some(chatlab_domain::idempotency::MAX_IDEMPOTENCY_KEY_LEN))
            .pattern(Some("^[!-~]+$"))
            .into()
    }
}

impl utoipa::ToSchema for IdempotencyKeyValue {}

/// The request's `Idempotency-Key`, if it sent one; a malformed one is a
/// 400.
#[derive(Debug, Clone)]
pub struct IdempotencyKeyHeader(pub Option<IdempotencyKey>);

impl FromRequest for IdempotencyKeyHeader {
    type Error = ApiError;
    type Future = Ready<Result<Self, Self::Error>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        ready(parse(req))
    }
}

fn parse(req: &HttpRequest) -> Result<IdempotencyKeyHeader, ApiError> {
    let mut values = req.headers().get_all(IDEMPOTENCY_KEY_HEADER);
    let Some(value) = values.next() else {
        return Ok(IdempotencyKeyHeader(None));
    };
    if values.next().is_some() {
        return Err(ApiError::BadRequest(
            "Idempotency-Key was sent more than once".to_owned(),
        ));
    }
    let text = value.to_str().map_err(|_| {
        ApiError::BadRequest("Idempotency-Key must be visible ASCII characters".to_owned())
    })?;
    let key = IdempotencyKey::parse(text).map_err(|e| ApiError::BadRequest(e.to_string()))?;
    Ok(IdempotencyKeyHeader(Some(key)))
}

/// A keyed write's response, prepared before the write: its status and
/// body, and the claim the store writes with it when a key was sent.
#[derive(Debug)]
pub struct PreparedResponse {
    status: StatusCode,
    body: String,
    claim: Option<KeyClaim>,
}

impl PreparedResponse {
    /// Prepares `response` (answered with `status`) for the request
    /// `request` to `operation` at `path` by `caller`.
    pub fn new(
        key: IdempotencyKeyHeader,
        caller: UserId,
        operation: &str,
        path: &str,
        request: &impl Serialize,
        status: StatusCode,
        response: &impl Serialize,
    ) -> Result<Self, ApiError> {
        let body = serde_json::to_string(response).map_err(|e| ApiError::Internal(e.into()))?;
        let claim = match key.0 {
            None => None,
            Some(key) => Some(KeyClaim {
                user_id: caller,
                key,
                fingerprint: fingerprint(operation, path, request)?,
                response: StoredResponse {
                    status: status.as_u16(),
                    body: body.clone(),
                },
            }),
        };
        Ok(Self {
            status,
            body,
            claim,
        })
    }

    /// The claim to hand the store, when a key was sent.
    pub fn claim(&self) -> Option<KeyClaim> {
        self.claim.clone()
    }

    /// The response: the prepared one for a fresh write (with `headers`),
    /// or the stored one of a replay ([`Self::replay`]).
    pub fn respond<T>(
        self,
        outcome: Keyed<T>,
        headers: impl FnOnce(&mut HttpResponseBuilder),
    ) -> Result<HttpResponse, ApiError> {
        match outcome {
            Keyed::Fresh(_) => {
                let mut response = HttpResponse::build(self.status);
                headers(&mut response);
                Ok(response.content_type(ContentType::json()).body(self.body))
            }
            Keyed::Replayed(stored) => Self::replay(stored),
        }
    }

    /// A stored response, answered again. A stored status that is not an
    /// HTTP status (a row written by hand, or by another program) is an
    /// internal error, logged, rather than a guess at what was answered.
    pub fn replay(stored: StoredResponse) -> Result<HttpResponse, ApiError> {
        let status = StatusCode::from_u16(stored.status).map_err(|e| {
            tracing::error!(
                status = stored.status,
                "a stored idempotent response has no valid HTTP status"
            );
            ApiError::Internal(
                format!(
                    "the stored response's status {} is not an HTTP status: {e}",
                    stored.status
                )
                .into(),
            )
        })?;
        Ok(HttpResponse::build(status)
            .insert_header((REPLAYED_HEADER, "true"))
            .content_type(ContentType::json())
            .body(stored.body))
    }
}

/// SHA-256 over the operation, the path and the canonical request body,
/// each ended by a NUL so no two splits hash alike.
fn fingerprint(operation: &str, path: &str, request: &impl Serialize) -> Result<Vec<u8>, ApiError> {
    let body = serde_json::to_vec(request).map_err(|e| ApiError::Internal(e.into()))?;
    let mut hash = Sha256::new();
    for part in [operation.as_bytes(), path.as_bytes(), &body] {
        hash.update(part);
        hash.update([0u8]);
    }
    Ok(hash.finalize().to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Serialize)]
    struct Body {
        name: &'static str,
    }

    #[test]
    fn fingerprints_tell_operation_path_and_body_apart() {
        let base = fingerprint("createChat", "/v1/chats", &Body { name: "a" }).unwrap();
        assert_eq!(
            base,
            fingerprint("createChat", "/v1/chats", &Body { name: "a" }).unwrap()
        );
        assert_ne!(
            base,
            fingerprint("createChat", "/v1/chats", &Body { name: "b" }).unwrap()
        );
        assert_ne!(
            base,
            fingerprint("sendMessage", "/v1/chats", &Body { name: "a" }).unwrap()
        );
        assert_ne!(
            base,
            fingerprint("createChat", "/v1/chatsx", &Body { name: "a" }).unwrap()
        );
        assert_eq!(base.len(), 32);
    }
}
