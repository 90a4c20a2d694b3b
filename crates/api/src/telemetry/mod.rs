//! Logs and traces through `tracing`.
//!
//! Logs: `RUST_LOG` (or `--rust-log`) filters, default `info`;
//! `LOG_FORMAT=json|pretty` picks the output. A finished request is logged at
//! `debug` when it succeeded (so that a load run at the default level does
//! not measure its own logging), `warn` for a 4xx and `error` for a 5xx.
//!
//! Traces: when `OTEL_EXPORTER_OTLP_ENDPOINT` (or
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) is set, an OpenTelemetry layer
//! exports chatlab's spans over OTLP ([`otlp`]); the request's span tree
//! is described in the README. Unset, there is no OpenTelemetry layer at
//! all, and the spans below `info` (the pool, the statements, the broker)
//! are never even built.

pub mod export_metrics;
pub mod otlp;
mod request_span;
pub mod trace_headers;

pub use request_span::RequestSpan;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing::Metadata;
use tracing_subscriber::filter::{EnvFilter, FilterFn};
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;
use tracing_subscriber::{Layer, Registry};

use crate::config::LogFormat;

/// Installs the global subscriber with `filter` (tracing's `EnvFilter`
/// syntax) and no OpenTelemetry layer: for the subcommands and for
/// configuration errors. A second call (tests) is a no-op.
pub fn init(format: LogFormat, filter: &str) {
    install(format, filter, None);
}

/// Installs the global subscriber: logs as [`init`] does, and, with
/// `provider`, an OpenTelemetry layer exporting chatlab's spans through it
/// ([`otlp::provider_from_env`] builds the server's; tests pass one with an
/// in-memory exporter). Returns `false` when a subscriber was already
/// installed (then nothing changed).
pub fn install(format: LogFormat, filter: &str, provider: Option<&SdkTracerProvider>) -> bool {
    let filter = EnvFilter::try_new(filter).unwrap_or_else(|_| EnvFilter::new("info"));
    // Colour codes only on a terminal: a log file or a pipe gets plain text.
    let fmt = tracing_subscriber::fmt::layer()
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr);
    let fmt = match format {
        LogFormat::Json => fmt.json().flatten_event(true).boxed(),
        LogFormat::Pretty => fmt.compact().boxed(),
    };
    let otel = provider.map(|p| {
        tracing_opentelemetry::layer()
            .with_tracer(p.tracer("chatlab"))
            .with_location(false)
            .with_threads(false)
            .with_filter(FilterFn::new(exported))
    });
    let installed = Registry::default()
        .with(fmt.with_filter(filter))
        .with(otel)
        .try_init()
        .is_ok();
    if installed && provider.is_some() {
        chatlab_telemetry::enable();
    }
    installed
}

/// What the OpenTelemetry layer sees: chatlab's own spans down to `debug`
/// (the pool, each statement, the broker; never the exporter's own HTTP or
/// gRPC spans, which would trace the exporting), and events from `warn` up,
/// which become span events.
fn exported(meta: &Metadata<'_>) -> bool {
    if meta.is_span() {
        meta.target().starts_with("chatlab") && *meta.level() <= tracing::Level::DEBUG
    } else {
        *meta.level() <= tracing::Level::WARN
    }
}
