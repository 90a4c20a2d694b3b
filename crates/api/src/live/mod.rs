//! Live delivery: each instance follows the event topic itself
//! ([`chatlab_kafka::live_tail`]) and pushes every event to the open
//! connections of the members of its chat, as Server-Sent Events on
//! `GET /v1/events`.
//!
//! Instances share nothing but the database and the broker: a member
//! connected to any instance receives what was written on any other.

pub mod dispatch;
pub mod hub;
pub mod metrics;
pub mod stream;

use std::sync::Arc;
use std::time::Duration;

pub use hub::Hub;
pub use metrics::LiveMetrics;

/// What the streaming endpoint needs, as app data.
#[derive(Debug, Clone)]
pub struct Live {
    /// This instance's connections.
    pub hub: Arc<Hub>,
    /// The counters.
    pub metrics: LiveMetrics,
    /// Frames a connection may have waiting before it is dropped.
    pub buffer: usize,
    /// Period of the heartbeat comment on an idle connection.
    pub heartbeat: Duration,
}
