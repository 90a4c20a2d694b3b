//! Moving a member's read marker: `READ_MARKER_MODE=direct`, one UPDATE of
//! the member row; `log`, one INSERT into the append-only log, folded into
//! the member rows by a compaction; `coalesced`, held, then written by a
//! flush of every held marker ([`super::read_markers`]). Each answers the
//! read state after the move, read by [`crate::reads::read_state`].

use std::time::Instant;

use diesel::prelude::*;
use futures_util::FutureExt;
use tracing::instrument;

use chatlab_domain::{
    Entity, Event, MarkRead, MessageFanout, PublishMode, ReadMarkerMode, ReadState,
    RepositoryError, UserId,
};

use crate::error_mapping::query_err;
use crate::events::publishing::TxError;
use crate::queries::{AppendReadMarker, MoveReadMarker, ViewerIsMember};
use crate::reads::read_state::{read_state, read_state_of};
use crate::schema::{inbox, messages};
use crate::session::DbSession;
use crate::store::PgStore;
use crate::writes::read_markers::{HeldMarker, ReadMarkers};

/// Why a marker did not move: the reader is no member (the chat does not
/// exist for them), or the message is not the chat's. `None` when neither:
/// the marker was there already, or further.
async fn refusal(s: &mut DbSession, command: &MarkRead) -> QueryResult<Option<RepositoryError>> {
    let chat_id = command.chat_id.as_uuid();
    let up_to = command.up_to.as_uuid();
    let (member, in_chat): (bool, bool) = s
        .get_result(diesel::select((
            ViewerIsMember {
                chat_id,
                viewer: command.reader.as_uuid(),
            },
            diesel::dsl::exists(
                messages::table
                    .filter(messages::id.eq(up_to))
                    .filter(messages::chat_id.eq(chat_id)),
            ),
        )))
        .await?;
    Ok(if !member {
        Some(PgStore::not_found(Entity::Chat, chat_id))
    } else if !in_chat {
        Some(PgStore::not_found(Entity::Message, up_to))
    } else {
        None
    })
}

/// markRead's unit of work: the marker's UPDATE; with `inbox`, the read
/// flags of the reader's rows up to the marker, in the same transaction;
/// then the read state.
async fn mark_read_work(
    s: &mut DbSession,
    command: &MarkRead,
    fanout: MessageFanout,
) -> Result<ReadState, RepositoryError> {
    let chat_id = command.chat_id.as_uuid();
    let user_id = command.reader.as_uuid();
    let up_to = command.up_to.as_uuid();
    let moved = match fanout {
        MessageFanout::None => s
            .execute(MoveReadMarker {
                chat_id,
                user_id,
                up_to,
            })
            .await
            .map_err(query_err)?,
        MessageFanout::Inbox => s
            .transaction(async |s| {
                let moved = s
                    .execute(MoveReadMarker {
                        chat_id,
                        user_id,
                        up_to,
                    })
                    .await?;
                if moved == 1 {
                    s.execute(
                        diesel::update(
                            inbox::table
                                .filter(inbox::user_id.eq(user_id))
                                .filter(inbox::chat_id.eq(chat_id))
                                .filter(inbox::message_id.le(up_to))
                                .filter(inbox::read.eq(false)),
                        )
                        .set(inbox::read.eq(true)),
                    )
                    .await?;
                }
                Ok::<_, TxError>(moved)
            })
            .await
            .map_err(RepositoryError::from)?,
    };
    answer_move(s, command, fanout, moved).await
}

/// The answer to a move that wrote `written` rows: when none, why (see
/// [`refusal`]) or, when it was refused for no reason (the marker was
/// there already, or further), the read state as it is; else the read
/// state after it.
async fn answer_move(
    s: &mut DbSession,
    command: &MarkRead,
    fanout: MessageFanout,
    written: usize,
) -> Result<ReadState, RepositoryError> {
    if written == 0
        && let Some(refused) = refusal(s, command).await.map_err(query_err)?
    {
        return Err(refused);
    }
    let chat_id = command.chat_id.as_uuid();
    let state = read_state_of(s, chat_id, command.reader.as_uuid(), fanout, None)
        .await
        .map_err(query_err)?
        // Removed between the two statements (with `log`, the compaction
        // drops the row).
        .ok_or_else(|| PgStore::not_found(Entity::Chat, chat_id))?;
    Ok(read_state(chat_id, state))
}

/// markRead with `READ_MARKER_MODE=log`: one INSERT into the log (no
/// member-row UPDATE, no transaction: the statement is the move); refused
/// as `direct` would refuse it. The reader's inbox rows are flagged by the
/// compaction that folds the move; the unread count counts from the marker
/// at once either way.
async fn append_read_work(
    s: &mut DbSession,
    command: &MarkRead,
    fanout: MessageFanout,
) -> Result<ReadState, RepositoryError> {
    let appended = s
        .execute(AppendReadMarker {
            chat_id: command.chat_id.as_uuid(),
            user_id: command.reader.as_uuid(),
            up_to: command.up_to.as_uuid(),
        })
        .await
        .map_err(query_err)?;
    answer_move(s, command, fanout, appended).await
}

/// markRead with `READ_MARKER_MODE=coalesced`: refused as `direct` would
/// refuse it (and then nothing is held), else held until the next flush;
/// answers the read state as of the held marker.
async fn hold_read_work(
    s: &mut DbSession,
    command: &MarkRead,
    fanout: MessageFanout,
    markers: &ReadMarkers,
) -> Result<ReadState, RepositoryError> {
    if let Some(refused) = refusal(s, command).await.map_err(query_err)? {
        return Err(refused);
    }
    let chat_id = command.chat_id.as_uuid();
    let user_id = command.reader.as_uuid();
    let floor = markers.hold(HeldMarker {
        chat_id,
        user_id,
        up_to: command.up_to.as_uuid(),
        inbox: fanout == MessageFanout::Inbox,
        since: Instant::now(),
    });
    let state = read_state_of(s, chat_id, user_id, fanout, Some(floor))
        .await
        .map_err(query_err)?
        // Removed between the two statements; the flush skips the marker.
        .ok_or_else(|| PgStore::not_found(Entity::Chat, chat_id))?;
    Ok(read_state(chat_id, state))
}

impl PgStore {
    /// Moves the reader's marker in the chat forward to `up_to` (never
    /// back) and answers the read state after it. `NotFound` for the chat
    /// when the reader is no member; `NotFound` for the message when
    /// `up_to` is not one of the chat's. With `inbox` the reader's rows up
    /// to the marker are flagged read in the same transaction.
    #[instrument(name = "mark_read", skip_all, fields(chat_id = %command.chat_id, fanout = fanout.as_str()))]
    pub async fn mark_read(
        &self,
        command: MarkRead,
        fanout: MessageFanout,
    ) -> Result<ReadState, RepositoryError> {
        match self.read_markers().mode() {
            ReadMarkerMode::Direct => {
                self.db()
                    .run(move |s| async move { mark_read_work(s, &command, fanout).await }.boxed())
                    .await
            }
            ReadMarkerMode::Log => {
                self.db()
                    .run(move |s| {
                        async move { append_read_work(s, &command, fanout).await }.boxed()
                    })
                    .await
            }
            ReadMarkerMode::Coalesced => {
                let markers = self.read_markers().clone();
                self.db()
                    .run(move |s| {
                        async move { hold_read_work(s, &command, fanout, &markers).await }.boxed()
                    })
                    .await
            }
        }
    }

    /// Tells the reader's live connections on every instance (their other
    /// devices) where their marker is after a move: a `chat.read` event,
    /// for the reader alone, handed to the producer's queue after the
    /// answer, whatever the publish mode but `off` (which publishes
    /// nothing). Best-effort, as the frame it becomes: not in any
    /// transaction nor the outbox, so a broker that refuses it costs the
    /// move nothing, and a client that missed it reads its state again.
    pub fn announce_read(&self, reader: UserId, read: &ReadState, mode: PublishMode) {
        let Some(up_to) = read.read_up_to else {
            return;
        };
        if mode == PublishMode::Off {
            return;
        }
        let event = Event::read_marker_moved(
            read.chat_id.as_uuid(),
            reader.as_uuid(),
            up_to.as_uuid(),
            read.unread_count,
            mode,
        );
        if let Err(e) = self.publisher().enqueue(&event, mode) {
            tracing::debug!(chat_id = %read.chat_id, error = %e,
                "chat.read not enqueued; the reader's other connections see the marker when they next read it");
        }
    }
}
