//! The HTTP API, end to end: a real server on a random port, a real
//! PostgreSQL database of its own per test.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod chats;
mod errors;
mod events;
mod imports;
mod messages;
mod operations;
mod pool;
mod support;
mod users;
