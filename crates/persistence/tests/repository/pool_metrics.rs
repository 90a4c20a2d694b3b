use chatlab_domain::{
    IdempotencyKey, InsertStrategy, KeyClaim, PublishMode, Sending, StoredResponse,
};
use prometheus_client::encoding::text::encode;

use crate::support::Writes;
use crate::support::{command, fixture, seed_users};

fn sample(text: &str, name: &str) -> f64 {
    chatlab_testdb::sample(text, name).unwrap_or_else(|| panic!("no sample {name} in\n{text}"))
}

/// Counter `name` of `strategy` in `registry` now (0 before its first
/// count).
fn strategy_count(
    registry: &prometheus_client::registry::Registry,
    name: &str,
    strategy: InsertStrategy,
) -> f64 {
    let mut text = String::new();
    encode(&mut text, registry).unwrap();
    chatlab_testdb::sample(&text, &format!("{name}{{strategy=\"{strategy}\"}}")).unwrap_or(0.0)
}

#[tokio::test]
async fn every_checkout_is_timed_and_returned() {
    let f = fixture().await;
    let users = seed_users(&f.store, 50).await;
    let before = {
        let mut text = String::new();
        encode(&mut text, &f.registry).unwrap();
        sample(&text, "db_client_connection_use_time_seconds_count")
    };
    f.store
        .create_chat(
            command("room", users[0], &users[1..]),
            InsertStrategy::PerRow,
            PublishMode::Off,
        )
        .await
        .unwrap();
    f.store.db().refresh_metrics();
    let mut text = String::new();
    encode(&mut text, &f.registry).unwrap();

    assert_eq!(
        sample(&text, "db_client_connection_use_time_seconds_count"),
        before + 1.0
    );
    assert!(sample(&text, "db_client_connection_use_time_seconds_sum") > 0.0);
    assert!(sample(&text, "db_client_connection_wait_time_seconds_count") >= 2.0);
    assert_eq!(
        sample(
            &text,
            "db_client_connection_count{db_client_connection_state=\"used\"}"
        ),
        0.0
    );
    assert!(
        sample(
            &text,
            "db_client_connection_count{db_client_connection_state=\"idle\"}"
        ) >= 1.0
    );
    assert_eq!(sample(&text, "db_client_connection_pending_requests"), 0.0);
    assert_eq!(sample(&text, "db_client_connection_max"), 4.0);
    // 50 members per row: the chat row, 50 member rows, the system message.
    assert_eq!(
        sample(
            &text,
            "chatlab_create_chat_statements_total{strategy=\"per_row\"}"
        ),
        52.0
    );
    assert_eq!(
        sample(
            &text,
            "chatlab_create_chat_rows_inserted_total{strategy=\"per_row\"}"
        ),
        52.0
    );
    assert_eq!(
        sample(
            &text,
            "chatlab_create_chat_connection_hold_seconds_count{strategy=\"per_row\",publish_mode=\"off\"}"
        ),
        1.0
    );
}

#[tokio::test]
async fn batch_and_unnest_send_three_statements_for_fifty_members() {
    let f = fixture().await;
    let users = seed_users(&f.store, 50).await;
    for strategy in [InsertStrategy::Batch, InsertStrategy::Unnest] {
        f.store
            .create_chat(
                command("room", users[0], &users[1..]),
                strategy,
                PublishMode::Off,
            )
            .await
            .unwrap();
    }
    let mut text = String::new();
    encode(&mut text, &f.registry).unwrap();
    for strategy in ["batch", "unnest"] {
        let label = format!("{{strategy=\"{strategy}\"}}");
        assert_eq!(
            sample(
                &text,
                &format!("chatlab_create_chat_statements_total{label}")
            ),
            3.0
        );
        assert_eq!(
            sample(
                &text,
                &format!("chatlab_create_chat_rows_inserted_total{label}")
            ),
            52.0
        );
    }
}

/// Every strategy sends the statements its plan describes: one by one,
/// the chat row and the system message around the member rows as the
/// plan's `RowsBy` sends them (50 single-row INSERTs, one VALUES chunk, one
/// `unnest`, one COPY); one statement for `single`; `unnest`'s three in a
/// flight for `pipeline`. Each writes the same 52 rows.
#[tokio::test]
async fn every_strategy_sends_the_statements_its_plan_describes() {
    let f = fixture().await;
    let users = seed_users(&f.store, 50).await;
    for strategy in chatlab_testdb::strategies() {
        let counted = |name: &str| strategy_count(&f.registry, name, strategy);
        let (statements, rows) = (
            counted("chatlab_create_chat_statements_total"),
            counted("chatlab_create_chat_rows_inserted_total"),
        );
        f.store
            .create_chat(
                command("room", users[0], &users[1..]),
                strategy,
                PublishMode::Off,
            )
            .await
            .unwrap();
        let plan = strategy.plan();
        let expected = match plan.sending {
            Sending::OneByOne => 2 + plan.rows.statements(50, 3),
            Sending::OneStatement => 1,
            Sending::OneFlight => 3,
        };
        assert_eq!(
            counted("chatlab_create_chat_statements_total") - statements,
            expected as f64,
            "{strategy}"
        );
        assert_eq!(
            counted("chatlab_create_chat_rows_inserted_total") - rows,
            52.0,
            "{strategy}"
        );
    }
}

/// Round trips per committed createChat of 50 members, as the session
/// counts them: BEGIN, each statement, the outbox row, COMMIT; `batch`'s
/// VALUES statement is prepared in a round trip of its own on the async
/// driver; `single` is one statement on its own, its outbox row inside it;
/// `pipeline` is one flight on the async driver, and on the blocking driver
/// (no pipeline) unnest's round trips; `copy` (blocking only) sends its
/// member rows as one COPY, which waits for the server twice. Under an
/// idempotency key even one statement or one flight is wrapped in a
/// transaction that claims the key first. (The `wire` test checks these
/// against a hop's count.)
#[tokio::test]
async fn round_trips_are_counted_per_strategy_and_mode() {
    let f = fixture().await;
    let users = seed_users(&f.store, 50).await;
    let round_trips = |strategy: InsertStrategy| {
        strategy_count(
            &f.registry,
            "chatlab_create_chat_round_trips_total",
            strategy,
        )
    };
    let on_async = chatlab_testdb::driver() == chatlab_persistence::Driver::Async;
    let piped = |on_async_driver: f64, on_blocking: f64| {
        if on_async {
            on_async_driver
        } else {
            on_blocking
        }
    };
    let mut cases = vec![
        (InsertStrategy::PerRow, PublishMode::Off, false, 54.0),
        (
            InsertStrategy::Batch,
            PublishMode::Off,
            false,
            piped(6.0, 5.0),
        ),
        (InsertStrategy::Unnest, PublishMode::Off, false, 5.0),
        (InsertStrategy::Single, PublishMode::Off, false, 1.0),
        (
            InsertStrategy::Batch,
            PublishMode::Outbox,
            false,
            piped(7.0, 6.0),
        ),
        (InsertStrategy::Single, PublishMode::Outbox, false, 1.0),
        (
            InsertStrategy::Pipeline,
            PublishMode::Off,
            false,
            piped(1.0, 5.0),
        ),
        (
            InsertStrategy::Pipeline,
            PublishMode::Outbox,
            false,
            piped(1.0, 6.0),
        ),
        // BEGIN, the key's claim, the statement, COMMIT.
        (InsertStrategy::Single, PublishMode::Off, true, 4.0),
        // BEGIN, the claim, the flight (or unnest's three), the outbox row, COMMIT.
        (
            InsertStrategy::Pipeline,
            PublishMode::Outbox,
            true,
            piped(5.0, 7.0),
        ),
        (InsertStrategy::Unnest, PublishMode::Off, true, 6.0),
    ];
    if !on_async {
        cases.push((InsertStrategy::Copy, PublishMode::Off, false, 6.0));
        cases.push((InsertStrategy::Copy, PublishMode::Outbox, true, 8.0));
    }
    for (n, (strategy, mode, keyed, expected)) in cases.into_iter().enumerate() {
        let key = keyed.then(|| KeyClaim {
            user_id: users[0],
            key: IdempotencyKey::parse(&format!("round-trips-{n}")).unwrap(),
            fingerprint: vec![n as u8],
            response: StoredResponse {
                status: 201,
                body: "{}".into(),
            },
        });
        let before = round_trips(strategy);
        let created = f
            .store
            .create_chat_keyed(command("room", users[0], &users[1..]), strategy, mode, key)
            .await
            .unwrap();
        assert!(created.fresh().is_some(), "{strategy} {mode} keyed {keyed}");
        assert_eq!(
            round_trips(strategy) - before,
            expected,
            "{strategy} {mode} keyed {keyed}"
        );
    }
}
