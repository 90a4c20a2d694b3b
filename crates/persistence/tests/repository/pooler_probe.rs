//! The startup probe tells a transaction pooler from PostgreSQL itself:
//! the suite's straight passes must find none, its pass through PgBouncer
//! in transaction mode (`CHATLAB_TEST_POOLER`) must find one.

use chatlab_persistence::database::pooler_probe::{Pooling, probe};
use chatlab_testdb::TestDb;
use secrecy::ExposeSecret as _;

#[tokio::test]
async fn the_probe_finds_a_transaction_pooler_exactly_when_one_is_in_the_path() {
    let db = TestDb::new().await;
    let url = db.config().url.expose_secret().to_owned();
    let found = tokio::task::spawn_blocking(move || probe(&url))
        .await
        .unwrap()
        .unwrap();
    match chatlab_testdb::pooler() {
        Some(at) => assert!(
            matches!(found, Pooling::TransactionPooler { before, after } if before != after),
            "through {at}: {found:?}"
        ),
        None => assert_eq!(found, Pooling::SessionPerConnection),
    }
}
