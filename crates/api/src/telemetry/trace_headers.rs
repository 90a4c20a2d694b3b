//! Every response names its trace: `traceresponse` (W3C Trace Context
//! level 2: `00-<trace id>-<span id>-<flags>` of the server span) and
//! `X-Trace-Id`, and a problem+json body gets a `trace_id` member, so a user
//! can find the trace of a failed request.
//!
//! With tracing off there is no trace of chatlab's own; a request that
//! arrived with a valid `traceparent` still gets its trace id back (the
//! caller's trace), and `traceresponse` is left out.

use actix_web::Error;
use actix_web::body::{BoxBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header::{CONTENT_TYPE, HeaderName, HeaderValue};
use actix_web::middleware::Next;
use opentelemetry::trace::TraceContextExt as _;

use super::request_span::Headers;
use crate::problem::PROBLEM_JSON;

/// `traceresponse`.
pub const TRACERESPONSE: HeaderName = HeaderName::from_static("traceresponse");
/// `x-trace-id`.
pub const X_TRACE_ID: HeaderName = HeaderName::from_static("x-trace-id");

/// The trace this request belongs to: (trace id, `traceresponse` value).
fn trace_of(req: &ServiceRequest) -> Option<(String, Option<String>)> {
    // Runs inside the server span (the logger wraps this middleware).
    if let Some(sc) = chatlab_telemetry::span_context(&tracing::Span::current()) {
        return Some((
            sc.trace_id().to_string(),
            Some(chatlab_telemetry::traceparent(&sc)),
        ));
    }
    let cx = chatlab_telemetry::extract(&Headers(req.headers()));
    let sc = cx.span().span_context().clone();
    sc.is_valid().then(|| (sc.trace_id().to_string(), None))
}

/// Middleware adding the trace headers, and `trace_id` to problem bodies.
pub async fn add(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, Error> {
    let trace = trace_of(&req);
    let response = next.call(req).await?.map_into_boxed_body();
    let Some((trace_id, traceresponse)) = trace else {
        return Ok(response);
    };
    let is_problem = response
        .headers()
        .get(CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes() == PROBLEM_JSON.as_bytes());
    let mut response = if is_problem {
        with_trace_id_in_body(response, &trace_id).await
    } else {
        response
    };
    let headers = response.headers_mut();
    if let Ok(v) = HeaderValue::from_str(&trace_id) {
        headers.insert(X_TRACE_ID, v);
    }
    if let Some(Ok(v)) = traceresponse.map(|t| HeaderValue::from_str(&t)) {
        headers.insert(TRACERESPONSE, v);
    }
    Ok(response)
}

/// The problem document with `"trace_id"` added. Problem bodies are small
/// and whole in memory; one that is not a JSON object is left as it is.
async fn with_trace_id_in_body(
    response: ServiceResponse<BoxBody>,
    trace_id: &str,
) -> ServiceResponse<BoxBody> {
    let (req, res) = response.into_parts();
    let (head, body) = res.into_parts();
    let bytes = match actix_web::body::to_bytes(body).await {
        Ok(bytes) => bytes,
        Err(_) => return ServiceResponse::new(req, head.set_body(BoxBody::new(()))),
    };
    let rewritten = match serde_json::from_slice::<serde_json::Value>(&bytes) {
        Ok(serde_json::Value::Object(mut doc)) => {
            doc.insert("trace_id".to_owned(), trace_id.into());
            serde_json::to_vec(&doc).ok()
        }
        _ => None,
    };
    let body = match rewritten {
        Some(json) => BoxBody::new(json),
        None => BoxBody::new(bytes),
    };
    ServiceResponse::new(req, head.set_body(body))
}
