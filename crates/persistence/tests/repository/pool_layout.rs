//! The pool's layouts, with threads standing in for the server's workers
//! (each a single-threaded runtime, as an actix worker is): `per_worker`
//! runs a worker's units of work on the worker's own thread, out of its own
//! slice, and counts a wait in one slice while another has a free
//! connection; `shared` runs every unit on the runtime that built the pool,
//! whatever thread asked.

use std::thread::ThreadId;
use std::time::{Duration, Instant};

use futures_util::FutureExt as _;
use prometheus_client::encoding::text::encode;
use prometheus_client::registry::Registry;
use tokio::sync::{mpsc, oneshot};

use chatlab_persistence::database::pool_metrics::PoolMetrics;
use chatlab_persistence::{Database, DbConfig, Driver, PersistenceError, PoolLayout};
use chatlab_testdb::TestDb;

/// What a worker thread is asked to do: run a unit of work that holds its
/// connection until `release` fires, and answer the thread it ran on and
/// how long it waited for its connection.
struct Job {
    release: oneshot::Receiver<()>,
    started: oneshot::Sender<()>,
    done: oneshot::Sender<(ThreadId, Duration)>,
}

/// A thread with a single-threaded runtime that adopts a slice of `db`,
/// then runs the jobs it is sent; answers its thread id and slice.
fn worker(db: Database) -> (mpsc::UnboundedSender<Job>, ThreadId, Option<usize>) {
    let (jobs, mut received) = mpsc::unbounded_channel::<Job>();
    let (ready, adopted) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let slice = db.adopt_slice();
            ready.send((std::thread::current().id(), slice)).unwrap();
            while let Some(job) = received.recv().await {
                let db = db.clone();
                tokio::spawn(async move {
                    let asked = Instant::now();
                    let Job {
                        release,
                        started,
                        done,
                    } = job;
                    let ran = db
                        .run(move |s| {
                            async move {
                                let waited = asked.elapsed();
                                let _ = started.send(());
                                s.execute(diesel::sql_query("SELECT 1")).await?;
                                let _ = release.await;
                                Ok::<_, PersistenceError>((std::thread::current().id(), waited))
                            }
                            .boxed()
                        })
                        .await
                        .unwrap();
                    let _ = done.send(ran);
                });
            }
        });
    });
    let (thread, slice) = adopted.recv().unwrap();
    (jobs, thread, slice)
}

/// Sends a job; answers its release, its start and its outcome.
fn send(
    jobs: &mpsc::UnboundedSender<Job>,
) -> (
    oneshot::Sender<()>,
    oneshot::Receiver<()>,
    oneshot::Receiver<(ThreadId, Duration)>,
) {
    let (release, release_rx) = oneshot::channel();
    let (started_tx, started) = oneshot::channel();
    let (done_tx, done) = oneshot::channel();
    jobs.send(Job {
        release: release_rx,
        started: started_tx,
        done: done_tx,
    })
    .unwrap();
    (release, started, done)
}

fn database(db: &TestDb, layout: PoolLayout, registry: &mut Registry) -> Database {
    // The async driver whatever the suite's: the blocking one runs every
    // unit on a thread of its blocking pool, in either layout.
    let config = DbConfig {
        driver: Driver::Async,
        layout,
        workers: 2,
        pool_max_size: 2,
        ..db.config()
    };
    Database::new(&config, PoolMetrics::register(registry))
}

fn sample(registry: &Registry, name: &str) -> f64 {
    let mut text = String::new();
    encode(&mut text, registry).unwrap();
    chatlab_testdb::sample(&text, name).unwrap_or_else(|| panic!("no {name} in\n{text}"))
}

fn imbalanced_waits(registry: &Registry) -> f64 {
    sample(registry, "db_client_connection_imbalanced_waits_total")
}

#[tokio::test]
async fn per_worker_keeps_each_workers_work_on_its_thread_and_in_its_slice() {
    let test_db = TestDb::new().await;
    let mut registry = Registry::default();
    let db = database(&test_db, PoolLayout::PerWorker, &mut registry);
    assert_eq!(db.slice_sizes(), [1, 1]);
    let (first, first_thread, first_slice) = worker(db.clone());
    let (second, second_thread, second_slice) = worker(db.clone());
    assert_eq!((first_slice, second_slice), (Some(0), Some(1)));

    // The first worker's one connection is held...
    let (release_a, started_a, done_a) = send(&first);
    started_a.await.unwrap();
    // ...so its next unit waits, though the second worker's is free.
    let (release_b, mut started_b, done_b) = send(&first);
    let deadline = Instant::now() + Duration::from_secs(10);
    while sample(&registry, "db_client_connection_pending_requests") < 1.0 {
        assert!(Instant::now() < deadline, "the second unit waits");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let (release_c, started_c, done_c) = send(&second);
    tokio::time::timeout(Duration::from_secs(10), started_c)
        .await
        .expect("the second worker's unit starts at once, on its own slice")
        .unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        started_b.try_recv().is_err(),
        "the first worker's second unit waits for the first worker's slice"
    );
    release_c.send(()).unwrap();
    release_a.send(()).unwrap();
    release_b.send(()).unwrap();

    let (thread_a, _) = done_a.await.unwrap();
    let (thread_b, waited_b) = done_b.await.unwrap();
    let (thread_c, waited_c) = done_c.await.unwrap();
    assert_eq!(
        (thread_a, thread_b),
        (first_thread, first_thread),
        "on the worker's own thread"
    );
    assert_eq!(thread_c, second_thread);
    assert!(waited_b >= Duration::from_millis(200), "{waited_b:?}");
    assert!(waited_c < waited_b, "{waited_c:?} vs {waited_b:?}");
    assert_eq!(
        imbalanced_waits(&registry),
        1.0,
        "one wait while another slice had a free connection"
    );
}

#[tokio::test]
async fn shared_runs_every_unit_on_the_pools_runtime_and_lends_any_idle_connection() {
    let test_db = TestDb::new().await;
    let mut registry = Registry::default();
    // Built on a runtime of its own, as the server's main runtime.
    let home = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let home_thread = home
        .spawn(async { std::thread::current().id() })
        .await
        .unwrap();
    let db = {
        let _entered = home.enter();
        database(&test_db, PoolLayout::Shared, &mut registry)
    };
    assert_eq!(db.slice_sizes(), [2]);
    let (first, first_thread, slice) = worker(db.clone());
    assert_eq!(slice, None, "nothing to adopt in the shared layout");

    let (release_a, started_a, done_a) = send(&first);
    started_a.await.unwrap();
    // The pool's second connection serves the same worker's next unit.
    let (release_b, started_b, done_b) = send(&first);
    tokio::time::timeout(Duration::from_secs(10), started_b)
        .await
        .expect("a second connection of the one pool")
        .unwrap();
    release_a.send(()).unwrap();
    release_b.send(()).unwrap();
    for done in [done_a, done_b] {
        let (thread, _) = done.await.unwrap();
        assert_ne!(thread, first_thread, "handed off to the pool's runtime");
        assert_eq!(thread, home_thread);
    }
    assert_eq!(imbalanced_waits(&registry), 0.0);
    drop(db);
    home.shutdown_background();
}
