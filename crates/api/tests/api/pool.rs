//! The pool under pressure, and the database gone.

use std::time::Duration;

use diesel_async::SimpleAsyncConnection;
use reqwest::StatusCode;

use crate::support::{assert_problem, sample, spawn_app_with, spawn_on};

/// With one connection held by a blocked createChat, the next request
/// waits the acquire timeout and gets 503 with Retry-After; the blocked one
/// completes once the lock is gone.
#[tokio::test]
async fn an_exhausted_pool_answers_503_with_retry_after() {
    let app = spawn_app_with(&[
        ("DB_POOL_MAX_SIZE", "1"),
        ("DB_POOL_ACQUIRE_TIMEOUT_MS", "300"),
    ])
    .await;
    let user = app.create_user("a").await;

    let mut locker = app.db.connect().await;
    locker
        .batch_execute("BEGIN; LOCK TABLE chats IN ACCESS EXCLUSIVE MODE;")
        .await
        .unwrap();
    let blocked = {
        let client = app.client.clone();
        let url = app.url("/v1/chats");
        let bearer = app.bearer(user);
        tokio::spawn(async move {
            client
                .post(url)
                .header("authorization", bearer)
                .json(&serde_json::json!({"name": "r"}))
                .send()
                .await
                .unwrap()
                .status()
        })
    };
    // Wait until the blocked request holds the only connection.
    let mut held = false;
    for _ in 0..100 {
        let m = app.metrics().await;
        if sample(
            &m,
            "db_client_connection_count{db_client_connection_state=\"used\"}",
        ) == Some(1.0)
        {
            held = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(held, "the createChat never took the connection");

    let resp = app.get_as(user, &format!("/v1/users/{user}")).await;
    assert_eq!(resp.headers()["retry-after"], "1");
    assert_problem(resp, 503, "unavailable").await;
    let m = app.metrics().await;
    assert_eq!(sample(&m, "db_client_connection_timeouts_total"), Some(1.0));
    assert_eq!(
        sample(&m, "db_client_connection_pending_requests"),
        Some(0.0)
    );

    locker.batch_execute("COMMIT").await.unwrap();
    assert_eq!(blocked.await.unwrap(), StatusCode::CREATED);
}

/// With the database unreachable the process keeps serving: liveness is
/// fine, readiness and data endpoints answer 503.
#[tokio::test]
async fn an_unreachable_database_gives_503_not_a_crash() {
    let db = chatlab_testdb::TestDb::new().await;
    // A port nothing listens on: bind one, then let it go.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dead_url = format!("postgres://postgres@127.0.0.1:{port}/nowhere");
    let app = spawn_on(
        db,
        &[
            ("DATABASE_URL", dead_url.as_str()),
            ("DB_RUN_MIGRATIONS", "false"),
            ("DB_POOL_ACQUIRE_TIMEOUT_MS", "300"),
        ],
    )
    .await;
    assert_eq!(app.get("/healthz").await.status(), StatusCode::OK);
    assert_problem(app.get("/readyz").await, 503, "unavailable").await;
    let resp = app
        .post_json("/v1/users", &serde_json::json!({"name": "a"}))
        .await;
    let body = assert_problem(resp, 503, "unavailable").await;
    // Told apart from a busy pool by what failed (a connect), on either
    // driver: not "no connection became free in time".
    assert_eq!(
        body["detail"], "the database could not be reached; retry shortly",
        "{body}"
    );
}

/// `DB_POOL=off`: each request opens its own connection (counted, timed)
/// and closes it. When PostgreSQL refuses one (here the test's own role is
/// at its `CONNECTION LIMIT`), the request answers 503 problem+json, the
/// refusal is counted, and the server serves again once a slot frees up.
#[tokio::test]
async fn unpooled_requests_open_a_connection_each_and_answer_503_when_refused() {
    let db = chatlab_testdb::TestDb::new().await;
    let role = db.role_name();
    let mut admin = db.connect().await;
    admin
        .batch_execute(&format!(
            "DROP ROLE IF EXISTS {role}; \
             CREATE ROLE {role} LOGIN CONNECTION LIMIT 3; \
             GRANT CONNECT ON DATABASE {db} TO {role}; \
             GRANT USAGE ON SCHEMA public TO {role}; \
             GRANT ALL ON ALL TABLES IN SCHEMA public TO {role}; \
             GRANT ALL ON ALL SEQUENCES IN SCHEMA public TO {role};",
            db = db.name()
        ))
        .await
        .unwrap();
    let role_url =
        chatlab_testdb::with_database(&as_user(&chatlab_testdb::server_url(), &role), db.name());
    let app = spawn_on(
        db,
        &[
            ("DATABASE_URL", role_url.as_str()),
            ("DB_POOL", "off"),
            ("DB_RUN_MIGRATIONS", "false"),
            ("KAFKA_PUBLISH_MODE", "off"),
        ],
    )
    .await;
    let opens =
        |m: &str| sample(m, "db_client_connection_create_time_seconds_count").unwrap_or(0.0);

    let user = app.create_user("a").await;
    let before = opens(&app.metrics().await);
    for _ in 0..3 {
        assert_eq!(
            app.get_as(user, &format!("/v1/users/{user}"))
                .await
                .status(),
            StatusCode::OK
        );
    }
    let m = app.metrics().await;
    assert_eq!(opens(&m) - before, 3.0, "one open per request");
    assert_eq!(
        sample(
            &m,
            "db_client_connection_count{db_client_connection_state=\"used\"}"
        ),
        Some(0.0)
    );
    assert_eq!(sample(&m, "db_client_connection_max"), Some(0.0));

    // Take every connection the role has left (the outbox relay may hold
    // one of the three).
    let mut held = Vec::new();
    for _ in 0..5 {
        match <diesel_async::AsyncPgConnection as diesel_async::AsyncConnection>::establish(
            &role_url,
        )
        .await
        {
            Ok(conn) => held.push(conn),
            Err(e) => {
                assert!(e.to_string().contains("too many connections"), "{e}");
                break;
            }
        }
    }
    assert!(held.len() <= 3, "the role's limit did not hold");

    let resp = app.get_as(user, &format!("/v1/users/{user}")).await;
    assert_eq!(resp.headers()["retry-after"], "1");
    assert_problem(resp, 503, "unavailable").await;
    let resp = app
        .post_json("/v1/users", &serde_json::json!({"name": "b"}))
        .await;
    assert_problem(resp, 503, "unavailable").await;
    let m = app.metrics().await;
    assert!(sample(&m, "db_client_connection_open_failures_total").unwrap_or(0.0) >= 2.0);
    assert_eq!(app.get("/healthz").await.status(), StatusCode::OK);

    drop(held);
    let mut served = false;
    for _ in 0..50 {
        if app
            .get_as(user, &format!("/v1/users/{user}"))
            .await
            .status()
            == StatusCode::OK
        {
            served = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        served,
        "the server did not recover once connections were free"
    );
}

/// `url` with its user replaced by `user` (and no password: the tests'
/// PostgreSQL trusts loopback connections).
fn as_user(url: &str, user: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let host_start = rest.find('@').filter(|at| rest[..*at].find('/').is_none());
    let host = host_start.map_or(rest, |at| &rest[at + 1..]);
    format!("{scheme}://{user}@{host}")
}

/// A database server that accepts connections and never answers (a hung
/// host behind a load balancer): every request still answers 503 within
/// the acquire timeout, pooled or not, instead of waiting forever (an
/// unpooled open had no bound at all) or twice as long (the FIFO queue's
/// wait, then bb8's own full timeout).
#[tokio::test]
async fn a_database_that_never_answers_costs_at_most_the_acquire_timeout() {
    // The kernel completes the TCP handshake for the backlog; nothing reads.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!(
        "postgres://postgres@127.0.0.1:{}/silent",
        silent.local_addr().unwrap().port()
    );
    for pooling in ["on", "off"] {
        let app = spawn_app_with(&[
            ("DATABASE_URL", url.as_str()),
            ("DB_RUN_MIGRATIONS", "false"),
            ("DB_POOL", pooling),
            ("DB_POOL_ACQUIRE_TIMEOUT_MS", "500"),
        ])
        .await;
        let someone = uuid::Uuid::now_v7();
        let resp = app
            .client
            .get(app.url(&format!("/v1/users/{someone}")))
            .header("authorization", app.bearer(someone))
            .timeout(Duration::from_secs(10))
            .send()
            .await
            .unwrap_or_else(|e| panic!("DB_POOL={pooling}: no answer within 10 s: {e}"));
        assert_problem(resp, 503, "unavailable").await;
    }
}
