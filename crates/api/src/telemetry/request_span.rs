//! The server span of every request, named after OpenTelemetry's HTTP
//! server conventions, with chatlab's own attributes, and continuing the
//! caller's trace when the request carries a W3C `traceparent`.

use actix_web::body::MessageBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header::HeaderMap;
use tracing::Span;
use tracing::field::Empty;
use tracing_actix_web::RootSpanBuilder;

/// Root span of every request.
#[derive(Debug, Clone, Copy)]
pub struct RequestSpan;

/// An incoming request's headers, as a trace-context carrier.
pub(crate) struct Headers<'a>(pub(crate) &'a HeaderMap);

impl chatlab_telemetry::Carrier for Headers<'_> {
    fn header(&self, name: &str) -> Option<&str> {
        self.0.get(name).and_then(|v| v.to_str().ok())
    }
}

impl RootSpanBuilder for RequestSpan {
    fn on_request_start(request: &ServiceRequest) -> Span {
        // The sampler decides before the span is built: an unsampled
        // request gets a lean root, and nothing below it is built.
        chatlab_telemetry::open_root(&Headers(request.headers()), || {
            let method = crate::http::limits::method_label(request.method());
            let route = request.match_pattern();
            let name = match &route {
                Some(route) => format!("{method} {route}"),
                None => method.to_owned(),
            };
            tracing::info_span!(
                "HTTP request",
                otel.name = %name,
                otel.kind = "server",
                otel.status_code = Empty,
                http.request.method = %method,
                http.route = route.as_deref().unwrap_or(""),
                url.path = %request.path(),
                http.response.status_code = Empty,
                chatlab.insert_strategy = Empty,
                chatlab.publish_mode = Empty,
                chatlab.message_fanout = Empty,
                chatlab.member_count = Empty,
                sampling.priority = Empty,
            )
        })
    }

    fn on_request_end<B: MessageBody>(
        span: Span,
        outcome: &Result<ServiceResponse<B>, actix_web::Error>,
    ) {
        let _entered = span.enter();
        match outcome {
            Ok(response) => {
                let status = response.status().as_u16();
                span.record("http.response.status_code", status);
                match status {
                    500.. => {
                        span.record("otel.status_code", "ERROR");
                        tracing::error!(status, "request completed");
                    }
                    400..=499 => tracing::warn!(status, "request completed"),
                    _ => tracing::debug!(status, "request completed"),
                }
            }
            Err(error) => {
                span.record("otel.status_code", "ERROR");
                tracing::error!(%error, "request failed");
            }
        }
    }
}
