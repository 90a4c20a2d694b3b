//! The real OTLP exporters, over gRPC and over HTTP/protobuf, against
//! receivers in this process: spans arrive, with chatlab's resource.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use actix_web::{App, HttpResponse, HttpServer, web};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use opentelemetry_sdk::trace::SdkTracerProvider;
use prost::Message as _;
use tracing_subscriber::layer::SubscriberExt as _;

use chatlab_api::telemetry::otlp::provider_from;

type Received = Arc<Mutex<Vec<ExportTraceServiceRequest>>>;

struct Grpc(Received);

#[tonic::async_trait]
impl TraceService for Grpc {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        self.0.lock().unwrap().push(request.into_inner());
        Ok(tonic::Response::new(ExportTraceServiceResponse::default()))
    }
}

/// A gRPC receiver on a free loopback port: its endpoint.
async fn grpc_receiver(received: Received) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(TraceServiceServer::new(Grpc(received)))
            .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener)),
    );
    format!("http://{addr}")
}

/// An OTLP/HTTP receiver (`POST /v1/traces`, protobuf): its base URL.
fn http_receiver(received: Received) -> String {
    let server = HttpServer::new(move || {
        let received = received.clone();
        App::new().route(
            "/v1/traces",
            web::post().to(move |body: web::Bytes| {
                let received = received.clone();
                async move {
                    match ExportTraceServiceRequest::decode(body) {
                        Ok(req) => {
                            received.lock().unwrap().push(req);
                            HttpResponse::Ok()
                                .content_type("application/x-protobuf")
                                .body(ExportTraceServiceResponse::default().encode_to_vec())
                        }
                        Err(_) => HttpResponse::BadRequest().finish(),
                    }
                }
            }),
        )
    })
    .workers(1)
    .bind("127.0.0.1:0")
    .unwrap();
    let addr = server.addrs()[0];
    tokio::spawn(server.run());
    format!("http://{addr}")
}

/// Emits one chatlab span through `provider` (on a subscriber of this
/// thread only) and flushes it out.
async fn emit(provider: SdkTracerProvider) {
    let subscriber = tracing_subscriber::registry()
        .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("chatlab")));
    tracing::subscriber::with_default(subscriber, || {
        let span = tracing::info_span!(target: "chatlab_test", "exported", chatlab.check = 7);
        let _entered = span.enter();
    });
    tokio::task::spawn_blocking(move || {
        provider.force_flush().unwrap();
        provider.shutdown().unwrap();
    })
    .await
    .unwrap();
}

fn resource(req: &ExportTraceServiceRequest) -> HashMap<String, String> {
    req.resource_spans[0]
        .resource
        .as_ref()
        .unwrap()
        .attributes
        .iter()
        .filter_map(|kv| match kv.value.as_ref()?.value.as_ref()? {
            AnyValue::StringValue(s) => Some((kv.key.clone(), s.clone())),
            _ => None,
        })
        .collect()
}

fn assert_arrived(received: &Received, protocol: &str) {
    let got = received.lock().unwrap();
    let req = got
        .first()
        .unwrap_or_else(|| panic!("{protocol}: nothing arrived"));
    let attrs = resource(req);
    assert_eq!(
        attrs.get("service.name").map(String::as_str),
        Some("chatlab"),
        "{attrs:?}"
    );
    assert_eq!(
        attrs.get("service.version").map(String::as_str),
        Some(env!("CARGO_PKG_VERSION"))
    );
    assert_eq!(
        attrs.get("service.instance.id").map(String::len),
        Some(36),
        "{attrs:?}"
    );
    let spans: Vec<&str> = req
        .resource_spans
        .iter()
        .flat_map(|r| &r.scope_spans)
        .flat_map(|s| &s.spans)
        .map(|s| s.name.as_str())
        .collect();
    assert_eq!(spans, ["exported"], "{protocol}");
}

#[tokio::test]
async fn spans_reach_an_otlp_receiver_over_grpc_and_over_http() {
    let before = chatlab_api::telemetry::export_metrics::ExportMetrics::global()
        .exported
        .get();
    for protocol in ["grpc", "http/protobuf"] {
        let received: Received = Arc::default();
        let endpoint = match protocol {
            "grpc" => grpc_receiver(received.clone()).await,
            _ => http_receiver(received.clone()),
        };
        let vars = HashMap::from([
            ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", protocol.to_owned()),
        ]);
        let provider = provider_from(|k| vars.get(k).cloned())
            .unwrap()
            .expect("an endpoint is set");
        emit(provider).await;
        assert_arrived(&received, protocol);
    }
    let after = chatlab_api::telemetry::export_metrics::ExportMetrics::global()
        .exported
        .get();
    assert_eq!(after - before, 2, "each export is counted on /metrics");
}
