//! Live delivery over Server-Sent Events, against tansu and two server
//! instances on one database and topic: a member connected to one
//! instance receives, in order, what was written on the other; a non-member
//! receives nothing; removal stops delivery and an addition starts it.

use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::mpsc;
use uuid::Uuid;

use crate::events::{post_chat, spawn_on_tansu};
use crate::support::{TestApp, spawn_on_shared};

/// One event as the stream carried it: its type and its data.
type Received = (String, Value);

/// A subscriber's events, read by a task of its own.
struct Subscriber {
    events: mpsc::UnboundedReceiver<Received>,
}

impl Subscriber {
    /// Opens `GET /v1/events` on `app` as `user`; returns once the server
    /// answered (the connection is registered by then).
    async fn connect(app: &TestApp, user: Uuid) -> Self {
        let resp = app
            .client
            .get(app.url("/v1/events"))
            .header("authorization", app.bearer(user))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
        assert_eq!(resp.headers()["content-type"], "text/event-stream");
        let (tx, events) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut resp = resp;
            let mut buffer = String::new();
            while let Ok(Some(chunk)) = resp.chunk().await {
                buffer.push_str(&String::from_utf8_lossy(&chunk));
                while let Some(end) = buffer.find("\n\n") {
                    let frame: String = buffer.drain(..end + 2).collect();
                    let mut kind = None;
                    let mut data = None;
                    for line in frame.lines() {
                        if let Some(k) = line.strip_prefix("event: ") {
                            kind = Some(k.to_owned());
                        } else if let Some(d) = line.strip_prefix("data: ") {
                            data = serde_json::from_str::<Value>(d).ok();
                        }
                    }
                    if let (Some(kind), Some(data)) = (kind, data)
                        && tx.send((kind, data)).is_err()
                    {
                        return;
                    }
                }
            }
        });
        Self { events }
    }

    /// The next event, within 30 s.
    async fn next(&mut self) -> Received {
        tokio::time::timeout(Duration::from_secs(30), self.events.recv())
            .await
            .expect("an event within 30 s")
            .expect("the stream is open")
    }

    /// The next event that is not a `chat.created`: the outbox relay may
    /// publish the creation of a chat made before the subscriber connected
    /// after it did.
    async fn next_after_creation(&mut self) -> Received {
        loop {
            let received = self.next().await;
            if received.0 != "chat.created" {
                return received;
            }
        }
    }
}

async fn post(app: &TestApp, user: Uuid, path: &str, body: Value, mode: &str) -> Value {
    let resp = app
        .client
        .post(app.url(path))
        .header("authorization", app.bearer(user))
        .header("x-chatlab-publish-mode", mode)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 201, "{path}");
    resp.json().await.unwrap()
}

#[tokio::test]
async fn a_member_on_another_instance_receives_in_order_and_a_non_member_nothing() {
    let (a, brokers, topic) = spawn_on_tansu().await;
    let b = spawn_on_shared(
        a.db.clone(),
        &[
            ("KAFKA_BROKERS", brokers.as_str()),
            ("KAFKA_TOPIC", topic.as_str()),
            ("CHATLAB_ALLOW_OVERRIDES", "true"),
        ],
    )
    .await;
    let users = a.bulk_users(3).await;
    let (ada, bob, eve) = (users[0], users[1], users[2]);
    let chat: Value = post_chat(&a, "live", &[ada, bob], "outbox")
        .await
        .json()
        .await
        .unwrap();
    let chat = chat["id"].as_str().unwrap().to_owned();
    let mut bobs = Subscriber::connect(&b, bob).await;
    let mut eves = Subscriber::connect(&b, eve).await;

    let mut sent = Vec::new();
    for mode in ["in_tx_await", "in_tx_enqueue", "after_commit", "outbox"] {
        for i in 0..3 {
            let path = format!("/v1/chats/{chat}/messages");
            let m = post(
                &a,
                ada,
                &path,
                json!({ "body": format!("{mode} {i}") }),
                mode,
            )
            .await;
            sent.push(m["id"].as_str().unwrap().to_owned());
        }
    }
    let mut received = Vec::new();
    while received.len() < sent.len() {
        let (kind, data) = bobs.next_after_creation().await;
        assert_eq!(kind, "message.sent", "{data}");
        assert_eq!(data["chat_id"], chat.as_str());
        received.push(data["message_id"].as_str().unwrap().to_owned());
    }
    // One chat, one partition: the order of the writes, each once.
    assert_eq!(received, sent);

    // Eve, no member, got nothing: the first event she gets is her own
    // new chat's.
    let own: Value = post_chat(&a, "eve's", &[eve], "outbox")
        .await
        .json()
        .await
        .unwrap();
    let (kind, data) = eves.next().await;
    assert_eq!(kind, "chat.created");
    assert_eq!(data["chat_id"], own["id"]);
}

#[tokio::test]
async fn removal_stops_delivery_and_an_addition_starts_it() {
    let (app, _brokers, _topic) = spawn_on_tansu().await;
    let users = app.bulk_users(2).await;
    let (ada, bob) = (users[0], users[1]);
    let chat = app.create_chat_ok(ada, &[bob]).await;
    let mut bobs = Subscriber::connect(&app, bob).await;
    let removed = app
        .client
        .delete(app.url(&format!("/v1/chats/{chat}/members/{bob}")))
        .header("authorization", app.bearer(ada))
        .send()
        .await
        .unwrap();
    assert_eq!(removed.status(), 204);
    let (kind, data) = bobs.next_after_creation().await;
    assert_eq!(kind, "member.removed");
    assert_eq!(data["user_id"], json!(bob));
    let messages = format!("/v1/chats/{chat}/messages");
    post(
        &app,
        ada,
        &messages,
        json!({ "body": "not for bob" }),
        "outbox",
    )
    .await;
    let members = format!("/v1/chats/{chat}/members");
    post(&app, ada, &members, json!({ "user_ids": [bob] }), "outbox").await;
    let after = post(&app, ada, &messages, json!({ "body": "for bob" }), "outbox").await;
    // What bob gets next is his addition, then the message after it: the
    // one between never reached him.
    let (kind, _) = bobs.next().await;
    assert_eq!(kind, "members.added");
    let (kind, data) = bobs.next().await;
    assert_eq!(kind, "message.sent");
    assert_eq!(data["message_id"], after["id"]);
}
