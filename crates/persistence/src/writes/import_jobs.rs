//! Bulk import jobs: rows split into chunks, one transaction per chunk,
//! up to `parallelism` chunks at once (each on its own connection, so the
//! pool bounds the real concurrency).

use std::collections::HashSet;
use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use chrono::{DateTime, Utc};
use diesel::ExecuteCopyFromDsl;
use diesel::pg::PgConnection;
use diesel::prelude::*;
use futures_util::{FutureExt, StreamExt};
use tracing::instrument;
use uuid::Uuid;

use chatlab_domain::{
    ChatId, ChunkFailure, ChunkRange, Chunking, Entity, ImportMembers, ImportMessages,
    ImportReport, InsertStrategy, KeyClaim, MessageFanout, MessageKind, PublishMode,
    RepositoryError, RowsBy, StoredResponse, UserId,
};

use crate::error_mapping::{name_unknown_users, query_err};
use crate::events::publishing::TxError;
use crate::models::MessageRow;
use crate::queries::{BlockInsert, InsertImportedInbox, InsertMessagesUnnest};
use crate::reads;
use crate::schema::{chat_members, chats, messages};
use crate::session::{DbSession, Executable};
use crate::store::PgStore;
use crate::writes::chat_statements::Members;
use crate::writes::idempotency::{self, Claimed};
use crate::writes::row_writes::{RowSet, WriteCount, write_rows};
use crate::writes::write_metrics::ImportKind;

/// The rows of one job, shared by its chunks.
enum Rows {
    Members {
        chat_id: Uuid,
        joined_at: DateTime<Utc>,
        user_ids: Vec<Uuid>,
    },
    /// Messages, and whether their inbox rows are written with them.
    Messages(Vec<MessageRow>, MessageFanout),
}

impl Rows {
    fn kind(&self) -> ImportKind {
        match self {
            Self::Members { .. } => ImportKind::Members,
            Self::Messages(..) => ImportKind::Messages,
        }
    }

    fn len(&self) -> usize {
        match self {
            Self::Members { user_ids, .. } => user_ids.len(),
            Self::Messages(rows, _) => rows.len(),
        }
    }

    /// Writes one chunk's rows (the caller holds the transaction).
    async fn write(
        &self,
        s: &mut DbSession,
        chunk: ChunkRange,
        strategy: InsertStrategy,
    ) -> QueryResult<WriteCount> {
        let range = chunk.row_range();
        let by = strategy.plan().rows;
        match self {
            Self::Members {
                chat_id,
                joined_at,
                user_ids,
            } => {
                let members = Members {
                    chat_id: *chat_id,
                    joined_at: *joined_at,
                    user_ids: user_ids[range].to_vec(),
                };
                write_rows(s, &members, by).await
            }
            Self::Messages(rows, MessageFanout::None) => {
                write_rows(s, &MessageRows(&rows[range]), by).await
            }
            Self::Messages(rows, MessageFanout::Inbox) => {
                insert_messages_fanned(s, &rows[range], by).await
            }
        }
    }
}

/// An import chunk's message rows, all of one chat.
struct MessageRows<'a>(&'a [MessageRow]);

impl RowSet for MessageRows<'_> {
    const TABLE: &'static str = "messages";
    const COLUMNS: usize = 7;

    fn len(&self) -> usize {
        self.0.len()
    }

    fn insert_one(&self, i: usize) -> Executable {
        Executable::new(diesel::insert_into(messages::table).values(self.0[i].clone()))
    }

    fn insert_values(&self, range: Range<usize>) -> Executable {
        Executable::new(diesel::insert_into(messages::table).values(self.0[range].to_vec()))
    }

    fn insert_block(&self, range: Range<usize>) -> Executable {
        Executable::new(BlockInsert(
            diesel::insert_into(messages::table).values(self.0[range].to_vec()),
        ))
    }

    fn insert_unnest(&self) -> Executable {
        let rows = self.0;
        Executable::new(InsertMessagesUnnest {
            // Never empty: `write_rows` sends nothing for no rows.
            chat_id: rows.first().map_or_else(Uuid::nil, |r| r.chat_id),
            ids: rows.iter().map(|r| r.id).collect(),
            sender_ids: rows.iter().filter_map(|r| r.sender_id).collect(),
            bodies: rows.iter().map(|r| r.body.clone()).collect(),
            created_at: rows.iter().map(|r| r.created_at).collect(),
        })
    }

    fn copy(&self, c: &mut PgConnection) -> QueryResult<usize> {
        diesel::copy_from(messages::table)
            .from_insertable(self.0.to_vec())
            .execute(c)
    }
}

/// Inserts message rows by `by` with their inbox rows (every member
/// but each message's sender), after a share lock on the chat row that
/// keeps membership changes out until the chunk commits, as a send does.
/// The inbox rows go in one statement whatever the strategy; the count is
/// the messages'.
async fn insert_messages_fanned(
    s: &mut DbSession,
    rows: &[MessageRow],
    by: RowsBy,
) -> QueryResult<WriteCount> {
    let Some(first) = rows.first() else {
        return Ok(WriteCount::default());
    };
    let chat_id = first.chat_id;
    s.load::<_, Uuid>(
        chats::table
            .filter(chats::id.eq(chat_id))
            .select(chats::id)
            .for_share(),
    )
    .await?;
    let count = write_rows(s, &MessageRows(rows), by).await?;
    s.execute(InsertImportedInbox {
        chat_id,
        ids: rows.iter().map(|r| r.id).collect(),
        sender_ids: rows.iter().filter_map(|r| r.sender_id).collect(),
        bodies: rows.iter().map(|r| r.body.clone()).collect(),
    })
    .await?;
    Ok(count)
}

/// One chunk as one transaction. Under a key the chunk claims its part
/// first: a chunk committed by an earlier request with the same key is
/// not written again (`None`).
async fn write_chunk(
    s: &mut DbSession,
    rows: &Rows,
    chunk: ChunkRange,
    strategy: InsertStrategy,
    key: Option<&KeyClaim>,
    retention: Duration,
) -> Result<Option<WriteCount>, RepositoryError> {
    let outcome = s
        .transaction(async |s| {
            if let Some(key) = key {
                let part = key.part(
                    chunk.index,
                    StoredResponse {
                        status: 201,
                        body: format!(r#"{{"chunk":{},"rows":{}}}"#, chunk.index, chunk.rows),
                    },
                );
                if let Claimed::Replay(_) = idempotency::claim(s, &part, retention).await? {
                    return Ok(None);
                }
            }
            Ok::<_, TxError>(Some(rows.write(s, chunk, strategy).await?))
        })
        .await;
    let outcome = match outcome {
        Ok(done) => Ok(done),
        Err(TxError::Db(e)) => Err(e),
        Err(TxError::Refused(e)) => return Err(e),
        Err(TxError::Publish(e)) => return Err(RepositoryError::Internal(Box::new(e))),
    };
    match (outcome, rows) {
        (Ok(count), _) => Ok(count),
        // The chunk rolled back; an unknown user is named, as createChat
        // names them.
        (Err(e), Rows::Members { user_ids, .. }) => {
            let ids: Vec<UserId> = user_ids[chunk.row_range()]
                .iter()
                .map(|id| UserId::from_uuid(*id))
                .collect();
            Err(name_unknown_users(s, &ids, e).await)
        }
        (Err(e), Rows::Messages(..)) => Err(query_err(e)),
    }
}

impl PgStore {
    /// Runs the chunks of a job and reports what committed.
    async fn run_chunks(
        &self,
        rows: Rows,
        chunking: Chunking,
        strategy: InsertStrategy,
        key: Option<KeyClaim>,
    ) -> ImportReport {
        let key = key.map(Arc::new);
        let retention = self.key_retention();
        let requested = rows.len();
        let kind = rows.kind();
        let rows = Arc::new(rows);
        let stopped = Arc::new(AtomicBool::new(false));
        type Outcome = Option<Result<Option<WriteCount>, RepositoryError>>;
        let outcomes: Vec<(ChunkRange, Outcome)> =
            futures_util::stream::iter(chunking.chunks(requested))
                .map(|chunk| {
                    let (rows, stopped, db) = (rows.clone(), stopped.clone(), self.db().clone());
                    let key = key.clone();
                    async move {
                        // A chunk not yet started when another failed is
                        // not run: the report then says exactly where the
                        // job stopped.
                        if stopped.load(Ordering::Acquire) {
                            return (chunk, None);
                        }
                        let written = db
                            .run(move |s| {
                                async move {
                                    write_chunk(
                                        s,
                                        &rows,
                                        chunk,
                                        strategy,
                                        key.as_deref(),
                                        retention,
                                    )
                                    .await
                                }
                                .boxed()
                            })
                            .await;
                        if written.is_err() {
                            stopped.store(true, Ordering::Release);
                        }
                        (chunk, Some(written))
                    }
                })
                .buffer_unordered(chunking.parallelism.max(1))
                .collect()
                .await;
        let mut committed = Vec::new();
        let mut failure: Option<ChunkFailure> = None;
        for (chunk, outcome) in outcomes {
            match outcome {
                Some(Ok(Some(count))) => {
                    self.writes().record_import(kind, strategy, true, count);
                    committed.push(chunk);
                }
                // Committed by an earlier request with the same key.
                Some(Ok(None)) => committed.push(chunk),
                Some(Err(error)) => {
                    self.writes()
                        .record_import(kind, strategy, false, WriteCount::default());
                    if failure.as_ref().is_none_or(|f| f.chunk.index > chunk.index) {
                        failure = Some(ChunkFailure { chunk, error });
                    }
                }
                None => {}
            }
        }
        committed.sort_by_key(|c| c.index);
        ImportReport {
            requested,
            chunking,
            committed,
            failure,
        }
    }
}

impl PgStore {
    /// Adds the users to the chat, chunk by chunk, with `strategy` inside
    /// each chunk. `Err` means nothing was written (no such chat, or the
    /// database could not be reached before the first chunk); a failure
    /// after that is reported in the report, with the committed chunks.
    #[instrument(skip_all, fields(chat_id = %job.chat_id, rows = job.user_ids.len(),
        chunk_size = job.chunking.chunk_size, parallelism = job.chunking.parallelism))]
    pub async fn import_members(
        &self,
        job: ImportMembers,
        strategy: InsertStrategy,
        caller: UserId,
    ) -> Result<ImportReport, RepositoryError> {
        self.import_members_keyed(job, strategy, caller, None).await
    }

    /// [`Self::import_members`] under an idempotency key: each chunk claims
    /// its part of the key in its own transaction, so a retry writes only
    /// the chunks that did not commit before (see
    /// [`crate::writes::idempotency::finish`] for the whole job's response).
    pub async fn import_members_keyed(
        &self,
        job: ImportMembers,
        strategy: InsertStrategy,
        caller: UserId,
        key: Option<KeyClaim>,
    ) -> Result<ImportReport, RepositoryError> {
        let chat_id = job.chat_id;
        self.db()
            .run(move |s| async move { ensure_owner(s, chat_id, caller).await }.boxed())
            .await?;
        let rows = Rows::Members {
            chat_id: chat_id.as_uuid(),
            joined_at: job.joined_at,
            user_ids: job.user_ids.iter().map(|id| id.as_uuid()).collect(),
        };
        Ok(self.run_chunks(rows, job.chunking, strategy, key).await)
    }

    /// Imports the messages, chunk by chunk, with `strategy` inside each
    /// chunk. Every sender must be a member (checked before the first
    /// chunk, `NotAMember` naming one that is not). Imported messages
    /// publish no events: an import is a data migration, not chat traffic.
    #[instrument(skip_all, fields(chat_id = %job.chat_id, rows = job.messages.len(),
        chunk_size = job.chunking.chunk_size, parallelism = job.chunking.parallelism))]
    pub async fn import_messages(
        &self,
        job: ImportMessages,
        strategy: InsertStrategy,
        caller: UserId,
    ) -> Result<ImportReport, RepositoryError> {
        self.import_messages_keyed(job, strategy, caller, None)
            .await
    }

    /// [`Self::import_messages`] under an idempotency key, as
    /// [`Self::import_members_keyed`].
    pub async fn import_messages_keyed(
        &self,
        job: ImportMessages,
        strategy: InsertStrategy,
        caller: UserId,
        key: Option<KeyClaim>,
    ) -> Result<ImportReport, RepositoryError> {
        self.import_messages_routed(job, strategy, MessageFanout::None, caller, key)
            .await
    }

    /// [`Self::import_messages_keyed`], with `fanout`: under
    /// [`MessageFanout::Inbox`] each chunk writes its messages' inbox rows
    /// in its own transaction, so the unread counts an import leaves are
    /// those its messages would have left, sent one by one.
    pub async fn import_messages_routed(
        &self,
        job: ImportMessages,
        strategy: InsertStrategy,
        fanout: MessageFanout,
        caller: UserId,
        key: Option<KeyClaim>,
    ) -> Result<ImportReport, RepositoryError> {
        let chat_id = job.chat_id;
        let senders: Vec<Uuid> = job.senders().iter().map(|id| id.as_uuid()).collect();
        // The caller must own the chat and every sender be a member;
        // checked once, before any chunk, in one round trip each.
        let non_member = self
            .db()
            .run(move |s| {
                async move {
                    ensure_owner(s, chat_id, caller).await?;
                    let members: HashSet<Uuid> = s
                        .load::<_, Uuid>(
                            chat_members::table
                                .filter(chat_members::chat_id.eq(chat_id.as_uuid()))
                                .filter(chat_members::user_id.eq_any(senders.clone()))
                                .select(chat_members::user_id),
                        )
                        .await
                        .map_err(query_err)?
                        .into_iter()
                        .collect();
                    Ok::<_, RepositoryError>(senders.into_iter().find(|id| !members.contains(id)))
                }
                .boxed()
            })
            .await?;
        if let Some(user) = non_member {
            return Err(RepositoryError::NotAMember {
                chat_id,
                user_id: user.into(),
            });
        }
        let rows = Rows::Messages(
            job.messages
                .into_iter()
                .map(|m| MessageRow {
                    id: m.id.as_uuid(),
                    chat_id: chat_id.as_uuid(),
                    sender_id: Some(m.sender_id.as_uuid()),
                    kind: MessageKind::Talk.as_str().to_owned(),
                    body: m.body,
                    created_at: m.created_at,
                    publish_mode: PublishMode::Off.as_str().to_owned(),
                })
                .collect(),
            fanout,
        );
        Ok(self.run_chunks(rows, job.chunking, strategy, key).await)
    }
}

/// Imports are the owner's: `NotFound` when there is no chat or the caller
/// is not a member (a non-member cannot tell the two apart), `NotTheOwner`
/// for a member who does not own it. One statement.
async fn ensure_owner(
    s: &mut DbSession,
    chat_id: ChatId,
    caller: UserId,
) -> Result<(), RepositoryError> {
    match reads::owner_and_membership(s, chat_id.as_uuid(), caller.as_uuid())
        .await
        .map_err(query_err)?
    {
        Some((owner, _)) if owner == caller.as_uuid() => Ok(()),
        Some((_, true)) => Err(RepositoryError::NotTheOwner {
            chat_id,
            user_id: caller,
        }),
        _ => Err(PgStore::not_found(Entity::Chat, chat_id)),
    }
}
