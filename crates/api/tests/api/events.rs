//! Events end to end: every publish mode against a real Kafka-protocol
//! broker (tansu at `KAFKA_TEST_BROKERS`, default 127.0.0.1:9092; `make
//! test` starts it), and the faults a running broker cannot be asked for
//! (an outage on cue, injected round-trip time) against librdkafka's mock
//! cluster, which the server starts when `KAFKA_BROKERS` is unset.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use diesel::prelude::*;
use diesel_async::{RunQueryDsl, SimpleAsyncConnection};
use rdkafka::ClientConfig;
use rdkafka::producer::{FutureProducer, FutureRecord};
use reqwest::{Response, StatusCode};
use serde_json::{Value, json};
use uuid::Uuid;

use chatlab_domain::{Event, EventPayload};
use chatlab_kafka::topic_reader::{TopicRecord, read_all};
use chatlab_persistence::schema::outbox;

use crate::support::{TestApp, assert_problem, sample, spawn_app_with};

fn test_brokers() -> String {
    std::env::var("KAFKA_TEST_BROKERS").unwrap_or_else(|_| "127.0.0.1:9092".to_owned())
}

fn unique_topic() -> String {
    format!("chatlab-test-{}", Uuid::now_v7().simple())
}

/// Reads the topic until it holds at least `at_least` records, for up to
/// 60 s; the failure message carries the server's event metrics and the
/// audit.
pub async fn wait_for_records(
    app: &TestApp,
    bootstrap: &str,
    topic: &str,
    at_least: usize,
) -> Vec<TopicRecord> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (b, t) = (bootstrap.to_owned(), topic.to_owned());
        let read = tokio::task::spawn_blocking(move || read_all(&b, &t, Duration::from_secs(10)))
            .await
            .unwrap();
        // A broker too busy to answer in time is asked again until the
        // deadline; only a broker that never answers fails the test.
        let records = match read {
            Ok(snapshot) => snapshot.records,
            Err(e) if Instant::now() < deadline => {
                eprintln!("reading {topic} at {bootstrap} failed, asking again: {e}");
                tokio::time::sleep(Duration::from_millis(500)).await;
                continue;
            }
            Err(e) => panic!("cannot read {topic} at {bootstrap}: {e}"),
        };
        if records.len() >= at_least || Instant::now() > deadline {
            if records.len() < at_least {
                let metrics = app.metrics().await;
                let events: Vec<&str> = metrics
                    .lines()
                    .filter(|l| l.starts_with("chatlab_event"))
                    .collect();
                // The audit says whose loss it is: an event the broker never
                // acknowledged, or one it acknowledged and does not serve.
                let audit: Value = app
                    .get_ops("/audit?settle_ms=0")
                    .await
                    .json()
                    .await
                    .unwrap();
                panic!(
                    "{topic} holds {} records, expected at least {at_least}; server: {events:?}\n{}",
                    records.len(),
                    audit["table"].as_str().unwrap_or_default()
                );
            }
            return records;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A server on the test broker, with a topic of its own and overrides on.
pub async fn spawn_on_tansu() -> (TestApp, String, String) {
    let brokers = test_brokers();
    let topic = unique_topic();
    let app = spawn_app_with(&[
        ("KAFKA_BROKERS", brokers.as_str()),
        ("KAFKA_TOPIC", topic.as_str()),
        ("CHATLAB_ALLOW_OVERRIDES", "true"),
    ])
    .await;
    (app, brokers, topic)
}

/// `POST /v1/chats` as `users[0]`, with the others as members.
pub async fn post_chat(app: &TestApp, name: &str, users: &[Uuid], mode: &str) -> Response {
    app.client
        .post(app.url("/v1/chats"))
        .header("authorization", app.bearer(users[0]))
        .header("x-chatlab-publish-mode", mode)
        .json(&json!({ "name": name, "member_ids": &users[1..] }))
        .send()
        .await
        .unwrap()
}

async fn post_message(app: &TestApp, chat: &str, sender: Uuid, body: &str, mode: &str) -> Value {
    let resp = app
        .client
        .post(app.url(&format!("/v1/chats/{chat}/messages")))
        .header("authorization", app.bearer(sender))
        .header("x-chatlab-publish-mode", mode)
        .json(&json!({ "body": body }))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::CREATED);
    assert_eq!(resp.headers()["x-chatlab-publish-mode"], mode);
    resp.json().await.unwrap()
}

/// The audit with every event's line, asked again for up to 30 s while the
/// broker is too busy to answer it, or while it reports losses or an event
/// on the topic without its receipt: the
/// broker makes records visible to a new consumer a moment after it acks
/// them, the outbox relay publishes asynchronously, and the receipt ledger
/// writes every 100 ms.
pub async fn audit(app: &TestApp) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let resp = app.get_ops("/audit?settle_ms=0&events=all").await;
        if resp.status() == StatusCode::SERVICE_UNAVAILABLE && Instant::now() < deadline {
            // The broker did not answer the audit's reader in time.
            tokio::time::sleep(Duration::from_millis(500)).await;
            continue;
        }
        assert_eq!(resp.status(), StatusCode::OK);
        let report: Value = resp.json().await.unwrap();
        let losing = report["modes"].as_array().is_some_and(|modes| {
            modes
                .iter()
                .any(|m| m["mode"] != "after_commit" && m["lost"] != 0)
        });
        let unreceipted = report["events"].as_array().is_some_and(|lines| {
            lines.iter().any(|l| {
                l["seen_at"].as_array().is_some_and(|s| !s.is_empty())
                    && l["acked_at"].as_array().is_some_and(|a| a.is_empty())
            })
        });
        if !(losing || unreceipted) || Instant::now() > deadline {
            return report;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

pub fn mode_row<'a>(audit: &'a Value, mode: &str) -> &'a Value {
    audit["modes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["mode"] == mode)
        .unwrap_or_else(|| panic!("no {mode} in the audit: {audit}"))
}

pub async fn outbox_pending(app: &TestApp) -> i64 {
    let mut conn = app.db.connect().await;
    outbox::table
        .filter(outbox::published_at.is_null())
        .count()
        .get_result(&mut conn)
        .await
        .unwrap()
}

#[tokio::test]
async fn every_mode_publishes_exactly_what_it_committed_in_order() {
    let (app, brokers, topic) = spawn_on_tansu().await;
    let users = app.bulk_users(4).await;
    let modes = [
        "in_tx_await",
        "in_tx_enqueue",
        "after_commit",
        "outbox",
        "off",
    ];
    // chat id -> (mode, message ids in send order)
    let mut written: HashMap<String, (&str, Vec<String>)> = HashMap::new();
    for mode in modes {
        let resp = post_chat(&app, &format!("room {mode}"), &users, mode).await;
        assert_eq!(resp.status(), StatusCode::CREATED);
        assert_eq!(resp.headers()["x-chatlab-publish-mode"], mode);
        let chat: Value = resp.json().await.unwrap();
        let chat_id = chat["id"].as_str().unwrap().to_owned();
        let mut messages = Vec::new();
        for (i, sender) in users.iter().take(3).enumerate() {
            let m = post_message(&app, &chat_id, *sender, &format!("m{i}-{mode}"), mode).await;
            messages.push(m["id"].as_str().unwrap().to_owned());
        }
        written.insert(chat_id, (mode, messages));
    }

    // Four publishing modes × (one chat + three messages); `off` adds none.
    let expected = 16;
    wait_for_records(&app, &brokers, &topic, expected).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let records = wait_for_records(&app, &brokers, &topic, expected).await;
    assert_eq!(records.len(), expected, "no extra events");

    let mut by_chat: HashMap<String, Vec<&TopicRecord>> = HashMap::new();
    for r in &records {
        let event = r.event.as_ref().expect("every record is a chatlab event");
        let chat_id = event.chat_id().to_string();
        assert_eq!(r.key.as_deref(), Some(chat_id.as_str()), "key = chat id");
        by_chat.entry(chat_id).or_default().push(r);
    }
    for (chat_id, (mode, messages)) in &written {
        let Some(events) = by_chat.get(chat_id) else {
            assert_eq!(*mode, "off", "{mode} published nothing");
            continue;
        };
        assert_ne!(*mode, "off", "off must publish nothing");
        assert!(
            events.iter().all(|r| r.partition == events[0].partition),
            "one chat, one partition"
        );
        let events: Vec<&Event> = events.iter().map(|r| r.event.as_ref().unwrap()).collect();
        assert!(events.iter().all(|e| e.publish_mode == *mode));
        match &events[0].payload {
            EventPayload::ChatCreated {
                member_count,
                creator_id,
                ..
            } => {
                assert_eq!(*member_count, 4);
                assert_eq!(*creator_id, users[0]);
            }
            other => panic!("{mode}: first event of a chat is {other:?}"),
        }
        let sent: Vec<String> = events[1..]
            .iter()
            .map(|e| match &e.payload {
                EventPayload::MessageSent {
                    message_id,
                    body_length,
                    ..
                } => {
                    assert_eq!(*body_length, 3 + mode.len());
                    message_id.to_string()
                }
                other => panic!("{mode}: expected message.sent, got {other:?}"),
            })
            .collect();
        assert_eq!(&sent, messages, "{mode}: events in the order of the writes");
    }

    let report = audit(&app).await;
    assert_eq!(report["failed"], false, "{report}");
    assert_eq!(report["broker_failed"], false, "{}", report["table"]);
    for mode in ["in_tx_await", "in_tx_enqueue", "after_commit", "outbox"] {
        let row = mode_row(&report, mode);
        assert_eq!(row["committed"], 4, "{mode}");
        assert_eq!(row["events"], 4, "{mode}");
        assert_eq!(row["acked"], 4, "{mode}: every event has its receipt");
        assert_eq!(
            (&row["lost"], &row["phantom"], &row["duplicated"]),
            (&json!(0), &json!(0), &json!(0)),
            "{mode}"
        );
    }
    assert_eq!(mode_row(&report, "off")["events"], 0);

    // Per event: the broker's receipt names exactly where the reader found
    // it.
    let lines = report["events"].as_array().unwrap();
    assert_eq!(lines.len(), 16, "one line per published event");
    let position = |r: &TopicRecord| json!({ "partition": r.partition, "offset": r.offset });
    for line in lines {
        assert_eq!(line["verdict"], "ok", "{line}");
        assert_eq!(line["acked_at"], line["seen_at"], "{line}");
        let record = records
            .iter()
            .find(|r| {
                r.event
                    .as_ref()
                    .is_ok_and(|e| e.subject_id().to_string() == line["subject_id"])
            })
            .unwrap_or_else(|| panic!("{line} is not on the topic"));
        assert_eq!(line["acked_at"], json!([position(record)]), "{line}");
    }
}

/// The one-round-trip strategies take their own paths to the broker:
/// `single` and `pipeline` write on their own (outbox row inside) where the
/// mode allows, and open a transaction around the broker where it does not.
/// Each path publishes exactly its chat's one event, and the audit agrees.
#[tokio::test]
async fn single_and_pipeline_publish_once_in_every_mode() {
    let (app, brokers, topic) = spawn_on_tansu().await;
    let users = app.bulk_users(3).await;
    let modes = ["in_tx_await", "in_tx_enqueue", "after_commit", "outbox"];
    let mut written: HashMap<String, (&str, &str)> = HashMap::new();
    for strategy in ["single", "pipeline"] {
        for mode in modes {
            let resp = app
                .client
                .post(app.url("/v1/chats"))
                .header("authorization", app.bearer(users[0]))
                .header("x-chatlab-insert-strategy", strategy)
                .header("x-chatlab-publish-mode", mode)
                .json(&json!({ "name": format!("{strategy} {mode}"), "member_ids": &users[1..] }))
                .send()
                .await
                .unwrap();
            assert_eq!(resp.status(), StatusCode::CREATED, "{strategy} {mode}");
            assert_eq!(resp.headers()["x-chatlab-insert-strategy"], strategy);
            let chat: Value = resp.json().await.unwrap();
            written.insert(chat["id"].as_str().unwrap().to_owned(), (strategy, mode));
        }
    }
    let expected = written.len();
    wait_for_records(&app, &brokers, &topic, expected).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let records = wait_for_records(&app, &brokers, &topic, expected).await;
    assert_eq!(records.len(), expected, "one event per chat, no more");
    let mut seen = HashMap::new();
    for r in &records {
        let event = r.event.as_ref().expect("a chatlab event");
        let chat_id = event.chat_id().to_string();
        let (strategy, mode) = written
            .get(&chat_id)
            .unwrap_or_else(|| panic!("an event for a chat not written: {chat_id}"));
        assert_eq!(event.publish_mode, *mode, "{strategy}");
        assert!(
            matches!(
                event.payload,
                EventPayload::ChatCreated {
                    member_count: 3,
                    ..
                }
            ),
            "{strategy} {mode}: {:?}",
            event.payload
        );
        *seen.entry(chat_id).or_insert(0) += 1;
    }
    assert!(seen.values().all(|&n| n == 1), "{seen:?}");
    let report = audit(&app).await;
    assert_eq!(report["failed"], false, "{report}");
    for mode in modes {
        let row = mode_row(&report, mode);
        assert_eq!(row["committed"], 2, "{mode}");
        assert_eq!(row["events"], 2, "{mode}");
    }
}

/// A broker outage, on cue: `in_tx_await` refuses the write, `after_commit`
/// commits and loses the event, `outbox` commits and publishes once the
/// broker is back.
#[tokio::test]
async fn an_unreachable_broker_costs_each_mode_what_it_promised() {
    let app = spawn_app_with(&[
        ("CHATLAB_ALLOW_OVERRIDES", "true"),
        ("KAFKA_SEND_TIMEOUT_MS", "1500"),
    ])
    .await;
    let broker = app.embedded.clone().expect("embedded broker");
    let users = app.bulk_users(2).await;
    broker.broker_down().unwrap();
    let before = app.row_counts().await;

    let refused = post_chat(&app, "await", &users, "in_tx_await").await;
    assert_problem(refused, 503, "unavailable").await;
    assert_eq!(app.row_counts().await, before, "in_tx_await rolled back");

    let after = post_chat(&app, "after", &users, "after_commit").await;
    assert_eq!(after.status(), StatusCode::CREATED);
    let metrics = app.metrics().await;
    assert_eq!(
        sample(
            &metrics,
            "chatlab_events_failed_total{publish_mode=\"after_commit\"}"
        ),
        Some(1.0)
    );

    let outboxed = post_chat(&app, "outbox", &users, "outbox").await;
    assert_eq!(outboxed.status(), StatusCode::CREATED);
    assert_eq!(outbox_pending(&app).await, 1, "committed and pending");
    assert_eq!(app.row_counts().await[1], before[1] + 2);

    broker.broker_up().unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while outbox_pending(&app).await > 0 {
        assert!(
            Instant::now() < deadline,
            "the relay never published the outbox row"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    let report = audit(&app).await;
    let outbox = mode_row(&report, "outbox");
    assert_eq!(
        (&outbox["committed"], &outbox["lost"]),
        (&json!(1), &json!(0))
    );
    let after = mode_row(&report, "after_commit");
    assert_eq!(
        (&after["committed"], &after["lost"]),
        (&json!(1), &json!(1))
    );
    assert_eq!(report["failed"], false, "after_commit promised nothing");
}

/// The seed's behaviour: the record is handed to the producer inside the
/// transaction, the transaction then fails at COMMIT, and the event is out
/// anyway. A deferred constraint trigger (this test's own database) makes
/// COMMIT fail.
#[tokio::test]
async fn a_rollback_after_enqueue_leaves_a_phantom_that_the_audit_reports() {
    let (app, brokers, topic) = spawn_on_tansu().await;
    let users = app.bulk_users(2).await;
    let mut conn = app.db.connect().await;
    conn.batch_execute(
        "CREATE FUNCTION fail_doomed() RETURNS trigger LANGUAGE plpgsql AS $$ \
         BEGIN IF NEW.name = 'doomed' THEN RAISE EXCEPTION 'doomed at commit'; END IF; \
         RETURN NEW; END $$; \
         CREATE CONSTRAINT TRIGGER doomed_at_commit AFTER INSERT ON chats \
         DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION fail_doomed();",
    )
    .await
    .unwrap();

    let fine = post_chat(&app, "fine", &users, "in_tx_enqueue").await;
    assert_eq!(fine.status(), StatusCode::CREATED);
    let doomed = post_chat(&app, "doomed", &users, "in_tx_enqueue").await;
    assert_eq!(doomed.status(), StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(
        app.row_counts().await[1],
        1,
        "only the fine chat is committed"
    );

    let records = wait_for_records(&app, &brokers, &topic, 2).await;
    assert_eq!(records.len(), 2, "the doomed chat's event went out anyway");
    let report = audit(&app).await;
    let enqueue = mode_row(&report, "in_tx_enqueue");
    assert_eq!(enqueue["committed"], 1);
    assert_eq!(enqueue["events"], 2);
    assert_eq!(enqueue["phantom"], 1);
    assert_eq!(enqueue["lost"], 0);
    // The broker acknowledged the doomed chat's event, at the offset where
    // the reader found it: a phantom of chatlab's making, not the broker's.
    let phantom = report["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["verdict"] == "phantom")
        .unwrap_or_else(|| panic!("no phantom line: {report}"));
    assert_eq!(phantom["committed"], false);
    assert_eq!(phantom["acked_at"].as_array().map(Vec::len), Some(1));
    assert_eq!(phantom["acked_at"], phantom["seen_at"]);
}

/// Mean connection use time of `count` sequential createChats in `mode`,
/// from the pool's own histogram (nothing else uses the pool meanwhile: the
/// relay has its own connection).
async fn mean_use_time(app: &TestApp, users: &[Uuid], mode: &str, count: usize) -> f64 {
    let before = app.metrics().await;
    for i in 0..count {
        let resp = post_chat(app, &format!("rtt {i}"), users, mode).await;
        assert_eq!(resp.status(), StatusCode::CREATED);
    }
    let after = app.metrics().await;
    let sum = |t: &str| sample(t, "db_client_connection_use_time_seconds_sum").unwrap();
    let n = |t: &str| sample(t, "db_client_connection_use_time_seconds_count").unwrap();
    (sum(&after) - sum(&before)) / (n(&after) - n(&before))
}

/// With 50 ms of broker round trip injected, only `in_tx_await` holds the
/// connection for it.
#[tokio::test]
async fn only_in_tx_await_holds_the_connection_for_the_broker_round_trip() {
    let app = spawn_app_with(&[
        ("CHATLAB_ALLOW_OVERRIDES", "true"),
        ("KAFKA_MOCK_BROKER_RTT_MS", "50"),
    ])
    .await;
    let users = app.bulk_users(10).await;
    // The first send also fetches metadata; keep it out of the figures.
    assert_eq!(
        post_chat(&app, "warm", &users, "in_tx_await")
            .await
            .status(),
        StatusCode::CREATED
    );
    let await_mean = mean_use_time(&app, &users, "in_tx_await", 5).await;
    let after_mean = mean_use_time(&app, &users, "after_commit", 5).await;
    let outbox_mean = mean_use_time(&app, &users, "outbox", 5).await;
    assert!(
        await_mean >= 0.050,
        "in_tx_await held {await_mean} s, less than the RTT"
    );
    assert!(after_mean < 0.050, "after_commit held {after_mean} s");
    assert!(outbox_mean < 0.050, "outbox held {outbox_mean} s");
}

/// The audit on a topic and tables made by hand: a duplicate, a phantom, a
/// loss in a mode that may lose, a loss in one that may not, a loss the
/// broker acknowledged (a receipt past the partition's end: the broker's,
/// not chatlab's), and a record that is not an event.
#[tokio::test]
async fn the_audit_reconciles_a_fabricated_topic_and_table() {
    let brokers = test_brokers();
    let topic = unique_topic();
    chatlab_kafka::publisher::ensure_topic(&brokers, &topic, 3)
        .await
        .unwrap();
    let db = chatlab_testdb::TestDb::new().await;
    let (user, c1, c2, c3, c4, c5, ghost) = (
        Uuid::now_v7(),
        Uuid::now_v7(),
        Uuid::now_v7(),
        Uuid::now_v7(),
        Uuid::now_v7(),
        Uuid::now_v7(),
        Uuid::now_v7(),
    );
    let mut conn = db.connect().await;
    conn.batch_execute(&format!(
        "INSERT INTO users VALUES ('{user}', 'u', now()); \
         INSERT INTO chats (id, name, creator_id, created_at, publish_mode) VALUES \
           ('{c1}', 'a', '{user}', now(), 'outbox'), ('{c2}', 'b', '{user}', now(), 'outbox'), \
           ('{c3}', 'c', '{user}', now(), 'after_commit'), ('{c4}', 'd', '{user}', now(), 'in_tx_await'), \
           ('{c5}', 'e', '{user}', now(), 'in_tx_await'); \
         INSERT INTO event_receipts \
           (event_id, subject_id, publish_mode, topic, \"partition\", \"offset\", occurred_at) \
           VALUES ('{}', '{c5}', 'in_tx_await', '{topic}', 0, 99, now());",
        Uuid::now_v7()
    ))
    .await
    .unwrap();
    let event = |chat: Uuid, mode: &str| Event {
        event_id: Uuid::now_v7(),
        occurred_at: chrono::Utc::now(),
        schema_version: 1,
        publish_mode: mode.to_owned(),
        payload: EventPayload::ChatCreated {
            chat_id: chat,
            name: "x".into(),
            creator_id: user,
            member_count: 1,
            system_message_id: Uuid::now_v7(),
            member_ids: vec![user],
        },
        trace_parent: None,
    };
    let e1 = event(c1, "outbox");
    let payloads = [
        e1.to_json().unwrap(),
        e1.to_json().unwrap(), // the relay published it twice
        event(c2, "outbox").to_json().unwrap(),
        event(ghost, "in_tx_enqueue").to_json().unwrap(), // never committed
        "not an event".to_owned(),
    ];
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", &brokers)
        .create()
        .unwrap();
    for p in &payloads {
        producer
            .send(
                FutureRecord::to(&topic).key("k").payload(p),
                Duration::from_secs(5),
            )
            .await
            .unwrap();
    }

    let mut registry = prometheus_client::registry::Registry::default();
    let source = chatlab_api::audit::AuditSource {
        db: chatlab_persistence::Database::new(
            &db.config(),
            chatlab_persistence::database::pool_metrics::PoolMetrics::register(&mut registry),
        ),
        bootstrap: brokers.clone(),
        topic: topic.clone(),
        default_since: chrono::DateTime::<chrono::Utc>::UNIX_EPOCH,
        max_window: chrono::Duration::MAX,
        running: tokio::sync::Semaphore::new(1),
    };
    let report = source
        .run(
            chrono::DateTime::<chrono::Utc>::UNIX_EPOCH,
            chrono::Utc::now() + chrono::Duration::minutes(1),
        )
        .await
        .unwrap();
    use chatlab_domain::PublishMode::*;
    let outbox = report.mode(Outbox).unwrap();
    assert_eq!(
        (
            outbox.committed,
            outbox.events,
            outbox.lost,
            outbox.duplicated
        ),
        (2, 2, 0, 1)
    );
    assert_eq!(report.mode(AfterCommit).unwrap().lost, 1);
    assert_eq!(report.mode(InTxEnqueue).unwrap().phantom, 1);
    let await_row = report.mode(InTxAwait).unwrap();
    assert_eq!(
        (await_row.committed, await_row.acked, await_row.lost),
        (2, 1, 2)
    );
    assert_eq!(await_row.lost_after_ack, 1, "c5's loss is the broker's");
    assert_eq!(report.broker.acked_past_end, 1);
    assert_eq!(report.unreadable, 1);
    assert!(report.failed(), "in_tx_await promised no loss (c4)");
    assert!(report.broker_failed(), "the broker acknowledged c5 at 0@99");

    // The command line says the same, and fails.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_chatlab"))
        .arg("audit")
        .arg("--settle-secs")
        .arg("0")
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("DATABASE_URL", db.url())
        .env("KAFKA_BROKERS", &brokers)
        .env("KAFKA_TOPIC", &topic)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("| in_tx_await | 2 | 0 | 1 | 2 | 1 | 0 | 0 | FAIL"),
        "{stdout}"
    );
}
