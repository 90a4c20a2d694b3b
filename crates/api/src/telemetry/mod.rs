//! Logs through `tracing`: `RUST_LOG` (or `--rust-log`) filters, default
//! `info`, `LOG_FORMAT=json|pretty` picks the output. Every request gets a span with
//! method, route, status and, on writes, the insert strategy and publish
//! mode used. A
//! finished request is logged at `debug` when it succeeded (so that a load
//! run at the default level does not measure its own logging), `warn` for a
//! 4xx and `error` for a 5xx.

use actix_web::body::MessageBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use tracing::Span;
use tracing_actix_web::{DefaultRootSpanBuilder, RootSpanBuilder};
use tracing_subscriber::EnvFilter;

use crate::config::LogFormat;

/// Installs the global subscriber with `filter` (tracing's `EnvFilter`
/// syntax), as the caller resolved it: the server's settings already read
/// `RUST_LOG` and `--rust-log`, so the environment is not read again here,
/// and the flag keeps its precedence. A second call (tests) is a no-op.
pub fn init(format: LogFormat, filter: &str) {
    let filter = EnvFilter::try_new(filter).unwrap_or_else(|_| EnvFilter::new("info"));
    // Colour codes only on a terminal: a log file or a pipe gets plain text.
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr);
    let _ = match format {
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
        LogFormat::Pretty => builder.compact().try_init(),
    };
}

/// Root span of every request.
#[derive(Debug, Clone, Copy)]
pub struct RequestSpan;

impl RootSpanBuilder for RequestSpan {
    fn on_request_start(request: &ServiceRequest) -> Span {
        tracing_actix_web::root_span!(
            request,
            chatlab.insert_strategy = tracing::field::Empty,
            chatlab.publish_mode = tracing::field::Empty
        )
    }

    fn on_request_end<B: MessageBody>(
        span: Span,
        outcome: &Result<ServiceResponse<B>, actix_web::Error>,
    ) {
        DefaultRootSpanBuilder::on_request_end(span.clone(), outcome);
        let _entered = span.enter();
        match outcome {
            Ok(response) => {
                let status = response.status().as_u16();
                match status {
                    500.. => tracing::error!(status, "request completed"),
                    400..=499 => tracing::warn!(status, "request completed"),
                    _ => tracing::debug!(status, "request completed"),
                }
            }
            Err(error) => tracing::error!(%error, "request failed"),
        }
    }
}
