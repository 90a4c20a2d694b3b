//! The load itself: what the virtual users send and how (scenarios, tokens,
//! closed and open models, schedules), the latencies they see, and the
//! yardstick's SQL that pgbench sends straight to PostgreSQL.

pub(crate) mod auth;
pub(crate) mod choice;
pub(crate) mod created;
pub(crate) mod creators;
pub(crate) mod latency;
pub(crate) mod live_stream;
pub(crate) mod measure;
pub(crate) mod message_writes;
pub(crate) mod monotonic;
pub(crate) mod runner;
pub(crate) mod scenario;
pub(crate) mod schedule;
pub(crate) mod traces;
pub(crate) mod yardstick_sql;
