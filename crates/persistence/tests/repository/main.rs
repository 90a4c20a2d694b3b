//! Repository tests against the real PostgreSQL at `DATABASE_URL`, each in
//! its own database cloned from the migrated template.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod cancellation;
mod create_chat;
mod dead_connections;
mod error_language;
mod import_jobs;
mod messages;
mod outbox_relay;
mod pipeline;
mod pool_layout;
mod pool_metrics;
mod pooler_probe;
mod read_marker_modes;
mod support;
mod unread_state;
mod wire;
