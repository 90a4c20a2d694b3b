//! Import jobs: chunking writes exactly the rows asked for, whatever the
//! chunk size, parallelism and strategy; a failed chunk leaves the chunks
//! before it committed and the report says which.

use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use uuid::Uuid;

use chatlab_domain::{
    ImportMembers, ImportMessages, InsertStrategy, Limits, NewImportedMessage, PublishMode,
    RepositoryError, UserId,
};
use chatlab_persistence::schema::{chat_members, messages};

use crate::support::Writes;
use crate::support::{command, fixture, seed_users};

const STRATEGIES: [InsertStrategy; 3] = [
    InsertStrategy::PerRow,
    InsertStrategy::Batch,
    InsertStrategy::Unnest,
];

fn limits() -> Limits {
    Limits::default()
}

async fn members_of(conn: &mut diesel_async::AsyncPgConnection, chat: Uuid) -> Vec<Uuid> {
    chat_members::table
        .filter(chat_members::chat_id.eq(chat))
        .select(chat_members::user_id)
        .order(chat_members::user_id)
        .load(conn)
        .await
        .unwrap()
}

#[tokio::test]
async fn member_import_writes_exactly_the_rows_asked_for() {
    let f = fixture().await;
    let users = seed_users(&f.store, 1_201).await;
    let (creator, rest) = users.split_first().unwrap();
    let mut conn = f.db.connect().await;
    // Chunk sizes that divide the rows, that do not, and one larger than
    // the job; parallelism 1 and 4.
    let cases = [(100, 1), (333, 4), (5_000, 1), (1, 8)];
    for (i, (chunk_size, parallelism)) in cases.into_iter().enumerate() {
        let strategy = STRATEGIES[i % 3];
        let chat = f
            .store
            .create_chat(
                command(&format!("import {i}"), *creator, &[]),
                InsertStrategy::Batch,
                PublishMode::Off,
            )
            .await
            .unwrap();
        let wanted: Vec<UserId> = if chunk_size == 1 {
            rest[..40].to_vec()
        } else {
            rest.to_vec()
        };
        let job = ImportMembers::validate(
            chat.id,
            wanted.clone(),
            Some(chunk_size),
            Some(parallelism),
            &limits(),
        )
        .unwrap();
        let report = f
            .store
            .import_members(job, strategy, *creator)
            .await
            .unwrap();
        assert!(report.failure.is_none(), "{:?}", report.failure);
        assert_eq!(report.written(), wanted.len());
        assert_eq!(report.committed.len(), wanted.len().div_ceil(chunk_size));
        let mut expected: Vec<Uuid> = wanted.iter().map(|u| u.as_uuid()).collect();
        expected.push(creator.as_uuid());
        expected.sort();
        assert_eq!(
            members_of(&mut conn, chat.id.as_uuid()).await,
            expected,
            "chunk {chunk_size}, parallelism {parallelism}, {strategy}"
        );
    }
}

#[tokio::test]
async fn a_failed_chunk_leaves_earlier_chunks_committed_and_says_which() {
    let f = fixture().await;
    let users = seed_users(&f.store, 31).await;
    let (creator, rest) = users.split_first().unwrap();
    let mut conn = f.db.connect().await;
    for strategy in STRATEGIES {
        let chat = f
            .store
            .create_chat(
                command("partial", *creator, &[]),
                InsertStrategy::Batch,
                PublishMode::Off,
            )
            .await
            .unwrap();
        // 40 rows in chunks of 10; row 25 (chunk 2) names no user.
        let ghost = UserId::from_uuid(Uuid::now_v7());
        let mut wanted: Vec<UserId> = rest[..30].to_vec();
        wanted.insert(25, ghost);
        wanted.extend(std::iter::repeat_with(|| UserId::from_uuid(Uuid::now_v7())).take(9));
        let job =
            ImportMembers::validate(chat.id, wanted.clone(), Some(10), Some(1), &limits()).unwrap();
        let report = f
            .store
            .import_members(job, strategy, *creator)
            .await
            .unwrap();
        let failure = report.failure.as_ref().expect("chunk 2 fails");
        assert_eq!(failure.chunk.index, 2);
        assert_eq!(failure.chunk.first_row, 20);
        match &failure.error {
            RepositoryError::UnknownUsers(ids) => assert_eq!(ids, &vec![ghost]),
            other => panic!("expected unknown users, got {other:?}"),
        }
        // Chunks 0 and 1 committed; chunk 2 rolled back whole; chunk 3 was
        // never run.
        assert_eq!(
            report.committed.iter().map(|c| c.index).collect::<Vec<_>>(),
            vec![0, 1]
        );
        assert_eq!(report.written(), 20);
        let mut expected: Vec<Uuid> = wanted[..20].iter().map(|u| u.as_uuid()).collect();
        expected.push(creator.as_uuid());
        expected.sort();
        assert_eq!(
            members_of(&mut conn, chat.id.as_uuid()).await,
            expected,
            "{strategy}"
        );
    }
}

#[tokio::test]
async fn parallel_chunks_report_every_committed_row() {
    let f = fixture().await;
    let users = seed_users(&f.store, 200).await;
    let (creator, rest) = users.split_first().unwrap();
    let chat = f
        .store
        .create_chat(
            command("parallel", *creator, &[]),
            InsertStrategy::Batch,
            PublishMode::Off,
        )
        .await
        .unwrap();
    // The last chunk fails on a user already in the chat: whatever ran in
    // parallel with it, the report must match the table exactly.
    let mut wanted: Vec<UserId> = rest.to_vec();
    let last = wanted.len() - 1;
    wanted[last] = *creator;
    let job =
        ImportMembers::validate(chat.id, wanted.clone(), Some(20), Some(4), &limits()).unwrap();
    let report = f
        .store
        .import_members(job, InsertStrategy::Batch, *creator)
        .await
        .unwrap();
    let failure = report.failure.as_ref().expect("the last chunk fails");
    assert!(
        matches!(failure.error, RepositoryError::Conflict(_)),
        "{:?}",
        failure.error
    );
    assert_eq!(failure.chunk.index, 9);
    let mut conn = f.db.connect().await;
    let mut expected: Vec<Uuid> = report
        .committed
        .iter()
        .flat_map(|c| wanted[c.row_range()].iter().map(|u| u.as_uuid()))
        .collect();
    expected.push(creator.as_uuid());
    expected.sort();
    assert_eq!(members_of(&mut conn, chat.id.as_uuid()).await, expected);
}

#[tokio::test]
async fn message_import_writes_every_message_in_order_by_each_strategy() {
    let f = fixture().await;
    let users = seed_users(&f.store, 3).await;
    let mut conn = f.db.connect().await;
    for strategy in STRATEGIES {
        let chat = f
            .store
            .create_chat(
                command("msgs", users[0], &users[1..]),
                InsertStrategy::Batch,
                PublishMode::Off,
            )
            .await
            .unwrap();
        let input: Vec<NewImportedMessage> = (0..2_500)
            .map(|i| NewImportedMessage {
                sender_id: users[i % 3],
                body: format!("message {i}"),
            })
            .collect();
        let job =
            ImportMessages::validate(chat.id, input, Some(1_000), Some(2), &limits()).unwrap();
        let report = f
            .store
            .import_messages(job, strategy, users[0])
            .await
            .unwrap();
        assert!(report.failure.is_none());
        assert_eq!(report.written(), 2_500);
        let rows: Vec<(Option<Uuid>, String, String)> = messages::table
            .filter(messages::chat_id.eq(chat.id.as_uuid()))
            .filter(messages::kind.eq("talk"))
            .select((messages::sender_id, messages::body, messages::publish_mode))
            .order(messages::id)
            .load(&mut conn)
            .await
            .unwrap();
        assert_eq!(rows.len(), 2_500, "{strategy}");
        for (i, (sender, body, mode)) in rows.iter().enumerate() {
            assert_eq!(*sender, Some(users[i % 3].as_uuid()));
            assert_eq!(body, &format!("message {i}"));
            assert_eq!(mode, "off");
        }
    }
}

#[tokio::test]
async fn a_message_import_by_a_non_member_or_into_no_chat_writes_nothing() {
    let f = fixture().await;
    let users = seed_users(&f.store, 3).await;
    // users[0] owns the chat, users[2] is a member, users[1] is neither.
    let chat = f
        .store
        .create_chat(
            command("closed", users[0], &users[2..]),
            InsertStrategy::Batch,
            PublishMode::Off,
        )
        .await
        .unwrap();
    let job = |chat_id| {
        ImportMessages::validate(
            chat_id,
            vec![
                NewImportedMessage {
                    sender_id: users[0],
                    body: "hi".into(),
                },
                NewImportedMessage {
                    sender_id: users[1],
                    body: "intruder".into(),
                },
            ],
            None,
            None,
            &limits(),
        )
        .unwrap()
    };
    // The owner imports, but a sender is not a member.
    let err = f
        .store
        .import_messages(job(chat.id), InsertStrategy::Batch, users[0])
        .await
        .unwrap_err();
    assert!(
        matches!(err, RepositoryError::NotAMember { user_id, .. } if user_id == users[1]),
        "{err:?}"
    );
    let nowhere = chatlab_domain::ChatId::from_uuid(Uuid::now_v7());
    let err = f
        .store
        .import_messages(job(nowhere), InsertStrategy::Batch, users[0])
        .await
        .unwrap_err();
    assert!(matches!(err, RepositoryError::NotFound { .. }), "{err:?}");
    // Imports are the owner's: a member who does not own the chat is told
    // so; for a non-member the chat does not exist.
    let err = f
        .store
        .import_messages(job(chat.id), InsertStrategy::Batch, users[2])
        .await
        .unwrap_err();
    assert!(
        matches!(err, RepositoryError::NotTheOwner { chat_id, user_id }
            if chat_id == chat.id && user_id == users[2]),
        "{err:?}"
    );
    let err = f
        .store
        .import_messages(job(chat.id), InsertStrategy::Batch, users[1])
        .await
        .unwrap_err();
    assert!(
        matches!(err, RepositoryError::NotFound { id, .. } if id == chat.id.as_uuid()),
        "{err:?}"
    );
    let mut conn = f.db.connect().await;
    let talk: i64 = messages::table
        .filter(messages::kind.eq("talk"))
        .count()
        .get_result(&mut conn)
        .await
        .unwrap();
    assert_eq!(talk, 0);
}

#[tokio::test]
async fn only_the_owner_may_import_members() {
    let f = fixture().await;
    let users = seed_users(&f.store, 4).await;
    // users[0] owns the chat, users[1] is a member, users[2] is neither.
    let chat = f
        .store
        .create_chat(
            command("owned", users[0], &users[1..2]),
            InsertStrategy::Batch,
            PublishMode::Off,
        )
        .await
        .unwrap();
    let job = || ImportMembers::validate(chat.id, vec![users[3]], None, None, &limits()).unwrap();
    let err = f
        .store
        .import_members(job(), InsertStrategy::Batch, users[1])
        .await
        .unwrap_err();
    assert!(
        matches!(err, RepositoryError::NotTheOwner { user_id, .. } if user_id == users[1]),
        "{err:?}"
    );
    let err = f
        .store
        .import_members(job(), InsertStrategy::Batch, users[2])
        .await
        .unwrap_err();
    assert!(
        matches!(err, RepositoryError::NotFound { id, .. } if id == chat.id.as_uuid()),
        "{err:?}"
    );
    let mut conn = f.db.connect().await;
    let mut before: Vec<Uuid> = vec![users[0].as_uuid(), users[1].as_uuid()];
    before.sort();
    assert_eq!(members_of(&mut conn, chat.id.as_uuid()).await, before);

    let report = f
        .store
        .import_members(job(), InsertStrategy::Batch, users[0])
        .await
        .unwrap();
    assert_eq!(report.written(), 1);
}
