//! What one client may cost the server: how long its body may take, how
//! large its head may be, which method names it may make the server
//! remember, and what a path answers to a method it does not take.
//!
//! - [`bound_body`]: a request body must arrive within
//!   `HTTP_BODY_TIMEOUT_MS` of its headers, else 408 and the connection
//!   closes; a connection whose body is unfinished when it is answered is
//!   closed after the answer, whatever its framing. Bodies are read whole
//!   before a handler runs, so a client that trickles one never holds a
//!   database connection.
//! - [`bound_head`]: a URI or headers larger than the server reads are a
//!   414 or a 431 problem (larger still, actix's own bare 400 or 431).
//! - [`Guarded`] and [`count_in_flight`]: a request head that begins
//!   between two requests of a connection gets `HTTP_HEADER_TIMEOUT_MS`
//!   too (actix's own deadline covers the first), else 408 and the
//!   connection closes.
//! - [`method_label`]: the methods HTTP defines keep their name in metrics
//!   and spans; any other is `_OTHER` (OpenTelemetry's HTTP conventions),
//!   so made-up method names cannot grow `/metrics`.
//! - [`KnownPaths`]: a path that exists but not with the request's method
//!   answers 405 with `Allow`, not 404; `HEAD` is served as `GET` without
//!   the body ([`head_as_get`]).

mod between_requests;
mod body;
mod head;
mod holding;

pub use between_requests::{Guarded, InFlight, count_in_flight};

pub use body::{
    BODY_TIMEOUT_MESSAGE, BodyTimeout, KeptBody, bound_body, carries_body, is_body_timeout,
};
pub use head::{MAX_HEADER_BYTES, MAX_URI_BYTES, bound_head};

use actix_web::Error;
use actix_web::body::MessageBody;
use actix_web::dev::{ResourceDef, ServiceRequest, ServiceResponse};
use actix_web::http::Method;
use actix_web::middleware::Next;

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
