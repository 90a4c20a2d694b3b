//! Fan-out on write (`inbox`) against fan-out on read (`none`): the inbox
//! rows each strategy writes, membership changes, read markers, and a
//! property test that drives both through the same random history and
//! checks every read against a model.

use std::collections::{BTreeMap, BTreeSet};

use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use proptest::prelude::*;
use uuid::Uuid;

use chatlab_domain::{
    AddMembers, ChatId, Entity, InsertStrategy, Limits, MarkRead, MessageFanout, MessageId,
    NewMembers, PageRequest, PublishMode, RemoveMember, RepositoryError, SendMessage, UserId,
    fanout::mentions,
};
use chatlab_persistence::schema::inbox;
use chatlab_persistence::{PgStore, SendRoute};

use crate::support::Writes;
use crate::support::{command, fixture, message, seed_users};

fn route(fanout: MessageFanout, strategy: InsertStrategy) -> SendRoute {
    SendRoute {
        mode: PublishMode::Off,
        fanout,
        strategy,
    }
}

async fn send(
    store: &PgStore,
    message: SendMessage,
    fanout: MessageFanout,
    strategy: InsertStrategy,
) -> Result<MessageId, RepositoryError> {
    let id = message.id;
    store
        .send_message_routed(message, route(fanout, strategy), None)
        .await
        .map(|sent| {
            assert!(sent.fresh().is_some());
            id
        })
}

async fn add(store: &PgStore, chat_id: ChatId, owner: UserId, users: &[UserId]) {
    let command = AddMembers::validate(
        NewMembers {
            chat_id,
            actor_id: owner,
            user_ids: users.to_vec(),
        },
        &Limits::default(),
    )
    .unwrap();
    store
        .add_members(command, InsertStrategy::Unnest, PublishMode::Off, None)
        .await
        .unwrap();
}

async fn remove(store: &PgStore, chat_id: ChatId, owner: UserId, user: UserId) {
    store
        .remove_member(RemoveMember::new(chat_id, owner, user), PublishMode::Off)
        .await
        .unwrap();
}

/// The inbox rows of one message: (user, read, mentioned), by user.
async fn inbox_of(
    conn: &mut diesel_async::AsyncPgConnection,
    message: MessageId,
) -> Vec<(Uuid, bool, bool)> {
    inbox::table
        .filter(inbox::message_id.eq(message.as_uuid()))
        .select((inbox::user_id, inbox::read, inbox::mentioned))
        .order(inbox::user_id)
        .load(conn)
        .await
        .unwrap()
}

#[tokio::test]
async fn every_strategy_writes_the_same_inbox_rows() {
    let f = fixture().await;
    let users = seed_users(&f.store, 6).await;
    let chat = f
        .store
        .create_chat(
            command("room", users[0], &users[1..5]),
            InsertStrategy::Batch,
            PublishMode::Off,
        )
        .await
        .unwrap();
    let mut conn = f.db.connect().await;
    // users[1] sends, mentioning users[3]; users[5] is no member.
    let body = format!("hello @{} and @{}", users[3].as_uuid(), users[5].as_uuid());
    let expected: Vec<(Uuid, bool, bool)> = {
        let mut rows: Vec<(Uuid, bool, bool)> = [users[0], users[2], users[3], users[4]]
            .iter()
            .map(|u| (u.as_uuid(), false, mentions(&body, *u)))
            .collect();
        rows.sort();
        rows
    };
    assert_eq!(expected.iter().filter(|r| r.2).count(), 1);
    for strategy in chatlab_testdb::strategies() {
        let id = send(
            &f.store,
            message(chat.id, users[1], &body),
            MessageFanout::Inbox,
            strategy,
        )
        .await
        .unwrap();
        assert_eq!(inbox_of(&mut conn, id).await, expected, "{strategy}");
    }
    // `none` writes no inbox row.
    let id = send(
        &f.store,
        message(chat.id, users[1], &body),
        MessageFanout::None,
        InsertStrategy::Unnest,
    )
    .await
    .unwrap();
    assert!(inbox_of(&mut conn, id).await.is_empty());
}

#[tokio::test]
async fn a_refused_send_writes_no_inbox_row() {
    let f = fixture().await;
    let users = seed_users(&f.store, 3).await;
    let chat = f
        .store
        .create_chat(
            command("room", users[0], &users[1..2]),
            InsertStrategy::Batch,
            PublishMode::Off,
        )
        .await
        .unwrap();
    let mut conn = f.db.connect().await;
    for strategy in chatlab_testdb::strategies() {
        let refused = send(
            &f.store,
            message(chat.id, users[2], "let me in"),
            MessageFanout::Inbox,
            strategy,
        )
        .await
        .unwrap_err();
        assert!(
            matches!(
                refused,
                RepositoryError::NotFound {
                    entity: Entity::Chat,
                    ..
                }
            ),
            "{strategy}: {refused:?}"
        );
    }
    let rows: i64 = inbox::table.count().get_result(&mut conn).await.unwrap();
    assert_eq!(rows, 0, "a pipelined fan-out rolled back with its message");
}

#[tokio::test]
async fn membership_changes_keep_inbox_rows_consistent() {
    let f = fixture().await;
    let users = seed_users(&f.store, 4).await;
    let owner = users[0];
    let chat = f
        .store
        .create_chat(
            command("room", owner, &users[1..3]),
            InsertStrategy::Batch,
            PublishMode::Off,
        )
        .await
        .unwrap();
    let mut conn = f.db.connect().await;
    let first = send(
        &f.store,
        message(chat.id, owner, "before"),
        MessageFanout::Inbox,
        InsertStrategy::Unnest,
    )
    .await
    .unwrap();
    add(&f.store, chat.id, owner, &[users[3]]).await;
    let second = send(
        &f.store,
        message(chat.id, owner, "after"),
        MessageFanout::Inbox,
        InsertStrategy::Single,
    )
    .await
    .unwrap();
    let holders = |rows: Vec<(Uuid, bool, bool)>| -> BTreeSet<Uuid> {
        rows.into_iter().map(|r| r.0).collect()
    };
    // The late joiner has a row for what was sent after joining only.
    assert!(!holders(inbox_of(&mut conn, first).await).contains(&users[3].as_uuid()));
    assert!(holders(inbox_of(&mut conn, second).await).contains(&users[3].as_uuid()));
    let late = f
        .store
        .read_state(chat.id, users[3], MessageFanout::Inbox)
        .await
        .unwrap();
    assert_eq!(late.unread_count, 1);
    // A removed member's rows go.
    remove(&f.store, chat.id, owner, users[1]).await;
    for message in [first, second] {
        assert!(!holders(inbox_of(&mut conn, message).await).contains(&users[1].as_uuid()));
    }
    let gone = f
        .store
        .read_state(chat.id, users[1], MessageFanout::Inbox)
        .await
        .unwrap_err();
    assert!(matches!(
        gone,
        RepositoryError::NotFound {
            entity: Entity::Chat,
            ..
        }
    ));
}

#[tokio::test]
async fn a_read_marker_moves_forward_only_and_flags_inbox_rows() {
    let f = fixture().await;
    let users = seed_users(&f.store, 3).await;
    let (owner, reader, outsider) = (users[0], users[1], users[2]);
    let chat = f
        .store
        .create_chat(
            command("room", owner, &[reader]),
            InsertStrategy::Batch,
            PublishMode::Off,
        )
        .await
        .unwrap();
    let other = f
        .store
        .create_chat(
            command("other", owner, &[reader]),
            InsertStrategy::Batch,
            PublishMode::Off,
        )
        .await
        .unwrap();
    let mut conn = f.db.connect().await;
    let mut sent = Vec::new();
    for i in 0..3 {
        sent.push(
            send(
                &f.store,
                message(chat.id, owner, &format!("m{i}")),
                MessageFanout::Inbox,
                InsertStrategy::Batch,
            )
            .await
            .unwrap(),
        );
    }
    let mark = |up_to: MessageId, reader: UserId| MarkRead {
        chat_id: chat.id,
        reader,
        up_to,
    };
    for fanout in MessageFanout::ALL {
        let before = f.store.read_state(chat.id, reader, fanout).await.unwrap();
        assert_eq!(
            (before.read_up_to, before.unread_count),
            (None, 3),
            "{fanout}"
        );
    }
    let state = f
        .store
        .mark_read(mark(sent[1], reader), MessageFanout::Inbox)
        .await
        .unwrap();
    assert_eq!((state.read_up_to, state.unread_count), (Some(sent[1]), 1));
    let flags: Vec<bool> = inbox::table
        .filter(inbox::user_id.eq(reader.as_uuid()))
        .select(inbox::read)
        .order(inbox::message_id)
        .load(&mut conn)
        .await
        .unwrap();
    assert_eq!(flags, [true, true, false]);
    // Back is no move: the marker stays.
    let state = f
        .store
        .mark_read(mark(sent[0], reader), MessageFanout::None)
        .await
        .unwrap();
    assert_eq!((state.read_up_to, state.unread_count), (Some(sent[1]), 1));
    // A message of another chat, and a reader who is no member.
    let elsewhere = f
        .store
        .mark_read(
            MarkRead {
                chat_id: chat.id,
                reader,
                up_to: other.system_message_id,
            },
            MessageFanout::None,
        )
        .await
        .unwrap_err();
    assert!(matches!(
        elsewhere,
        RepositoryError::NotFound {
            entity: Entity::Message,
            ..
        }
    ));
    let stranger = f
        .store
        .mark_read(mark(sent[2], outsider), MessageFanout::Inbox)
        .await
        .unwrap_err();
    assert!(matches!(
        stranger,
        RepositoryError::NotFound {
            entity: Entity::Chat,
            ..
        }
    ));
    let after = f
        .store
        .read_state(chat.id, reader, MessageFanout::None)
        .await
        .unwrap();
    assert_eq!((after.read_up_to, after.unread_count), (Some(sent[1]), 1));
}

#[tokio::test]
async fn my_chats_lists_newest_activity_first_a_page_at_a_time() {
    let f = fixture().await;
    let users = seed_users(&f.store, 2).await;
    let mut chats = Vec::new();
    for i in 0..3 {
        chats.push(
            f.store
                .create_chat(
                    command(&format!("room {i}"), users[0], &[users[1]]),
                    InsertStrategy::Batch,
                    PublishMode::Off,
                )
                .await
                .unwrap(),
        );
    }
    // Activity in the oldest chat makes it the newest.
    send(
        &f.store,
        message(chats[0].id, users[0], "news"),
        MessageFanout::Inbox,
        InsertStrategy::Unnest,
    )
    .await
    .unwrap();
    for fanout in MessageFanout::ALL {
        let first = f
            .store
            .my_chats(users[1], PageRequest::new(None, Some(2)).unwrap(), fanout)
            .await
            .unwrap();
        let names: Vec<&str> = first.items.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["room 0", "room 2"], "{fanout}");
        assert_eq!(first.items[0].last_message.body, "news");
        assert_eq!(first.items[0].read.unread_count, 1);
        assert_eq!(first.items[1].read.unread_count, 0);
        let rest = f
            .store
            .my_chats(
                users[1],
                PageRequest::new(first.next_cursor, Some(2)).unwrap(),
                fanout,
            )
            .await
            .unwrap();
        let names: Vec<&str> = rest.items.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["room 1"]);
        assert_eq!(rest.next_cursor, None);
    }
    // The sender has nothing unread.
    let own = f
        .store
        .my_chats(
            users[0],
            PageRequest::new(None, None).unwrap(),
            MessageFanout::Inbox,
        )
        .await
        .unwrap();
    assert!(own.items.iter().all(|c| c.read.unread_count == 0));
}

/// One step of a chat's history. Users are indices into the case's five
/// users; user 0 owns the chat.
#[derive(Debug, Clone)]
enum Op {
    Send {
        sender: usize,
        mention: Option<usize>,
    },
    Join {
        user: usize,
    },
    Remove {
        user: usize,
    },
    Read {
        user: usize,
        message: usize,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..5usize, proptest::option::of(0..5usize))
            .prop_map(|(sender, mention)| Op::Send { sender, mention }),
        1 => (1..5usize).prop_map(|user| Op::Join { user }),
        1 => (1..5usize).prop_map(|user| Op::Remove { user }),
        2 => (0..5usize, 0..64usize).prop_map(|(user, message)| Op::Read { user, message }),
    ]
}

/// What the reads must answer: per message its sender (None for a system
/// or membership message), per member when they joined (as a message
/// count) and their marker (an index into the messages).
#[derive(Debug, Default)]
struct Model {
    senders: Vec<Option<usize>>,
    joined: BTreeMap<usize, usize>,
    marker: BTreeMap<usize, usize>,
}

impl Model {
    fn unread(&self, user: usize) -> Option<i64> {
        let joined = *self.joined.get(&user)?;
        let marker = self.marker.get(&user).copied();
        Some(
            self.senders
                .iter()
                .enumerate()
                .filter(|&(i, s)| {
                    i >= joined && s.is_some_and(|s| s != user) && marker.is_none_or(|m| i > m)
                })
                .count() as i64,
        )
    }
}

/// One chat driven through `ops` under `fanout` by `strategy`; returns, per
/// user, the unread count and marker index the reads answered (None for a
/// non-member), checking `/me/chats` and the one-chat read against each
/// other and against the model.
async fn drive(
    store: &PgStore,
    ops: &[Op],
    fanout: MessageFanout,
    strategy: InsertStrategy,
) -> Vec<Option<(i64, Option<usize>)>> {
    let users = seed_users(store, 5).await;
    let chat = store
        .create_chat(
            command("prop", users[0], &users[1..3]),
            InsertStrategy::Unnest,
            PublishMode::Off,
        )
        .await
        .unwrap();
    let mut model = Model {
        senders: vec![None],
        ..Model::default()
    };
    let mut ids = vec![chat.system_message_id];
    for u in 0..3 {
        model.joined.insert(u, 0);
    }
    for op in ops {
        match *op {
            Op::Send { sender, mention } => {
                let body = match mention {
                    Some(m) => format!("hi @{}", users[m].as_uuid()),
                    None => "hi".to_owned(),
                };
                let sent = send(
                    store,
                    message(chat.id, users[sender], &body),
                    fanout,
                    strategy,
                )
                .await;
                if model.joined.contains_key(&sender) {
                    ids.push(sent.unwrap());
                    model.senders.push(Some(sender));
                } else {
                    assert!(sent.is_err(), "a non-member posted");
                }
            }
            Op::Join { user } if !model.joined.contains_key(&user) => {
                add(store, chat.id, users[0], &[users[user]]).await;
                ids.push(last_message(store, chat.id, users[0]).await);
                model.senders.push(None);
                model.joined.insert(user, model.senders.len() - 1);
                model.marker.remove(&user);
            }
            Op::Remove { user } if model.joined.contains_key(&user) => {
                remove(store, chat.id, users[0], users[user]).await;
                ids.push(last_message(store, chat.id, users[0]).await);
                model.senders.push(None);
                model.joined.remove(&user);
                model.marker.remove(&user);
            }
            Op::Read { user, message } => {
                let index = message % ids.len();
                let read = store
                    .mark_read(
                        MarkRead {
                            chat_id: chat.id,
                            reader: users[user],
                            up_to: ids[index],
                        },
                        fanout,
                    )
                    .await;
                if model.joined.contains_key(&user) {
                    let now = model.marker.get(&user).map_or(index, |&m| m.max(index));
                    model.marker.insert(user, now);
                    let state = read.unwrap();
                    assert_eq!(state.unread_count, model.unread(user).unwrap());
                    assert_eq!(state.read_up_to, Some(ids[now]));
                } else {
                    assert!(read.is_err(), "a non-member moved a marker");
                }
            }
            Op::Join { .. } | Op::Remove { .. } => {}
        }
    }
    let mut seen = Vec::new();
    for (u, user) in users.iter().enumerate() {
        let one = store.read_state(chat.id, *user, fanout).await.ok();
        let listed = store
            .my_chats(*user, PageRequest::new(None, None).unwrap(), fanout)
            .await
            .unwrap();
        let in_list = listed.items.iter().find(|c| c.chat_id == chat.id);
        assert_eq!(
            one.map(|r| r.unread_count),
            model.unread(u),
            "user {u} ({fanout})"
        );
        assert_eq!(
            in_list.map(|c| c.read.unread_count),
            model.unread(u),
            "user {u}'s chat list ({fanout})"
        );
        if let Some(c) = in_list {
            assert_eq!(c.last_message.id, *ids.last().unwrap());
        }
        seen.push(one.map(|r| {
            let marker = r
                .read_up_to
                .map(|m| ids.iter().position(|id| *id == m).unwrap());
            (r.unread_count, marker)
        }));
    }
    seen
}

async fn last_message(store: &PgStore, chat_id: ChatId, viewer: UserId) -> MessageId {
    store
        .list_messages(chat_id, viewer, PageRequest::new(None, Some(1)).unwrap())
        .await
        .unwrap()
        .items[0]
        .id
}

#[test]
fn both_fanouts_answer_every_read_the_same() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let f = runtime.block_on(fixture());
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: 24,
        ..ProptestConfig::default()
    });
    let history = (
        proptest::collection::vec(op(), 1..24),
        proptest::sample::select(chatlab_testdb::strategies()),
    );
    runner
        .run(&history, |(ops, strategy)| {
            let (none, inbox) = runtime.block_on(async {
                let none = drive(&f.store, &ops, MessageFanout::None, strategy).await;
                let inbox = drive(&f.store, &ops, MessageFanout::Inbox, strategy).await;
                (none, inbox)
            });
            prop_assert_eq!(none, inbox);
            Ok(())
        })
        .unwrap();
}

/// An import leaves the unread counts its messages would have left, sent
/// one by one, under either fan-out, whatever the strategy and chunking.
#[tokio::test]
async fn an_import_counts_as_its_messages_would() {
    use chatlab_domain::{ImportMessages, NewImportedMessage};
    let f = fixture().await;
    for fanout in MessageFanout::ALL {
        for strategy in [
            InsertStrategy::PerRow,
            InsertStrategy::Batch,
            InsertStrategy::Unnest,
        ] {
            let users = seed_users(&f.store, 3).await;
            let chat = f
                .store
                .create_chat(
                    command("import", users[0], &users[1..3]),
                    InsertStrategy::Batch,
                    PublishMode::Off,
                )
                .await
                .unwrap();
            // Seven messages: four by users[0], three by users[1].
            let messages = (0..7)
                .map(|i| NewImportedMessage {
                    sender_id: users[usize::from(i % 2 == 1 && i < 6)],
                    body: format!("imported {i}"),
                })
                .collect();
            let job =
                ImportMessages::validate(chat.id, messages, Some(3), Some(2), &Limits::default())
                    .unwrap();
            let report = f
                .store
                .import_messages_routed(job, strategy, fanout, users[0], None)
                .await
                .unwrap();
            assert!(report.failure.is_none(), "{report:?}");
            let unread = |user: UserId| {
                let store = &f.store;
                async move {
                    store
                        .read_state(chat.id, user, fanout)
                        .await
                        .unwrap()
                        .unread_count
                }
            };
            assert_eq!(unread(users[0]).await, 3, "{fanout} {strategy}");
            assert_eq!(unread(users[1]).await, 4, "{fanout} {strategy}");
            assert_eq!(unread(users[2]).await, 7, "{fanout} {strategy}");
        }
    }
}
