//! A pooled connection whose session the database ended while it sat idle
//! (`pg_terminate_backend`, a restart) is not handed out again once the
//! driver has seen its socket close, even with the default `fast` check,
//! which sends nothing to the database. Found by `make fault-db`: after a
//! terminate, a request met a dead idle connection of another worker's
//! slice and answered 503 although the database had long been back.

use std::time::{Duration, Instant};

use diesel::sql_types::Integer;
use diesel::{QueryableByName, sql_query};
use diesel_async::RunQueryDsl;
use futures_util::FutureExt as _;
use prometheus_client::registry::Registry;

use chatlab_persistence::database::pool_metrics::PoolMetrics;
use chatlab_persistence::{Database, DbConfig, Driver, PersistenceError, Recycle};
use chatlab_testdb::TestDb;

#[derive(QueryableByName)]
struct Pid {
    #[diesel(sql_type = Integer)]
    pid: i32,
}

/// The backend pid of the connection a unit of work is given.
async fn backend_pid(db: &Database) -> Result<i32, PersistenceError> {
    db.run(|s| {
        async move {
            let row: Pid = s
                .get_result(sql_query("SELECT pg_backend_pid() AS pid"))
                .await?;
            Ok::<_, PersistenceError>(row.pid)
        }
        .boxed()
    })
    .await
}

#[tokio::test]
async fn a_session_ended_while_idle_is_not_handed_out_again() {
    let test_db = TestDb::new().await;
    // The async driver: the blocking one cannot tell a closed socket
    // without a round trip.
    let config = DbConfig {
        driver: Driver::Async,
        pool_max_size: 1,
        recycle: Recycle::Fast,
        ..test_db.config()
    };
    let db = Database::new(&config, PoolMetrics::register(&mut Registry::default()));
    let first = backend_pid(&db).await.expect("a first unit of work");

    // End the idle connection's session and wait until it is gone.
    let mut admin = test_db.connect().await;
    sql_query(format!("SELECT pg_terminate_backend({first})"))
        .execute(&mut admin)
        .await
        .expect("terminate the pooled session");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let left: Vec<Pid> = sql_query(format!(
            "SELECT pid FROM pg_stat_activity WHERE pid = {first}"
        ))
        .load(&mut admin)
        .await
        .expect("look for the ended session");
        if left.is_empty() {
            break;
        }
        assert!(Instant::now() < deadline, "the session never ended");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Let the driver's connection task read the close, as a server's
    // runtime does between requests.
    tokio::time::sleep(Duration::from_millis(50)).await;

    let second = backend_pid(&db)
        .await
        .expect("the unit after the fault runs on a live connection");
    assert_ne!(second, first, "a new session, not the ended one");
}
