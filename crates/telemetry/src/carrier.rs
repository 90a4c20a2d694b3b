//! W3C Trace Context in and out of header maps, with OpenTelemetry's own
//! propagator (`TraceContextPropagator`), whatever holds the headers.

use opentelemetry::Context;
use opentelemetry::propagation::{Extractor, Injector, TextMapPropagator as _};
use opentelemetry::trace::TraceContextExt as _;
use opentelemetry_sdk::propagation::TraceContextPropagator;

/// Headers that trace context can be read from.
pub trait Carrier {
    /// The value of header `name` (lower case), if present and text.
    fn header(&self, name: &str) -> Option<&str>;
}

impl Carrier for [(&str, &str)] {
    fn header(&self, name: &str) -> Option<&str> {
        self.iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| *v)
    }
}

struct Read<'a, C: ?Sized>(&'a C);

impl<C: Carrier + ?Sized> Extractor for Read<'_, C> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.header(key)
    }

    fn keys(&self) -> Vec<&str> {
        ["traceparent", "tracestate"]
            .into_iter()
            .filter(|k| self.0.header(k).is_some())
            .collect()
    }
}

struct Write<F>(F);

impl<F: FnMut(&'static str, String)> Injector for Write<F> {
    fn set(&mut self, key: &str, value: String) {
        let key = match key {
            "traceparent" => "traceparent",
            "tracestate" => "tracestate",
            // The W3C propagator writes only those two.
            _ => return,
        };
        (self.0)(key, value);
    }
}

/// The remote context that `carrier`'s `traceparent` and `tracestate`
/// name; an empty context when they are absent or malformed.
pub fn extract<C: Carrier + ?Sized>(carrier: &C) -> Context {
    TraceContextPropagator::new().extract(&Read(carrier))
}

/// Writes the current span's context as `traceparent` (and `tracestate`
/// when it has one) through `set`; writes nothing when tracing is off or
/// the span is in no trace.
pub fn inject_current(set: impl FnMut(&'static str, String)) {
    // The span context, not the span's OpenTelemetry context: an unsampled
    // request's lean root stands for a context of its own.
    let Some(sc) = crate::span_context(&tracing::Span::current()) else {
        return;
    };
    let cx = Context::new().with_remote_span_context(sc);
    TraceContextPropagator::new().inject_context(&cx, &mut Write(set));
}

/// Writes `traceparent` (a value stored earlier, e.g. with an outbox row)
/// through `set` when it is a valid W3C `traceparent`; its flags and ids
/// are written as parsed, so a malformed value is never passed on.
pub fn inject_traceparent(traceparent: &str, set: impl FnMut(&'static str, String)) {
    let cx = extract(&[("traceparent", traceparent)][..]);
    TraceContextPropagator::new().inject_context(&cx, &mut Write(set));
}
