//! `http_server_request_duration_seconds`, by method, route template and
//! status (OpenTelemetry's HTTP server conventions). The route is the
//! template (`/v1/chats/{id}`), never the raw path, so label cardinality
//! stays bounded whatever clients send. A bucket carries, as an OpenMetrics
//! exemplar, the trace id of a sampled request that fell in it, so the
//! slowest bucket on a dashboard leads to a trace.

use std::time::Instant;

use actix_web::body::MessageBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::middleware::Next;
use actix_web::{Error, web};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::exemplar::HistogramWithExemplars;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::{Registry, Unit};

use chatlab_persistence::database::pool_metrics::{TraceLabel, latency_buckets};

use crate::http::limits::method_label;

/// Labels of the request-duration histogram.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    /// `GET`, `POST`, ..., or `_OTHER` for a method HTTP does not define.
    pub http_request_method: &'static str,
    /// Route template, or `unmatched`.
    pub http_route: String,
    /// Response status.
    pub http_response_status_code: u16,
}

/// A duration histogram whose buckets keep an exemplar each.
pub type Durations = HistogramWithExemplars<TraceLabel>;

fn new_histogram() -> Durations {
    HistogramWithExemplars::new(latency_buckets())
}

/// HTTP server metrics.
#[derive(Debug, Clone)]
pub struct HttpMetrics {
    /// Request durations.
    pub duration: Family<RequestLabels, Durations, fn() -> Durations>,
}

impl HttpMetrics {
    /// Creates the metrics and registers them.
    pub fn register(registry: &mut Registry) -> Self {
        let duration = Family::<RequestLabels, Durations, fn() -> Durations>::new_with_constructor(
            new_histogram,
        );
        registry.register_with_unit(
            "http_server_request_duration",
            "Duration of HTTP server requests",
            Unit::Seconds,
            duration.clone(),
        );
        Self { duration }
    }
}

/// Middleware that times every request.
pub async fn record(
    req: ServiceRequest,
    next: Next<impl MessageBody>,
) -> Result<ServiceResponse<impl MessageBody>, Error> {
    let metrics = req.app_data::<web::Data<HttpMetrics>>().cloned();
    let method = method_label(req.method());
    let started = Instant::now();
    let response = next.call(req).await?;
    if let Some(metrics) = metrics {
        let labels = RequestLabels {
            http_request_method: method,
            http_route: response
                .request()
                .match_pattern()
                .unwrap_or_else(|| "unmatched".to_owned()),
            http_response_status_code: response.status().as_u16(),
        };
        metrics.duration.get_or_create(&labels).observe(
            started.elapsed().as_secs_f64(),
            TraceLabel::of(&tracing::Span::current()),
            None,
        );
    }
    Ok(response)
}
