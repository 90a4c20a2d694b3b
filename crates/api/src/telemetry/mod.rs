//! Logs and traces through `tracing`.
//!
//! Logs: `RUST_LOG` (or `--rust-log`) filters, default `info`;
//! `LOG_FORMAT=json|pretty` picks the output. What a client can make actix
//! log at will (a request head it cannot parse) is let through once per
//! 10 s ([`throttle`]). A finished request is logged at
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
pub mod process_metrics;
mod request_span;
pub mod throttle;
pub mod trace_headers;

pub use request_span::RequestSpan;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing::Metadata;
use tracing::subscriber::Interest;
use tracing_log::AsLog as _;
use tracing_subscriber::filter::{DynFilterFn, EnvFilter, FilterExt as _, LevelFilter};
use tracing_subscriber::layer::Context;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::registry::LookupSpan;
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
            // What a request would pay for and nobody reads: the source
            // location, thread and target of every span; busy and idle
            // time (two clock reads at each poll of every instrumented
            // future); and an OpenTelemetry context attached to the thread
            // at each poll (chatlab reads a span's context from the span).
            .with_location(false)
            .with_threads(false)
            .with_target(false)
            .with_tracked_inactivity(false)
            .with_context_activation(false)
            .with_filter(
                DynFilterFn::new(exported_in_trace).with_callsite_filter(exported_callsite),
            )
    });
    // The `log` crate's records (tokio-postgres logs each statement at
    // debug) are converted only when the logs would show them, or for a
    // warning the traces would carry; the OpenTelemetry layer's own level
    // (debug, for its spans) would otherwise let every one through.
    let log_level = tracing_subscriber::Layer::<Registry>::max_level_hint(&filter)
        .unwrap_or(LevelFilter::TRACE)
        .max(if provider.is_some() {
            LevelFilter::WARN
        } else {
            LevelFilter::OFF
        });
    let subscriber = Registry::default()
        .with(fmt.with_filter(filter.and(throttle::Throttle::default())))
        .with(otel);
    let installed = tracing::subscriber::set_global_default(subscriber).is_ok();
    if installed {
        // Fails only when a `log` logger is already set: then that one stays.
        let _ = tracing_log::LogTracer::builder()
            .with_max_level(log_level.as_log())
            .init();
    }
    if installed && provider.is_some() {
        chatlab_telemetry::enable();
    }
    installed
}

/// Whether the OpenTelemetry layer sees a callsite at all ([`exported`]);
/// the others are never asked again.
fn exported_callsite(meta: &'static Metadata<'static>) -> Interest {
    if exported(meta) {
        Interest::sometimes()
    } else {
        Interest::never()
    }
}

/// [`exported`], and no span below an unsampled request's lean root
/// ([`chatlab_telemetry::open_root`]): it would never be exported, and
/// building it (its attributes, the sampler asked again as it starts) was
/// most of what tracing cost a request that is not sampled.
fn exported_in_trace<S>(meta: &Metadata<'_>, cx: &Context<'_, S>) -> bool
where
    S: tracing::Subscriber + for<'a> LookupSpan<'a>,
{
    exported(meta) && !(meta.is_span() && chatlab_telemetry::in_unsampled_trace(cx))
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
