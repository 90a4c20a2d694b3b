use actix_web::{HttpResponse, get, web};
use prometheus_client::encoding::text::encode;

use crate::problem::ApiError;
use crate::state::AppState;

/// Prometheus (OpenMetrics text) metrics: pool, write path and HTTP.
#[utoipa::path(
    tag = "operations",
    responses((status = 200, description = "Metrics in OpenMetrics text format", body = String,
        content_type = "application/openmetrics-text; version=1.0.0; charset=utf-8"))
)]
#[get("/metrics")]
pub async fn metrics(state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    (state.metrics.refresh)();
    let mut body = String::with_capacity(16 * 1024);
    encode(&mut body, &state.metrics.registry).map_err(|e| ApiError::Internal(Box::new(e)))?;
    Ok(HttpResponse::Ok()
        .content_type("application/openmetrics-text; version=1.0.0; charset=utf-8")
        .body(body))
}
