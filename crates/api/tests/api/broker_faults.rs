//! Real broker faults, on a tansu of the test's own: frozen and resumed (a
//! hung broker, or a partition). (Killed and restarted on its SQLite
//! storage, tansu 0.6.0 panics on the first idempotent produce after the
//! restart and never produces again, for any client: that fault waits for
//! a broker that survives it.)
//! Whatever state librdkafka's idempotent producer is left in (after a
//! delivery timeout it can be fenced for good), publishing resumes by
//! itself, every mode keeps its promise, and no outbox row stays pending.

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use uuid::Uuid;

use crate::events::{audit, mode_row, outbox_pending, post_chat};
use crate::private_broker::PrivateBroker;
use crate::support::{TestApp, sample, spawn_app_with};

/// A server on `broker` with a short send timeout, so a fault of a few
/// seconds outlasts a delivery.
async fn spawn_on(broker: &PrivateBroker) -> TestApp {
    let brokers = broker.bootstrap();
    spawn_app_with(&[
        ("KAFKA_BROKERS", brokers.as_str()),
        ("KAFKA_TOPIC", "chatlab.fault-events"),
        ("KAFKA_TOPIC_PARTITIONS", "1"),
        ("KAFKA_SEND_TIMEOUT_MS", "2000"),
        ("CHATLAB_ALLOW_OVERRIDES", "true"),
    ])
    .await
}

/// Waits until the relay has published every outbox row.
async fn outbox_drained(app: &TestApp, within: Duration) {
    let deadline = Instant::now() + within;
    loop {
        let pending = outbox_pending(app).await;
        if pending == 0 {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{pending} outbox rows still pending {within:?} after the broker came back; metrics:\n{}",
            events_metrics(app).await
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn events_metrics(app: &TestApp) -> String {
    app.metrics()
        .await
        .lines()
        .filter(|l| l.starts_with("chatlab_event") || l.starts_with("chatlab_outbox"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// After the fault: a chat in every publishing mode is written and
/// published again (within `within`, the broker may still be coming back).
async fn every_mode_publishes_again(app: &TestApp, users: &[Uuid], within: Duration) {
    let deadline = Instant::now() + within;
    for mode in ["in_tx_await", "after_commit", "in_tx_enqueue", "outbox"] {
        loop {
            let before = app.metrics().await;
            let resp = post_chat(app, &format!("after {mode}"), users, mode).await;
            let status = resp.status();
            let published = |m: &str| {
                sample(
                    m,
                    &format!("chatlab_events_published_total{{publish_mode=\"{mode}\"}}"),
                )
                .unwrap_or(0.0)
            };
            // in_tx_enqueue's delivery is not awaited: give it a moment.
            tokio::time::sleep(Duration::from_millis(300)).await;
            let after = app.metrics().await;
            if status == StatusCode::CREATED
                && (mode == "outbox" || published(&after) > published(&before))
            {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{mode} does not publish {within:?} after the fault (last status {status}); metrics:\n{}",
                events_metrics(app).await
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
    outbox_drained(app, within).await;
}

/// tansu frozen for longer than a delivery timeout, then resumed: the
/// defect was a producer fenced for good (every send `ProducerFenced`,
/// outbox rows pending forever) until the process restarted.
#[tokio::test]
async fn a_frozen_broker_resumed_gets_every_mode_publishing_again_by_itself() {
    let broker = PrivateBroker::start().await;
    let app = spawn_on(&broker).await;
    let users = app.bulk_users(3).await;
    for mode in ["in_tx_await", "outbox"] {
        let resp = post_chat(&app, &format!("before {mode}"), &users, mode).await;
        assert_eq!(
            resp.status(),
            StatusCode::CREATED,
            "{mode} before the fault"
        );
    }
    outbox_drained(&app, Duration::from_secs(10)).await;

    broker.freeze();
    // While frozen: outbox commits (its events wait in the table),
    // in_tx_await refuses and rolls back, after_commit commits and loses.
    let frozen_at = Instant::now();
    for i in 0..3 {
        let resp = post_chat(&app, &format!("frozen outbox {i}"), &users, "outbox").await;
        assert_eq!(resp.status(), StatusCode::CREATED);
    }
    let before = app.row_counts().await;
    let refused = post_chat(&app, "frozen await", &users, "in_tx_await").await;
    assert_eq!(refused.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(app.row_counts().await, before, "in_tx_await rolled back");
    let lost = post_chat(&app, "frozen after", &users, "after_commit").await;
    assert_eq!(lost.status(), StatusCode::CREATED);
    // Keep it frozen well past the relay's delivery timeout.
    tokio::time::sleep(Duration::from_secs(5).saturating_sub(frozen_at.elapsed())).await;
    broker.resume();

    every_mode_publishes_again(&app, &users, Duration::from_secs(30)).await;
    // chatlab's promises: no event of a no-loss mode that the broker never
    // acknowledged is missing (tansu's memory engine can lose records it
    // acknowledged: the audit counts those as the broker's). The outbox
    // invents nothing; it may publish twice (a send that timed out while
    // the broker was frozen can still be stored when it resumes, and the
    // relay sends the row again). in_tx_await can invent the event of the
    // request it refused for the same reason: librdkafka gives up on the
    // delivery, the write rolls back, the broker stores the record anyway.
    let report = audit(&app).await;
    let table = report["table"].as_str().unwrap_or_default().to_owned();
    for mode in ["outbox", "in_tx_await"] {
        assert_eq!(mode_row(&report, mode)["failed"], false, "{mode}: {table}");
    }
    assert_eq!(mode_row(&report, "outbox")["phantom"], 0, "{table}");
    assert!(
        mode_row(&report, "in_tx_await")["phantom"].as_u64() <= Some(1),
        "at most the refused request's event: {table}"
    );
    assert_eq!(mode_row(&report, "outbox")["committed"], 5);
    let metrics = app.metrics().await;
    eprintln!(
        "producer rebuilds after the freeze: {:?}",
        sample(&metrics, "chatlab_event_producer_rebuilds_total")
    );
}
