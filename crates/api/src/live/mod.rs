//! Live delivery: each instance follows the event topic itself
//! ([`chatlab_kafka::live_tail`]) and pushes every event to the open
//! connections of the members of its chat, as Server-Sent Events on
//! `GET /v1/events`. A client that reconnects with the `Last-Event-ID` it
//! last received first gets what it missed ([`catch_up`]), then the live
//! feed, with no gap and no repeat.
//!
//! Instances share nothing but the database and the broker: a member
//! connected to any instance receives what was written on any other.
//!
//! A stream holds its connection for as long as its client listens, so
//! streams have a budget of their own ([`budget`]): per user and per
//! instance, below the connections the workers take; and only a user who
//! exists may hold one ([`known_users`]).

pub mod budget;
pub mod catch_up;
pub mod cursor;
pub mod dispatch;
pub mod frame;
pub mod hub;
pub mod known_users;
pub mod membership;
pub mod metrics;
pub mod recent;
pub mod socket;
pub mod stream;
#[cfg(test)]
mod test_events;
pub mod tickets;

use std::sync::Arc;
use std::time::Duration;

pub use budget::StreamBudget;
pub use hub::Hub;
pub use known_users::KnownUsers;
pub use metrics::LiveMetrics;

/// What the streaming endpoint needs, as app data.
#[derive(Debug, Clone)]
pub struct Live {
    /// This instance's connections.
    pub hub: Arc<Hub>,
    /// The users lately found to exist, or not.
    pub known: Arc<KnownUsers>,
    /// The counters.
    pub metrics: LiveMetrics,
    /// Frames a connection may have waiting before it is dropped.
    pub buffer: usize,
    /// Period of the heartbeat comment on an idle connection.
    pub heartbeat: Duration,
    /// What a stream refused by its budget is told to wait
    /// (`Retry-After`): two heartbeats, by when a stream whose client has
    /// gone has been written to, found gone, and freed.
    pub retry_after: Duration,
    /// Where a reconnecting client's catch-up reads.
    pub source: catch_up::TopicSource,
    /// How long a live ticket waits to open a stream.
    pub ticket_ttl: Duration,
}
