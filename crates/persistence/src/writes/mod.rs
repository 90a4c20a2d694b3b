//! Writes: each unit of work on [`crate::store::PgStore`] that changes
//! something (createChat, sendMessage, membership, imports, a read
//! marker's move), the statements they send ([`chat_statements`],
//! [`fanout`], [`row_writes`], the one path every multi-row write takes),
//! idempotency keys, who opens a write's transaction ([`transaction`]),
//! the read markers held between flushes and their writer
//! ([`read_markers`]), and what createChat sent, as metrics.

pub(crate) mod chat_statements;
pub(crate) mod create_chat;
pub(crate) mod fanout;
pub mod idempotency;
pub mod import_jobs;
pub(crate) mod mark_read;
pub(crate) mod membership;
pub mod read_markers;
pub(crate) mod row_writes;
pub(crate) mod send_message;
pub(crate) mod transaction;
pub mod write_metrics;
