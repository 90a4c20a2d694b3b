//! Counters of the span export, on `/metrics` from startup (at 0 when
//! tracing is off): spans handed to the exporter, spans dropped because the
//! export queue was full (a request never waits for the exporter), and
//! failed exports.

use std::sync::LazyLock;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// The process's span-export counters (one exporter per process).
#[derive(Debug, Clone, Default)]
pub struct ExportMetrics {
    /// Spans passed to the exporter.
    pub exported: Counter,
    /// Spans dropped on a full queue.
    pub dropped: Counter,
    /// Exports (batches) that failed.
    pub failed_exports: Counter,
    /// Spans waiting for export right now.
    pub queued: Gauge,
}

static METRICS: LazyLock<ExportMetrics> = LazyLock::new(ExportMetrics::default);

impl ExportMetrics {
    /// The process's counters.
    pub fn global() -> &'static ExportMetrics {
        &METRICS
    }

    /// Registers the process's counters in `registry`.
    pub fn register(registry: &mut Registry) {
        let m = Self::global();
        registry.register(
            "chatlab_otel_spans_exported",
            "Spans handed to the OTLP exporter",
            m.exported.clone(),
        );
        registry.register(
            "chatlab_otel_spans_dropped",
            "Spans dropped because the export queue was full (requests never wait for the exporter)",
            m.dropped.clone(),
        );
        registry.register(
            "chatlab_otel_export_failures",
            "Span exports (batches) the OTLP endpoint did not accept",
            m.failed_exports.clone(),
        );
        registry.register(
            "chatlab_otel_spans_queued",
            "Spans waiting in the export queue",
            m.queued.clone(),
        );
    }
}
