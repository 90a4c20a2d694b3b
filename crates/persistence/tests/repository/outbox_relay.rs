//! The outbox relay against a publisher of the test's own (the one port
//! with a test double): which rows it marks, in which order, and which it
//! sets aside.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use diesel::prelude::*;
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
use prometheus_client::registry::Registry;
use tokio::sync::Notify;
use tokio_util::sync::{CancellationToken, DropGuard};
use uuid::Uuid;

use chatlab_domain::{Event, EventPayload, EventPublisher, PublishError, PublishMode, Receipt};
use chatlab_persistence::events::outbox_relay::{
    CLAIM_SQL, OutboxMetrics, OutboxRelay, RelaySettings, Relayed, UNREADABLE_ATTEMPTS,
};
use chatlab_persistence::schema::outbox;
use chatlab_testdb::TestDb;

/// Acknowledges every event but those it was told to refuse once.
#[derive(Default)]
struct Scripted {
    refuse_once: Mutex<HashSet<Uuid>>,
}

#[async_trait::async_trait]
impl EventPublisher for Scripted {
    async fn publish(&self, event: &Event, _: PublishMode) -> Result<Receipt, PublishError> {
        if self.refuse_once.lock().unwrap().remove(&event.event_id) {
            return Err(PublishError("refused on purpose".into()));
        }
        Ok(Receipt {
            partition: 0,
            offset: 0,
        })
    }

    fn enqueue(&self, _: &Event, _: PublishMode) -> Result<(), PublishError> {
        Err(PublishError("the relay never enqueues".into()))
    }
}

fn event(chat: Uuid) -> Event {
    Event {
        event_id: Uuid::now_v7(),
        occurred_at: Utc::now(),
        schema_version: 1,
        publish_mode: "outbox".into(),
        payload: EventPayload::MessageSent {
            chat_id: chat,
            message_id: Uuid::now_v7(),
            sender_id: Uuid::now_v7(),
            body_length: 1,
            body: None,
        },
        trace_parent: None,
    }
}

async fn insert(conn: &mut AsyncPgConnection, event_id: Uuid, chat: Uuid, payload: &str) -> i64 {
    diesel::insert_into(outbox::table)
        .values((
            outbox::event_id.eq(event_id),
            outbox::chat_id.eq(chat),
            outbox::lock_key.eq(7),
            outbox::event_type.eq("message.sent"),
            outbox::payload.eq(payload),
            outbox::created_at.eq(Utc::now()),
        ))
        .returning(outbox::id)
        .get_result(conn)
        .await
        .unwrap()
}

/// A relay on `db` with `publisher`, retrying every 50 ms; it stops when
/// the guard drops.
fn start(db: &TestDb, publisher: Arc<Scripted>) -> (DropGuard, Registry) {
    let mut registry = Registry::default();
    let relay = OutboxRelay::new(
        db.config().url,
        &db.config().session,
        publisher,
        Arc::new(Notify::new()),
        OutboxMetrics::register(&mut registry),
        RelaySettings {
            retry_backoff: Duration::from_millis(50),
            poll_interval: Duration::from_millis(50),
            ..RelaySettings::default()
        },
    );
    let stop = CancellationToken::new();
    let running = stop.clone();
    // The server's workers run it the same way: a batch a run, waiting what
    // each run asks (bounded by the test: the guard stops it).
    tokio::spawn(async move {
        let mut relay = relay;
        while !running.is_cancelled() {
            match relay.relay_once().await {
                Relayed::More => {}
                Relayed::Drained => tokio::time::sleep(Duration::from_millis(50)).await,
                Relayed::Failed(pause) => tokio::time::sleep(pause).await,
            }
        }
    });
    (stop.drop_guard(), registry)
}

type Row = (i64, Option<DateTime<Utc>>, i32, Option<DateTime<Utc>>);

async fn rows(conn: &mut AsyncPgConnection) -> Vec<Row> {
    outbox::table
        .select((
            outbox::id,
            outbox::published_at,
            outbox::attempts,
            outbox::dead_at,
        ))
        .order(outbox::id)
        .load(conn)
        .await
        .unwrap()
}

async fn until(
    conn: &mut AsyncPgConnection,
    what: &str,
    done: impl Fn(&[Row]) -> bool,
) -> Vec<Row> {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let rows = rows(conn).await;
        if done(&rows) {
            return rows;
        }
        assert!(Instant::now() < deadline, "{what}: {rows:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A chat's first event fails, its later ones are acknowledged in the same
/// batch: none of them may be marked before the first one.
#[tokio::test]
async fn a_chats_rows_are_marked_in_order_even_when_a_later_one_was_acknowledged_first() {
    let db = TestDb::new().await;
    let mut conn = db.connect().await;
    let chat = Uuid::now_v7();
    let events: Vec<Event> = (0..3).map(|_| event(chat)).collect();
    for e in &events {
        insert(&mut conn, e.event_id, chat, &e.to_json().unwrap()).await;
    }
    let publisher = Arc::new(Scripted::default());
    publisher
        .refuse_once
        .lock()
        .unwrap()
        .insert(events[0].event_id);
    let (_stop, _registry) = start(&db, publisher);
    let rows = until(&mut conn, "every row published", |rows| {
        rows.iter().all(|r| r.1.is_some())
    })
    .await;
    let marked: Vec<DateTime<Utc>> = rows.iter().filter_map(|r| r.1).collect();
    assert!(
        marked.windows(2).all(|w| w[0] <= w[1]),
        "a later row was marked before the one that failed: {rows:?}"
    );
    assert_eq!(rows[0].2, 2, "the first row took two attempts");
}

/// A row whose payload cannot be read is set aside after a bounded number
/// of attempts; its chat's later rows and other chats' rows go on.
#[tokio::test]
async fn an_unreadable_row_is_set_aside_and_the_relay_goes_on() {
    let db = TestDb::new().await;
    let mut conn = db.connect().await;
    let chat = Uuid::now_v7();
    let bad = insert(&mut conn, Uuid::now_v7(), chat, "not an event").await;
    let next = event(chat);
    insert(&mut conn, next.event_id, chat, &next.to_json().unwrap()).await;
    let other = event(Uuid::now_v7());
    insert(
        &mut conn,
        other.event_id,
        other.chat_id(),
        &other.to_json().unwrap(),
    )
    .await;
    let (_stop, registry) = start(&db, Arc::new(Scripted::default()));
    let rows = until(
        &mut conn,
        "the bad row set aside, the others published",
        |rows| {
            rows.iter().all(|r| {
                if r.0 == bad {
                    r.3.is_some()
                } else {
                    r.1.is_some()
                }
            })
        },
    )
    .await;
    let bad_row = rows.iter().find(|r| r.0 == bad).unwrap();
    assert_eq!(bad_row.1, None, "never published");
    assert_eq!(bad_row.2, UNREADABLE_ATTEMPTS);
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    assert_eq!(
        chatlab_testdb::sample(&text, "chatlab_outbox_dead_rows_total"),
        Some(1.0)
    );
}

#[derive(QueryableByName)]
struct ClaimedId {
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    id: i64,
}

#[derive(QueryableByName)]
struct Held {
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    advisory: i64,
}

/// A claim takes the chat locks of its batch and no more, whatever plan
/// PostgreSQL picks and however long the backlog: a claim that tried the
/// lock on every pending row filled the server's lock table under load
/// ("out of shared memory" for every other transaction).
#[tokio::test]
async fn a_claim_locks_the_chats_of_its_batch_only_however_long_the_backlog() {
    let db = TestDb::new().await;
    let mut conn = db.connect().await;
    let mut ids = Vec::new();
    for key in 0..300 {
        let id: i64 = diesel::insert_into(outbox::table)
            .values((
                outbox::event_id.eq(Uuid::now_v7()),
                outbox::chat_id.eq(Uuid::now_v7()),
                outbox::lock_key.eq(key),
                outbox::event_type.eq("message.sent"),
                outbox::payload.eq("{}"),
                outbox::created_at.eq(Utc::now()),
            ))
            .returning(outbox::id)
            .get_result(&mut conn)
            .await
            .unwrap();
        ids.push(id);
    }
    let (claimed, held) = conn
        .transaction::<_, diesel::result::Error, _>(async |c| {
            // The plan that filtered every pending row before the sort.
            diesel::sql_query("SET LOCAL enable_indexscan = off")
                .execute(c)
                .await?;
            let claimed: Vec<ClaimedId> = diesel::sql_query(CLAIM_SQL)
                .bind::<diesel::sql_types::Integer, _>(2)
                .bind::<diesel::sql_types::BigInt, _>(10)
                .load(c)
                .await?;
            let held: Held = diesel::sql_query(
                "SELECT count(*) AS advisory FROM pg_locks \
                 WHERE locktype = 'advisory' AND pid = pg_backend_pid()",
            )
            .get_result(c)
            .await?;
            Ok((claimed, held))
        })
        .await
        .unwrap();
    let claimed: Vec<i64> = claimed.iter().map(|c| c.id).collect();
    assert_eq!(claimed, ids[..10], "the first ten pending rows, in order");
    assert_eq!(held.advisory, 10, "one chat lock per claimed row, no more");
}
