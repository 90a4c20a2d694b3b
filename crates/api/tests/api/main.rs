//! The HTTP API, end to end: a real server on a random port, a real
//! PostgreSQL database of its own per test.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod auth;
mod background;
mod broker_faults;
mod browsers;
mod chats;
mod errors;
mod events;
mod exposure;
mod hostile;
mod idempotency;
mod import_jobs;
mod live;
mod membership;
mod messages;
mod operations;
mod pool;
mod private_broker;
mod probe;
mod read_state;
mod streams;
mod support;
mod users;
