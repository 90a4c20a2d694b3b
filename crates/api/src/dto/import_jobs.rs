use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use chatlab_domain::{ChunkRange, ImportReport};

/// `POST /v1/chats/{id}/members/import`.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ImportMembersRequest {
    /// Users to add, each once; up to `CHAT_IMPORT_MAX_ROWS` (default
    /// 100,000).
    #[schema(min_items = 1, max_items = 100000)]
    pub user_ids: Vec<Uuid>,
    /// Rows per transaction (default 1,000; at most `CHAT_IMPORT_MAX_ROWS`).
    #[schema(example = 1000, minimum = 1, maximum = 100000)]
    #[serde(default, deserialize_with = "super::integral::option_usize")]
    pub chunk_size: Option<usize>,
    /// Chunks in flight at once, each on its own connection (1 to 16,
    /// default 1).
    #[schema(example = 4, minimum = 1, maximum = 16)]
    #[serde(default, deserialize_with = "super::integral::option_usize")]
    pub parallelism: Option<usize>,
}

/// One message of an import.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ImportedMessageRequest {
    /// The author; must be a member.
    pub sender_id: Uuid,
    /// The text, 1 to 4,000 characters; no control character but tab and
    /// line breaks.
    #[schema(
        min_length = 1,
        max_length = 4000,
        pattern = r"^[^\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f-\u009f]*[^\s\u0000-\u001f\u007f-\u009f][^\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f-\u009f]*$"
    )]
    pub body: String,
}

/// `POST /v1/chats/{id}/messages/import`.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ImportMessagesRequest {
    /// The messages, in order; up to `CHAT_IMPORT_MAX_ROWS` (default
    /// 100,000).
    #[schema(min_items = 1, max_items = 100000)]
    pub messages: Vec<ImportedMessageRequest>,
    /// Rows per transaction (default 1,000; at most `CHAT_IMPORT_MAX_ROWS`).
    #[schema(example = 1000, minimum = 1, maximum = 100000)]
    #[serde(default, deserialize_with = "super::integral::option_usize")]
    pub chunk_size: Option<usize>,
    /// Chunks in flight at once, each on its own connection (1 to 16,
    /// default 1).
    #[schema(example = 4, minimum = 1, maximum = 16)]
    #[serde(default, deserialize_with = "super::integral::option_usize")]
    pub parallelism: Option<usize>,
}

/// A chunk: rows `first_row .. first_row + rows` of the request, written
/// as one transaction.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, ToSchema)]
pub struct ChunkResponse {
    /// Position among the job's chunks, from 0.
    pub index: usize,
    /// Position of its first row in the request, from 0.
    pub first_row: usize,
    /// Rows in it.
    pub rows: usize,
}

impl From<ChunkRange> for ChunkResponse {
    fn from(c: ChunkRange) -> Self {
        Self {
            index: c.index,
            first_row: c.first_row,
            rows: c.rows,
        }
    }
}

/// A finished import job: every chunk committed.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ImportResponse {
    /// Rows in the request.
    pub rows_requested: usize,
    /// Rows committed (equal to `rows_requested`).
    pub rows_written: usize,
    /// Rows per transaction.
    pub chunk_size: usize,
    /// Chunks run at once.
    pub parallelism: usize,
    /// Transactions committed.
    pub chunks: usize,
    /// Wall time of the job, in milliseconds.
    pub elapsed_ms: f64,
}

impl ImportResponse {
    /// The response for a job that committed every chunk.
    pub fn new(report: &ImportReport, elapsed: std::time::Duration) -> Self {
        Self {
            rows_requested: report.requested,
            rows_written: report.written(),
            chunk_size: report.chunking.chunk_size,
            parallelism: report.chunking.parallelism,
            chunks: report.committed.len(),
            elapsed_ms: elapsed.as_secs_f64() * 1000.0,
        }
    }
}
