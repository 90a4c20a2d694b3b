//! What one client may cost the server: how long its body may take, which
//! method names it may make the server remember, and what a path answers
//! to a method it does not take.
//!
//! - [`bound_body`]: a request body must arrive within
//!   `HTTP_BODY_TIMEOUT_MS` of its headers, else 408 and the connection
//!   closes. Bodies are read whole before a handler runs, so a client that
//!   trickles one never holds a database connection.
//! - [`method_label`]: the methods HTTP defines keep their name in metrics
//!   and spans; any other is `_OTHER` (OpenTelemetry's HTTP conventions),
//!   so made-up method names cannot grow `/metrics`.
//! - [`KnownPaths`]: a path that exists but not with the request's method
//!   answers 405 with `Allow`, not 404; `HEAD` is served as `GET` without
//!   the body ([`head_as_get`]).

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use actix_web::body::MessageBody;
use actix_web::dev::{Payload, ResourceDef, ServiceRequest, ServiceResponse};
use actix_web::error::PayloadError;
use actix_web::http::{Method, header};
use actix_web::middleware::Next;
use actix_web::{Error, HttpMessage, web};
use bytes::Bytes;
use futures_util::Stream;
use tokio::time::{Instant, Sleep};

/// The longest a body may take, as app data for [`bound_body`].
#[derive(Debug, Clone, Copy)]
pub struct BodyTimeout(pub Duration);

/// The message of the I/O error a late body ends with; the JSON readers
/// turn it into 408.
pub const BODY_TIMEOUT_MESSAGE: &str = "the request body did not arrive in time";

/// Middleware: bounds the time a request's body may take, counted from
/// the moment its headers were read. Requests without a body pass
/// untouched (no timer).
pub async fn bound_body(
    mut req: ServiceRequest,
    next: Next<impl MessageBody>,
) -> Result<ServiceResponse<impl MessageBody>, Error> {
    let limit = req.app_data::<web::Data<BodyTimeout>>().map(|t| t.0);
    if let Some(limit) = limit.filter(|_| has_body(&req)) {
        let inner = req.take_payload();
        let bounded: Pin<Box<dyn Stream<Item = Result<Bytes, PayloadError>>>> =
            Box::pin(Deadline {
                inner,
                sleep: Box::pin(tokio::time::sleep_until(Instant::now() + limit)),
                expired: false,
            });
        req.set_payload(Payload::from(bounded));
    }
    next.call(req).await
}

fn has_body(req: &ServiceRequest) -> bool {
    let headers = req.headers();
    headers.contains_key(header::TRANSFER_ENCODING)
        || headers
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.trim() != "0")
}

/// A payload that fails with `TimedOut` once its deadline passes.
struct Deadline {
    inner: Payload,
    sleep: Pin<Box<Sleep>>,
    expired: bool,
}

impl Stream for Deadline {
    type Item = Result<Bytes, PayloadError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.expired {
            return Poll::Ready(None);
        }
        if let Poll::Ready(item) = Pin::new(&mut self.inner).poll_next(cx) {
            return Poll::Ready(item);
        }
        match self.sleep.as_mut().poll(cx) {
            Poll::Ready(()) => {
                self.expired = true;
                Poll::Ready(Some(Err(PayloadError::Io(io::Error::new(
                    io::ErrorKind::TimedOut,
                    BODY_TIMEOUT_MESSAGE,
                )))))
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

/// Whether a payload error is [`bound_body`]'s deadline.
pub fn is_body_timeout(err: &PayloadError) -> bool {
    matches!(err, PayloadError::Io(e) if e.kind() == io::ErrorKind::TimedOut)
}

/// The method as a metric label or span attribute: one of HTTP's own
/// methods, else `_OTHER`.
pub fn method_label(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::HEAD => "HEAD",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::DELETE => "DELETE",
        Method::CONNECT => "CONNECT",
        Method::OPTIONS => "OPTIONS",
        Method::TRACE => "TRACE",
        Method::PATCH => "PATCH",
        _ => "_OTHER",
    }
}

/// Middleware: routes a `HEAD` request as its `GET`. The HTTP/1 encoder
/// remembers the request was `HEAD` and sends the headers (with the
/// length) but not the body.
pub async fn head_as_get(
    mut req: ServiceRequest,
    next: Next<impl MessageBody>,
) -> Result<ServiceResponse<impl MessageBody>, Error> {
    if req.method() == Method::HEAD {
        req.head_mut().method = Method::GET;
    }
    next.call(req).await
}

/// The public paths and the methods each takes, from the OpenAPI
/// document (which is collected from the router, so they agree).
#[derive(Debug, Default)]
pub struct KnownPaths(Vec<(ResourceDef, Vec<&'static str>)>);

impl KnownPaths {
    /// Every path of `doc` with its methods (`HEAD` beside `GET`).
    pub fn from_document(doc: &utoipa::openapi::OpenApi) -> Self {
        let paths = doc
            .paths
            .paths
            .iter()
            .map(|(template, item)| {
                let mut methods = Vec::new();
                if item.get.is_some() {
                    methods.extend(["GET", "HEAD"]);
                }
                for (op, name) in [
                    (&item.post, "POST"),
                    (&item.put, "PUT"),
                    (&item.patch, "PATCH"),
                    (&item.delete, "DELETE"),
                ] {
                    if op.is_some() {
                        methods.push(name);
                    }
                }
                (ResourceDef::new(template.as_str()), methods)
            })
            .collect();
        Self(paths)
    }

    /// The methods `path` takes, if it is a known path.
    pub fn allowed(&self, path: &str) -> Option<&[&'static str]> {
        self.0
            .iter()
            .find(|(def, _)| def.is_match(path))
            .map(|(_, methods)| methods.as_slice())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_methods_share_one_label() {
        assert_eq!(method_label(&Method::GET), "GET");
        assert_eq!(method_label(&Method::PATCH), "PATCH");
        let made_up = Method::from_bytes(b"XYZZY").map_or("?", |m| method_label(&m));
        assert_eq!(made_up, "_OTHER");
    }

    #[test]
    fn known_paths_list_the_methods_of_the_document() {
        let known = KnownPaths::from_document(&crate::openapi::document());
        assert_eq!(
            known.allowed("/v1/chats/0190f0d4-0000-7000-8000-000000000000/messages"),
            Some(&["GET", "HEAD", "POST"][..])
        );
        assert_eq!(known.allowed("/v1/chats"), Some(&["POST"][..]));
        // The import path, not the member's, whose id is a UUID.
        assert_eq!(
            known.allowed("/v1/chats/0190f0d4-0000-7000-8000-000000000000/members/import"),
            Some(&["POST"][..])
        );
        assert_eq!(
            known.allowed("/metrics"),
            None,
            "operator paths are not public"
        );
        assert_eq!(known.allowed("/v1/nothing"), None);
    }
}
