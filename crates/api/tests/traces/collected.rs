//! The in-memory collector every test of this binary reads, and helpers
//! to walk a trace.

use std::collections::HashMap;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use opentelemetry::Value;
use opentelemetry_sdk::trace::{InMemorySpanExporter, Sampler, SdkTracerProvider, SpanData};
use uuid::Uuid;

use chatlab_api::config::LogFormat;

struct Collector {
    exporter: InMemorySpanExporter,
    _provider: SdkTracerProvider,
}

static COLLECTOR: OnceLock<Collector> = OnceLock::new();

/// Installs the collector (once per process) as the global subscriber's
/// OpenTelemetry layer; call before starting a server.
pub fn install() {
    COLLECTOR.get_or_init(|| {
        let exporter = InMemorySpanExporter::default();
        let provider = SdkTracerProvider::builder()
            .with_simple_exporter(exporter.clone())
            .with_sampler(chatlab_telemetry::HeadSampler::install(Box::new(
                Sampler::ParentBased(Box::new(Sampler::AlwaysOn)),
            )))
            .build();
        let filter = std::env::var("RUST_LOG").unwrap_or_else(|_| "warn".to_owned());
        assert!(
            chatlab_api::telemetry::install(LogFormat::Pretty, &filter, Some(&provider)),
            "no other subscriber may be installed first"
        );
        Collector {
            exporter,
            _provider: provider,
        }
    });
}

/// A fresh `traceparent` (sampled) and its trace and span ids.
pub fn traceparent() -> (String, String, String) {
    let trace = format!("{:032x}", Uuid::now_v7().as_u128());
    let parent = format!("{:016x}", (Uuid::new_v4().as_u128() as u64) | 1);
    (format!("00-{trace}-{parent}-01"), trace, parent)
}

/// Every span finished so far.
pub fn all() -> Vec<SpanData> {
    COLLECTOR
        .get()
        .map(|c| c.exporter.get_finished_spans().unwrap_or_default())
        .unwrap_or_default()
}

/// The finished spans of trace `trace`, once `done` says they are all
/// there (spans finish as the response leaves, and a broker's answer can
/// come later), or after 15 s, whatever is there then.
pub async fn trace(trace: &str, done: impl Fn(&Trace) -> bool) -> Trace {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let t = Trace(
            all()
                .into_iter()
                .filter(|s| s.span_context.trace_id().to_string() == trace)
                .collect(),
        );
        if done(&t) || Instant::now() > deadline {
            return t;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The spans of one trace.
pub struct Trace(pub Vec<SpanData>);

impl Trace {
    pub fn named(&self, name: &str) -> Vec<&SpanData> {
        self.0.iter().filter(|s| s.name == name).collect()
    }

    pub fn one(&self, name: &str) -> &SpanData {
        let found = self.named(name);
        assert_eq!(found.len(), 1, "one {name:?} span in {}", self.names());
        found[0]
    }

    /// Whether `span` lies under `ancestor` in this trace.
    pub fn under(&self, span: &SpanData, ancestor: &SpanData) -> bool {
        let parents: HashMap<_, _> = self
            .0
            .iter()
            .map(|s| (s.span_context.span_id(), s.parent_span_id))
            .collect();
        let mut at = span.parent_span_id;
        for _ in 0..64 {
            if at == ancestor.span_context.span_id() {
                return true;
            }
            match parents.get(&at) {
                Some(p) => at = *p,
                None => return false,
            }
        }
        false
    }

    /// The statement spans of an operation (`INSERT`), under `ancestor`.
    pub fn statements(&self, operation: &str, ancestor: &SpanData) -> Vec<&SpanData> {
        self.0
            .iter()
            .filter(|s| attr(s, "db.operation.name").as_deref() == Some(operation))
            .filter(|s| self.under(s, ancestor))
            .collect()
    }

    pub fn names(&self) -> String {
        let mut names: Vec<&str> = self.0.iter().map(|s| s.name.as_ref()).collect();
        names.sort_unstable();
        names.join(", ")
    }
}

/// An attribute of `span`, as text.
pub fn attr(span: &SpanData, key: &str) -> Option<String> {
    span.attributes
        .iter()
        .find(|kv| kv.key.as_str() == key)
        .map(|kv| match &kv.value {
            Value::String(s) => s.as_str().to_owned(),
            other => other.to_string(),
        })
}
