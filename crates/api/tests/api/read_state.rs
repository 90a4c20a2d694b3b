//! Read markers and the caller's chats over HTTP, in both fan-outs.

use reqwest::StatusCode;
use serde_json::{Value, json};
use uuid::Uuid;

use crate::support::{TestApp, assert_problem, spawn_app, spawn_app_with, spawn_on_shared};

async fn send_id(app: &TestApp, chat: Uuid, sender: Uuid, body: &str) -> Uuid {
    let resp = app.send_message(chat, sender, body).await;
    assert_eq!(resp.status(), StatusCode::CREATED);
    let body: Value = resp.json().await.unwrap();
    body["id"].as_str().unwrap().parse().unwrap()
}

async fn mark(app: &TestApp, user: Uuid, chat: Uuid, up_to: &Value) -> reqwest::Response {
    app.post_json_as(
        user,
        &format!("/v1/chats/{chat}/read"),
        &json!({ "up_to": up_to }),
    )
    .await
}

/// The same history read through both fan-outs, chosen per request: a
/// member's unread count, its move with the marker, and the chat list.
#[tokio::test]
async fn unread_counts_follow_the_marker_in_both_fanouts() {
    let app = spawn_app_with(&[("CHATLAB_ALLOW_OVERRIDES", "true")]).await;
    let users = app.bulk_users(2).await;
    for fanout in ["none", "inbox"] {
        let chat = app.create_chat_ok(users[0], &users[1..]).await;
        let mut sent = Vec::new();
        for i in 0..3 {
            let resp = app
                .client
                .post(app.url(&format!("/v1/chats/{chat}/messages")))
                .header("authorization", app.bearer(users[0]))
                .header("x-chatlab-message-fanout", fanout)
                .json(&json!({ "body": format!("m{i}") }))
                .send()
                .await
                .unwrap();
            assert_eq!(resp.status(), StatusCode::CREATED);
            assert_eq!(resp.headers()["x-chatlab-message-fanout"], fanout);
            let body: Value = resp.json().await.unwrap();
            sent.push(body["id"].as_str().unwrap().to_owned());
        }
        let reader = users[1];
        let read_state = |path: String| {
            let app = &app;
            async move {
                let resp = app
                    .client
                    .get(app.url(&path))
                    .header("authorization", app.bearer(reader))
                    .header("x-chatlab-message-fanout", fanout)
                    .send()
                    .await
                    .unwrap();
                assert_eq!(resp.status(), StatusCode::OK);
                resp.json::<Value>().await.unwrap()
            }
        };
        let before = read_state(format!("/v1/me/chats/{chat}")).await;
        assert_eq!(before["unread_count"], 3, "{fanout}");
        assert!(before["read_up_to"].is_null());
        let resp = app
            .client
            .post(app.url(&format!("/v1/chats/{chat}/read")))
            .header("authorization", app.bearer(users[1]))
            .header("x-chatlab-message-fanout", fanout)
            .json(&json!({ "up_to": sent[1] }))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::OK);
        let after: Value = resp.json().await.unwrap();
        assert_eq!(after["unread_count"], 1, "{fanout}");
        assert_eq!(after["read_up_to"], sent[1]);
        let list = read_state("/v1/me/chats".to_owned()).await;
        let this = list["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["chat_id"] == chat.to_string())
            .unwrap();
        assert_eq!(this["unread_count"], 1);
        assert_eq!(this["last_message"]["body"], "m2");
        // The newest chat comes first.
        assert_eq!(list["items"][0]["chat_id"], chat.to_string());
    }
}

#[tokio::test]
async fn a_marker_never_moves_back() {
    let app = spawn_app().await;
    let users = app.bulk_users(2).await;
    let chat = app.create_chat_ok(users[0], &users[1..]).await;
    let first = send_id(&app, chat, users[0], "one").await;
    let second = send_id(&app, chat, users[0], "two").await;
    let ahead = mark(&app, users[1], chat, &json!(second)).await;
    assert_eq!(ahead.status(), StatusCode::OK);
    let back = mark(&app, users[1], chat, &json!(first)).await;
    assert_eq!(back.status(), StatusCode::OK);
    let state: Value = back.json().await.unwrap();
    assert_eq!(state["read_up_to"], second.to_string());
    assert_eq!(state["unread_count"], 0);
}

/// Bad input gets a problem document and moves nothing.
#[tokio::test]
async fn bad_markers_are_refused_and_change_nothing() {
    let app = spawn_app().await;
    let users = app.bulk_users(3).await;
    let chat = app.create_chat_ok(users[0], &users[1..2]).await;
    let other = app.create_chat_ok(users[0], &users[1..2]).await;
    let message = send_id(&app, chat, users[0], "hello").await;
    let foreign = send_id(&app, other, users[0], "elsewhere").await;

    let body = assert_problem(
        mark(&app, users[1], chat, &json!(foreign)).await,
        422,
        "validation",
    )
    .await;
    assert_eq!(body["errors"][0]["field"], "up_to");
    let unknown = Uuid::now_v7();
    assert_problem(
        mark(&app, users[1], chat, &json!(unknown)).await,
        422,
        "validation",
    )
    .await;
    // A non-member, and a chat that does not exist: the same 404.
    assert_problem(
        mark(&app, users[2], chat, &json!(message)).await,
        404,
        "not-found",
    )
    .await;
    assert_problem(
        mark(&app, users[1], Uuid::now_v7(), &json!(message)).await,
        404,
        "not-found",
    )
    .await;
    // Malformed bodies.
    assert_problem(
        mark(&app, users[1], chat, &json!("not a uuid")).await,
        400,
        "bad-request",
    )
    .await;
    let extra = app
        .post_json_as(
            users[1],
            &format!("/v1/chats/{chat}/read"),
            &json!({ "up_to": message, "x": 1 }),
        )
        .await;
    assert_problem(extra, 400, "bad-request").await;
    // Without credentials.
    let anonymous = app
        .post_json(
            &format!("/v1/chats/{chat}/read"),
            &json!({ "up_to": message }),
        )
        .await;
    assert_problem(anonymous, 401, "unauthorized").await;
    // A fan-out named while overrides are off is refused, not ignored.
    let named = app
        .client
        .get(app.url("/v1/me/chats"))
        .header("authorization", app.bearer(users[1]))
        .header("x-chatlab-message-fanout", "inbox")
        .send()
        .await
        .unwrap();
    assert_problem(named, 400, "bad-request").await;

    let state: Value = app
        .get_as(users[1], &format!("/v1/me/chats/{chat}"))
        .await
        .json()
        .await
        .unwrap();
    assert!(state["read_up_to"].is_null(), "nothing moved: {state}");
    assert_eq!(state["unread_count"], 1);
    let outsider = app.get_as(users[2], &format!("/v1/me/chats/{chat}")).await;
    assert_problem(outsider, 404, "not-found").await;
    let limit = app.get_as(users[1], "/v1/me/chats?limit=0").await;
    assert_problem(limit, 422, "validation").await;
}

/// The member's marker as the database has it.
async fn stored_marker(app: &TestApp, chat: Uuid, user: Uuid) -> Option<Uuid> {
    use chatlab_persistence::schema::chat_members;
    use diesel::prelude::*;
    use diesel_async::RunQueryDsl;
    let mut conn = app.db.connect().await;
    chat_members::table
        .filter(chat_members::chat_id.eq(chat))
        .filter(chat_members::user_id.eq(user))
        .select(chat_members::read_up_to)
        .first(&mut conn)
        .await
        .unwrap()
}

/// Polls the database (every 50 ms, 10 s at most) until the member's
/// marker is `expected`.
async fn until_stored(app: &TestApp, chat: Uuid, user: Uuid, expected: Uuid) {
    for _ in 0..200 {
        if stored_marker(app, chat, user).await == Some(expected) {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("marker {expected} never written");
}

/// `READ_MARKER_MODE=coalesced`: the move is answered at once and written
/// by the next flush; a server that stops writes what it holds first.
#[tokio::test]
async fn coalesced_markers_are_written_by_the_flush_and_at_shutdown() {
    let app = spawn_app_with(&[
        ("READ_MARKER_MODE", "coalesced"),
        ("READ_MARKER_FLUSH_MS", "100"),
    ])
    .await;
    let users = app.bulk_users(2).await;
    let chat = app.create_chat_ok(users[0], &users[1..]).await;
    let first = send_id(&app, chat, users[0], "one").await;
    let resp = mark(&app, users[1], chat, &json!(first)).await;
    assert_eq!(resp.status(), StatusCode::OK);
    let state: Value = resp.json().await.unwrap();
    assert_eq!(
        (&state["read_up_to"], &state["unread_count"]),
        (&json!(first), &json!(0))
    );
    until_stored(&app, chat, users[1], first).await;
    let metrics = app.metrics().await;
    assert!(
        metrics.contains("chatlab_read_marker_moves_held_total 1"),
        "{metrics}"
    );

    // A window longer than the test: only the stop writes it.
    let slow = spawn_on_shared(
        app.db.clone(),
        &[
            ("READ_MARKER_MODE", "coalesced"),
            ("READ_MARKER_FLUSH_MS", "60000"),
        ],
    )
    .await;
    let second = send_id(&slow, chat, users[0], "two").await;
    let resp = mark(&slow, users[1], chat, &json!(second)).await;
    assert_eq!(resp.status(), StatusCode::OK);
    // Its first tick flushed at startup, before the move: held since.
    assert_eq!(stored_marker(&slow, chat, users[1]).await, Some(first));
    slow.stop().await;
    until_stored(&app, chat, users[1], second).await;
}

/// `READ_MARKER_MODE=log`: the move is one log row, seen at once by
/// another instance (here one in `direct` mode on the same database), and
/// folded into the member row by the compaction.
#[tokio::test]
async fn logged_markers_are_read_at_once_everywhere_and_compacted() {
    let app = spawn_app_with(&[
        ("READ_MARKER_MODE", "log"),
        ("READ_MARKER_FLUSH_MS", "60000"),
    ])
    .await;
    let users = app.bulk_users(2).await;
    let chat = app.create_chat_ok(users[0], &users[1..]).await;
    let first = send_id(&app, chat, users[0], "one").await;
    let second = send_id(&app, chat, users[0], "two").await;
    let resp = mark(&app, users[1], chat, &json!(first)).await;
    assert_eq!(resp.status(), StatusCode::OK);
    let state: Value = resp.json().await.unwrap();
    assert_eq!(
        (&state["read_up_to"], &state["unread_count"]),
        (&json!(first), &json!(1))
    );
    // Its first compaction ran at startup, before the move: the member
    // row has nothing yet, and another instance reads the log.
    assert_eq!(stored_marker(&app, chat, users[1]).await, None);
    let other = spawn_on_shared(app.db.clone(), &[("READ_MARKER_FLUSH_MS", "100")]).await;
    let seen: Value = other
        .get_as(users[1], &format!("/v1/me/chats/{chat}"))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        (&seen["read_up_to"], &seen["unread_count"]),
        (&json!(first), &json!(1))
    );
    let resp = mark(&app, users[1], chat, &json!(second)).await;
    assert_eq!(resp.status(), StatusCode::OK);
    // A compaction at the stop folds both moves into the member row.
    app.stop().await;
    until_stored(&other, chat, users[1], second).await;
    let listed: Value = other
        .get_as(users[1], "/v1/me/chats")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(listed["items"][0]["unread_count"], json!(0), "{listed}");
}
