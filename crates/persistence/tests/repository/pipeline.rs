//! The pipelined transaction's own guarantees, beyond the rows it writes
//! (the identical-rows tests cover those): a statement that fails, on the
//! server or before it is sent, leaves nothing written and a clean
//! connection; a session dropped mid-flight is not reused.

use std::time::Duration;

use chrono::Utc;
use diesel::pg::Pg;
use diesel::prelude::*;
use diesel::query_builder::{AstPass, QueryFragment, QueryId};
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use futures_util::FutureExt;
use prometheus_client::registry::Registry;
use uuid::Uuid;

use chatlab_domain::{InsertStrategy, PublishMode, UserId};
use chatlab_persistence::queries::InsertMembersUnnest;
use chatlab_persistence::schema::{chats, messages};
use chatlab_persistence::{DbSession, Executable, PgStore};
use chatlab_testdb::TestDb;

use crate::support::Writes;
use crate::support::{NoBroker, command, seed_users};

/// A store whose pool holds one connection, so every unit of work meets
/// what the previous one left.
async fn one_connection_store() -> (TestDb, PgStore) {
    let db = TestDb::new().await;
    let mut config = db.config();
    config.pool_max_size = 1;
    let store = PgStore::new(
        &config,
        &mut Registry::default(),
        std::sync::Arc::new(NoBroker),
    );
    (db, store)
}

fn insert_chat(id: Uuid, creator: UserId) -> Executable {
    Executable::new(diesel::insert_into(chats::table).values((
        chats::id.eq(id),
        chats::name.eq("piped"),
        chats::creator_id.eq(creator.as_uuid()),
        chats::created_at.eq(Utc::now()),
        chats::publish_mode.eq("off"),
    )))
}

fn insert_message(chat_id: Uuid) -> Executable {
    Executable::new(diesel::insert_into(messages::table).values((
        messages::id.eq(Uuid::now_v7()),
        messages::chat_id.eq(chat_id),
        messages::kind.eq("system"),
        messages::body.eq("room created"),
        messages::created_at.eq(Utc::now()),
        messages::publish_mode.eq("off"),
    )))
}

/// A statement whose SQL cannot be built: it fails on its first poll,
/// before anything of it is sent.
#[derive(Debug, Clone, Copy, QueryId)]
struct Unbuildable;

impl QueryFragment<Pg> for Unbuildable {
    fn walk_ast<'b>(&'b self, _: AstPass<'_, 'b, Pg>) -> QueryResult<()> {
        Err(diesel::result::Error::QueryBuilderError(
            "this statement cannot be built".into(),
        ))
    }
}

#[derive(QueryableByName)]
struct Count {
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    n: i64,
}

#[derive(QueryableByName)]
struct Pid {
    #[diesel(sql_type = diesel::sql_types::Integer)]
    pid: i32,
}

async fn chat_exists(conn: &mut AsyncPgConnection, id: Uuid) -> bool {
    chats::table
        .find(id)
        .count()
        .get_result::<i64>(conn)
        .await
        .unwrap()
        == 1
}

async fn messages_of(conn: &mut AsyncPgConnection, id: Uuid) -> i64 {
    messages::table
        .filter(messages::chat_id.eq(id))
        .count()
        .get_result::<i64>(conn)
        .await
        .unwrap()
}

async fn idle_in_transaction(conn: &mut AsyncPgConnection) -> i64 {
    diesel::sql_query(
        "SELECT count(*) AS n FROM pg_stat_activity \
         WHERE datname = current_database() AND state LIKE 'idle in transaction%'",
    )
    .get_result::<Count>(conn)
    .await
    .unwrap()
    .n
}

/// Runs `statements` as one pipelined transaction on the store's pool
/// (on the blocking driver, one by one inside a transaction).
async fn pipelined(store: &PgStore, statements: Vec<Executable>) -> QueryResult<Vec<usize>> {
    store
        .db()
        .run(move |s: &mut DbSession| {
            async move {
                let done = s.pipelined_transaction(statements).await;
                Ok::<_, chatlab_persistence::PersistenceError>(done.map(|p| p.rows))
            }
            .boxed()
        })
        .await
        .unwrap()
}

async fn backend_pid(store: &PgStore) -> i32 {
    store
        .db()
        .run(|s: &mut DbSession| {
            async move {
                Ok::<_, chatlab_persistence::PersistenceError>(
                    s.get_result::<_, Pid>(diesel::sql_query("SELECT pg_backend_pid() AS pid"))
                        .await
                        .unwrap()
                        .pid,
                )
            }
            .boxed()
        })
        .await
        .unwrap()
}

#[tokio::test]
async fn a_statement_failing_on_the_server_rolls_the_flight_back_and_leaves_a_clean_connection() {
    let (db, store) = one_connection_store().await;
    let users = seed_users(&store, 3).await;
    let mut conn = db.connect().await;
    let chat = Uuid::now_v7();
    let ghost = Uuid::now_v7();
    let err = pipelined(
        &store,
        vec![
            insert_chat(chat, users[0]),
            Executable::new(InsertMembersUnnest {
                chat_id: chat,
                joined_at: Utc::now(),
                user_ids: vec![users[1].as_uuid(), ghost],
            }),
            insert_message(chat),
        ],
    )
    .await
    .unwrap_err();
    assert!(
        matches!(
            err,
            diesel::result::Error::DatabaseError(
                diesel::result::DatabaseErrorKind::ForeignKeyViolation,
                _
            )
        ),
        "the member insert's own error, not the aborted transaction's: {err:?}"
    );
    assert!(
        !chat_exists(&mut conn, chat).await,
        "the chat row rolled back"
    );
    assert_eq!(messages_of(&mut conn, chat).await, 0);
    assert_eq!(idle_in_transaction(&mut conn).await, 0);

    // The one connection is clean: the next flight commits on it.
    let rows = pipelined(
        &store,
        vec![insert_chat(chat, users[0]), insert_message(chat)],
    )
    .await
    .unwrap();
    assert_eq!(rows, vec![1, 1]);
    assert!(chat_exists(&mut conn, chat).await);
}

#[tokio::test]
async fn a_statement_failing_before_it_is_sent_ends_the_flight_with_rollback() {
    let (db, store) = one_connection_store().await;
    let users = seed_users(&store, 1).await;
    let mut conn = db.connect().await;
    let chat = Uuid::now_v7();
    let err = pipelined(
        &store,
        vec![
            insert_chat(chat, users[0]),
            Executable::new(Unbuildable),
            insert_message(chat),
        ],
    )
    .await
    .unwrap_err();
    assert!(
        matches!(err, diesel::result::Error::QueryBuilderError(_)),
        "{err:?}"
    );
    // The chat row and the message were sent and executed; the flight's
    // last statement was ROLLBACK, not COMMIT.
    assert!(!chat_exists(&mut conn, chat).await, "nothing half written");
    assert_eq!(messages_of(&mut conn, chat).await, 0);
    assert_eq!(idle_in_transaction(&mut conn).await, 0);
}

#[tokio::test]
async fn a_session_dropped_mid_flight_is_discarded_not_reused() {
    let (db, store) = one_connection_store().await;
    let users = seed_users(&store, 1).await;
    let mut conn = db.connect().await;
    // Prepares BEGIN, the chat insert and COMMIT on the one connection.
    let warm = Uuid::now_v7();
    pipelined(&store, vec![insert_chat(warm, users[0])])
        .await
        .unwrap();
    let pid_before = backend_pid(&store).await;

    // BEGIN and the chat insert go out on the first poll; the message
    // insert is new to this connection, so it waits for its prepare, and
    // COMMIT waits behind it. Dropped there, the transaction is open.
    let chat = Uuid::now_v7();
    let creator = users[0];
    let first_poll_finished = store
        .db()
        .run(move |s: &mut DbSession| {
            async move {
                let flight =
                    s.pipelined_transaction(vec![insert_chat(chat, creator), insert_message(chat)]);
                Ok::<_, chatlab_persistence::PersistenceError>(flight.now_or_never().is_some())
            }
            .boxed()
        })
        .await
        .unwrap();
    if chatlab_testdb::driver() == chatlab_persistence::Driver::Blocking {
        // No pipeline there: the statements ran one by one to COMMIT
        // within that one poll, and nothing was left open to discard.
        assert!(first_poll_finished, "the blocking driver runs to its end");
        assert!(chat_exists(&mut conn, chat).await);
        assert_eq!(backend_pid(&store).await, pid_before);
        return;
    }
    assert!(!first_poll_finished, "the flight must be cut mid-way");

    // The pool discarded that connection: a new one answers, and the open
    // transaction died with the old one.
    assert_ne!(
        backend_pid(&store).await,
        pid_before,
        "the connection was reused"
    );
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while idle_in_transaction(&mut conn).await > 0 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(idle_in_transaction(&mut conn).await, 0);
    assert!(!chat_exists(&mut conn, chat).await, "nothing half written");
    assert!(chat_exists(&mut conn, warm).await);

    // And createChat under `pipeline` works on the fresh connection.
    store
        .create_chat(
            command("after", users[0], &[]),
            InsertStrategy::Pipeline,
            PublishMode::Off,
        )
        .await
        .unwrap();
}
