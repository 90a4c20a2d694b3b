use std::time::Duration;

use actix_web::{HttpResponse, get, web};

use chatlab_domain::{RepositoryError, UnavailableReason};

use crate::dto::StatusResponse;
use crate::problem::{ApiError, Problem};
use crate::state::AppState;

/// How long `/readyz` waits for the database.
const READY_TIMEOUT: Duration = Duration::from_secs(2);

/// Liveness: the process is up and serving HTTP.
#[utoipa::path(tag = "operations", responses((status = 200, description = "Alive", body = StatusResponse)))]
#[get("/healthz")]
pub async fn healthz() -> HttpResponse {
    HttpResponse::Ok().json(StatusResponse {
        status: "ok".into(),
    })
}

/// Readiness: a pooled connection answers a query within two seconds.
#[utoipa::path(
    tag = "operations",
    responses(
        (status = 200, description = "Ready", body = StatusResponse),
        (status = 503, description = "Database unreachable", body = Problem, content_type = "application/problem+json"),
    )
)]
#[get("/readyz")]
pub async fn readyz(state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    match tokio::time::timeout(READY_TIMEOUT, state.store.ping()).await {
        Ok(result) => result?,
        Err(elapsed) => {
            return Err(ApiError::from(RepositoryError::Unavailable {
                reason: UnavailableReason::Connection,
                source: Box::new(elapsed),
            }));
        }
    }
    Ok(HttpResponse::Ok().json(StatusResponse {
        status: "ready".into(),
    }))
}
