//! `Idempotency-Key`: a retried write answers the first response and
//! writes and publishes nothing more; the same key with another request is
//! refused; concurrent requests with one key write once; the key survives
//! a restart; expired keys are swept.

use std::time::Duration;

use diesel::prelude::*;
use diesel_async::{RunQueryDsl, SimpleAsyncConnection};
use reqwest::{Response, StatusCode};
use serde_json::{Value, json};
use uuid::Uuid;

use chatlab_persistence::schema::{chats, idempotency_keys, messages, outbox};

use crate::events::{spawn_on_tansu, wait_for_records};
use crate::support::{TestApp, assert_problem, spawn_app, spawn_app_with, spawn_on_shared};

/// `POST /v1/chats` as `users[0]` with the others as members, under `key`,
/// with the strategy and mode headers when given.
async fn keyed_chat(
    app: &TestApp,
    users: &[Uuid],
    name: &str,
    key: &str,
    headers: &[(&str, &str)],
) -> Response {
    let mut req = app
        .client
        .post(app.url("/v1/chats"))
        .header("authorization", app.bearer(users[0]))
        .header("idempotency-key", key)
        .json(&json!({ "name": name, "member_ids": &users[1..] }));
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    req.send().await.unwrap()
}

async fn chats_named(app: &TestApp, name: &str) -> i64 {
    let mut conn = app.db.connect().await;
    chats::table
        .filter(chats::name.eq(name))
        .count()
        .get_result(&mut conn)
        .await
        .unwrap()
}

async fn keys_stored(app: &TestApp) -> i64 {
    let mut conn = app.db.connect().await;
    idempotency_keys::table
        .count()
        .get_result(&mut conn)
        .await
        .unwrap()
}

/// Status, whether it is a replay, and the body's bytes.
async fn read(resp: Response) -> (u16, bool, String) {
    let status = resp.status().as_u16();
    let replayed = resp
        .headers()
        .get("idempotent-replayed")
        .is_some_and(|v| v == "true");
    (status, replayed, resp.text().await.unwrap())
}

/// A stored response whose status is not an HTTP status (the table's
/// CHECK keeps chatlab from writing one; another program, or a schema
/// before it, could) is answered as an internal error, not as a 201.
#[tokio::test]
async fn a_stored_status_that_is_not_http_is_an_internal_error_not_a_201() {
    let app = spawn_app().await;
    let users = app.bulk_users(2).await;
    let first = read(keyed_chat(&app, &users, "stored", "key-1", &[]).await).await;
    assert_eq!((first.0, first.1), (201, false));
    let mut conn = app.db.connect().await;
    conn.batch_execute(
        "ALTER TABLE idempotency_keys DROP CONSTRAINT idempotency_keys_status_check; \
         UPDATE idempotency_keys SET status = 1000",
    )
    .await
    .unwrap();
    let again = keyed_chat(&app, &users, "stored", "key-1", &[]).await;
    assert_problem(again, 500, "internal").await;
    assert_eq!(
        chats_named(&app, "stored").await,
        1,
        "nothing written again"
    );
}

#[tokio::test]
async fn a_retried_create_chat_answers_the_first_response_in_every_strategy() {
    let app = spawn_app_with(&[("CHATLAB_ALLOW_OVERRIDES", "true")]).await;
    let users = app.bulk_users(4).await;
    for strategy in ["per_row", "batch", "unnest", "single", "pipeline"] {
        let name = format!("retried {strategy}");
        let key = format!("key-{strategy}");
        let headers = [
            ("x-chatlab-insert-strategy", strategy),
            ("x-chatlab-publish-mode", "outbox"),
        ];
        let first = read(keyed_chat(&app, &users, &name, &key, &headers).await).await;
        assert_eq!((first.0, first.1), (201, false), "{strategy}: {}", first.2);
        for _ in 0..2 {
            let again = read(keyed_chat(&app, &users, &name, &key, &headers).await).await;
            assert_eq!(again, (201, true, first.2.clone()), "{strategy}");
        }
        assert_eq!(chats_named(&app, &name).await, 1, "{strategy} wrote once");
    }
    // One outbox row per chat: the replays wrote no event either.
    let mut conn = app.db.connect().await;
    let outbox_rows: i64 = outbox::table.count().get_result(&mut conn).await.unwrap();
    assert_eq!(outbox_rows, 5);
    assert_eq!(keys_stored(&app).await, 5);
    // Without a key, the same request writes again.
    for _ in 0..2 {
        let resp = app
            .post_json_as(
                users[0],
                "/v1/chats",
                &json!({ "name": "unkeyed", "member_ids": &users[1..] }),
            )
            .await;
        assert_eq!(resp.status(), StatusCode::CREATED);
    }
    assert_eq!(chats_named(&app, "unkeyed").await, 2);
}

#[tokio::test]
async fn the_same_key_with_another_request_is_refused_and_writes_nothing() {
    let app = spawn_app_with(&[]).await;
    let users = app.bulk_users(3).await;
    let first = keyed_chat(&app, &users, "first", "k1", &[]).await;
    assert_eq!(first.status(), StatusCode::CREATED);
    let before = app.row_counts().await;
    // Another body under the same key.
    let other = keyed_chat(&app, &users, "second", "k1", &[]).await;
    let problem = assert_problem(other, 422, "idempotency-key-reused").await;
    assert!(problem["detail"].as_str().unwrap().contains("new key"));
    // Another operation under the same key.
    let chat: Uuid = first.json::<Value>().await.unwrap()["id"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let message = app
        .client
        .post(app.url(&format!("/v1/chats/{chat}/messages")))
        .header("authorization", app.bearer(users[0]))
        .header("idempotency-key", "k1")
        .json(&json!({ "body": "hello" }))
        .send()
        .await
        .unwrap();
    assert_problem(message, 422, "idempotency-key-reused").await;
    assert_eq!(app.row_counts().await, before, "nothing written");
    // Keys are per user: another user's "k1" is a new key.
    let theirs = keyed_chat(&app, &[users[1], users[2]], "theirs", "k1", &[]).await;
    assert_eq!(theirs.status(), StatusCode::CREATED);
    assert_eq!(
        theirs.headers().get("idempotent-replayed"),
        None,
        "a fresh write"
    );
}

#[tokio::test]
async fn a_failed_write_keeps_no_key_and_a_malformed_key_is_refused() {
    let app = spawn_app_with(&[]).await;
    let users = app.bulk_users(2).await;
    let ghost = Uuid::now_v7();
    let failed = keyed_chat(&app, &[users[0], ghost], "room", "retry-me", &[]).await;
    assert_problem(failed, 422, "unknown-users").await;
    assert_eq!(keys_stored(&app).await, 0, "the claim rolled back");
    // The key is free: the corrected request writes.
    let fixed = keyed_chat(&app, &users, "room", "retry-me", &[]).await;
    assert_eq!(fixed.status(), StatusCode::CREATED);
    assert_eq!(keys_stored(&app).await, 1);

    let before = app.row_counts().await;
    for bad in ["", "has space", &"k".repeat(256), "tab\there"] {
        let resp = keyed_chat(&app, &users, "bad key", bad, &[]).await;
        assert_problem(resp, 400, "bad-request").await;
    }
    let twice = app
        .client
        .post(app.url("/v1/chats"))
        .header("authorization", app.bearer(users[0]))
        .header("idempotency-key", "a")
        .header("idempotency-key", "b")
        .json(&json!({ "name": "twice", "member_ids": [] }))
        .send()
        .await
        .unwrap();
    assert_problem(twice, 400, "bad-request").await;
    assert_eq!(app.row_counts().await, before, "nothing written");
}

#[tokio::test]
async fn concurrent_requests_with_one_key_write_once() {
    let app = spawn_app_with(&[("DB_POOL_MAX_SIZE", "8")]).await;
    let users = app.bulk_users(20).await;
    let requests = (0..8).map(|_| keyed_chat(&app, &users, "raced", "race", &[]));
    let answers: Vec<(u16, bool, String)> =
        futures_util::future::join_all(requests.map(|r| async { read(r.await).await })).await;
    assert_eq!(chats_named(&app, "raced").await, 1, "{answers:?}");
    let fresh: Vec<_> = answers.iter().filter(|a| a.0 == 201 && !a.1).collect();
    assert_eq!(fresh.len(), 1, "one write: {answers:?}");
    for answer in &answers {
        match answer.0 {
            // A replay is the fresh write's body, byte for byte.
            201 => assert_eq!(answer.2, fresh[0].2),
            // Waited past lock_timeout on the writer.
            409 => assert!(answer.2.contains("idempotency-key-in-flight")),
            other => panic!("unexpected {other}: {answer:?}"),
        }
    }
}

#[tokio::test]
async fn a_retried_message_is_written_once() {
    let app = spawn_app_with(&[]).await;
    let users = app.bulk_users(2).await;
    let chat = app.create_chat_ok(users[0], &users[1..]).await;
    let post = || {
        app.client
            .post(app.url(&format!("/v1/chats/{chat}/messages")))
            .header("authorization", app.bearer(users[1]))
            .header("idempotency-key", "m-1")
            .json(&json!({ "body": "only once" }))
            .send()
    };
    let first = read(post().await.unwrap()).await;
    let again = read(post().await.unwrap()).await;
    assert_eq!((first.0, first.1), (201, false));
    assert_eq!(again, (201, true, first.2.clone()));
    let mut conn = app.db.connect().await;
    let written: i64 = messages::table
        .filter(messages::body.eq("only once"))
        .count()
        .get_result(&mut conn)
        .await
        .unwrap();
    assert_eq!(written, 1);
    // A non-member's keyed message is the usual 404 and keeps no key.
    let outsider = app.bulk_users(1).await[0];
    let resp = app
        .client
        .post(app.url(&format!("/v1/chats/{chat}/messages")))
        .header("authorization", app.bearer(outsider))
        .header("idempotency-key", "m-1")
        .json(&json!({ "body": "let me in" }))
        .send()
        .await
        .unwrap();
    assert_problem(resp, 404, "not-found").await;
    assert_eq!(keys_stored(&app).await, 1, "the message's key only");
}

#[tokio::test]
async fn a_key_replays_after_a_server_restart() {
    let app = spawn_app_with(&[]).await;
    let users = app.bulk_users(3).await;
    let first = read(keyed_chat(&app, &users, "before restart", "restart-key", &[]).await).await;
    assert_eq!((first.0, first.1), (201, false));
    let db = app.db.clone();
    app.stop().await;
    drop(app);
    let restarted = spawn_on_shared(db, &[]).await;
    let again =
        read(keyed_chat(&restarted, &users, "before restart", "restart-key", &[]).await).await;
    assert_eq!(again, (201, true, first.2));
    assert_eq!(chats_named(&restarted, "before restart").await, 1);
}

#[tokio::test]
async fn expired_keys_are_swept_and_may_be_used_again() {
    let app = spawn_app_with(&[
        ("CHATLAB_IDEMPOTENCY_RETENTION_SECS", "60"),
        ("CHATLAB_IDEMPOTENCY_SWEEP_SECS", "1"),
    ])
    .await;
    let users = app.bulk_users(2).await;
    for key in ["old-1", "old-2", "young"] {
        let resp = keyed_chat(&app, &users, key, key, &[]).await;
        assert_eq!(resp.status(), StatusCode::CREATED);
    }
    // Age two keys past the retention.
    let mut conn = app.db.connect().await;
    conn.batch_execute(
        "UPDATE idempotency_keys SET created_at = now() - interval '2 minutes' \
         WHERE key IN ('old-1', 'old-2')",
    )
    .await
    .unwrap();
    // An expired key is taken over by a new request at once, sweep or not.
    let reused = read(keyed_chat(&app, &users, "old-1 again", "old-1", &[]).await).await;
    assert_eq!((reused.0, reused.1), (201, false), "{}", reused.2);
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let left: Vec<String> = idempotency_keys::table
            .select(idempotency_keys::key)
            .order(idempotency_keys::key)
            .load(&mut conn)
            .await
            .unwrap();
        if left == ["old-1", "young"] {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the sweep left {left:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn a_retry_publishes_no_second_event_in_any_mode() {
    let (app, brokers, topic) = spawn_on_tansu().await;
    let users = app.bulk_users(3).await;
    let modes = ["in_tx_await", "in_tx_enqueue", "after_commit", "outbox"];
    let mut chat_ids = Vec::new();
    for mode in modes {
        let headers = [("x-chatlab-publish-mode", mode)];
        let key = format!("event-{mode}");
        let first = keyed_chat(&app, &users, mode, &key, &headers).await;
        assert_eq!(first.status(), StatusCode::CREATED);
        let body: Value = first.json().await.unwrap();
        chat_ids.push(body["id"].as_str().unwrap().to_owned());
        let again = read(keyed_chat(&app, &users, mode, &key, &headers).await).await;
        assert_eq!((again.0, again.1), (201, true), "{mode}");
    }
    wait_for_records(&app, &brokers, &topic, modes.len()).await;
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    let records = wait_for_records(&app, &brokers, &topic, modes.len()).await;
    assert_eq!(
        records.len(),
        modes.len(),
        "one event per chat, none for the retries"
    );
    for id in &chat_ids {
        let events = records
            .iter()
            .filter(|r| r.key.as_deref() == Some(id.as_str()))
            .count();
        assert_eq!(events, 1, "chat {id}");
    }
}

/// `POST` an import under `key`.
async fn keyed_import(app: &TestApp, owner: Uuid, path: &str, key: &str, body: &Value) -> Response {
    app.client
        .post(app.url(path))
        .header("authorization", app.bearer(owner))
        .header("idempotency-key", key)
        .json(body)
        .send()
        .await
        .unwrap()
}

#[tokio::test]
async fn a_retried_import_writes_only_the_chunks_that_did_not_commit() {
    let app = spawn_app_with(&[]).await;
    let users = app.bulk_users(31).await;
    let owner = users[0];
    // users[7] is a member already: the import stops at its chunk.
    let chat = app.create_chat_ok(owner, &[users[7]]).await;
    let path = format!("/v1/chats/{chat}/members/import");
    let body = json!({ "user_ids": &users[1..], "chunk_size": 5, "parallelism": 1 });
    let stopped = keyed_import(&app, owner, &path, "import-1", &body).await;
    let problem = assert_problem(stopped, 409, "import-stopped").await;
    assert_eq!(problem["rows_written"], 5, "{problem}");
    // Without removing the clash a retry stops at the same chunk, and the
    // first chunk is not written twice (it would be a 409 at chunk 0).
    let again = keyed_import(&app, owner, &path, "import-1", &body).await;
    let problem = assert_problem(again, 409, "import-stopped").await;
    assert_eq!(problem["failed_chunk"]["index"], 1, "{problem}");
    // Clear the clash; the retry writes the remaining chunks only.
    let removed = app
        .client
        .delete(app.url(&format!("/v1/chats/{chat}/members/{}", users[7])))
        .header("authorization", app.bearer(owner))
        .send()
        .await
        .unwrap();
    assert_eq!(removed.status(), StatusCode::NO_CONTENT);
    let done = read(keyed_import(&app, owner, &path, "import-1", &body).await).await;
    assert_eq!((done.0, done.1), (201, false), "{}", done.2);
    let report: Value = serde_json::from_str(&done.2).unwrap();
    assert_eq!(report["rows_written"], 30);
    // The finished job answers the same again, and writes nothing.
    let replay = read(keyed_import(&app, owner, &path, "import-1", &body).await).await;
    assert_eq!(replay, (201, true, done.2.clone()));
    let members = app
        .get_as(owner, &format!("/v1/chats/{chat}"))
        .await
        .json::<Value>()
        .await
        .unwrap();
    assert_eq!(members["member_count"], 31);

    // Messages: the retry of a finished import writes no second copy.
    let path = format!("/v1/chats/{chat}/messages/import");
    let messages: Vec<Value> = (0..12)
        .map(|i| json!({ "sender_id": owner, "body": format!("imported {i}") }))
        .collect();
    let body = json!({ "messages": messages, "chunk_size": 5, "parallelism": 2 });
    for _ in 0..2 {
        let resp = keyed_import(&app, owner, &path, "import-2", &body).await;
        assert_eq!(resp.status(), StatusCode::CREATED);
    }
    let mut conn = app.db.connect().await;
    let imported: i64 = messages::table
        .filter(messages::body.like("imported %"))
        .count()
        .get_result(&mut conn)
        .await
        .unwrap();
    assert_eq!(imported, 12);
    // The same key for another import is refused before any chunk runs.
    let other = json!({ "messages": [{ "sender_id": owner, "body": "x" }] });
    let refused = keyed_import(&app, owner, &path, "import-2", &other).await;
    assert_problem(refused, 422, "idempotency-key-reused").await;
}
