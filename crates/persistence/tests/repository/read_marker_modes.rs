//! `READ_MARKER_MODE=coalesced` and `log`: a move is checked and answered
//! at once; `coalesced` holds it in memory and writes it by the next flush,
//! one statement for every member who moved; `log` appends it, every store
//! reads through the log at once, and one compaction folds it into the
//! member rows. Neither moves a marker back, and a refused move holds or
//! logs nothing.

use diesel::prelude::*;
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use uuid::Uuid;

use chatlab_domain::{
    ChatId, Entity, InsertStrategy, MarkRead, MessageFanout, MessageId, PublishMode,
    ReadMarkerMode, RepositoryError, UserId,
};
use chatlab_persistence::schema::{chat_members, inbox, read_marker_log};
use chatlab_persistence::{MarkerWriter, PgStore, SendRoute, SessionSettings};

use crate::support::Writes;
use crate::support::{command, fixture, message, seed_users};

async fn marker(conn: &mut AsyncPgConnection, chat: ChatId, user: UserId) -> Option<Uuid> {
    chat_members::table
        .filter(chat_members::chat_id.eq(chat.as_uuid()))
        .filter(chat_members::user_id.eq(user.as_uuid()))
        .select(chat_members::read_up_to)
        .first(conn)
        .await
        .unwrap()
}

async fn flags(conn: &mut AsyncPgConnection, user: UserId) -> Vec<bool> {
    inbox::table
        .filter(inbox::user_id.eq(user.as_uuid()))
        .select(inbox::read)
        .order(inbox::message_id)
        .load(conn)
        .await
        .unwrap()
}

/// A store in one read-marker mode, its writer (the flusher in
/// `coalesced`, the compactor in `log`), and a chat of three members
/// (`first` and `second` beside its creator) with three messages from its
/// creator written with inbox rows; `outsider` is a user not in it.
struct Scene {
    store: PgStore,
    writer: MarkerWriter,
    chat: ChatId,
    sent: Vec<MessageId>,
    first: UserId,
    second: UserId,
    outsider: UserId,
}

impl Scene {
    async fn new(store: &PgStore, url: &str, mode: ReadMarkerMode) -> Self {
        let store = store.clone().with_read_markers(mode);
        let writer = MarkerWriter::new(
            url.to_owned().into(),
            &SessionSettings::default(),
            store.read_markers().clone(),
        );
        let users = seed_users(&store, 4).await;
        let chat = store
            .create_chat(
                command("room", users[0], &[users[1], users[2]]),
                InsertStrategy::Batch,
                PublishMode::Off,
            )
            .await
            .unwrap()
            .id;
        let mut sent: Vec<MessageId> = Vec::new();
        for i in 0..3 {
            let route = SendRoute {
                mode: PublishMode::Off,
                fanout: MessageFanout::Inbox,
                strategy: InsertStrategy::Batch,
            };
            let command = message(chat, users[0], &format!("m{i}"));
            let id = command.id;
            let fresh = store
                .send_message_routed(command, route, None)
                .await
                .unwrap();
            assert!(fresh.fresh().is_some());
            sent.push(id);
        }
        Self {
            store,
            writer,
            chat,
            sent,
            first: users[1],
            second: users[2],
            outsider: users[3],
        }
    }

    fn mark(&self, reader: UserId, up_to: MessageId) -> MarkRead {
        MarkRead {
            chat_id: self.chat,
            reader,
            up_to,
        }
    }

    /// The moves both modes answer alike: the first member to message 0,
    /// 2, then back to 1 (answered as 2: forward only), the second to 1;
    /// then two moves that are refused and leave nothing behind.
    async fn move_markers(&self) {
        for (up_to, expected) in [(0, (0, 2)), (2, (2, 0)), (1, (2, 0))] {
            let state = self
                .store
                .mark_read(
                    self.mark(self.first, self.sent[up_to]),
                    MessageFanout::Inbox,
                )
                .await
                .unwrap();
            assert_eq!(
                (state.read_up_to, state.unread_count),
                (Some(self.sent[expected.0]), expected.1),
                "first reader to message {up_to}"
            );
        }
        let state = self
            .store
            .mark_read(self.mark(self.second, self.sent[1]), MessageFanout::Inbox)
            .await
            .unwrap();
        assert_eq!(
            (state.read_up_to, state.unread_count),
            (Some(self.sent[1]), 1)
        );
        refused_moves(
            &self.store,
            self.mark(self.outsider, self.sent[2]),
            self.mark(self.first, MessageId::generate()),
        )
        .await;
    }

    /// One write of the moves above: `written` members, whose markers and
    /// read flags the database then holds; a second write finds nothing.
    async fn write_once(&mut self, conn: &mut AsyncPgConnection, written: usize) {
        assert_eq!(self.writer.flush().await.unwrap(), written);
        assert_eq!(
            marker(conn, self.chat, self.first).await,
            Some(self.sent[2].as_uuid())
        );
        assert_eq!(
            marker(conn, self.chat, self.second).await,
            Some(self.sent[1].as_uuid())
        );
        assert_eq!(flags(conn, self.first).await, [true, true, true]);
        assert_eq!(flags(conn, self.second).await, [true, true, false]);
        assert_eq!(self.writer.flush().await.unwrap(), 0, "nothing left");
    }
}

/// `stranger` (a non-member's move) is refused as an unknown chat, and
/// `foreign` (a move to a message of no chat of the reader's) as an
/// unknown message, under the inbox fan-out.
async fn refused_moves(store: &PgStore, stranger: MarkRead, foreign: MarkRead) {
    let refused = store
        .mark_read(stranger, MessageFanout::Inbox)
        .await
        .unwrap_err();
    assert!(matches!(
        refused,
        RepositoryError::NotFound {
            entity: Entity::Chat,
            ..
        }
    ));
    let refused = store
        .mark_read(foreign, MessageFanout::Inbox)
        .await
        .unwrap_err();
    assert!(matches!(
        refused,
        RepositoryError::NotFound {
            entity: Entity::Message,
            ..
        }
    ));
}

#[tokio::test]
async fn coalesced_moves_are_answered_at_once_and_written_by_one_flush() {
    let f = fixture().await;
    let mut scene = Scene::new(&f.store, f.db.url(), ReadMarkerMode::Coalesced).await;
    // Answered with the held marker and the count it implies; refused
    // moves hold nothing.
    scene.move_markers().await;
    let (chat, first, second, sent) = (scene.chat, scene.first, scene.second, scene.sent.clone());
    let store = scene.store.clone();
    assert_eq!(store.read_markers().held(), 2, "one marker per member");

    // Nothing written yet; this instance's reads see the held marker.
    let mut conn = f.db.connect().await;
    assert_eq!(marker(&mut conn, chat, first).await, None);
    assert_eq!(flags(&mut conn, first).await, [false, false, false]);
    let read = store
        .read_state(chat, first, MessageFanout::Inbox)
        .await
        .unwrap();
    assert_eq!((read.read_up_to, read.unread_count), (Some(sent[2]), 0));

    // One flush writes both members and their read flags.
    scene.write_once(&mut conn, 2).await;
    assert_eq!(store.read_markers().held(), 0);
    let metrics = store.read_markers().metrics();
    assert_eq!(
        (
            metrics.held.get(),
            metrics.flushes.get(),
            metrics.flushed.get()
        ),
        (4, 1, 2),
        "four moves, one flush of two markers"
    );

    // A held marker behind the database's is answered and flushed as the
    // database's: never back.
    f.store
        .mark_read(scene.mark(second, sent[2]), MessageFanout::Inbox)
        .await
        .unwrap();
    let state = store
        .mark_read(scene.mark(second, sent[0]), MessageFanout::Inbox)
        .await
        .unwrap();
    assert_eq!((state.read_up_to, state.unread_count), (Some(sent[2]), 0));
    assert_eq!(scene.writer.flush().await.unwrap(), 1);
    assert_eq!(
        marker(&mut conn, chat, second).await,
        Some(sent[2].as_uuid())
    );
}

async fn logged(conn: &mut AsyncPgConnection, chat: ChatId) -> i64 {
    read_marker_log::table
        .filter(read_marker_log::chat_id.eq(chat.as_uuid()))
        .count()
        .get_result(conn)
        .await
        .unwrap()
}

#[tokio::test]
async fn log_moves_are_seen_at_once_and_folded_by_one_compaction() {
    let f = fixture().await;
    let mut scene = Scene::new(&f.store, f.db.url(), ReadMarkerMode::Log).await;
    // Answered from the log at once; refused moves log nothing.
    scene.move_markers().await;
    let (chat, first, second, sent) = (scene.chat, scene.first, scene.second, scene.sent.clone());
    let store = scene.store.clone();

    // The member rows are untouched; every move is a log row, and every
    // store (another instance's, or one in another mode) reads through it.
    let mut conn = f.db.connect().await;
    assert_eq!(marker(&mut conn, chat, first).await, None);
    assert_eq!(
        logged(&mut conn, chat).await,
        4,
        "three moves of one, one of another"
    );
    let elsewhere = f
        .store
        .read_state(chat, first, MessageFanout::None)
        .await
        .unwrap();
    assert_eq!(
        (elsewhere.read_up_to, elsewhere.unread_count),
        (Some(sent[2]), 0)
    );
    let page = f
        .store
        .my_chats(
            second,
            chatlab_domain::PageRequest::new(None, None).unwrap(),
            MessageFanout::Inbox,
        )
        .await
        .unwrap();
    assert_eq!(page.items[0].read.read_up_to, Some(sent[1]));
    assert_eq!(page.items[0].read.unread_count, 1);

    // One compaction folds both members, flags their rows, empties the log.
    scene.write_once(&mut conn, 2).await;
    assert_eq!(logged(&mut conn, chat).await, 0);
    let metrics = store.read_markers().metrics();
    assert_eq!(
        (
            metrics.compacted.get(),
            metrics.flushes.get(),
            metrics.flushed.get()
        ),
        (4, 1, 2),
        "four log rows, one compaction moving two members"
    );

    // A move behind the member row logs nothing and answers the row's.
    let state = store
        .mark_read(scene.mark(first, sent[0]), MessageFanout::Inbox)
        .await
        .unwrap();
    assert_eq!((state.read_up_to, state.unread_count), (Some(sent[2]), 0));
    assert_eq!(logged(&mut conn, chat).await, 0);
}
