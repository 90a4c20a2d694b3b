//! A statement or lock timeout is a timeout (503, retry) whatever language
//! the server speaks: diesel hands out no SQLSTATE, errors are told apart
//! by their text, so chatlab pins its sessions' messages to English.
//!
//! Behind a transaction pooler (the suite's pass through PgBouncer) chatlab
//! sends no `SET`s: the same settings then come from the database, as
//! docs/operations.md tells operators to set them, and these tests check
//! that recipe.

use std::time::Duration;

use diesel_async::{AsyncPgConnection, SimpleAsyncConnection};
use prometheus_client::registry::Registry;

use chatlab_domain::{InsertStrategy, PublishMode, RepositoryError, UnavailableReason};
use chatlab_persistence::PgStore;
use chatlab_testdb::TestDb;

use crate::support::Writes;
use crate::support::{NoBroker, command, seed_users};

/// Makes the test database speak German, and checks that the server does:
/// a check of the fix means nothing on a server that answers in English
/// anyway.
async fn german_database(db: &TestDb) {
    let mut conn = db.connect().await;
    conn.batch_execute(&format!(
        "ALTER DATABASE \"{}\" SET lc_messages = 'de_DE.UTF-8'",
        db.name()
    ))
    .await
    .unwrap();
    let mut fresh = db.connect().await;
    let err = fresh
        .batch_execute("SET statement_timeout = 1; SELECT pg_sleep(0.2)")
        .await
        .unwrap_err()
        .to_string();
    assert!(
        !err.starts_with("canceling statement"),
        "the server answers in English ({err:?}) even with lc_messages = de_DE.UTF-8: it needs \
         the de_DE.UTF-8 locale (localedef -i de_DE -f UTF-8 de_DE.UTF-8) from before it \
         started; scripts/run-tests.sh makes it and restarts the machine's cluster once"
    );
}

/// Behind a pooler, the settings chatlab would `SET` on its sessions, set
/// on the database instead (the operators' recipe): English messages and
/// the timeouts `statement` and `lock`. Nothing without a pooler.
async fn pooler_recipe(db: &TestDb, statement: Duration, lock: Duration) {
    if chatlab_testdb::pooler().is_none() {
        return;
    }
    let mut conn = db.connect().await;
    let name = db.name();
    conn.batch_execute(&format!(
        "ALTER DATABASE \"{name}\" SET lc_messages = 'C'; \
         ALTER DATABASE \"{name}\" SET statement_timeout = {}; \
         ALTER DATABASE \"{name}\" SET lock_timeout = {}",
        statement.as_millis(),
        lock.as_millis()
    ))
    .await
    .unwrap();
}

/// A connection that holds a row lock on `user` until it is dropped: a
/// createChat naming that user waits for it (its foreign-key check).
async fn lock_user(db: &TestDb, user: uuid::Uuid) -> AsyncPgConnection {
    let mut conn = db.connect().await;
    conn.batch_execute(&format!(
        "BEGIN; SELECT 1 FROM users WHERE id = '{user}' FOR UPDATE"
    ))
    .await
    .unwrap();
    conn
}

async fn timed_out_create(statement: Duration, lock: Duration) -> RepositoryError {
    let db = TestDb::new().await;
    german_database(&db).await;
    pooler_recipe(&db, statement, lock).await;
    let mut config = db.config();
    config.session.statement_timeout = statement;
    config.session.lock_timeout = lock;
    let store = PgStore::new(
        &config,
        &mut Registry::default(),
        std::sync::Arc::new(NoBroker),
    );
    let users = seed_users(&store, 3).await;
    let _lock = lock_user(&db, users[2].as_uuid()).await;
    store
        .create_chat(
            command("locked out", users[0], &users[1..]),
            InsertStrategy::Batch,
            PublishMode::Off,
        )
        .await
        .unwrap_err()
}

fn assert_timeout(err: &RepositoryError) {
    assert!(
        matches!(
            err,
            RepositoryError::Unavailable {
                reason: UnavailableReason::Timeout,
                ..
            }
        ),
        "{err:?}"
    );
}

#[tokio::test]
async fn a_statement_timeout_is_a_timeout_in_a_german_speaking_server() {
    assert_timeout(&timed_out_create(Duration::from_millis(300), Duration::ZERO).await);
}

#[tokio::test]
async fn a_lock_timeout_is_a_timeout_in_a_german_speaking_server() {
    assert_timeout(&timed_out_create(Duration::ZERO, Duration::from_millis(300)).await);
}

/// Sessions pin English messages where the role may, so the store reports
/// `C` even on a German-speaking server (behind a pooler, by the database's
/// setting); startup warns about anything else.
#[tokio::test]
async fn sessions_speak_the_c_locale_where_the_role_may_pin_it() {
    let db = TestDb::new().await;
    german_database(&db).await;
    pooler_recipe(&db, Duration::from_secs(30), Duration::from_secs(5)).await;
    let store = PgStore::new(
        &db.config(),
        &mut Registry::default(),
        std::sync::Arc::new(NoBroker),
    );
    assert_eq!(store.message_language().await.unwrap(), "C");
}
