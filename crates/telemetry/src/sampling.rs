//! Head sampling: the decision is taken once, before a request's root span
//! is built, and an unsampled request gets a root that costs next to
//! nothing.
//!
//! `tracing-opentelemetry` asks the sampler only when a span starts, after
//! the span and its attributes were built; every span of an unsampled trace
//! would still be built. So the server asks first ([`open_root`]):
//!
//! - sampled: the full root span, marked `sampling.priority = 1`, which
//!   [`HeadSampler`] honours as the SDK starts it;
//! - not sampled: a lean root (target [`UNSAMPLED_TARGET`], no attributes,
//!   `sampling.priority = 0`) that keeps the trace's span context for the
//!   request. The OpenTelemetry layer's filter leaves out every span below
//!   it ([`in_unsampled_trace`]), and [`span_context`](crate::span_context)
//!   answers with the kept context, so the response still names the trace
//!   and the broker and the outbox still carry it, with the sampled flag
//!   clear.

use std::sync::OnceLock;

use opentelemetry::trace::{SpanContext, SpanKind, TraceContextExt as _, TraceFlags, TraceState};
use opentelemetry::{Context as OtelContext, KeyValue, Value};
use opentelemetry_sdk::trace::{
    IdGenerator as _, RandomIdGenerator, SamplingDecision, SamplingResult, ShouldSample,
};
use tracing::Span;
use tracing_opentelemetry::OpenTelemetrySpanExt as _;
use tracing_subscriber::Registry;
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;

use crate::{Carrier, enabled, extract};

/// The target of an unsampled request's lean root span.
pub const UNSAMPLED_TARGET: &str = "chatlab::unsampled";

/// The attribute that carries the head decision to the SDK's sampler
/// (the name OpenTracing gave it): above 0, sampled.
pub const SAMPLING_PRIORITY: &str = "sampling.priority";

/// The name of a request's root span, full or lean, as the sampler sees it.
const ROOT_NAME: &str = "HTTP request";

/// The sampler the configuration names, for the decision at the root.
static HEAD: OnceLock<Box<dyn ShouldSample>> = OnceLock::new();

/// The SDK's sampler: it follows the head decision a root span carries in
/// `sampling.priority`, and a local parent's decision; any other span (a
/// root opened outside a request, such as the outbox relay's) is left to
/// the configured sampler.
#[derive(Debug, Clone)]
pub struct HeadSampler {
    configured: Box<dyn ShouldSample>,
}

impl HeadSampler {
    /// Wraps `configured` (`opentelemetry_sdk::trace::Config::default()`'s
    /// sampler reads `OTEL_TRACES_SAMPLER`) and makes it the decision that
    /// [`open_root`] takes. The first call in a process sets that decision.
    pub fn install(configured: Box<dyn ShouldSample>) -> Self {
        let _ = HEAD.set(configured.clone());
        Self { configured }
    }
}

impl ShouldSample for HeadSampler {
    fn should_sample(
        &self,
        parent: Option<&OtelContext>,
        trace_id: opentelemetry::trace::TraceId,
        name: &str,
        kind: &SpanKind,
        attributes: &[KeyValue],
        links: &[opentelemetry::trace::Link],
    ) -> SamplingResult {
        let priority = attributes
            .iter()
            .find(|kv| kv.key.as_str() == SAMPLING_PRIORITY)
            .map(|kv| matches!(kv.value, Value::I64(p) if p > 0));
        let parent_sc = parent
            .filter(|cx| cx.has_active_span())
            .map(|cx| cx.span().span_context().clone());
        let local_parent = parent_sc.as_ref().filter(|sc| !sc.is_remote());
        let sampled = match (priority, local_parent) {
            (Some(sampled), _) => sampled,
            (None, Some(sc)) => sc.is_sampled(),
            (None, None) => {
                return self
                    .configured
                    .should_sample(parent, trace_id, name, kind, attributes, links);
            }
        };
        SamplingResult {
            decision: if sampled {
                SamplingDecision::RecordAndSample
            } else {
                SamplingDecision::Drop
            },
            attributes: Vec::new(),
            trace_state: parent_sc.map_or_else(TraceState::default, |sc| sc.trace_state().clone()),
        }
    }
}

/// The lean root's mark: the span context it stands for.
#[derive(Debug, Clone)]
struct Unsampled(SpanContext);

/// Opens a request's root span, continuing the trace in `carrier` (an
/// incoming `traceparent`): `full()` when the trace is sampled (or no
/// [`HeadSampler`] was installed, or tracing is off), a lean root when it is
/// not. `full()` must declare an empty `sampling.priority` field.
pub fn open_root<C: Carrier + ?Sized>(carrier: &C, full: impl FnOnce() -> Span) -> Span {
    if !enabled() {
        return full();
    }
    let parent = extract(carrier);
    match HEAD.get().map(|head| decide(head.as_ref(), &parent)) {
        Some(Some(sc)) => {
            let span = tracing::info_span!(
                target: UNSAMPLED_TARGET,
                ROOT_NAME,
                sampling.priority = 0_i64
            );
            in_registry(&span, |data| data.extensions_mut().insert(Unsampled(sc)));
            span
        }
        decided => {
            let span = full();
            if decided.is_some() {
                span.record(SAMPLING_PRIORITY, 1_i64);
            }
            if parent.span().span_context().is_valid() {
                // Fails only when the span is disabled: then there is
                // nothing to continue.
                let _ = span.set_parent(parent);
            }
            span
        }
    }
}

/// `None` when `head` samples a server span under `parent`; otherwise the
/// span context the unsampled request stands for: the caller's trace (or a
/// new one), a span id of the server's, the sampled flag clear.
fn decide(head: &dyn ShouldSample, parent: &OtelContext) -> Option<SpanContext> {
    let ids = RandomIdGenerator::default();
    let parent_sc = parent.span().span_context().clone();
    let trace_id = if parent_sc.is_valid() {
        parent_sc.trace_id()
    } else {
        ids.new_trace_id()
    };
    let result = head.should_sample(
        Some(parent),
        trace_id,
        ROOT_NAME,
        &SpanKind::Server,
        &[],
        &[],
    );
    match result.decision {
        SamplingDecision::RecordAndSample => None,
        SamplingDecision::Drop | SamplingDecision::RecordOnly => Some(SpanContext::new(
            trace_id,
            ids.new_span_id(),
            TraceFlags::default(),
            false,
            result.trace_state,
        )),
    }
}

/// Whether a span opened now, on this thread, would lie below an
/// unsampled request's lean root: the OpenTelemetry layer's span filter
/// (`cx` is its filtered context). Either the nearest span the layer sees
/// is a lean root (the filter leaves out everything below one, so nothing
/// below is nearer), or the thread is in spans the layer sees none of:
/// those are the spans the filter left out, entered on another task (the
/// database unit runs in its caller's span).
pub fn in_unsampled_trace<S>(cx: &Context<'_, S>) -> bool
where
    S: tracing::Subscriber + for<'a> LookupSpan<'a>,
{
    match cx.lookup_current() {
        Some(span) => span.metadata().target() == UNSAMPLED_TARGET,
        None => cx.current_span().id().is_some(),
    }
}

/// Whether `span` is an unsampled request's lean root or lies below one.
/// A span opened with an explicit parent (on another task, where the
/// filter cannot see the request) checks this first, and stays out.
pub fn is_unsampled(span: &Span) -> bool {
    if !enabled() || span.is_disabled() {
        return false;
    }
    match span.metadata() {
        Some(m) if m.target() == UNSAMPLED_TARGET => true,
        _ => unsampled_root(span).is_some(),
    }
}

/// The span context an unsampled request's lean root stands for, when
/// `span` is that root or lies below it.
pub(crate) fn unsampled_root(span: &Span) -> Option<SpanContext> {
    in_registry(span, |data| {
        data.scope()
            .find_map(|s| s.extensions().get::<Unsampled>().map(|u| u.0.clone()))
    })
    .flatten()
}

/// `f` on the registry's data of `span`; `None` when the span is disabled
/// or the subscriber is not built on a `Registry`.
fn in_registry<T>(
    span: &Span,
    f: impl FnOnce(tracing_subscriber::registry::SpanRef<'_, Registry>) -> T,
) -> Option<T> {
    span.with_subscriber(|(id, dispatch)| dispatch.downcast_ref::<Registry>()?.span(id).map(f))
        .flatten()
}
