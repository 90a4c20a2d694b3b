//! What every handler shares: the store, the write settings, the limits,
//! the token keys and the metrics registry.

use prometheus_client::registry::Registry;

use chatlab_domain::Limits;
use chatlab_persistence::PgStore;

use crate::config::WriteSettings;

/// Shared application state, behind `web::Data`.
pub struct AppState {
    /// Storage: every read and write, each one unit of work on one
    /// connection. Cheap to clone.
    pub store: PgStore,
    /// Largest import job body, in bytes.
    pub import_limit_bytes: usize,
    /// Strategy default and whether requests may override it.
    pub writes: WriteSettings,
    /// Request limits.
    pub limits: Limits,
    /// Metrics for `/metrics`.
    pub metrics: MetricsEndpoint,
    /// The event audit's sources.
    pub audit: crate::audit::AuditSource,
    /// Verifies (and, where the keys allow, issues) bearer tokens.
    pub auth: chatlab_auth::TokenKeys,
    /// `POST /v1/tokens` answers (development only).
    pub dev_tokens: bool,
}

/// The registry and the hook that refreshes sampled gauges before a scrape.
pub struct MetricsEndpoint {
    /// All metrics.
    pub registry: Registry,
    /// Copies point-in-time values (pool state) into their gauges.
    pub refresh: Box<dyn Fn() + Send + Sync>,
}

/// The shared state of the app serving `req`, for extractors (handlers take
/// `web::Data<AppState>` directly); a missing state is a wiring bug.
pub(crate) fn of(
    req: &actix_web::HttpRequest,
) -> Result<&actix_web::web::Data<AppState>, crate::problem::ApiError> {
    req.app_data::<actix_web::web::Data<AppState>>()
        .ok_or_else(|| crate::problem::ApiError::Internal("application state is missing".into()))
}
