//! Trace context for chatlab's crates, over `tracing` and
//! `tracing-opentelemetry`.
//!
//! The server installs an OpenTelemetry layer only when an OTLP endpoint is
//! configured, and then calls [`enable`]. Until then every function here
//! returns at once with nothing: with tracing off, a request pays one
//! relaxed atomic load per call, and no span context is looked up.
//!
//! The sampling decision is taken once, before a request's root span is
//! built ([`open_root`], [`HeadSampler`]); an unsampled request gets a lean
//! root, nothing is built below it ([`in_unsampled_trace`]), and the
//! root's span context stands for the request.
//!
//! The context travels as W3C Trace Context (`traceparent`, `tracestate`):
//! in HTTP headers, in Kafka record headers, and in the outbox row, so that
//! a relayed event can link back to the request that wrote it.

mod carrier;
mod sampling;
mod switch;

pub use carrier::{Carrier, extract, inject_current, inject_traceparent};
pub use sampling::{
    HeadSampler, SAMPLING_PRIORITY, UNSAMPLED_TARGET, in_unsampled_trace, is_unsampled, open_root,
};
pub use switch::{enable, enabled};

use opentelemetry::trace::{SpanContext, TraceContextExt as _};
use tracing_opentelemetry::OpenTelemetrySpanExt as _;

/// The OpenTelemetry span context of `span`, when tracing is on and the
/// span belongs to a trace. An unsampled request's lean root, and a span
/// below it, answer with the context the root stands for ([`open_root`]).
pub fn span_context(span: &tracing::Span) -> Option<SpanContext> {
    if !enabled() || span.is_disabled() {
        return None;
    }
    if is_lean_root(span) {
        return sampling::unsampled_root(span);
    }
    let cx = span.context();
    let sc = cx.span().span_context().clone();
    if sc.is_valid() {
        Some(sc)
    } else {
        sampling::unsampled_root(span)
    }
}

/// The W3C `traceparent` of the current span (`00-<trace id>-<span
/// id>-<flags>`), when tracing is on and the span belongs to a trace.
pub fn current_traceparent() -> Option<String> {
    span_context(&tracing::Span::current()).map(|sc| traceparent(&sc))
}

/// The trace id of `span` (32 hex digits) when it is sampled: what an
/// exemplar or a response header names, since only sampled traces reach
/// a backend.
pub fn sampled_trace_id(span: &tracing::Span) -> Option<String> {
    if is_lean_root(span) {
        return None;
    }
    span_context(span)
        .filter(SpanContext::is_sampled)
        .map(|sc| sc.trace_id().to_string())
}

/// Whether `span` belongs to a sampled trace (one that will be exported):
/// work that only describes a span can be skipped when it does not.
pub fn is_sampled(span: &tracing::Span) -> bool {
    !is_lean_root(span) && span_context(span).is_some_and(|sc| sc.is_sampled())
}

/// Whether `span` is an unsampled request's lean root (no lookup needed).
fn is_lean_root(span: &tracing::Span) -> bool {
    span.metadata()
        .is_some_and(|m| m.target() == UNSAMPLED_TARGET)
}

/// `sc` written as a W3C `traceparent` header value.
pub fn traceparent(sc: &SpanContext) -> String {
    format!(
        "00-{}-{}-{:02x}",
        sc.trace_id(),
        sc.span_id(),
        sc.trace_flags().to_u8()
    )
}

/// Adds to `span` a link to the span that `traceparent` names (a W3C
/// `traceparent` value, as stored with an outbox row). A value that does
/// not parse adds nothing.
pub fn link_to(span: &tracing::Span, traceparent: &str) {
    if !enabled() {
        return;
    }
    let cx = extract(&[("traceparent", traceparent)][..]);
    let sc = cx.span().span_context().clone();
    if sc.is_valid() {
        span.add_link(sc);
    }
}

/// Makes the context in `carrier` (incoming `traceparent`, `tracestate`)
/// the parent of `span`, which must not have been entered yet. Nothing
/// happens when tracing is off or the carrier holds no valid context.
pub fn set_remote_parent<C: Carrier + ?Sized>(span: &tracing::Span, carrier: &C) {
    if !enabled() {
        return;
    }
    let cx = extract(carrier);
    if cx.span().span_context().is_valid() {
        // Fails only when the span was already started or is disabled:
        // then it keeps its local parent, which is the best left to do.
        let _ = span.set_parent(cx);
    }
}

#[cfg(test)]
mod tests;
