//! The OTLP trace pipeline, configured by OpenTelemetry's standard
//! variables:
//!
//! - `OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`:
//!   where to send; unset, there is no pipeline at all;
//! - `OTEL_EXPORTER_OTLP_PROTOCOL` (or `_TRACES_PROTOCOL`): `grpc` or
//!   `http/protobuf` (the default, as the specification says);
//! - `OTEL_EXPORTER_OTLP_HEADERS`, `_TIMEOUT`: read by the exporter;
//! - `OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`: the resource, to which
//!   chatlab adds `service.version` and a `service.instance.id` of its own;
//! - `OTEL_TRACES_SAMPLER` / `OTEL_TRACES_SAMPLER_ARG`: read as the SDK
//!   reads them (default `parentbased_always_on`; `parentbased_traceidratio`
//!   with `0.01` keeps 1% of the traces that start here, and follows the
//!   caller's decision for the others), and asked once per request, before
//!   its spans are built ([`chatlab_telemetry::open_root`]);
//! - `OTEL_BSP_MAX_QUEUE_SIZE`, `OTEL_BSP_SCHEDULE_DELAY`,
//!   `OTEL_BSP_MAX_EXPORT_BATCH_SIZE`: the batch processor's.
//!
//! Spans are exported in batches from a thread of the SDK's. The queue in
//! front of it is bounded: a span that finds it full is dropped and
//! counted ([`super::export_metrics`]), and the request goes on.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use opentelemetry::{Context, KeyValue};
use opentelemetry_otlp::{ExporterBuildError, SpanExporter as OtlpExporter, WithExportConfig as _};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{
    BatchConfigBuilder, BatchSpanProcessor, SdkTracerProvider, Span, SpanData, SpanExporter,
    SpanProcessor,
};

use super::export_metrics::ExportMetrics;

/// The OTLP transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// OTLP over gRPC (port 4317 by convention).
    Grpc,
    /// OTLP over HTTP with protobuf bodies (port 4318 by convention).
    HttpProtobuf,
}

/// Why the trace pipeline could not be built.
#[derive(Debug, thiserror::Error)]
pub enum OtlpError {
    /// `OTEL_EXPORTER_OTLP_PROTOCOL` names a protocol chatlab cannot send.
    #[error("OTEL_EXPORTER_OTLP_PROTOCOL={0:?}: chatlab sends `grpc` or `http/protobuf`")]
    Protocol(String),
    /// The exporter refused its configuration (a malformed endpoint, say).
    #[error("the OTLP exporter could not be built")]
    Build(#[from] ExporterBuildError),
}

/// The protocol the variables in `var` ask for, or `None` when no OTLP
/// endpoint is set (no tracing).
pub fn requested(var: &impl Fn(&str) -> Option<String>) -> Result<Option<Protocol>, OtlpError> {
    let set = |name: &str| var(name).filter(|v| !v.trim().is_empty());
    if set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").is_none()
        && set("OTEL_EXPORTER_OTLP_ENDPOINT").is_none()
    {
        return Ok(None);
    }
    let protocol =
        set("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL").or_else(|| set("OTEL_EXPORTER_OTLP_PROTOCOL"));
    match protocol.as_deref().map(str::trim) {
        None | Some("http/protobuf") => Ok(Some(Protocol::HttpProtobuf)),
        Some("grpc") => Ok(Some(Protocol::Grpc)),
        Some(other) => Err(OtlpError::Protocol(other.to_owned())),
    }
}

/// The server's tracer provider from the process's environment, or `None`
/// when no OTLP endpoint is set. Must run inside a Tokio runtime (the gRPC
/// client's connection lives on it).
pub fn provider_from_env() -> Result<Option<SdkTracerProvider>, OtlpError> {
    provider_from(|name| std::env::var(name).ok())
}

/// [`provider_from_env`] with the variables read through `var` (tests).
/// Headers and timeouts are still read from the environment, by the
/// exporter.
pub fn provider_from(
    var: impl Fn(&str) -> Option<String>,
) -> Result<Option<SdkTracerProvider>, OtlpError> {
    let Some(protocol) = requested(&var)? else {
        return Ok(None);
    };
    let endpoint = endpoint(&var, protocol);
    let exporter = match protocol {
        Protocol::Grpc => OtlpExporter::builder()
            .with_tonic()
            .with_endpoint(endpoint)
            .build()?,
        Protocol::HttpProtobuf => OtlpExporter::builder()
            .with_http()
            .with_endpoint(endpoint)
            .build()?,
    };
    Ok(Some(provider(exporter, batch_settings(&var))))
}

/// Where to send, as the specification says: the traces variable as it
/// is; the generic one with `/v1/traces` appended for HTTP.
fn endpoint(var: impl Fn(&str) -> Option<String>, protocol: Protocol) -> String {
    let set = |name: &str| {
        var(name)
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty())
    };
    if let Some(traces) = set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") {
        return traces;
    }
    let generic = set("OTEL_EXPORTER_OTLP_ENDPOINT").unwrap_or_default();
    match protocol {
        Protocol::Grpc => generic,
        Protocol::HttpProtobuf => format!("{}/v1/traces", generic.trim_end_matches('/')),
    }
}

/// A provider that exports through `exporter` in batches, behind a bounded
/// queue of `settings.0` spans, with chatlab's resource.
pub fn provider<E>(exporter: E, settings: (usize, BatchConfigBuilder)) -> SdkTracerProvider
where
    E: SpanExporter + 'static,
{
    let (capacity, batch) = settings;
    let queued = Arc::new(AtomicUsize::new(0));
    // The SDK's queue is made one span larger than ours, so ours is
    // always the one that fills first and every drop is counted.
    let batch = BatchSpanProcessor::builder(Counted {
        inner: exporter,
        queued: queued.clone(),
    })
    .with_batch_config(batch.with_max_queue_size(capacity + 1).build())
    .build();
    SdkTracerProvider::builder()
        .with_span_processor(Bounded {
            inner: batch,
            queued,
            capacity,
        })
        .with_resource(resource())
        // OTEL_TRACES_SAMPLER, as the SDK reads it, decided at each
        // request's root before the span is built.
        .with_sampler(chatlab_telemetry::HeadSampler::install(
            opentelemetry_sdk::trace::Config::default().sampler,
        ))
        .build()
}

/// The queue bound (`OTEL_BSP_MAX_QUEUE_SIZE`, default 2048) and the rest
/// of the batch settings as the SDK reads them from the environment.
fn batch_settings(var: impl Fn(&str) -> Option<String>) -> (usize, BatchConfigBuilder) {
    let capacity = var("OTEL_BSP_MAX_QUEUE_SIZE")
        .and_then(|v| v.trim().parse().ok())
        .filter(|&n: &usize| n > 0)
        .unwrap_or(2048);
    (capacity, BatchConfigBuilder::default())
}

/// `service.name` (from `OTEL_SERVICE_NAME`, else `chatlab`),
/// `service.version`, `service.instance.id` (new at each start), and what
/// `OTEL_RESOURCE_ATTRIBUTES` adds.
fn resource() -> Resource {
    let mut builder = Resource::builder().with_attributes([
        KeyValue::new("service.version", env!("CARGO_PKG_VERSION")),
        KeyValue::new("service.instance.id", uuid::Uuid::now_v7().to_string()),
    ]);
    // The SDK's own default is "unknown_service"; OTEL_SERVICE_NAME and
    // OTEL_RESOURCE_ATTRIBUTES still win.
    let named = std::env::var("OTEL_SERVICE_NAME").is_ok_and(|v| !v.is_empty())
        || std::env::var("OTEL_RESOURCE_ATTRIBUTES").is_ok_and(|v| v.contains("service.name="));
    if !named {
        builder = builder.with_service_name("chatlab");
    }
    builder.build()
}

/// Counts spans into the queue and drops (counting them) those that find
/// it full, so that a slow or absent OTLP endpoint never blocks a request.
#[derive(Debug)]
struct Bounded {
    inner: BatchSpanProcessor,
    queued: Arc<AtomicUsize>,
    capacity: usize,
}

impl SpanProcessor for Bounded {
    fn on_start(&self, span: &mut Span, cx: &Context) {
        self.inner.on_start(span, cx);
    }

    fn on_end(&self, span: SpanData) {
        let m = ExportMetrics::global();
        if self.queued.fetch_add(1, Ordering::AcqRel) >= self.capacity {
            self.queued.fetch_sub(1, Ordering::AcqRel);
            m.dropped.inc();
            return;
        }
        m.queued.inc();
        self.inner.on_end(span);
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}

/// The exporter, counting what leaves the queue.
#[derive(Debug)]
struct Counted<E> {
    inner: E,
    queued: Arc<AtomicUsize>,
}

impl<E: SpanExporter> SpanExporter for Counted<E> {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let m = ExportMetrics::global();
        let n = batch.len();
        self.queued.fetch_sub(n, Ordering::AcqRel);
        m.queued.dec_by(n as i64);
        let outcome = self.inner.export(batch).await;
        match &outcome {
            Ok(()) => {
                m.exported.inc_by(n as u64);
            }
            Err(_) => {
                m.failed_exports.inc();
            }
        }
        outcome
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        move |name| {
            pairs
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
        }
    }

    #[test]
    fn no_endpoint_means_no_pipeline_whatever_else_is_set() {
        let none = requested(&vars(&[("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")]));
        assert!(matches!(none, Ok(None)));
        let blank = requested(&vars(&[("OTEL_EXPORTER_OTLP_ENDPOINT", " ")]));
        assert!(matches!(blank, Ok(None)));
    }

    #[test]
    fn the_protocol_defaults_to_http_protobuf_and_the_traces_variable_wins() {
        let e = ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318");
        assert_eq!(
            requested(&vars(&[e])).ok().flatten(),
            Some(Protocol::HttpProtobuf)
        );
        assert_eq!(
            requested(&vars(&[
                e,
                ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"),
                ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "grpc")
            ]))
            .ok()
            .flatten(),
            Some(Protocol::Grpc)
        );
        assert!(matches!(
            requested(&vars(&[e, ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")])),
            Err(OtlpError::Protocol(p)) if p == "http/json"
        ));
    }

    /// An exporter that takes no batch until the gate opens.
    #[derive(Debug)]
    struct Gated(std::sync::Mutex<std::sync::mpsc::Receiver<()>>);

    impl SpanExporter for Gated {
        async fn export(&self, _batch: Vec<SpanData>) -> OTelSdkResult {
            if let Ok(gate) = self.0.lock() {
                let _ = gate.recv_timeout(Duration::from_secs(10));
            }
            Ok(())
        }
    }

    #[test]
    fn a_full_queue_drops_and_counts_spans_instead_of_waiting() {
        use opentelemetry::trace::{Tracer as _, TracerProvider as _};

        let m = ExportMetrics::global();
        let (exported, dropped) = (m.exported.get(), m.dropped.get());
        let (open, gate) = std::sync::mpsc::channel();
        let provider = provider(
            Gated(std::sync::Mutex::new(gate)),
            (
                4,
                BatchConfigBuilder::default().with_max_export_batch_size(4),
            ),
        );
        let tracer = provider.tracer("test");
        let started = std::time::Instant::now();
        for _ in 0..50 {
            tracer.in_span("work", |_| {});
        }
        // The exporter is stuck: had a span waited for room, this loop
        // would have taken the gate's 10 s.
        assert!(started.elapsed() < Duration::from_secs(5));
        let lost = m.dropped.get() - dropped;
        assert!(
            lost >= 30,
            "most of 50 spans found the queue of 4 full: {lost}"
        );
        for _ in 0..50 {
            let _ = open.send(());
        }
        let _ = provider.force_flush();
        let _ = provider.shutdown();
        assert_eq!(
            (m.exported.get() - exported) + lost,
            50,
            "every span is exported or counted as dropped"
        );
    }

    #[test]
    fn the_generic_endpoint_gets_the_signal_path_over_http_only() {
        let generic = vars(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318/")]);
        assert_eq!(
            endpoint(&generic, Protocol::HttpProtobuf),
            "http://c:4318/v1/traces"
        );
        assert_eq!(endpoint(&generic, Protocol::Grpc), "http://c:4318/");
        let traces = vars(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
            ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://t:9/x"),
        ]);
        assert_eq!(endpoint(&traces, Protocol::HttpProtobuf), "http://t:9/x");
    }
}
