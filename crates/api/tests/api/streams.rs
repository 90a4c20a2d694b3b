//! What live streams may cost, and the cursors they resume from, on the
//! embedded broker: a user holds at most `LIVE_MAX_STREAMS_PER_USER`
//! streams and an instance `LIVE_MAX_STREAMS`, each beyond answered 429;
//! a token's user must exist; a cursor past the end of the topic, or from
//! the topic's life before a restart, starts with a `reset`.

use std::time::Duration;

use reqwest::StatusCode;
use uuid::Uuid;

use crate::live::Subscriber;
use crate::support::{TestApp, assert_problem, spawn_app_with, spawn_on_shared};

/// `GET /v1/events` as `user`: the response (a stream while it is kept).
async fn open_events(app: &TestApp, user: Uuid) -> reqwest::Response {
    app.client
        .get(app.url("/v1/events"))
        .header("authorization", app.bearer(user))
        .send()
        .await
        .unwrap()
}

/// A WebSocket handshake as `user`: the status it is answered.
async fn open_ws_status(app: &TestApp, user: Uuid) -> u16 {
    use tokio_tungstenite::tungstenite::Error;
    use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;
    let url = app.url("/v1/ws").replacen("http://", "ws://", 1);
    let mut request = url.into_client_request().unwrap();
    request
        .headers_mut()
        .insert("authorization", app.bearer(user).parse().unwrap());
    match tokio_tungstenite::connect_async(request).await {
        Ok((_socket, response)) => response.status().as_u16(),
        Err(Error::Http(response)) => response.status().as_u16(),
        Err(e) => panic!("handshake: {e}"),
    }
}

/// Asserts a 429 problem with a `Retry-After` and `Connection: close`;
/// returns its detail.
async fn assert_too_many_streams(resp: reqwest::Response) -> String {
    let retry_after: u64 = resp
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
        .expect("a Retry-After in seconds");
    assert!(retry_after >= 1, "Retry-After: {retry_after}");
    let connection = resp
        .headers()
        .get("connection")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    assert_eq!(connection, "close");
    let problem = assert_problem(resp, 429, "too-many-streams").await;
    problem["detail"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn one_user_holds_at_most_its_streams_and_the_api_keeps_answering() {
    let app = spawn_app_with(&[
        ("LIVE_MAX_STREAMS_PER_USER", "2"),
        ("LIVE_HEARTBEAT_SECS", "1"),
    ])
    .await;
    let users = app.bulk_users(2).await;
    let (ada, bob) = (users[0], users[1]);
    let first = open_events(&app, ada).await;
    let second = open_events(&app, ada).await;
    assert_eq!(
        (first.status(), second.status()),
        (StatusCode::OK, StatusCode::OK)
    );
    let detail = assert_too_many_streams(open_events(&app, ada).await).await;
    assert!(detail.contains("LIVE_MAX_STREAMS_PER_USER"), "{detail}");
    assert_eq!(open_ws_status(&app, ada).await, 429, "the WebSocket too");
    // Another user, and the API, are untouched.
    let bobs = open_events(&app, bob).await;
    assert_eq!(bobs.status(), StatusCode::OK);
    assert_eq!(app.get("/healthz").await.status(), StatusCode::OK);
    app.create_user("still answered").await;
    // Once a stream ends, its place is free again (the server notices a
    // client gone at a heartbeat).
    drop(first);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    let third = loop {
        let resp = open_events(&app, ada).await;
        if resp.status() == StatusCode::OK {
            break resp;
        }
        assert_eq!(resp.status(), StatusCode::TOO_MANY_REQUESTS);
        assert!(
            tokio::time::Instant::now() < deadline,
            "the closed stream's place was not freed within 15 s"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    drop((second, third, bobs));
}

#[tokio::test]
async fn an_instance_holds_at_most_its_streams() {
    let app = spawn_app_with(&[("LIVE_MAX_STREAMS", "2")]).await;
    let users = app.bulk_users(3).await;
    let held = [
        open_events(&app, users[0]).await,
        open_events(&app, users[1]).await,
    ];
    assert!(held.iter().all(|r| r.status() == StatusCode::OK));
    let detail = assert_too_many_streams(open_events(&app, users[2]).await).await;
    assert!(detail.contains("LIVE_MAX_STREAMS"), "{detail}");
    assert_eq!(open_ws_status(&app, users[2]).await, 429);
    assert_eq!(app.get("/healthz").await.status(), StatusCode::OK);
    let metrics = app.metrics().await;
    assert!(
        metrics.lines().any(
            |l| l.starts_with("chatlab_live_refused_total{reason=\"instance\"} ")
                && !l.ends_with(" 0")
        ),
        "the refusals are counted: {metrics}"
    );
}

#[tokio::test]
async fn a_token_for_a_user_that_does_not_exist_opens_no_stream() {
    let app = spawn_app_with(&[]).await;
    let nobody = Uuid::now_v7();
    let resp = open_events(&app, nobody).await;
    let problem = assert_problem(resp, 401, "unauthorized").await;
    assert!(
        problem["detail"]
            .as_str()
            .unwrap()
            .contains("does not exist"),
        "{problem}"
    );
    assert_eq!(open_ws_status(&app, nobody).await, 401);
    // The same token is refused again (from the cache or not), and a user
    // who exists is served.
    assert_eq!(open_events(&app, nobody).await.status(), 401);
    let real = app.bulk_users(1).await[0];
    assert_eq!(open_events(&app, real).await.status(), StatusCode::OK);
}

/// Posts a message to `chat` as `sender`; its id.
async fn post_message(app: &TestApp, chat: Uuid, sender: Uuid, body: &str) -> String {
    let resp = app.send_message(chat, sender, body).await;
    assert_eq!(resp.status(), StatusCode::CREATED);
    let m: serde_json::Value = resp.json().await.unwrap();
    m["id"].as_str().unwrap().to_owned()
}

/// Asserts the stream's first event is a `reset` whose reason contains
/// `says`, then that it delivers what is written after.
async fn assert_reset_then_live(
    app: &TestApp,
    mut stream: Subscriber,
    chat: Uuid,
    ada: Uuid,
    says: &str,
) {
    let (kind, data) = stream.next().await;
    assert_eq!(kind, "reset", "{data}");
    let reason = data["reason"].as_str().unwrap();
    assert!(reason.contains(says), "{reason}");
    assert!(reason.contains("reload"), "{reason}");
    let sent = post_message(app, chat, ada, "after the reset").await;
    read_until(&mut stream, &sent).await;
}

/// Reads `stream` until the message `id` arrives. Messages written just
/// before may reach the topic (through the outbox relay) after the stream
/// opened, and come first.
async fn read_until(stream: &mut Subscriber, id: &str) {
    loop {
        let (kind, data) = stream.next_after_creation().await;
        assert_eq!(kind, "message.sent", "{data}");
        if data["message_id"] == id {
            return;
        }
    }
}

#[tokio::test]
async fn a_cursor_past_the_end_of_the_topic_starts_with_a_reset() {
    let app = spawn_app_with(&[("LIVE_HEARTBEAT_SECS", "1")]).await;
    let users = app.bulk_users(2).await;
    let (ada, bob) = (users[0], users[1]);
    let chat = app.create_chat_ok(ada, &[bob]).await;
    // This topic's life, from an id the server sent.
    let mut bobs = Subscriber::connect(&app, bob).await;
    let sent = post_message(&app, chat, ada, "to learn an id").await;
    read_until(&mut bobs, &sent).await;
    let id = bobs.disconnect().expect("an id");
    // `@life`, when the server names one.
    let life = id
        .split_once('@')
        .map(|(_, life)| format!("@{life}"))
        .unwrap_or_default();
    let ahead = format!("0:1000000,1:1000000,2:1000000{life}");
    let resumed = Subscriber::resume(&app, bob, Some(&ahead)).await;
    assert_reset_then_live(&app, resumed, chat, ada, "past the end of partition").await;
    // One partition ahead is enough.
    let mut one_ahead: Vec<String> = id
        .split('@')
        .next()
        .unwrap()
        .split(',')
        .map(str::to_owned)
        .collect();
    let (partition, _) = one_ahead[0].split_once(':').unwrap();
    one_ahead[0] = format!("{partition}:1000000");
    let ahead = format!("{}{life}", one_ahead.join(","));
    let resumed = Subscriber::resume(&app, bob, Some(&ahead)).await;
    assert_reset_then_live(&app, resumed, chat, ada, "past the end of partition").await;
}

#[tokio::test]
async fn a_cursor_from_before_a_restart_of_the_embedded_broker_starts_with_a_reset() {
    let before = spawn_app_with(&[("LIVE_HEARTBEAT_SECS", "1")]).await;
    let users = before.bulk_users(2).await;
    let (ada, bob) = (users[0], users[1]);
    let chat = before.create_chat_ok(ada, &[bob]).await;
    let mut bobs = Subscriber::connect(&before, bob).await;
    for i in 0..2 {
        let sent = post_message(&before, chat, ada, &format!("before {i}")).await;
        read_until(&mut bobs, &sent).await;
    }
    let old_id = bobs.disconnect().expect("an id");
    before.stop().await;
    // The same database, a new process: its embedded broker's topic
    // starts again at offset 0.
    let after = spawn_on_shared(before.db.clone(), &[("LIVE_HEARTBEAT_SECS", "1")]).await;
    let resumed = Subscriber::resume(&after, bob, Some(&old_id)).await;
    assert_reset_then_live(&after, resumed, chat, ada, "earlier").await;
    // Written in the new life until its offsets pass the old cursor's:
    // offsets alone could not tell the cursor is stale.
    for i in 0..4 {
        post_message(&after, chat, ada, &format!("after {i}")).await;
    }
    let resumed = Subscriber::resume(&after, bob, Some(&old_id)).await;
    assert_reset_then_live(&after, resumed, chat, ada, "earlier").await;
}
