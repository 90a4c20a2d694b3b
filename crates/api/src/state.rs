//! What every handler shares: the ports, the write settings, the limits and
//! the metrics registry.

use std::sync::Arc;

use prometheus_client::registry::Registry;

use chatlab_domain::{
    ChatRepository, HealthCheck, ImportRepository, Limits, MessageRepository, UserRepository,
};

use crate::config::WriteSettings;

/// Shared application state, behind `web::Data`.
pub struct AppState {
    /// Users port.
    pub users: Arc<dyn UserRepository>,
    /// Chats port.
    pub chats: Arc<dyn ChatRepository>,
    /// Messages port.
    pub messages: Arc<dyn MessageRepository>,
    /// Bulk import jobs.
    pub imports: Arc<dyn ImportRepository>,
    /// Largest import job body, in bytes.
    pub import_limit_bytes: usize,
    /// Readiness probe.
    pub health: Arc<dyn HealthCheck>,
    /// Strategy default and whether requests may override it.
    pub writes: WriteSettings,
    /// Request limits.
    pub limits: Limits,
    /// Metrics for `/metrics`.
    pub metrics: MetricsEndpoint,
    /// The event audit's sources.
    pub audit: crate::audit::AuditSource,
}

/// The registry and the hook that refreshes sampled gauges before a scrape.
pub struct MetricsEndpoint {
    /// All metrics.
    pub registry: Registry,
    /// Copies point-in-time values (pool state) into their gauges.
    pub refresh: Box<dyn Fn() + Send + Sync>,
}
