use std::collections::HashSet;

use proptest::prelude::*;

use chatlab_domain::{InsertStrategy, PublishMode, RepositoryError, UserId};

use crate::support::Writes;
use crate::support::{command, fixture, read_chat, row_counts, seed_users};

/// Writes the same chat once per strategy and checks the rows are identical.
async fn same_rows_for_every_strategy(member_count: usize) {
    let f = fixture().await;
    let users = seed_users(&f.store, member_count).await;
    let template = command("room", users[0], &users[1..]);
    let mut conn = f.db.connect().await;
    let mut written = Vec::new();
    for strategy in chatlab_testdb::strategies() {
        let mut cmd = template.clone();
        cmd.chat_id = chatlab_domain::ChatId::generate();
        cmd.system_message_id = chatlab_domain::MessageId::generate();
        let created = f
            .store
            .create_chat(cmd.clone(), strategy, PublishMode::Off)
            .await
            .unwrap();
        assert_eq!(created.member_count, member_count, "{strategy}");
        assert_eq!(created.id, cmd.chat_id);
        let rows = read_chat(&mut conn, cmd.chat_id.as_uuid()).await;
        assert_eq!(rows.members.len(), member_count, "{strategy}");
        assert_eq!(rows.messages.len(), 1, "{strategy}");
        assert_eq!(rows.messages[0].0, None);
        assert_eq!(rows.messages[0].1, "system");
        assert_eq!(rows.messages[0].2, "room created");
        written.push(rows);
    }
    for (strategy, rows) in chatlab_testdb::strategies().iter().zip(&written).skip(1) {
        assert_eq!(written[0], *rows, "per_row vs {strategy}");
    }
}

#[tokio::test]
async fn one_member_writes_identical_rows() {
    same_rows_for_every_strategy(1).await;
}

#[tokio::test]
async fn fifty_members_write_identical_rows() {
    same_rows_for_every_strategy(50).await;
}

#[tokio::test]
async fn a_thousand_members_write_identical_rows() {
    same_rows_for_every_strategy(1_000).await;
}

/// 25,000 members × 3 columns = 75,000 bind parameters: `batch` must split
/// into two statements to stay under PostgreSQL's 65,535.
#[tokio::test]
async fn twenty_five_thousand_members_force_chunking_and_write_identical_rows() {
    same_rows_for_every_strategy(25_000).await;
}

#[tokio::test]
async fn unknown_members_are_listed_and_nothing_is_written() {
    let f = fixture().await;
    let users = seed_users(&f.store, 5).await;
    let ghosts = [UserId::generate(), UserId::generate()];
    let mut members = users[1..].to_vec();
    members.insert(2, ghosts[0]);
    members.push(ghosts[1]);
    let mut conn = f.db.connect().await;
    for strategy in chatlab_testdb::strategies() {
        let err = f
            .store
            .create_chat(
                command("room", users[0], &members),
                strategy,
                PublishMode::Off,
            )
            .await
            .unwrap_err();
        match err {
            RepositoryError::UnknownUsers(ids) => assert_eq!(ids, ghosts.to_vec(), "{strategy}"),
            other => panic!("{strategy}: expected UnknownUsers, got {other:?}"),
        }
        assert_eq!(row_counts(&mut conn).await, (0, 0, 0), "{strategy}");
    }
    // An unknown creator fails on the chat row itself.
    let ghost_creator = UserId::generate();
    for strategy in [
        InsertStrategy::Batch,
        InsertStrategy::Single,
        InsertStrategy::Pipeline,
    ] {
        let err = f
            .store
            .create_chat(
                command("room", ghost_creator, &users),
                strategy,
                PublishMode::Off,
            )
            .await
            .unwrap_err();
        assert!(
            matches!(err, RepositoryError::UnknownUsers(ref ids) if ids == &[ghost_creator]),
            "{strategy}: {err:?}"
        );
        assert_eq!(row_counts(&mut conn).await, (0, 0, 0), "{strategy}");
    }
}

#[tokio::test]
async fn concurrent_creates_all_commit() {
    let f = fixture().await;
    let users = seed_users(&f.store, 60).await;
    let mut tasks = Vec::new();
    for i in 0..24 {
        let store = f.store.clone();
        let strategies = chatlab_testdb::strategies();
        let strategy = strategies[i % strategies.len()];
        // Overlapping member sets: every chat shares users with the others.
        let members: Vec<UserId> = users.iter().skip(i).take(30).copied().collect();
        let cmd = command(&format!("room {i}"), users[0], &members);
        tasks.push(tokio::spawn(async move {
            store.create_chat(cmd, strategy, PublishMode::Off).await
        }));
    }
    let mut ids = HashSet::new();
    for task in tasks {
        let created = task.await.unwrap().unwrap();
        ids.insert(created.id);
    }
    assert_eq!(ids.len(), 24);
    let mut conn = f.db.connect().await;
    let (chats, _, messages) = row_counts(&mut conn).await;
    assert_eq!((chats, messages), (24, 24));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    /// Random member lists, with duplicates and with or without the creator,
    /// give identical rows under every strategy.
    #[test]
    fn random_member_lists_write_identical_rows(
        creator in 0usize..12,
        picks in proptest::collection::vec(0usize..12, 0..40),
    ) {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        runtime.block_on(async {
            let f = fixture().await;
            let users = seed_users(&f.store, 12).await;
            let members: Vec<UserId> = picks.iter().map(|&i| users[i]).collect();
            let mut expected: HashSet<UserId> = members.iter().copied().collect();
            expected.insert(users[creator]);
            let template = command("prop", users[creator], &members);
            let mut conn = f.db.connect().await;
            let mut written = Vec::new();
            for strategy in chatlab_testdb::strategies() {
                let mut cmd = template.clone();
                cmd.chat_id = chatlab_domain::ChatId::generate();
                cmd.system_message_id = chatlab_domain::MessageId::generate();
                f.store.create_chat(cmd.clone(), strategy, PublishMode::Off).await.unwrap();
                written.push(read_chat(&mut conn, cmd.chat_id.as_uuid()).await);
            }
            let stored: HashSet<UserId> =
                written[0].members.iter().map(|(id, _)| UserId::from_uuid(*id)).collect();
            assert_eq!(stored, expected);
            for rows in &written[1..] {
                assert_eq!(&written[0], rows);
            }
        });
    }
}

/// `single` and `pipeline` in outbox mode: the event's row is part of the
/// one statement (the one flight), with the same event type and chat as
/// the other strategies write; and an unknown member leaves neither the
/// chat nor its outbox row behind.
#[tokio::test]
async fn single_and_pipeline_write_the_outbox_row_with_the_chat_or_nothing() {
    use chatlab_persistence::schema::outbox;
    use diesel::prelude::*;
    use diesel_async::RunQueryDsl;

    let f = fixture().await;
    let users = seed_users(&f.store, 5).await;
    let mut conn = f.db.connect().await;
    let mut events = Vec::new();
    for strategy in [
        InsertStrategy::Batch,
        InsertStrategy::Single,
        InsertStrategy::Pipeline,
    ] {
        let created = f
            .store
            .create_chat(
                command("room", users[0], &users[1..]),
                strategy,
                PublishMode::Outbox,
            )
            .await
            .unwrap();
        let rows: Vec<(String, uuid::Uuid)> = outbox::table
            .filter(outbox::chat_id.eq(created.id.as_uuid()))
            .select((outbox::event_type, outbox::chat_id))
            .load(&mut conn)
            .await
            .unwrap();
        assert_eq!(rows.len(), 1, "{strategy}: one outbox row");
        events.push(rows[0].0.clone());
    }
    assert_eq!(events, ["chat.created", "chat.created", "chat.created"]);

    let before: i64 = outbox::table.count().get_result(&mut conn).await.unwrap();
    for strategy in [InsertStrategy::Single, InsertStrategy::Pipeline] {
        let err = f
            .store
            .create_chat(
                command("room", users[0], &[users[1], UserId::generate()]),
                strategy,
                PublishMode::Outbox,
            )
            .await
            .unwrap_err();
        assert!(
            matches!(err, RepositoryError::UnknownUsers(_)),
            "{strategy}: {err:?}"
        );
    }
    let after: i64 = outbox::table.count().get_result(&mut conn).await.unwrap();
    assert_eq!(
        after, before,
        "no outbox row for a chat that was not written"
    );
    assert_eq!(
        row_counts(&mut conn).await.0,
        3,
        "only the three chats above"
    );
}
