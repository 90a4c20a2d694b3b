//! How large a request head may be.
//!
//! actix parses heads itself and answers what it cannot parse with a bare
//! response the server cannot shape: a head over 128 KiB is a 431, a URI
//! over 64 KiB (the `http` crate's limit), a NUL in a header, or
//! `Content-Length` beside `Transfer-Encoding` are a 400, each without a
//! body, and the connection closes. Below those limits [`bound_head`]
//! answers an oversized head itself, as a problem: a URI over
//! [`MAX_URI_BYTES`] is a 414, headers over [`MAX_HEADER_BYTES`] in all a
//! 431. Both limits leave room for the largest head the API documents (a
//! `Last-Event-ID` of 16 KiB, in the query for a WebSocket).

use actix_web::body::{EitherBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::middleware::Next;
use actix_web::{Error, ResponseError};

use crate::problem::ApiError;

/// The longest URI the server reads (path and query), in bytes.
pub const MAX_URI_BYTES: usize = 32 * 1024;

/// The most header bytes the server reads, names and values together.
pub const MAX_HEADER_BYTES: usize = 64 * 1024;

/// Middleware: a request whose URI or headers are larger than the server
/// reads is answered 414 or 431 as a problem, before anything else.
pub async fn bound_head(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<EitherBody<impl MessageBody>>, Error> {
    if let Some(too_large) = oversized(&req) {
        let response = too_large.error_response();
        return Ok(req.into_response(response).map_into_right_body());
    }
    next.call(req)
        .await
        .map(ServiceResponse::map_into_left_body)
}

/// The problem with `req`'s head, if it is too large.
fn oversized(req: &ServiceRequest) -> Option<ApiError> {
    let uri = req.uri().path_and_query().map_or(0, |pq| pq.as_str().len());
    if uri > MAX_URI_BYTES {
        return Some(ApiError::UriTooLong(format!(
            "the URI has {uri} bytes; this server reads at most {MAX_URI_BYTES}"
        )));
    }
    let headers: usize = req
        .headers()
        .iter()
        .map(|(name, value)| name.as_str().len() + value.len())
        .sum();
    (headers > MAX_HEADER_BYTES).then(|| {
        ApiError::HeadersTooLarge(format!(
            "the headers have {headers} bytes; this server reads at most {MAX_HEADER_BYTES}"
        ))
    })
}
