use actix_web::{HttpResponse, get, web};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::problem::{ApiError, Problem};
use crate::state::AppState;

/// `GET /audit` query.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct AuditQuery {
    /// Start of the window (RFC 3339); default: 1970-01-01, or the server's
    /// start when it runs the embedded broker (whose events die with it).
    pub since: Option<DateTime<Utc>>,
    /// End of the window (RFC 3339, exclusive); default: now minus `settle_ms`.
    pub until: Option<DateTime<Utc>>,
    /// When `until` is not given, leave out the last milliseconds, whose
    /// events may still be on their way (default 2000).
    pub settle_ms: Option<u64>,
}

/// The reconciliation of one publish mode.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ModeAuditResponse {
    /// The mode.
    pub mode: String,
    /// Committed writes made with it.
    pub committed: usize,
    /// Distinct events it produced.
    pub events: usize,
    /// Committed writes without an event.
    pub lost: usize,
    /// Events without a committed write.
    pub phantom: usize,
    /// Extra copies of events.
    pub duplicated: usize,
    /// A no-loss mode (`outbox`, `in_tx_await`) lost an event.
    pub failed: bool,
}

/// The audit of a window.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct AuditResponse {
    /// Window start.
    pub since: DateTime<Utc>,
    /// Window end (exclusive).
    pub until: DateTime<Utc>,
    /// One entry per mode seen.
    pub modes: Vec<ModeAuditResponse>,
    /// Records on the topic that were not chatlab events.
    pub unreadable: usize,
    /// Whether any no-loss mode lost an event.
    pub failed: bool,
    /// The same, as a Markdown table.
    pub table: String,
}

/// Reconciles the event topic with the committed writes, per publish mode.
#[utoipa::path(
    tag = "operations",
    params(AuditQuery),
    responses(
        (status = 200, description = "The audit", body = AuditResponse),
        (status = 400, description = "Malformed query", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "Database or broker unavailable", body = Problem, content_type = "application/problem+json"),
    )
)]
#[get("/audit")]
pub async fn audit(
    state: web::Data<AppState>,
    query: web::Query<AuditQuery>,
) -> Result<HttpResponse, ApiError> {
    let since = query.since.unwrap_or(state.audit.default_since);
    let until = query.until.unwrap_or_else(|| {
        Utc::now() - chrono::Duration::milliseconds(query.settle_ms.unwrap_or(2000) as i64)
    });
    let report = state.audit.run(since, until).await.map_err(|e| match e {
        crate::audit::AuditError::Database(e) => ApiError::from(e),
        other => ApiError::Unavailable {
            reason: chatlab_domain::UnavailableReason::EventBroker,
            source: Box::new(other),
        },
    })?;
    Ok(HttpResponse::Ok().json(AuditResponse {
        since,
        until,
        modes: report
            .modes
            .iter()
            .map(|m| ModeAuditResponse {
                mode: m.mode.as_str().to_owned(),
                committed: m.committed,
                events: m.events,
                lost: m.lost,
                phantom: m.phantom,
                duplicated: m.duplicated,
                failed: m.failed(),
            })
            .collect(),
        unreadable: report.unreadable,
        failed: report.failed(),
        table: report.to_table(),
    }))
}
