//! The background workers under their owner, against a real database:
//! once the owner is gone, the outbox relay and the receipt ledger stop
//! and close their connections, instead of waiting on a stop signal that
//! can never come (or spinning, querying without pause); and a server
//! whose process starts within a minute of the machine's boot relays its
//! outbox: "a minute ago" is never computed as an `Instant`, which would
//! lie before the boot and panic where an `Instant` counts unsigned ticks
//! (macOS).
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::Utc;
use diesel::sql_types::{BigInt, Text};
use diesel_async::RunQueryDsl;
use prometheus_client::registry::Registry;
use tokio::sync::{Notify, mpsc};
use uuid::Uuid;

use chatlab_api::background::Background;
use chatlab_api::background::outbox_relay::Relay;
use chatlab_api::background::receipt_ledger::Receipts;
use chatlab_domain::{AckedEvent, Event, EventPublisher, PublishError, PublishMode, Receipt};
use chatlab_persistence::events::outbox_relay::{OutboxMetrics, OutboxRelay, RelaySettings};
use chatlab_persistence::events::receipt_ledger::{LedgerMetrics, LedgerSettings, ReceiptLedger};
use chatlab_testdb::TestDb;

/// Acknowledges every event at offset 0.
struct Acknowledging;

#[async_trait::async_trait]
impl EventPublisher for Acknowledging {
    async fn publish(&self, _: &Event, _: PublishMode) -> Result<Receipt, PublishError> {
        Ok(Receipt {
            partition: 0,
            offset: 0,
        })
    }

    fn enqueue(&self, _: &Event, _: PublishMode) -> Result<(), PublishError> {
        Ok(())
    }
}

#[derive(diesel::QueryableByName)]
struct Count {
    #[diesel(sql_type = BigInt)]
    n: i64,
}

/// Sessions on `db` whose application name ends with `suffix`.
async fn sessions(db: &TestDb, suffix: &str) -> i64 {
    let mut conn = db.connect().await;
    diesel::sql_query(
        "SELECT count(*) AS n FROM pg_stat_activity WHERE datname = $1 AND application_name LIKE $2",
    )
    .bind::<Text, _>(db.name())
    .bind::<Text, _>(format!("%{suffix}"))
    .get_result::<Count>(&mut conn)
    .await
    .unwrap()
    .n
}

async fn until(what: &str, mut done: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(15);
    while !done().await {
        assert!(Instant::now() < deadline, "{what} within 15 s");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn dropping_the_owner_stops_the_relay_and_the_ledger_and_closes_their_connections() {
    let db = TestDb::new().await;
    let config = db.config();
    let mut registry = Registry::default();
    let relay = OutboxRelay::new(
        config.url.clone(),
        &config.session,
        Arc::new(Acknowledging),
        Arc::new(Notify::new()),
        OutboxMetrics::register(&mut registry),
        RelaySettings {
            poll_interval: Duration::from_millis(20),
            ..RelaySettings::default()
        },
    );
    // The receipts' sender stays open throughout: only the owner going
    // away may stop the ledger.
    let (receipts, receipts_rx) = mpsc::channel(16);
    let ledger = ReceiptLedger::new(
        config.url.clone(),
        &config.session,
        receipts_rx,
        LedgerMetrics::register(&mut registry),
        LedgerSettings::for_topic("background-test"),
    );
    let mut background = Background::new();
    background.run("outbox relay", relay.poll_interval(), Relay::new(relay));
    background.run_last("receipt ledger", ledger.flush_interval(), Receipts(ledger));
    // A receipt, so the ledger connects to write it.
    receipts
        .send(AckedEvent {
            event_id: Uuid::now_v7(),
            subject_id: Uuid::now_v7(),
            mode: PublishMode::AfterCommit,
            occurred_at: Utc::now(),
            receipt: Receipt {
                partition: 0,
                offset: 0,
            },
        })
        .await
        .unwrap();
    until("the relay and the ledger connected", async || {
        sessions(&db, "-outbox-relay").await == 1 && sessions(&db, "-receipt-ledger").await == 1
    })
    .await;

    drop(background);

    until(
        "the relay and the ledger closed their connections",
        async || {
            sessions(&db, "-outbox-relay").await == 0 && sessions(&db, "-receipt-ledger").await == 0
        },
    )
    .await;
    drop(receipts);
}

/// `unshare` with a time namespace whose clocks read about `at` since
/// boot: plainly (root), else inside a user namespace of one's own.
fn near_boot(at: Duration) -> std::process::Command {
    let uptime: f64 = std::fs::read_to_string("/proc/uptime")
        .expect("/proc/uptime")
        .split_whitespace()
        .next()
        .and_then(|s| s.parse().ok())
        .expect("the uptime");
    let offset = format!("-{}", (uptime - at.as_secs_f64()).max(0.0) as u64);
    let args = |user: bool| {
        let mut a: Vec<String> = Vec::new();
        if user {
            a.extend(["--user".into(), "--map-root-user".into()]);
        }
        a.extend([
            "--time".into(),
            format!("--monotonic={offset}"),
            format!("--boottime={offset}"),
        ]);
        a
    };
    for user in [false, true] {
        let works = std::process::Command::new("unshare")
            .args(args(user))
            .arg("true")
            .status()
            .is_ok_and(|s| s.success());
        if works {
            let mut command = std::process::Command::new("unshare");
            command.args(args(user)).arg("--");
            return command;
        }
    }
    panic!(
        "this test needs a time namespace (util-linux `unshare --time`, Linux 5.6+, as root or \
         with unprivileged user namespaces) to start a process whose clock reads seconds since boot"
    );
}

#[tokio::test]
async fn a_server_started_within_a_minute_of_boot_relays_its_outbox() {
    use std::io::BufRead as _;

    let db = TestDb::new().await;
    let mut server = near_boot(Duration::from_secs(5))
        .arg(env!("CARGO_BIN_EXE_chatlab"))
        .arg("serve")
        .env_clear()
        .envs([
            ("DATABASE_URL", db.url()),
            ("HTTP_ADDR", "127.0.0.1:0"),
            ("OPS_ADDR", "127.0.0.1:0"),
            ("CHATLAB_JWT_SECRET", crate::support::TEST_JWT_SECRET),
            ("HTTP_WORKERS", "1"),
            ("LOG_FORMAT", "json"),
            ("RUST_LOG", "warn,chatlab_api::startup=info"),
        ])
        .stderr(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let stderr = server.stderr.take().unwrap();
    let (lines, log) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            if lines.send(line).is_err() {
                return;
            }
        }
    });

    // A row in the outbox, as a write in outbox mode leaves it.
    let chat = Uuid::now_v7();
    let event = Event {
        event_id: Uuid::now_v7(),
        occurred_at: Utc::now(),
        schema_version: 1,
        publish_mode: "outbox".into(),
        payload: chatlab_domain::EventPayload::MessageSent {
            chat_id: chat,
            message_id: Uuid::now_v7(),
            sender_id: Uuid::now_v7(),
            body_length: 1,
            body: None,
        },
        trace_parent: None,
    };
    let mut conn = db.connect().await;
    diesel::sql_query(
        "INSERT INTO outbox (event_id, chat_id, lock_key, event_type, payload, created_at) \
         VALUES ($1, $2, 7, 'message.sent', $3, now())",
    )
    .bind::<diesel::sql_types::Uuid, _>(event.event_id)
    .bind::<diesel::sql_types::Uuid, _>(chat)
    .bind::<Text, _>(event.to_json().unwrap())
    .execute(&mut conn)
    .await
    .unwrap();

    let deadline = Instant::now() + Duration::from_secs(30);
    let published = loop {
        let n =
            diesel::sql_query("SELECT count(*) AS n FROM outbox WHERE published_at IS NOT NULL")
                .get_result::<Count>(&mut conn)
                .await
                .unwrap()
                .n;
        if n == 1 || Instant::now() > deadline || server.try_wait().unwrap().is_some() {
            break n;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let _ = server.kill();
    let _ = server.wait();
    let panics: Vec<String> = log.try_iter().filter(|l| l.contains("panicked")).collect();
    assert!(panics.is_empty(), "the server panicked: {panics:?}");
    assert_eq!(published, 1, "the relay published the outbox row");
}
