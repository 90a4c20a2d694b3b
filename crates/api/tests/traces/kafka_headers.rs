//! The record on the broker carries the request's trace, in every mode
//! that publishes, sampled or not: a consumer continues the trace of the
//! request that wrote the event (and knows whether it was sampled).

use std::time::{Duration, Instant};

use serde_json::json;

use chatlab_kafka::topic_reader::read_all;

use crate::collected::traceparent;
use crate::span_tree::spawn_on_tansu;

#[tokio::test]
async fn every_published_record_continues_its_requests_trace() {
    let (app, brokers, topic) = spawn_on_tansu().await;
    let users = app.bulk_users(3).await;
    let modes = ["in_tx_await", "in_tx_enqueue", "after_commit", "outbox"];
    let mut expected = Vec::new();
    for (mode, flags) in modes.iter().flat_map(|m| [(*m, "01"), (*m, "00")]) {
        let (tp, trace_id, parent) = traceparent();
        // The caller decided not to sample: the server's spans are left
        // out, the context still travels.
        let tp = format!("{}-{flags}", &tp[..tp.len() - 3]);
        let resp = app
            .client
            .post(app.url("/v1/chats"))
            .header("authorization", app.bearer(users[0]))
            .header("traceparent", &tp)
            .header("x-chatlab-publish-mode", mode)
            .json(&json!({ "name": mode, "member_ids": &users[1..] }))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 201, "{mode}");
        let body: serde_json::Value = resp.json().await.unwrap();
        let chat: uuid::Uuid = body["id"].as_str().unwrap().parse().unwrap();
        expected.push((mode, flags, chat, trace_id, parent));
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    let records = loop {
        let (b, t) = (brokers.clone(), topic.clone());
        let read = tokio::task::spawn_blocking(move || read_all(&b, &t, Duration::from_secs(10)))
            .await
            .unwrap();
        match read {
            Ok(s) if s.records.len() >= expected.len() => break s.records,
            _ if Instant::now() < deadline => tokio::time::sleep(Duration::from_millis(300)).await,
            other => panic!("{topic}: {:?}", other.map(|s| s.records.len())),
        }
    };
    for (mode, flags, chat, trace_id, parent) in expected {
        let record = records
            .iter()
            .find(|r| r.event.as_ref().is_ok_and(|e| e.chat_id() == chat))
            .unwrap_or_else(|| panic!("{mode}: no record of chat {chat}"));
        let header = record
            .traceparent
            .as_deref()
            .unwrap_or_else(|| panic!("{mode}: the record has no traceparent"));
        let parts: Vec<&str> = header.split('-').collect();
        assert_eq!(parts.len(), 4, "{header}");
        assert_eq!(
            parts[1], trace_id,
            "{mode} {flags}: the request's trace: {header}"
        );
        assert_ne!(
            parts[2], parent,
            "{mode} {flags}: a span of the server's, not the caller's"
        );
        assert_eq!(parts[3], flags, "{mode}: sampled as the caller asked");
    }
}
