//! The span tree of createChat: per strategy, per publish mode.

use reqwest::Response;
use serde_json::{Value, json};
use uuid::Uuid;

use crate::collected::{self, Trace, attr, traceparent};
use crate::support::{TestApp, spawn_app_with};

/// `POST /v1/chats` as `users[0]`, with the others as members.
async fn post_chat(
    app: &TestApp,
    name: &str,
    users: &[Uuid],
    headers: &[(&str, &str)],
) -> Response {
    let mut req = app
        .client
        .post(app.url("/v1/chats"))
        .header("authorization", app.bearer(users[0]))
        .json(&json!({ "name": name, "member_ids": &users[1..] }));
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    req.send().await.unwrap()
}

fn test_brokers() -> String {
    std::env::var("KAFKA_TEST_BROKERS").unwrap_or_else(|_| "127.0.0.1:9092".to_owned())
}

/// A server on the test broker, with a topic of its own and overrides on.
pub async fn spawn_on_tansu() -> (TestApp, String, String) {
    collected::install();
    let brokers = test_brokers();
    let topic = format!("chatlab-traces-{}", Uuid::now_v7().simple());
    let app = spawn_app_with(&[
        ("KAFKA_BROKERS", brokers.as_str()),
        ("KAFKA_TOPIC", topic.as_str()),
        ("CHATLAB_ALLOW_OVERRIDES", "true"),
        ("OUTBOX_POLL_MS", "50"),
    ])
    .await;
    (app, brokers, topic)
}

/// The server span of a traced request, with the checks every request
/// passes: it continues the caller's trace, and names its route.
fn server_span<'t>(t: &'t Trace, parent: &str) -> &'t opentelemetry_sdk::trace::SpanData {
    let server = t.one("POST /v1/chats");
    assert_eq!(
        server.parent_span_id.to_string(),
        parent,
        "the caller's span is the parent"
    );
    assert_eq!(attr(server, "http.request.method").as_deref(), Some("POST"));
    assert_eq!(attr(server, "http.route").as_deref(), Some("/v1/chats"));
    assert_eq!(
        attr(server, "http.response.status_code").as_deref(),
        Some("201")
    );
    server
}

#[tokio::test]
async fn every_strategy_shows_its_statements_under_the_connection_it_holds() {
    collected::install();
    let app = spawn_app_with(&[("CHATLAB_ALLOW_OVERRIDES", "true")]).await;
    let users = app.bulk_users(50).await;
    let member_ids: Vec<String> = users.iter().map(Uuid::to_string).collect();
    // INSERT statements at 50 members: the chat, each member, the system
    // message (per_row); the chat, the members, the message (batch,
    // unnest, pipeline); one statement of CTEs (single). Round trips on the
    // connection: those and BEGIN and COMMIT, batch's VALUES prepared in
    // one of its own on the async driver, pipeline's one flight (one by one
    // on the blocking driver, which has no pipeline).
    let on_async = chatlab_testdb::driver() == chatlab_persistence::Driver::Async;
    let by_driver = |on_async_driver: u64, on_blocking: u64| {
        if on_async {
            on_async_driver
        } else {
            on_blocking
        }
    };
    for (strategy, inserts, round_trips) in [
        ("per_row", 52, 54),
        ("batch", 3, by_driver(6, 5)),
        ("unnest", 3, 5),
        ("pipeline", 3, by_driver(1, 5)),
        ("single", 1, 1),
    ] {
        let (tp, trace_id, parent) = traceparent();
        let name = format!("secret-room-{}", Uuid::now_v7().simple());
        let resp = post_chat(
            &app,
            &name,
            &users,
            &[
                ("traceparent", &tp),
                ("x-chatlab-insert-strategy", strategy),
                ("x-chatlab-publish-mode", "off"),
            ],
        )
        .await;
        assert_eq!(resp.status(), 201, "{strategy}");
        let traceresponse = resp.headers()["traceresponse"].to_str().unwrap().to_owned();
        assert!(
            traceresponse.starts_with(&format!("00-{trace_id}-")),
            "{traceresponse}"
        );
        assert_eq!(resp.headers()["x-trace-id"].to_str().unwrap(), trace_id);
        let body: Value = resp.json().await.unwrap();
        let members = body["member_count"].as_u64().unwrap();

        let t = collected::trace(&trace_id, |t| !t.named("POST /v1/chats").is_empty()).await;
        let server = server_span(&t, &parent);
        assert_eq!(
            attr(server, "chatlab.insert_strategy").as_deref(),
            Some(strategy)
        );
        assert_eq!(
            attr(server, "chatlab.member_count"),
            Some(members.to_string())
        );
        // The server span's id is the one traceresponse names.
        assert!(traceresponse.contains(&server.span_context.span_id().to_string()));
        let wait = t.one("db.client.connection.wait");
        let held = t.one("db.client.connection.use");
        assert!(
            t.under(wait, server) && t.under(held, server),
            "{}",
            t.names()
        );
        assert!(
            wait.end_time <= held.start_time,
            "the wait ends before the hold starts"
        );
        assert_eq!(
            attr(held, "chatlab.round_trips"),
            Some(round_trips.to_string()),
            "{strategy}: the round trips it held the connection for"
        );

        let insert_spans = t.statements("INSERT", held);
        assert_eq!(insert_spans.len(), inserts, "{strategy}: {}", t.names());
        if strategy == "per_row" {
            assert_eq!(
                inserts as u64,
                members + 2,
                "a row per member, the chat, the message"
            );
        }
        for s in &insert_spans {
            assert_eq!(attr(s, "db.system.name").as_deref(), Some("postgresql"));
            assert_eq!(s.span_kind, opentelemetry::trace::SpanKind::Client);
            assert!(
                attr(s, "db.query.text").is_some_and(|q| q.contains('$')),
                "placeholders"
            );
            assert_eq!(
                attr(s, "db.query.summary"),
                attr(s, "db.collection.name").map(|c| format!("INSERT {c}"))
            );
        }
        if strategy != "single" {
            let tx = t.one("transaction");
            assert!(t.under(tx, held));
            assert_eq!(
                attr(tx, "chatlab.statements").as_deref(),
                Some(inserts.to_string().as_str())
            );
            assert_eq!(attr(tx, "chatlab.outcome").as_deref(), Some("committed"));
        }
        // No bind value anywhere: not the chat's name, not a member's id.
        for s in &t.0 {
            for kv in &s.attributes {
                let v = kv.value.to_string();
                assert!(!v.contains(&name), "{} = {v} names the chat", kv.key);
                assert!(
                    !member_ids.iter().any(|id| v.contains(id.as_str())),
                    "{} = {v} carries a member id",
                    kv.key
                );
            }
        }
    }
}

#[tokio::test]
async fn the_broker_send_sits_where_each_mode_puts_it() {
    let (app, _brokers, topic) = spawn_on_tansu().await;
    let users = app.bulk_users(3).await;
    let send = format!("send {topic}");
    for mode in ["in_tx_await", "in_tx_enqueue", "after_commit", "outbox"] {
        let (tp, trace_id, parent) = traceparent();
        let resp = post_chat(
            &app,
            "room",
            &users,
            &[("traceparent", &tp), ("x-chatlab-publish-mode", mode)],
        )
        .await;
        assert_eq!(resp.status(), 201, "{mode}");
        let in_request = mode != "outbox";
        let t = collected::trace(&trace_id, |t| {
            !t.named("POST /v1/chats").is_empty() && (!in_request || !t.named(&send).is_empty())
        })
        .await;
        let server = server_span(&t, &parent);
        assert_eq!(attr(server, "chatlab.publish_mode").as_deref(), Some(mode));
        let held = t.one("db.client.connection.use");
        match mode {
            "in_tx_await" | "in_tx_enqueue" => {
                let s = t.one(&send);
                assert!(t.under(s, held), "{mode}: the send holds the connection");
                assert_eq!(attr(s, "messaging.system").as_deref(), Some("kafka"));
                assert_eq!(
                    attr(s, "messaging.destination.name").as_deref(),
                    Some(topic.as_str())
                );
                assert!(
                    attr(s, "messaging.kafka.offset").is_some(),
                    "{mode}: acknowledged"
                );
            }
            "after_commit" => {
                let s = t.one(&send);
                assert!(
                    t.under(s, server) && !t.under(s, held),
                    "after the connection went back"
                );
                assert!(s.start_time >= held.end_time);
            }
            _ => {
                assert!(
                    t.named(&send).is_empty(),
                    "outbox: nothing sent in the request"
                );
                // The relay's batch, in a trace of its own, links back.
                let linked = wait_for_link(&trace_id).await;
                let batch_trace = linked.span_context.trace_id().to_string();
                assert_ne!(batch_trace, trace_id);
                let relay = collected::trace(&batch_trace, |t| !t.named(&send).is_empty()).await;
                let s = relay.named(&send);
                assert!(!s.is_empty() && s.iter().all(|s| relay.under(s, &linked)));
            }
        }
    }
}

/// The relay batch span that links to `trace_id`, within 15 s.
async fn wait_for_link(trace_id: &str) -> opentelemetry_sdk::trace::SpanData {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
    loop {
        let found = collected::all().into_iter().find(|s| {
            s.name == "outbox publish"
                && s.links
                    .iter()
                    .any(|l| l.span_context.trace_id().to_string() == trace_id)
        });
        if let Some(s) = found {
            return s;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no relay batch links to {trace_id}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn an_unsampled_request_exports_nothing_and_still_names_its_trace() {
    collected::install();
    let app = spawn_app_with(&[("CHATLAB_ALLOW_OVERRIDES", "true")]).await;
    let users = app.bulk_users(4).await;
    let (tp, unsampled, parent) = traceparent();
    let tp = format!("{}-00", &tp[..tp.len() - 3]);
    let resp = post_chat(
        &app,
        "unsampled",
        &users,
        &[
            ("traceparent", &tp),
            ("x-chatlab-insert-strategy", "per_row"),
        ],
    )
    .await;
    assert_eq!(resp.status(), 201);
    assert_eq!(resp.headers()["x-trace-id"].to_str().unwrap(), unsampled);
    let traceresponse = resp.headers()["traceresponse"].to_str().unwrap();
    assert!(
        traceresponse.starts_with(&format!("00-{unsampled}-")) && traceresponse.ends_with("-00"),
        "the server's span, not sampled: {traceresponse}"
    );
    assert!(!traceresponse.contains(&parent), "{traceresponse}");
    // A sampled request after it: once its spans are in, the unsampled
    // request's would be too (spans are exported as they end).
    let (tp, sampled, _) = traceparent();
    let resp = post_chat(&app, "sampled", &users, &[("traceparent", &tp)]).await;
    assert_eq!(resp.status(), 201);
    let t = collected::trace(&sampled, |t| !t.named("POST /v1/chats").is_empty()).await;
    assert!(
        !t.named("transaction").is_empty(),
        "the sampled trace is whole"
    );
    let leaked: Vec<_> = collected::all()
        .into_iter()
        .filter(|s| s.span_context.trace_id().to_string() == unsampled)
        .map(|s| s.name)
        .collect();
    assert!(
        leaked.is_empty(),
        "exported from an unsampled trace: {leaked:?}"
    );
}

#[tokio::test]
async fn a_failed_request_names_its_trace_in_the_problem() {
    collected::install();
    let app = spawn_app_with(&[]).await;
    let (tp, trace_id, _) = traceparent();
    let resp = app
        .client
        .post(app.url("/v1/chats"))
        .header("authorization", app.bearer(Uuid::now_v7()))
        .header("traceparent", &tp)
        .json(&json!({ "name": "", "member_ids": [] }))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 422);
    assert_eq!(resp.headers()["x-trace-id"].to_str().unwrap(), trace_id);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["trace_id"], trace_id.as_str());
    assert_eq!(body["status"], 422);
    // An untraced request still gets a trace of its own, and names it.
    let resp = app.get_as(Uuid::now_v7(), "/v1/chats/not-a-uuid").await;
    assert_eq!(resp.status(), 400);
    let id = resp.headers()["x-trace-id"].to_str().unwrap().to_owned();
    assert_eq!(id.len(), 32);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["trace_id"], id.as_str());
}

#[tokio::test]
async fn an_import_jobs_parallel_chunks_stay_in_its_trace() {
    collected::install();
    let app = spawn_app_with(&[("CHATLAB_ALLOW_OVERRIDES", "true")]).await;
    let users = app.bulk_users(41).await;
    let chat = app.create_chat_ok(users[0], &users[1..2]).await;
    let (tp, trace_id, parent) = traceparent();
    let resp = app
        .client
        .post(app.url(&format!("/v1/chats/{chat}/members/import")))
        .header("authorization", app.bearer(users[0]))
        .header("traceparent", &tp)
        .json(&json!({ "user_ids": &users[2..], "chunk_size": 10, "parallelism": 2 }))
        .send()
        .await
        .unwrap();
    assert!(resp.status().is_success(), "{}", resp.status());
    let route = "POST /v1/chats/{id}/members/import";
    let t = collected::trace(&trace_id, |t| !t.named(route).is_empty()).await;
    let server = t.one(route);
    assert_eq!(server.parent_span_id.to_string(), parent);
    // The owner's check, then four chunks of ten, each on a connection of
    // its own, all under the request although they ran side by side.
    let holds = t.named("db.client.connection.use");
    assert!(holds.iter().all(|h| t.under(h, server)));
    let chunks: Vec<_> = holds
        .iter()
        .filter(|h| !t.statements("INSERT", h).is_empty())
        .collect();
    assert_eq!(chunks.len(), 4, "{}", t.names());
}
