//! Callers that go away mid-write: a createChat future dropped at a random
//! point (a client hang-up where the server cancels, a shutdown that gives
//! up on its in-flight requests) leaves no write half done, no connection
//! checked out, no session idle in a transaction, and no event on the topic
//! for a write that rolled back.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use prometheus_client::registry::Registry;
use uuid::Uuid;

use chatlab_domain::{Event, EventPublisher, InsertStrategy, PublishError, PublishMode, Receipt};
use chatlab_persistence::PgStore;
use chatlab_persistence::schema::{chat_members, chats, messages};
use chatlab_testdb::TestDb;

use crate::support::Writes;
use crate::support::{command, seed_users};

/// A broker whose records land on the topic as soon as they are sent and
/// whose acknowledgement takes `rtt`, as a real broker's does: a caller
/// that stops waiting for the ack leaves the record on the topic.
struct SlowBroker {
    rtt: Duration,
    topic: Mutex<Vec<Uuid>>,
}

#[async_trait::async_trait]
impl EventPublisher for SlowBroker {
    async fn publish(&self, event: &Event, _: PublishMode) -> Result<Receipt, PublishError> {
        let offset = {
            let mut topic = self
                .topic
                .lock()
                .map_err(|_| PublishError("poisoned".into()))?;
            topic.push(event.subject_id());
            topic.len() as i64 - 1
        };
        tokio::time::sleep(self.rtt).await;
        Ok(Receipt {
            partition: 0,
            offset,
        })
    }

    fn enqueue(&self, event: &Event, _: PublishMode) -> Result<(), PublishError> {
        self.topic
            .lock()
            .map_err(|_| PublishError("poisoned".into()))?
            .push(event.subject_id());
        Ok(())
    }
}

/// Drops in_tx_await per_row createChats at random points (from 0 to 1.5
/// times an undisturbed write's time), then checks what they left.
#[tokio::test]
async fn writes_dropped_at_random_points_leave_nothing_half_done_and_no_phantom_event() {
    let db = TestDb::new().await;
    let broker = Arc::new(SlowBroker {
        rtt: Duration::from_millis(8),
        topic: Mutex::new(Vec::new()),
    });
    let store = PgStore::new(&db.config(), &mut Registry::default(), broker.clone());
    let members = 120;
    let users = seed_users(&store, members).await;
    let timed = tokio::time::Instant::now();
    store
        .create_chat(
            command("undisturbed", users[0], &users[1..]),
            InsertStrategy::PerRow,
            PublishMode::InTxAwait,
        )
        .await
        .unwrap();
    let span = (timed.elapsed().as_micros() as u64 * 3 / 2).max(1);
    let rounds = 60u64;
    let mut seed = 0x5EED_u64;
    let mut dropped = 0;
    for i in 0..rounds {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let after = Duration::from_micros(seed % span);
        let cmd = command(&format!("dropped {i}"), users[0], &users[1..]);
        let write = store.create_chat(cmd, InsertStrategy::PerRow, PublishMode::InTxAwait);
        if tokio::time::timeout(after, write).await.is_err() {
            dropped += 1;
        }
    }
    assert!(
        dropped > rounds / 4,
        "only {dropped} of {rounds} dropped: the test cut nothing"
    );

    // A unit of work the caller left runs to its end: give it a moment.
    let mut conn = db.connect().await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let (open, idle) = store.db().connections();
        let in_tx: i64 = diesel::sql_query(
            "SELECT count(*) AS n FROM pg_stat_activity \
             WHERE datname = current_database() AND state LIKE 'idle in transaction%'",
        )
        .get_result::<Count>(&mut conn)
        .await
        .map(|c| c.n)
        .unwrap();
        if (open == idle && in_tx == 0) || tokio::time::Instant::now() > deadline {
            assert_eq!(open - idle, 0, "connections left checked out");
            assert_eq!(in_tx, 0, "sessions left idle in transaction");
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // Every chat that committed is whole.
    let committed: Vec<Uuid> = chats::table
        .select(chats::id)
        .load(&mut conn)
        .await
        .unwrap();
    for chat in &committed {
        let member_rows: i64 = chat_members::table
            .filter(chat_members::chat_id.eq(chat))
            .count()
            .get_result(&mut conn)
            .await
            .unwrap();
        let system: i64 = messages::table
            .filter(messages::chat_id.eq(chat))
            .filter(messages::kind.eq("system"))
            .count()
            .get_result(&mut conn)
            .await
            .unwrap();
        assert_eq!((member_rows, system), (members as i64, 1), "chat {chat}");
    }
    // No event on the topic for a chat that is not there.
    let committed: HashSet<Uuid> = committed.into_iter().collect();
    let topic = broker.topic.lock().unwrap().clone();
    let phantoms: Vec<&Uuid> = topic.iter().filter(|s| !committed.contains(s)).collect();
    assert!(
        phantoms.is_empty(),
        "{} of {} events announce a chat that rolled back ({dropped} writes dropped)",
        phantoms.len(),
        topic.len()
    );
    assert!(
        !topic.is_empty(),
        "nothing was published: the test wrote nothing"
    );
}

#[derive(QueryableByName)]
struct Count {
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    n: i64,
}
