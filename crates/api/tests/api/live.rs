//! Live delivery over Server-Sent Events, against tansu and two server
//! instances on one database and topic: a member connected to one
//! instance receives, in order, what was written on the other; a non-member
//! receives nothing; removal stops delivery and an addition starts it; a
//! client that reconnects with its last id gets what it missed, once; the
//! WebSocket carries the same feed.

use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::mpsc;
use uuid::Uuid;

use crate::events::{post_chat, spawn_on_tansu};
use crate::support::{TestApp, spawn_on_shared};

/// One event as the stream carried it: its type and its data.
pub type Received = (String, Value);

/// A frame as read: its type (empty for a frame that only moves the id),
/// its data, its id.
type Frame = (String, Value, Option<String>);

/// A subscriber's events, read by a task of its own.
pub struct Subscriber {
    events: mpsc::UnboundedReceiver<Frame>,
    reader: tokio::task::JoinHandle<()>,
    /// The id of the last frame taken with `next`, as a client would keep
    /// it for `Last-Event-ID`.
    pub last_id: Option<String>,
}

impl Subscriber {
    /// Opens `GET /v1/events` on `app` as `user`; returns once the server
    /// answered (the connection is registered by then).
    pub async fn connect(app: &TestApp, user: Uuid) -> Self {
        Self::resume(app, user, None).await
    }

    /// Opens `GET /v1/events`, resuming after `last_id` if given.
    pub async fn resume(app: &TestApp, user: Uuid, last_id: Option<&str>) -> Self {
        let mut request = app
            .client
            .get(app.url("/v1/events"))
            .header("authorization", app.bearer(user));
        if let Some(id) = last_id {
            request = request.header("last-event-id", id);
        }
        let resp = request.send().await.unwrap();
        assert_eq!(resp.status(), 200);
        assert_eq!(resp.headers()["content-type"], "text/event-stream");
        let (tx, events) = mpsc::unbounded_channel();
        let reader = tokio::spawn(async move {
            let mut resp = resp;
            let mut buffer = String::new();
            while let Ok(Some(chunk)) = resp.chunk().await {
                buffer.push_str(&String::from_utf8_lossy(&chunk));
                while let Some(end) = buffer.find("\n\n") {
                    let frame: String = buffer.drain(..end + 2).collect();
                    let mut kind = None;
                    let mut data = None;
                    let mut id = None;
                    for line in frame.lines() {
                        if let Some(k) = line.strip_prefix("event: ") {
                            kind = Some(k.to_owned());
                        } else if let Some(d) = line.strip_prefix("data: ") {
                            data = serde_json::from_str::<Value>(d).ok();
                        } else if let Some(i) = line.strip_prefix("id: ") {
                            id = Some(i.to_owned());
                        }
                    }
                    let frame = match (kind, data) {
                        (Some(kind), Some(data)) => (kind, data, id),
                        (None, None) if id.is_some() => (String::new(), Value::Null, id),
                        _ => continue,
                    };
                    if tx.send(frame).is_err() {
                        return;
                    }
                }
            }
        });
        Self {
            events,
            reader,
            last_id: last_id.map(str::to_owned),
        }
    }

    /// The next event, within 30 s (frames that only move the id, such as
    /// heartbeats, move `last_id` and are skipped).
    pub async fn next(&mut self) -> Received {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            let (kind, data, id) = tokio::time::timeout_at(deadline, self.events.recv())
                .await
                .expect("an event within 30 s")
                .expect("the stream is open");
            if id.is_some() {
                self.last_id = id;
            }
            if !kind.is_empty() {
                return (kind, data);
            }
        }
    }

    /// Closes the connection, as a client that lost its network would;
    /// returns the id it would resume from.
    pub fn disconnect(self) -> Option<String> {
        self.reader.abort();
        self.last_id
    }

    /// The next event that is not a `chat.created`: the outbox relay may
    /// publish the creation of a chat made before the subscriber connected
    /// after it did.
    pub async fn next_after_creation(&mut self) -> Received {
        loop {
            let received = self.next().await;
            if received.0 != "chat.created" {
                return received;
            }
        }
    }
}

/// Another instance beside `a`: its database, broker and topic.
async fn another_instance(
    a: &TestApp,
    brokers: &str,
    topic: &str,
    extra: &[(&str, &str)],
) -> TestApp {
    let mut env = vec![
        ("KAFKA_BROKERS", brokers),
        ("KAFKA_TOPIC", topic),
        ("CHATLAB_ALLOW_OVERRIDES", "true"),
    ];
    env.extend_from_slice(extra);
    spawn_on_shared(a.db.clone(), &env).await
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
    let b = another_instance(&a, &brokers, &topic, &[]).await;
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

/// A `message.sent` frame carries what a client shows (id, chat, sender,
/// text, time), unless the writing instance keeps text off the topic
/// (`LIVE_FRAME_BODY=false`): then the frame is as it was, the length only.
#[tokio::test]
async fn message_frames_carry_the_text_unless_the_writer_keeps_it_off_the_topic() {
    let (a, brokers, topic) = spawn_on_tansu().await;
    let quiet = another_instance(&a, &brokers, &topic, &[("LIVE_FRAME_BODY", "false")]).await;
    let users = a.bulk_users(2).await;
    let (ada, bob) = (users[0], users[1]);
    let chat = a.create_chat_ok(ada, &[bob]).await;
    let mut bobs = Subscriber::connect(&a, bob).await;
    let path = format!("/v1/chats/{chat}/messages");
    let shown = post(&a, ada, &path, json!({ "body": "hello, bob" }), "outbox").await;
    let hushed = post(&quiet, ada, &path, json!({ "body": "secret" }), "outbox").await;
    let (kind, data) = bobs.next_after_creation().await;
    assert_eq!(kind, "message.sent");
    assert_eq!(data["message_id"], shown["id"]);
    assert_eq!(data["chat_id"], json!(chat));
    assert_eq!(data["sender_id"], json!(ada));
    assert_eq!(data["body"], "hello, bob");
    assert_eq!(data["occurred_at"], shown["created_at"]);
    let (kind, data) = bobs.next().await;
    assert_eq!(kind, "message.sent");
    assert_eq!(data["message_id"], hushed["id"]);
    assert!(data.get("body").is_none(), "{data}");
    assert_eq!(data["body_length"], 6);
}

/// A read marker's move reaches the reader's other connections, on any
/// instance, as a `chat.read` frame with the marker and the unread count;
/// the chat's other members get nothing of it.
#[tokio::test]
async fn a_marker_move_reaches_the_readers_other_connections_only() {
    let (a, brokers, topic) = spawn_on_tansu().await;
    let b = another_instance(&a, &brokers, &topic, &[]).await;
    let users = a.bulk_users(2).await;
    let (ada, bob) = (users[0], users[1]);
    let chat = a.create_chat_ok(ada, &[bob]).await;
    let mut bobs_phone = Subscriber::connect(&b, bob).await;
    let mut adas = Subscriber::connect(&a, ada).await;
    let path = format!("/v1/chats/{chat}/messages");
    let first = post(&a, ada, &path, json!({ "body": "one" }), "after_commit").await;
    post(&a, ada, &path, json!({ "body": "two" }), "after_commit").await;
    let resp = a
        .client
        .post(a.url(&format!("/v1/chats/{chat}/read")))
        .header("authorization", a.bearer(bob))
        .json(&json!({ "up_to": first["id"] }))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let last = post(&a, ada, &path, json!({ "body": "three" }), "after_commit").await;

    let mut bob_got = Vec::new();
    while bob_got.len() < 4 {
        bob_got.push(bobs_phone.next_after_creation().await);
    }
    let read = bob_got
        .iter()
        .find(|(kind, _)| kind == "chat.read")
        .unwrap_or_else(|| panic!("no chat.read among {bob_got:?}"));
    assert_eq!(read.1["chat_id"], json!(chat));
    assert_eq!(read.1["user_id"], json!(bob));
    assert_eq!(read.1["read_up_to"], first["id"]);
    assert_eq!(read.1["unread_count"], 1);
    // Ada's feed holds her three messages and nothing of Bob's marker
    // (acknowledged before the move was answered, the move's event handed
    // to the same producer before the third was written: one partition,
    // in that order).
    let mut ada_got = Vec::new();
    while ada_got.len() < 3 {
        ada_got.push(adas.next_after_creation().await);
    }
    assert!(
        ada_got.iter().all(|(kind, _)| kind == "message.sent"),
        "{ada_got:?}"
    );
    assert_eq!(ada_got[2].1["message_id"], last["id"]);
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

#[tokio::test]
async fn a_client_resuming_on_another_instance_under_writes_loses_nothing_and_repeats_nothing() {
    let (a, brokers, topic) = spawn_on_tansu().await;
    let b = another_instance(&a, &brokers, &topic, &[]).await;
    let users = a.bulk_users(2).await;
    let (ada, bob) = (users[0], users[1]);
    let chat = a.create_chat_ok(ada, &[bob]).await;
    let mut bobs = Subscriber::connect(&a, bob).await;

    // Ada writes all along, on instance A, one message after the other.
    const WRITES: usize = 60;
    let writer = {
        let (client, url, bearer) = (
            a.client.clone(),
            a.url(&format!("/v1/chats/{chat}/messages")),
            a.bearer(ada),
        );
        tokio::spawn(async move {
            let mut sent = Vec::with_capacity(WRITES);
            for i in 0..WRITES {
                let resp = client
                    .post(&url)
                    .header("authorization", &bearer)
                    .header("x-chatlab-publish-mode", "after_commit")
                    .json(&json!({ "body": format!("message {i}") }))
                    .send()
                    .await
                    .unwrap();
                assert_eq!(resp.status(), 201);
                let m: Value = resp.json().await.unwrap();
                sent.push(m["id"].as_str().unwrap().to_owned());
                tokio::time::sleep(Duration::from_millis(15)).await;
            }
            sent
        })
    };

    let mut received = Vec::new();
    while received.len() < 15 {
        let (kind, data) = bobs.next_after_creation().await;
        assert_eq!(kind, "message.sent", "{data}");
        received.push(data["message_id"].as_str().unwrap().to_owned());
    }
    let last_id = bobs.disconnect().expect("every event frame has an id");
    // Offline while Ada goes on writing.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut bobs = Subscriber::resume(&b, bob, Some(&last_id)).await;
    while received.len() < WRITES {
        let (kind, data) = bobs.next_after_creation().await;
        assert_eq!(kind, "message.sent", "{data}");
        received.push(data["message_id"].as_str().unwrap().to_owned());
    }
    let sent = writer.await.unwrap();
    // Every message once, in the order written: nothing lost at the
    // boundary between the catch-up and the live feed, nothing repeated.
    assert_eq!(received, sent);
}

#[tokio::test]
async fn a_last_event_id_that_is_no_cursor_is_a_400() {
    let (app, _brokers, _topic) = spawn_on_tansu().await;
    let user = app.bulk_users(1).await[0];
    let resp = app
        .client
        .get(app.url("/v1/events"))
        .header("authorization", app.bearer(user))
        .header("last-event-id", "0190b5c8-6b7e-7cc0-a2a3-8d8f3b8b5a11")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 400);
    assert_eq!(resp.headers()["content-type"], "application/problem+json");
}

#[tokio::test]
async fn a_cursor_the_topic_cannot_replay_starts_with_a_reset_then_live() {
    let (app, _brokers, _topic) = spawn_on_tansu().await;
    let users = app.bulk_users(2).await;
    let (ada, bob) = (users[0], users[1]);
    let chat = app.create_chat_ok(ada, &[bob]).await;
    // Partition 9999 is no partition of the topic, so the cursor names
    // none of the live feed's partitions.
    let mut bobs = Subscriber::resume(&app, bob, Some("9999:0")).await;
    let (kind, data) = bobs.next().await;
    assert_eq!(kind, "reset", "{data}");
    assert!(data["reason"].as_str().unwrap().contains("reload"));
    let reset_id = bobs
        .last_id
        .clone()
        .expect("the reset names where the live feed starts");
    assert!(
        reset_id.split(',').all(|p| p.split_once(':').is_some()),
        "{reset_id}"
    );
    let sent = post(
        &app,
        ada,
        &format!("/v1/chats/{chat}/messages"),
        json!({ "body": "after the reset" }),
        "after_commit",
    )
    .await;
    let (kind, data) = bobs.next_after_creation().await;
    assert_eq!(kind, "message.sent");
    assert_eq!(data["message_id"], sent["id"]);
}

/// The next WebSocket message of the feed that is an event other than a
/// chat creation: (its type, its data, its id).
async fn next_ws_event<S>(socket: &mut S) -> (String, Value, String)
where
    S: futures_util::Stream<
            Item = Result<
                tokio_tungstenite::tungstenite::Message,
                tokio_tungstenite::tungstenite::Error,
            >,
        > + Unpin,
{
    use futures_util::StreamExt as _;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let message = tokio::time::timeout_at(deadline, socket.next())
            .await
            .expect("a message within 30 s")
            .expect("the socket is open")
            .expect("a readable message");
        let tokio_tungstenite::tungstenite::Message::Text(text) = message else {
            continue;
        };
        let v: Value = serde_json::from_str(text.as_str()).unwrap();
        let kind = v["type"].as_str().unwrap().to_owned();
        if kind == "heartbeat" || kind == "chat.created" {
            continue;
        }
        return (
            kind,
            v["data"].clone(),
            v["id"].as_str().unwrap_or_default().to_owned(),
        );
    }
}

async fn open_ws(
    app: &TestApp,
    user: Uuid,
    last_id: Option<&str>,
) -> tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>> {
    use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;
    let mut url = app.url("/v1/ws").replacen("http://", "ws://", 1);
    if let Some(id) = last_id {
        url = format!("{url}?last_event_id={id}");
    }
    let mut request = url.into_client_request().unwrap();
    request
        .headers_mut()
        .insert("authorization", app.bearer(user).parse().unwrap());
    let (socket, response) = tokio_tungstenite::connect_async(request).await.unwrap();
    assert_eq!(response.status(), 101);
    socket
}

#[tokio::test]
async fn the_websocket_carries_the_same_feed_and_resumes_after_its_last_id() {
    let (app, _brokers, _topic) = spawn_on_tansu().await;
    let users = app.bulk_users(2).await;
    let (ada, bob) = (users[0], users[1]);
    let chat = app.create_chat_ok(ada, &[bob]).await;
    let messages = format!("/v1/chats/{chat}/messages");
    let mut socket = open_ws(&app, bob, None).await;
    let first = post(
        &app,
        ada,
        &messages,
        json!({ "body": "one" }),
        "after_commit",
    )
    .await;
    let (kind, data, id) = next_ws_event(&mut socket).await;
    assert_eq!(kind, "message.sent");
    assert_eq!(data["message_id"], first["id"]);
    drop(socket);
    let mut missed = Vec::new();
    for body in ["two", "three"] {
        let m = post(
            &app,
            ada,
            &messages,
            json!({ "body": body }),
            "after_commit",
        )
        .await;
        missed.push(m["id"].clone());
    }
    // Back after its last id: the two it missed, in order, nothing before.
    let mut socket = open_ws(&app, bob, Some(&id)).await;
    for expected in &missed {
        let (kind, data, _) = next_ws_event(&mut socket).await;
        assert_eq!(kind, "message.sent");
        assert_eq!(&data["message_id"], expected);
    }
}

#[tokio::test]
async fn a_plain_get_on_the_websocket_path_is_a_400() {
    let (app, _brokers, _topic) = spawn_on_tansu().await;
    let user = app.bulk_users(1).await[0];
    let resp = app
        .client
        .get(app.url("/v1/ws"))
        .header("authorization", app.bearer(user))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 400);
    assert_eq!(resp.headers()["content-type"], "application/problem+json");
    let unauthenticated = app.client.get(app.url("/v1/ws")).send().await.unwrap();
    assert_eq!(unauthenticated.status(), 401);
}

#[tokio::test]
async fn the_tails_lag_per_partition_is_on_the_metrics() {
    let (app, _brokers, _topic) = spawn_on_tansu().await;
    let users = app.bulk_users(2).await;
    app.create_chat_ok(users[0], &[users[1]]).await;
    // librdkafka reports statistics every 5 s.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let metrics = app.metrics().await;
        let lags: Vec<i64> = metrics
            .lines()
            .filter(|l| l.starts_with("chatlab_live_consumer_lag{partition=\""))
            .filter_map(|l| l.rsplit(' ').next()?.parse().ok())
            .collect();
        if !lags.is_empty() {
            assert!(lags.iter().all(|&lag| lag >= 0), "{lags:?}");
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no lag reported within 20 s"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Opens `GET /v1/events` on `app` as `user` over a socket with a tiny
/// receive buffer, and never reads: a client that stalled.
async fn stalled_client(app: &TestApp, user: Uuid) -> tokio::net::TcpStream {
    use tokio::io::AsyncWriteExt as _;
    let url = reqwest::Url::parse(&app.url("/v1/events")).unwrap();
    let addr = format!("{}:{}", url.host_str().unwrap(), url.port().unwrap());
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(1024).unwrap();
    let mut stream = socket.connect(addr.parse().unwrap()).await.unwrap();
    let request = format!(
        "GET /v1/events HTTP/1.1\r\nhost: {addr}\r\nauthorization: {}\r\n\r\n",
        app.bearer(user)
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    stream
}

/// `name`'s value on the metrics of `app`, 0 when absent.
async fn metric(app: &TestApp, name: &str) -> f64 {
    app.metrics()
        .await
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or(0.0)
}

#[tokio::test]
async fn a_stalled_client_is_cut_off_without_delaying_others_on_three_instances() {
    let (a, brokers, topic) = spawn_on_tansu().await;
    let small_buffer = [("LIVE_BUFFER_EVENTS", "16")];
    let b = another_instance(&a, &brokers, &topic, &small_buffer).await;
    let c = another_instance(&a, &brokers, &topic, &small_buffer).await;
    let users = a.bulk_users(3).await;
    let (ada, bob, eve) = (users[0], users[1], users[2]);
    let chat = a.create_chat_ok(ada, &[bob, eve]).await;
    let _stalled = stalled_client(&b, eve).await;
    let mut bobs_on_b = Subscriber::connect(&b, bob).await;
    let mut bobs_on_c = Subscriber::connect(&c, bob).await;

    // The kernel takes megabytes for a socket that is not read: first
    // fill it with large frames (each addition of 10,000 members names
    // them all, some 390 KB), then the stalled connection's 16-frame
    // queue with messages. Each write waits until Bob has it on both
    // instances before the next: a reader that keeps up is never cut off,
    // however slowly this machine parses 390 KB frames, while the stalled
    // one falls behind by every frame.
    let mut newcomers = a.bulk_users(60_000).await;
    newcomers.extend(a.bulk_users(60_000).await);
    let additions = format!("/v1/chats/{chat}/members");
    let messages = format!("/v1/chats/{chat}/messages");
    let writes = newcomers
        .chunks(10_000)
        .map(|group| {
            (
                additions.as_str(),
                json!({ "user_ids": group }),
                "message_id",
            )
        })
        .chain((0..40).map(|i| {
            let body = json!({ "body": format!("message {i}") });
            (messages.as_str(), body, "id")
        }));
    for (path, body, id_field) in writes {
        let written = post(&a, ada, path, body, "after_commit").await;
        let sent = written[id_field].as_str().unwrap().to_owned();
        for subscriber in [&mut bobs_on_b, &mut bobs_on_c] {
            let (kind, data) = subscriber.next_after_creation().await;
            assert!(kind == "message.sent" || kind == "members.added", "{kind}");
            assert_eq!(
                data["message_id"].as_str(),
                Some(sent.as_str()),
                "everything, in order, beside the stalled one"
            );
        }
    }
    assert_eq!(
        metric(&b, "chatlab_live_dropped_slow_total").await,
        1.0,
        "instance B let the stalled client go"
    );
    assert_eq!(metric(&c, "chatlab_live_dropped_slow_total").await, 0.0);
}

/// A delay hop (`chatlab-delay`, in this process) in front of the test
/// database, and the database's URL through it.
async fn behind_a_hop(a: &TestApp) -> (chatlab_delay::Proxy, String) {
    let hop = chatlab_delay::Proxy::start(chatlab_delay::Settings {
        listen: "127.0.0.1:0".parse().unwrap(),
        upstream: a.db.server_addr(),
        distance: chatlab_delay::Distance::default(),
        control: None,
    })
    .await
    .unwrap();
    let url = a.db.url_at(hop.local_addr());
    (hop, url)
}

/// Live delivery asks nothing of its instance's database: with the
/// network to it dead, a member connected there still receives a chat
/// created for them on another instance (whose event names its members),
/// and the messages that follow in it, while that instance cannot answer
/// a single query.
#[tokio::test]
async fn a_dead_database_delays_no_frame_of_a_new_chat_or_its_messages() {
    let (a, brokers, topic) = spawn_on_tansu().await;
    let (hop, url) = behind_a_hop(&a).await;
    let b = another_instance(&a, &brokers, &topic, &[("DATABASE_URL", url.as_str())]).await;
    let users = a.bulk_users(2).await;
    let (ada, bob) = (users[0], users[1]);
    let mut bobs = Subscriber::connect(&b, bob).await;

    hop.set_blackhole(true);
    for mode in ["in_tx_await", "after_commit", "outbox"] {
        let chat: Value = post_chat(&a, mode, &[ada, bob], mode)
            .await
            .json()
            .await
            .unwrap();
        let message = post(
            &a,
            ada,
            &format!("/v1/chats/{}/messages", chat["id"].as_str().unwrap()),
            json!({ "body": mode }),
            mode,
        )
        .await;
        let (kind, data) = bobs.next().await;
        assert_eq!(kind, "chat.created", "{mode}: {data}");
        assert_eq!(data["chat_id"], chat["id"]);
        assert!(data.get("member_ids").is_none(), "not sent to clients");
        let (kind, data) = bobs.next().await;
        assert_eq!(kind, "message.sent", "{mode}: {data}");
        assert_eq!(data["message_id"], message["id"]);
    }
    // B's own writes cannot go through meanwhile: the database really is
    // out of its reach.
    let stuck = tokio::time::timeout(
        Duration::from_secs(2),
        b.client
            .get(b.url("/v1/me/chats"))
            .header("authorization", b.bearer(bob))
            .send(),
    )
    .await;
    assert!(
        stuck.is_err() || stuck.is_ok_and(|r| r.is_ok_and(|r| !r.status().is_success())),
        "a read on B answered while its database was blackholed"
    );
    hop.set_blackhole(false);
}
