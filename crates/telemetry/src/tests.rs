//! With a real OpenTelemetry layer and the SDK's in-memory exporter.

use opentelemetry::trace::{TraceContextExt as _, TracerProvider as _};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider};
use tracing_subscriber::layer::SubscriberExt as _;

use super::*;

fn traced<R>(body: impl FnOnce() -> R) -> (R, Vec<opentelemetry_sdk::trace::SpanData>) {
    enable();
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    let subscriber = tracing_subscriber::registry()
        .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("test")));
    let out = tracing::subscriber::with_default(subscriber, body);
    let _ = provider.force_flush();
    (out, exporter.get_finished_spans().unwrap_or_default())
}

const REMOTE: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

#[test]
fn the_current_traceparent_names_the_current_span() {
    let (tp, spans) = traced(|| {
        let span = tracing::info_span!("work");
        let _entered = span.enter();
        current_traceparent()
    });
    let tp = tp.unwrap_or_default();
    assert_eq!(spans.len(), 1);
    let sc = &spans[0].span_context;
    assert_eq!(tp, format!("00-{}-{}-01", sc.trace_id(), sc.span_id()));
}

#[test]
fn a_remote_parent_becomes_the_parent_and_travels_on() {
    let (injected, spans) = traced(|| {
        let span = tracing::info_span!("server");
        set_remote_parent(&span, &[("TraceParent", REMOTE)][..]);
        let _entered = span.enter();
        let mut out = Vec::new();
        inject_current(|k, v| out.push((k, v)));
        out
    });
    assert_eq!(spans.len(), 1);
    assert_eq!(
        spans[0].span_context.trace_id().to_string(),
        "4bf92f3577b34da6a3ce929d0e0e4736"
    );
    assert_eq!(spans[0].parent_span_id.to_string(), "00f067aa0ba902b7");
    let (key, value) = &injected[0];
    assert_eq!(*key, "traceparent");
    assert!(value.starts_with("00-4bf92f3577b34da6a3ce929d0e0e4736-"));
    assert!(
        !value.contains("00f067aa0ba902b7"),
        "the child's own span id"
    );
}

#[test]
fn a_malformed_traceparent_is_neither_a_parent_nor_a_link_nor_passed_on() {
    let bad = "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01";
    let (_, spans) = traced(|| {
        let span = tracing::info_span!("server");
        set_remote_parent(&span, &[("traceparent", bad)][..]);
        link_to(&span, "not a traceparent");
        let _entered = span.enter();
    });
    assert_ne!(
        spans[0].span_context.trace_id().to_string(),
        "4bf92f3577b34da6a3ce929d0e0e4736"
    );
    assert!(spans[0].links.is_empty());
    let mut out = Vec::new();
    inject_traceparent(bad, |k, v| out.push((k, v)));
    assert!(out.is_empty(), "{out:?}");
}

#[test]
fn a_link_names_the_stored_context() {
    let (_, spans) = traced(|| {
        let span = tracing::info_span!("relay");
        link_to(&span, REMOTE);
        let _entered = span.enter();
    });
    let link = &spans[0].links.links[0].span_context;
    assert_eq!(
        link.trace_id().to_string(),
        "4bf92f3577b34da6a3ce929d0e0e4736"
    );
    assert_eq!(link.span_id().to_string(), "00f067aa0ba902b7");
    assert_ne!(spans[0].span_context.trace_id(), link.trace_id());
}

#[test]
fn the_sampled_trace_id_is_the_spans() {
    let (id, spans) = traced(|| {
        let span = tracing::info_span!("sampled");
        let id = sampled_trace_id(&span);
        drop(span);
        id
    });
    assert_eq!(id, Some(spans[0].span_context.trace_id().to_string()));
    let cx = extract(&[("traceparent", REMOTE)][..]);
    assert!(cx.span().span_context().is_remote());
}
