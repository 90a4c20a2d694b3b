//! Log lines any client can cause at will, let through at most once per
//! interval.
//!
//! actix's HTTP/1 dispatcher logs every request head it cannot parse (a
//! NUL in a header, `Content-Length` beside `Transfer-Encoding`, a URI
//! over 64 KiB) as an ERROR, `stream error: request parse error: ...`, and
//! answers it a bare 400 before any of the server's code runs. Its level
//! cannot be changed from outside, so [`Throttle`] lets the first such
//! line through and drops the same line for [`EVERY`] after it: a client
//! sending malformed heads in a loop cannot flood the log, and an operator
//! still sees that it happens.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tracing::callsite::Identifier;
use tracing::subscriber::Interest;
use tracing::{Event, Level, Metadata};
use tracing_subscriber::layer::{Context, Filter};

/// At most one line of each throttled callsite per this long.
pub const EVERY: Duration = Duration::from_secs(10);

/// The targets whose warnings and errors are throttled: actix's HTTP
/// layer, where a client's malformed request becomes a log line.
const THROTTLED_TARGETS: &[&str] = &["actix_http::h1::dispatcher"];

/// A per-layer filter: a throttled callsite's event is let through when
/// its last one was [`EVERY`] ago or longer; every other event passes.
#[derive(Debug, Default)]
pub struct Throttle {
    last: Mutex<HashMap<Identifier, Instant>>,
}

impl Throttle {
    /// Whether an event of `callsite` at `now` is let through; remembers it.
    fn admits(&self, callsite: Identifier, now: Instant) -> bool {
        let mut last = self
            .last
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if !due(last.get(&callsite).copied(), now) {
            return false;
        }
        last.insert(callsite, now);
        true
    }
}

/// Whether a line is due at `now` when the last one went out at `last`.
fn due(last: Option<Instant>, now: Instant) -> bool {
    last.is_none_or(|at| now.saturating_duration_since(at) >= EVERY)
}

/// Whether `meta` is a warning or error of a throttled target.
fn throttled(meta: &Metadata<'_>) -> bool {
    meta.is_event()
        && *meta.level() <= Level::WARN
        && THROTTLED_TARGETS
            .iter()
            .any(|t| meta.target().starts_with(t))
}

impl<S> Filter<S> for Throttle {
    fn enabled(&self, _meta: &Metadata<'_>, _cx: &Context<'_, S>) -> bool {
        true
    }

    fn callsite_enabled(&self, meta: &'static Metadata<'static>) -> Interest {
        if throttled(meta) {
            Interest::sometimes()
        } else {
            Interest::always()
        }
    }

    fn event_enabled(&self, event: &Event<'_>, _cx: &Context<'_, S>) -> bool {
        let meta = event.metadata();
        !throttled(meta) || self.admits(meta.callsite(), Instant::now())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use tracing_subscriber::Layer as _;
    use tracing_subscriber::layer::SubscriberExt as _;

    /// A writer that keeps what is written.
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_throttled_line_passes_once_per_interval_and_others_always() {
        let captured = Captured::default();
        let writer = captured.clone();
        let layer = tracing_subscriber::fmt::layer()
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .with_filter(Throttle::default());
        let subscriber = tracing_subscriber::registry().with(layer);
        tracing::subscriber::with_default(subscriber, || {
            for i in 0..50 {
                tracing::error!(target: "actix_http::h1::dispatcher", "stream error: request parse error {i}");
                tracing::error!(target: "chatlab_api::startup", "own error {i}");
            }
        });
        let text = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
        assert_eq!(text.matches("stream error").count(), 1, "{text}");
        assert_eq!(text.matches("own error").count(), 50);
    }

    #[test]
    fn the_next_line_is_due_once_the_interval_is_over() {
        let now = Instant::now();
        assert!(due(None, now));
        assert!(!due(Some(now), now + EVERY / 2));
        assert!(due(Some(now), now + EVERY));
    }
}
