//! Read markers and unread state on PostgreSQL: moving a member's marker
//! (`READ_MARKER_MODE=direct`: one UPDATE of the member row; `log`: one
//! INSERT into the append-only log, folded into the member rows by a
//! compaction; `coalesced`: held, then written by a flush of every held
//! marker), one chat's read state, and a member's chats newest activity
//! first.

use std::time::Instant;

use diesel::prelude::*;
use futures_util::FutureExt;
use tracing::instrument;
use uuid::Uuid;

use chatlab_domain::{
    ChatId, ChatSummary, Entity, Event, MarkRead, Message, MessageFanout, MessageId, MessageKind,
    Page, PageRequest, PublishMode, ReadMarkerMode, ReadState, RepositoryError, UserId,
};

use crate::error_mapping::query_err;
use crate::errors::PersistenceError;
use crate::events::publishing::TxError;
use crate::queries::{
    AppendReadMarker, MoveReadMarker, MyChatRow, MyChatsPage, ReadStateOf, ViewerIsMember,
};
use crate::reads::read_markers::{HeldMarker, ReadMarkers};
use crate::schema::{inbox, messages};
use crate::session::DbSession;
use crate::store::PgStore;

/// One member's read state of one chat, counted by `fanout`'s rows; `None`
/// for a non-member.
async fn read_state_of(
    s: &mut DbSession,
    chat_id: Uuid,
    user_id: Uuid,
    fanout: MessageFanout,
    floor: Option<Uuid>,
) -> QueryResult<Option<(Option<Uuid>, i64)>> {
    match fanout {
        MessageFanout::None => {
            s.optional(ReadStateOf::<false> {
                chat_id,
                user_id,
                floor,
            })
            .await
        }
        MessageFanout::Inbox => {
            s.optional(ReadStateOf::<true> {
                chat_id,
                user_id,
                floor,
            })
            .await
        }
    }
}

fn read_state(chat_id: Uuid, (marker, unread): (Option<Uuid>, i64)) -> ReadState {
    ReadState {
        chat_id: ChatId::from_uuid(chat_id),
        read_up_to: marker.map(MessageId::from_uuid),
        unread_count: unread,
    }
}

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

fn summary(row: MyChatRow) -> Result<ChatSummary, PersistenceError> {
    let (chat_id, name, marker, last_id, sender_id, kind, body, created_at, unread) = row;
    let kind = MessageKind::parse(&kind)
        .ok_or_else(|| PersistenceError::Corrupt(format!("message kind {kind:?}")))?;
    Ok(ChatSummary {
        chat_id: ChatId::from_uuid(chat_id),
        name,
        last_message: Message {
            id: MessageId::from_uuid(last_id),
            chat_id: ChatId::from_uuid(chat_id),
            sender_id: sender_id.map(UserId::from_uuid),
            kind,
            body,
            created_at,
        },
        read: read_state(chat_id, (marker, unread)),
    })
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

    /// The caller's read state of one chat, counted from `fanout`'s rows;
    /// `NotFound` when they are no member.
    pub async fn read_state(
        &self,
        chat_id: ChatId,
        user: UserId,
        fanout: MessageFanout,
    ) -> Result<ReadState, RepositoryError> {
        let (chat, user) = (chat_id.as_uuid(), user.as_uuid());
        let floor = self.read_markers().held_by(chat, user);
        let state = self
            .db()
            .run(move |s| {
                async move {
                    read_state_of(s, chat, user, fanout, floor)
                        .await
                        .map_err(query_err)
                }
                .boxed()
            })
            .await?
            .ok_or_else(|| Self::not_found(Entity::Chat, chat_id))?;
        Ok(read_state(chat, state))
    }

    /// The chats of `user`, newest activity first, each with its newest
    /// message and the user's read state, a page at a time (the cursor is
    /// the last chat's newest message id).
    pub async fn my_chats(
        &self,
        user: UserId,
        page: PageRequest<MessageId>,
        fanout: MessageFanout,
    ) -> Result<Page<ChatSummary, MessageId>, RepositoryError> {
        let user_id = user.as_uuid();
        let before = page.cursor.map_or(Uuid::max(), |c| c.as_uuid());
        // The page's limit is at most 100 (PageRequest checks it).
        let limit = i32::try_from(page.limit).unwrap_or(i32::MAX - 1) + 1;
        let rows: Vec<MyChatRow> = self
            .db()
            .run(move |s| {
                async move {
                    match fanout {
                        MessageFanout::None => {
                            s.load(MyChatsPage::<false> {
                                user_id,
                                before,
                                limit,
                            })
                            .await
                        }
                        MessageFanout::Inbox => {
                            s.load(MyChatsPage::<true> {
                                user_id,
                                before,
                                limit,
                            })
                            .await
                        }
                    }
                    .map_err(query_err)
                }
                .boxed()
            })
            .await?;
        let chats = rows
            .into_iter()
            .map(summary)
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Page::from_overfetch(chats, page.limit, |c| {
            c.last_message.id
        }))
    }
}
