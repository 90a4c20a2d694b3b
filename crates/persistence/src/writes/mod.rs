//! Writes: createChat's statements, membership changes, a message's inbox
//! rows, import chunks, idempotency keys, and the one path every multi-row
//! write takes ([`row_writes`]); who opens a write's transaction
//! ([`transaction`]); what createChat sent, as metrics.

pub(crate) mod create_chat;
pub(crate) mod fanout;
pub mod idempotency;
pub mod import_jobs;
pub(crate) mod membership;
pub(crate) mod row_writes;
pub(crate) mod transaction;
pub mod write_metrics;
