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

#[test]
fn the_head_decision_opens_a_full_root_or_a_lean_one() {
    use opentelemetry_sdk::trace::Sampler;
    use tracing::field::Empty;
    use tracing_subscriber::Layer as _;
    use tracing_subscriber::filter::DynFilterFn;

    enable();
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .with_sampler(HeadSampler::install(Box::new(Sampler::ParentBased(
            Box::new(Sampler::AlwaysOn),
        ))))
        .build();
    let otel = tracing_opentelemetry::layer()
        .with_tracer(provider.tracer("test"))
        .with_filter(DynFilterFn::new(|meta, cx| {
            !(meta.is_span() && in_unsampled_trace(cx))
        }));
    // A second layer that sees every span, as a log at `debug` would: the
    // children exist, with no OpenTelemetry span of their own.
    let logs = tracing_subscriber::fmt::layer().with_writer(std::io::sink);
    let subscriber = tracing_subscriber::registry().with(logs).with(otel);
    let request = |traceparent: &str| {
        let root = open_root(&[("traceparent", traceparent)][..], || {
            tracing::info_span!("server", sampling.priority = Empty)
        });
        let _root = root.enter();
        let root_tp = current_traceparent();
        let child = tracing::info_span!("statement");
        // The database unit: on another thread, in its caller's span.
        let dispatch = tracing::dispatcher::get_default(Clone::clone);
        let caller = child.clone();
        let elsewhere = std::thread::spawn(move || {
            tracing::dispatcher::with_default(&dispatch, || {
                let _caller = caller.enter();
                let span = tracing::info_span!("elsewhere");
                let _span = span.enter();
                current_traceparent()
            })
        })
        .join()
        .ok()
        .flatten();
        let _child = child.enter();
        let grandchild = tracing::info_span!("send");
        let _grandchild = grandchild.enter();
        let unsampled = root_tp.as_deref().is_some_and(|tp| tp.ends_with("-00"));
        if unsampled {
            assert_eq!(
                elsewhere, root_tp,
                "the root's context, on another thread too"
            );
        } else {
            assert!(
                elsewhere.as_deref().is_some_and(|tp| tp.ends_with("-01")),
                "{elsewhere:?}"
            );
        }
        (
            root.metadata().map(|m| m.target()),
            root_tp,
            current_traceparent(),
        )
    };
    let unsampled = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00";
    let ((lean, root_tp, child_tp), (full, _, sampled_tp)) =
        tracing::subscriber::with_default(subscriber, || (request(unsampled), request(REMOTE)));
    let _ = provider.force_flush();
    let spans = exporter.get_finished_spans().unwrap_or_default();

    assert_eq!(lean, Some(UNSAMPLED_TARGET));
    let root_tp = root_tp.unwrap_or_default();
    assert!(
        root_tp.starts_with("00-4bf92f3577b34da6a3ce929d0e0e4736-") && root_tp.ends_with("-00"),
        "{root_tp}"
    );
    assert!(
        !root_tp.contains("00f067aa0ba902b7"),
        "a span id of the server's"
    );
    assert_eq!(
        child_tp.as_deref(),
        Some(root_tp.as_str()),
        "the root's context"
    );

    assert_ne!(full, Some(UNSAMPLED_TARGET));
    let names: Vec<_> = spans.iter().map(|s| s.name.to_string()).collect();
    assert_eq!(
        names,
        ["elsewhere", "send", "statement", "server"],
        "only the sampled trace"
    );
    assert!(
        spans
            .iter()
            .all(|s| s.span_context.trace_id().to_string() == "4bf92f3577b34da6a3ce929d0e0e4736")
    );
    let server = &spans[3];
    assert_eq!(server.parent_span_id.to_string(), "00f067aa0ba902b7");
    assert!(
        server
            .attributes
            .iter()
            .any(|kv| kv.key.as_str() == SAMPLING_PRIORITY && kv.value == 1_i64.into())
    );
    let sampled_tp = sampled_tp.unwrap_or_default();
    assert_eq!(
        sampled_tp,
        format!(
            "00-{}-{}-01",
            spans[1].span_context.trace_id(),
            spans[1].span_context.span_id()
        )
    );
}
