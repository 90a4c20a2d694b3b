//! A small OTLP/HTTP receiver, so a matrix that compares tracing settings
//! needs no collector: a variant whose `OTEL_EXPORTER_OTLP_ENDPOINT` (or
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) is the placeholder `sink` exports
//! to this receiver on a loopback port, and `results.md` says how many
//! export requests, spans and bytes each variant sent, so a reader sees
//! that the exporting variants really exported.
//!
//! It speaks OTLP over HTTP with protobuf bodies (`POST /v1/traces`,
//! answered `200` with an empty `ExportTraceServiceResponse`, which is the
//! protocol's success), not gRPC: a variant that asks for another protocol
//! and the sink is refused. Each body is decoded as an
//! `ExportTraceServiceRequest` (opentelemetry-proto's generated types,
//! decoded by prost) and its spans counted down the three levels that hold
//! them (request → resource spans → scope spans → spans); a body that does
//! not decode is counted as undecoded. Gzip bodies are inflated by
//! actix-web before they are counted.

use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use actix_web::dev::ServerHandle;
use actix_web::{App, HttpRequest, HttpResponse, HttpServer, web};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use prost::Message as _;

use crate::error::LoadError;
use crate::servers::variant::ServerVariant;

/// The value of an endpoint variable that means "this harness's sink".
pub const PLACEHOLDER: &str = "sink";

/// The largest export request taken (OTLP exporters send a few hundred
/// KiB at most; actix-web's own default is 256 KiB).
const MAX_BODY: usize = 64 << 20;

/// The OTLP variables that name where traces go, and their suffix on the
/// sink's base URL: the general one gets `/v1/traces` from the exporter,
/// the traces-only one is the full URL.
const ENDPOINT_VARS: [(&str, &str); 2] = [
    ("OTEL_EXPORTER_OTLP_ENDPOINT", ""),
    ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "/v1/traces"),
];

/// The OTLP variables that choose the protocol.
const PROTOCOL_VARS: [&str; 2] = [
    "OTEL_EXPORTER_OTLP_PROTOCOL",
    "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
];

/// The only protocol the sink speaks.
const PROTOCOL: &str = "http/protobuf";

#[derive(Debug, Default)]
struct Counters {
    requests: AtomicU64,
    bytes: AtomicU64,
    spans: AtomicU64,
    undecoded: AtomicU64,
}

/// What the sink has received.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SinkCounts {
    /// Export requests.
    pub requests: u64,
    /// Bytes of their bodies (after gzip).
    pub bytes: u64,
    /// Spans in them.
    pub spans: u64,
    /// Requests whose body was not an OTLP protobuf message.
    pub undecoded: u64,
}

impl SinkCounts {
    /// What came between `earlier` and these counts.
    pub fn since(self, earlier: Self) -> Self {
        Self {
            requests: self.requests.saturating_sub(earlier.requests),
            bytes: self.bytes.saturating_sub(earlier.bytes),
            spans: self.spans.saturating_sub(earlier.spans),
            undecoded: self.undecoded.saturating_sub(earlier.undecoded),
        }
    }

    /// Adds `other`.
    pub fn add(&mut self, other: Self) {
        self.requests += other.requests;
        self.bytes += other.bytes;
        self.spans += other.spans;
        self.undecoded += other.undecoded;
    }
}

/// The running receiver; stopped by [`OtlpSink::stop`] (or with the
/// process).
pub struct OtlpSink {
    addr: SocketAddr,
    counters: Arc<Counters>,
    handle: ServerHandle,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl OtlpSink {
    /// Starts the receiver on a free loopback port, one worker.
    pub fn start() -> Result<Self, LoadError> {
        let fail = |e: std::io::Error| LoadError::Usage(format!("starting the OTLP sink: {e}"));
        let listener = TcpListener::bind("127.0.0.1:0").map_err(fail)?;
        let addr = listener.local_addr().map_err(fail)?;
        let counters = Arc::new(Counters::default());
        let data = web::Data::from(counters.clone());
        let server = HttpServer::new(move || {
            App::new()
                .app_data(data.clone())
                .app_data(web::PayloadConfig::new(MAX_BODY))
                .route("/v1/traces", web::post().to(receive))
        })
        .workers(1)
        .disable_signals()
        .shutdown_timeout(1)
        .listen(listener)
        .map_err(fail)?
        .run();
        let handle = server.handle();
        let task = tokio::spawn(server);
        Ok(Self {
            addr,
            counters,
            handle,
            task,
        })
    }

    /// Its base URL, `http://127.0.0.1:PORT`.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// What it has received so far.
    pub fn counts(&self) -> SinkCounts {
        let c = &self.counters;
        SinkCounts {
            requests: c.requests.load(Ordering::Relaxed),
            bytes: c.bytes.load(Ordering::Relaxed),
            spans: c.spans.load(Ordering::Relaxed),
            undecoded: c.undecoded.load(Ordering::Relaxed),
        }
    }

    /// Stops it, finishing the requests in progress.
    pub async fn stop(self) {
        self.handle.stop(true).await;
        let _ = self.task.await;
    }
}

/// One export request: counted, answered with an empty (successful)
/// `ExportTraceServiceResponse`.
async fn receive(
    request: HttpRequest,
    counters: web::Data<Counters>,
    body: web::Bytes,
) -> HttpResponse {
    counters.requests.fetch_add(1, Ordering::Relaxed);
    counters
        .bytes
        .fetch_add(body.len() as u64, Ordering::Relaxed);
    let protobuf = request
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/x-protobuf"));
    match count_spans(&body).filter(|_| protobuf) {
        Some(spans) => counters.spans.fetch_add(spans, Ordering::Relaxed),
        None => counters.undecoded.fetch_add(1, Ordering::Relaxed),
    };
    HttpResponse::Ok()
        .content_type("application/x-protobuf")
        .finish()
}

/// Whether any variant sends its traces to the sink.
pub fn wanted(variants: &[ServerVariant]) -> bool {
    variants.iter().any(|v| {
        v.env
            .iter()
            .any(|(k, val)| val == PLACEHOLDER && ENDPOINT_VARS.iter().any(|(var, _)| var == k))
    })
}

/// The variants with every `sink` endpoint replaced by the sink at
/// `base_url`, and HTTP/protobuf chosen where they name no protocol (an
/// exporter built with gRPC support may default to it). A variant that
/// names another protocol for the sink is an error.
pub fn point_at(variants: &[ServerVariant], base_url: &str) -> Result<Vec<ServerVariant>, String> {
    let mut out = Vec::with_capacity(variants.len());
    for v in variants {
        if !wanted(std::slice::from_ref(v)) {
            out.push(v.clone());
            continue;
        }
        let mut env = Vec::with_capacity(v.env.len() + 1);
        for (k, val) in &v.env {
            if PROTOCOL_VARS.contains(&k.as_str()) && val != PROTOCOL {
                return Err(format!(
                    "variant {}: {k}={val}, but the OTLP sink speaks {PROTOCOL} only",
                    v.name
                ));
            }
            let suffix = ENDPOINT_VARS
                .iter()
                .find(|(var, _)| var == k)
                .map(|(_, suffix)| suffix);
            match suffix {
                Some(suffix) if val == PLACEHOLDER => {
                    env.push((k.clone(), format!("{base_url}{suffix}")));
                }
                _ => env.push((k.clone(), val.clone())),
            }
        }
        if !env.iter().any(|(k, _)| PROTOCOL_VARS.contains(&k.as_str())) {
            env.push((PROTOCOL_VARS[0].to_owned(), PROTOCOL.to_owned()));
        }
        out.push(ServerVariant {
            name: v.name.clone(),
            env,
        });
    }
    Ok(out)
}

/// The spans in an OTLP `ExportTraceServiceRequest`, summed over its
/// resource spans and their scope spans. `None` when the bytes do not
/// decode as one.
pub fn count_spans(message: &[u8]) -> Option<u64> {
    let request = ExportTraceServiceRequest::decode(message).ok()?;
    Some(
        request
            .resource_spans
            .iter()
            .flat_map(|r| &r.scope_spans)
            .map(|s| s.spans.len() as u64)
            .sum(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry_proto::tonic::common::v1::{
        AnyValue, InstrumentationScope, KeyValue, any_value,
    };
    use opentelemetry_proto::tonic::resource::v1::Resource;
    use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span, span};
    use proptest::prelude::*;

    fn text(key: &str, value: &str) -> KeyValue {
        KeyValue {
            key: key.to_owned(),
            value: Some(AnyValue {
                value: Some(any_value::Value::StringValue(value.to_owned())),
            }),
            ..KeyValue::default()
        }
    }

    /// A span as an exporter writes one: ids, name, kind, start and end,
    /// an attribute.
    fn span(name: &str) -> Span {
        Span {
            trace_id: vec![7; 16],
            span_id: vec![9; 8],
            name: name.to_owned(),
            kind: span::SpanKind::Server as i32,
            start_time_unix_nano: 1_700_000_000_000_000_000,
            end_time_unix_nano: 1_700_000_000_001_000_000,
            attributes: vec![text("db.system.name", "postgresql")],
            ..Span::default()
        }
    }

    /// `resources[i][j]`: the number of spans of scope j of resource i,
    /// encoded.
    fn request(resources: &[Vec<usize>]) -> Vec<u8> {
        ExportTraceServiceRequest {
            resource_spans: resources
                .iter()
                .map(|scopes| ResourceSpans {
                    resource: Some(Resource {
                        attributes: vec![text("service.name", "chatlab")],
                        ..Resource::default()
                    }),
                    scope_spans: scopes
                        .iter()
                        .map(|&n| ScopeSpans {
                            scope: Some(InstrumentationScope {
                                name: "chatlab".to_owned(),
                                ..InstrumentationScope::default()
                            }),
                            spans: (0..n).map(|i| span(&format!("span {i}"))).collect(),
                            schema_url: "https://opentelemetry.io/schemas/1.30.0".to_owned(),
                        })
                        .collect(),
                    ..ResourceSpans::default()
                })
                .collect(),
        }
        .encode_to_vec()
    }

    proptest! {
        #[test]
        fn spans_are_counted_across_resources_and_scopes(
            resources in prop::collection::vec(prop::collection::vec(0usize..20, 0..4), 0..4),
        ) {
            let expected: usize = resources.iter().flatten().sum();
            prop_assert_eq!(count_spans(&request(&resources)), Some(expected as u64));
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..300)) {
            let _ = count_spans(&bytes);
        }
    }

    #[test]
    fn spans_of_a_request_from_the_official_encoder_are_counted() {
        // testdata/otlp_traces.py: 9 spans in resources of 3+2, 0 and 4.
        let official = include_bytes!("../../testdata/otlp_traces.bin");
        assert_eq!(count_spans(official), Some(9));
        assert_eq!(count_spans(&official[..official.len() - 1]), None);
    }

    #[test]
    fn an_empty_request_has_no_spans_and_a_cut_one_is_malformed() {
        assert_eq!(count_spans(&[]), Some(0));
        // Two resources, each with scopes of 3 spans: 2 × (3 + 3).
        assert_eq!(count_spans(&request(&[vec![3, 3], vec![3, 3]])), Some(12));
        let whole = request(&[vec![3]]);
        assert_eq!(count_spans(&whole), Some(3));
        assert_eq!(count_spans(&whole[..whole.len() - 3]), None);
        assert_eq!(count_spans(b"{\"resourceSpans\":[]}"), None);
        // Not protobuf at all: a wire type that does not exist, a length
        // past the end.
        assert_eq!(count_spans(&[0xff; 16]), None);
        assert_eq!(count_spans(&[0x0a, 0x7f, 0x01]), None);
    }

    fn variant(s: &str) -> ServerVariant {
        s.parse().unwrap()
    }

    #[test]
    fn the_placeholder_becomes_the_sink_and_http_protobuf() {
        let variants = vec![
            variant("off"),
            variant("one:OTEL_EXPORTER_OTLP_ENDPOINT=sink+OTEL_TRACES_SAMPLER_ARG=0.01"),
            variant(
                "two:OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=sink+OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf",
            ),
            variant("elsewhere:OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318"),
        ];
        assert!(wanted(&variants));
        assert!(!wanted(&[variants[0].clone(), variants[3].clone()]));
        let pointed = point_at(&variants, "http://127.0.0.1:5000").unwrap();
        assert_eq!(pointed[0], variants[0]);
        assert_eq!(pointed[3], variants[3]);
        let env = |v: &ServerVariant, k: &str| {
            v.env
                .iter()
                .filter(|(key, _)| key == k)
                .map(|(_, val)| val.clone())
                .collect::<Vec<_>>()
        };
        assert_eq!(
            env(&pointed[1], "OTEL_EXPORTER_OTLP_ENDPOINT"),
            ["http://127.0.0.1:5000"]
        );
        assert_eq!(
            env(&pointed[1], "OTEL_EXPORTER_OTLP_PROTOCOL"),
            ["http/protobuf"]
        );
        assert_eq!(env(&pointed[1], "OTEL_TRACES_SAMPLER_ARG"), ["0.01"]);
        assert_eq!(
            env(&pointed[2], "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"),
            ["http://127.0.0.1:5000/v1/traces"]
        );
        assert_eq!(
            env(&pointed[2], "OTEL_EXPORTER_OTLP_PROTOCOL"),
            ["http/protobuf"]
        );
        let grpc = variant("g:OTEL_EXPORTER_OTLP_ENDPOINT=sink+OTEL_EXPORTER_OTLP_PROTOCOL=grpc");
        let err = point_at(&[grpc], "http://127.0.0.1:5000").unwrap_err();
        assert!(err.contains("http/protobuf only"), "{err}");
    }

    #[tokio::test]
    async fn the_sink_answers_exports_and_counts_them() {
        let sink = OtlpSink::start().unwrap();
        let client = reqwest::Client::new();
        let url = format!("{}/v1/traces", sink.base_url());
        let body = request(&[vec![2, 1], vec![4]]);
        for _ in 0..2 {
            let resp = client
                .post(&url)
                .header("content-type", "application/x-protobuf")
                .body(body.clone())
                .send()
                .await
                .unwrap();
            assert_eq!(resp.status(), 200);
            assert_eq!(
                resp.headers()["content-type"].to_str().unwrap(),
                "application/x-protobuf"
            );
            assert!(resp.bytes().await.unwrap().is_empty());
        }
        let before = sink.counts();
        let json = client
            .post(&url)
            .header("content-type", "application/json")
            .body("{}")
            .send()
            .await
            .unwrap();
        assert_eq!(json.status(), 200);
        let garbage = client
            .post(&url)
            .header("content-type", "application/x-protobuf")
            .body(vec![0xffu8; 16])
            .send()
            .await
            .unwrap();
        assert_eq!(garbage.status(), 200);
        let elsewhere = client
            .post(format!("{}/v1/metrics", sink.base_url()))
            .body(body.clone())
            .send()
            .await
            .unwrap();
        assert_eq!(elsewhere.status(), 404);
        let counts = sink.counts();
        sink.stop().await;
        assert_eq!(
            before,
            SinkCounts {
                requests: 2,
                bytes: 2 * body.len() as u64,
                spans: 14,
                undecoded: 0
            }
        );
        assert_eq!(
            counts.since(before),
            SinkCounts {
                requests: 2,
                bytes: 2 + 16,
                spans: 0,
                undecoded: 2
            }
        );
    }
}
