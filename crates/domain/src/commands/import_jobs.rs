//! Bulk import jobs: many members, or many messages, into one existing chat
//! in one request, written as a series of transactions ("chunks") of a
//! chosen size, over one or several connections at once.
//!
//! A job is not atomic, by design: a failed chunk rolls back alone, the
//! chunks committed before it stay committed, and the report says exactly
//! which rows were written. Validation happens before the first chunk, so a
//! malformed job writes nothing.

use std::collections::HashSet;
use std::ops::Range;

use chrono::{DateTime, Utc};

use crate::commands::limits::{Limits, MESSAGE_BODY_MAX_CHARS};
use crate::commands::now;
use crate::commands::validation::{
    Checker, ValidationErrors, body_control_message, forbidden_in_body,
};
use crate::errors::RepositoryError;
use crate::ids::{ChatId, MessageId, UserId};

/// Rows per chunk when the client names none (or `CHAT_IMPORT_MAX_ROWS`,
/// if lower).
pub const DEFAULT_CHUNK_SIZE: usize = 1_000;
/// Most chunks one job runs at once.
pub const MAX_PARALLELISM: usize = 16;

/// How an import job is split into chunks and how many run at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Chunking {
    /// Rows per transaction.
    pub chunk_size: usize,
    /// Chunks in flight at once, each on its own connection.
    pub parallelism: usize,
}

impl Chunking {
    fn validate(
        check: &mut Checker,
        chunk_size: Option<usize>,
        parallelism: Option<usize>,
        limits: &Limits,
    ) -> Self {
        // The default never exceeds a deployment's lower row limit.
        let chunk_size =
            chunk_size.unwrap_or_else(|| DEFAULT_CHUNK_SIZE.min(limits.import_max_rows.max(1)));
        if chunk_size == 0 || chunk_size > limits.import_max_rows {
            check.fail(
                "chunk_size",
                format!(
                    "must be between 1 and {}, got {chunk_size}",
                    limits.import_max_rows
                ),
            );
        }
        let parallelism = parallelism.unwrap_or(1);
        if parallelism == 0 || parallelism > MAX_PARALLELISM {
            check.fail(
                "parallelism",
                format!("must be between 1 and {MAX_PARALLELISM}, got {parallelism}"),
            );
        }
        Self {
            chunk_size,
            parallelism,
        }
    }

    /// The chunks of a job of `rows` rows, in order.
    pub fn chunks(&self, rows: usize) -> Vec<ChunkRange> {
        let size = self.chunk_size.max(1);
        (0..rows.div_ceil(size))
            .map(|index| {
                let first_row = index * size;
                ChunkRange {
                    index,
                    first_row,
                    rows: size.min(rows - first_row),
                }
            })
            .collect()
    }
}

fn check_row_count(check: &mut Checker, field: &'static str, rows: usize, limits: &Limits) {
    if rows == 0 {
        check.fail(field, "must not be empty");
    } else if rows > limits.import_max_rows {
        check.fail(
            field,
            format!(
                "must hold at most {} rows, got {rows}",
                limits.import_max_rows
            ),
        );
    }
}

/// A checked member import.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImportMembers {
    /// The chat, which must exist.
    pub chat_id: ChatId,
    /// The users to add, each once, in the order given.
    pub user_ids: Vec<UserId>,
    /// One join time for every row.
    pub joined_at: DateTime<Utc>,
    /// Chunking.
    pub chunking: Chunking,
}

impl ImportMembers {
    /// Checks the sizes and that no user is listed twice (a repeated id
    /// would fail its chunk on the primary key half-way through the job).
    pub fn validate(
        chat_id: ChatId,
        user_ids: Vec<UserId>,
        chunk_size: Option<usize>,
        parallelism: Option<usize>,
        limits: &Limits,
    ) -> Result<Self, ValidationErrors> {
        let mut check = Checker::default();
        check_row_count(&mut check, "user_ids", user_ids.len(), limits);
        let mut seen = HashSet::with_capacity(user_ids.len());
        if let Some(dup) = user_ids.iter().find(|id| !seen.insert(**id)) {
            check.fail("user_ids", format!("lists {dup} more than once"));
        }
        let chunking = Chunking::validate(&mut check, chunk_size, parallelism, limits);
        check.finish()?;
        Ok(Self {
            chat_id,
            user_ids,
            joined_at: now(),
            chunking,
        })
    }
}

/// One message of an import, as the client sent it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewImportedMessage {
    /// The author; must be a member of the chat.
    pub sender_id: UserId,
    /// The text.
    pub body: String,
}

/// One checked message of an import.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImportedMessage {
    /// Its new id; ids increase in the order of the request.
    pub id: MessageId,
    /// The author.
    pub sender_id: UserId,
    /// The text.
    pub body: String,
    /// Creation time.
    pub created_at: DateTime<Utc>,
}

/// A checked message import.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImportMessages {
    /// The chat, which must exist.
    pub chat_id: ChatId,
    /// The messages, in order.
    pub messages: Vec<ImportedMessage>,
    /// Chunking.
    pub chunking: Chunking,
}

impl ImportMessages {
    /// Checks the sizes and every body (as for one message); names the
    /// first bad body's position.
    pub fn validate(
        chat_id: ChatId,
        messages: Vec<NewImportedMessage>,
        chunk_size: Option<usize>,
        parallelism: Option<usize>,
        limits: &Limits,
    ) -> Result<Self, ValidationErrors> {
        let mut check = Checker::default();
        check_row_count(&mut check, "messages", messages.len(), limits);
        if let Some((i, m)) = messages.iter().enumerate().find(|(_, m)| {
            m.body.trim().is_empty() || m.body.chars().count() > MESSAGE_BODY_MAX_CHARS
        }) {
            check.fail(
                "messages",
                format!(
                    "message {i}: body must be 1 to {MESSAGE_BODY_MAX_CHARS} characters, not only \
                     whitespace (got {} characters)",
                    m.body.chars().count()
                ),
            );
        } else if let Some((i, c)) = messages
            .iter()
            .enumerate()
            .find_map(|(i, m)| forbidden_in_body(&m.body).map(|c| (i, c)))
        {
            check.fail(
                "messages",
                format!("message {i}: body {}", body_control_message(c)),
            );
        }
        let chunking = Chunking::validate(&mut check, chunk_size, parallelism, limits);
        check.finish()?;
        let created_at = now();
        Ok(Self {
            chat_id,
            messages: messages
                .into_iter()
                .map(|m| ImportedMessage {
                    id: MessageId::generate(),
                    sender_id: m.sender_id,
                    body: m.body,
                    created_at,
                })
                .collect(),
            chunking,
        })
    }

    /// Each sender once.
    pub fn senders(&self) -> Vec<UserId> {
        let mut seen = HashSet::new();
        self.messages
            .iter()
            .map(|m| m.sender_id)
            .filter(|id| seen.insert(*id))
            .collect()
    }
}

/// A run of rows written (or attempted) as one transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkRange {
    /// Position among the job's chunks, from 0.
    pub index: usize,
    /// Position of its first row in the request, from 0.
    pub first_row: usize,
    /// Rows in it.
    pub rows: usize,
}

impl ChunkRange {
    /// Its rows' positions in the request.
    pub fn row_range(&self) -> Range<usize> {
        self.first_row..self.first_row + self.rows
    }
}

/// The chunk that failed, and why.
#[derive(Debug)]
pub struct ChunkFailure {
    /// The chunk; none of its rows were written.
    pub chunk: ChunkRange,
    /// Why.
    pub error: RepositoryError,
}

/// What a job wrote.
#[derive(Debug)]
pub struct ImportReport {
    /// Rows in the request.
    pub requested: usize,
    /// The chunking it ran with.
    pub chunking: Chunking,
    /// The committed chunks, by index.
    pub committed: Vec<ChunkRange>,
    /// The first chunk that failed, if one did. Chunks not yet started
    /// when it failed were not run; with parallelism, chunks already
    /// running finished (and, if they committed, are listed above).
    pub failure: Option<ChunkFailure>,
}

impl ImportReport {
    /// Rows committed.
    pub fn written(&self) -> usize {
        self.committed.iter().map(|c| c.rows).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use uuid::Uuid;

    fn chunking(chunk_size: usize) -> Chunking {
        Chunking {
            chunk_size,
            parallelism: 1,
        }
    }

    #[test]
    fn the_last_chunk_holds_the_remainder() {
        let chunks = chunking(1000).chunks(2500);
        assert_eq!(
            chunks
                .iter()
                .map(|c| (c.first_row, c.rows))
                .collect::<Vec<_>>(),
            vec![(0, 1000), (1000, 1000), (2000, 500)]
        );
    }

    proptest! {
        #[test]
        fn chunks_cover_every_row_once(rows in 0usize..20_000, size in 1usize..5_000) {
            let chunks = chunking(size).chunks(rows);
            let mut next = 0;
            for (i, c) in chunks.iter().enumerate() {
                prop_assert_eq!(c.index, i);
                prop_assert_eq!(c.first_row, next);
                prop_assert!(c.rows >= 1 && c.rows <= size);
                next += c.rows;
            }
            prop_assert_eq!(next, rows);
        }
    }

    #[test]
    fn bad_chunking_and_repeated_users_are_rejected() {
        let chat = ChatId::from_uuid(Uuid::from_u128(1));
        let u = UserId::from_uuid(Uuid::from_u128(2));
        let err = ImportMembers::validate(chat, vec![u, u], Some(0), Some(99), &Limits::default())
            .unwrap_err();
        let fields: Vec<_> = err.0.iter().map(|e| e.field).collect();
        assert_eq!(fields, vec!["user_ids", "chunk_size", "parallelism"]);
    }

    #[test]
    fn too_many_rows_and_empty_bodies_are_rejected() {
        let chat = ChatId::from_uuid(Uuid::from_u128(1));
        let limits = Limits {
            import_max_rows: 2,
            ..Limits::default()
        };
        let m = |body: &str| NewImportedMessage {
            sender_id: UserId::from_uuid(Uuid::from_u128(2)),
            body: body.into(),
        };
        let err = ImportMessages::validate(chat, vec![m("a"), m(" "), m("c")], None, None, &limits)
            .unwrap_err();
        assert_eq!(err.0.len(), 2, "{err}");
        assert!(err.0[1].message.contains("message 1"), "{err}");
    }
}
