//! Every round trip on the wire is one the session counts: a hop
//! (chatlab-delay, at no delay) in front of the test database counts the
//! client's flights, a chunk sent after the server's last answer, while the
//! session counts round trips into `chatlab_create_chat_round_trips_total`.
//! A round trip the plans do not know of (a statement prepared in a round
//! trip of its own, say) shows as a difference here, not only at a distance.

use std::sync::Arc;

use chatlab_delay::{Distance, Proxy, Settings};
use chatlab_domain::{InsertStrategy, PublishMode};
use chatlab_persistence::PgStore;
use chatlab_testdb::TestDb;
use prometheus_client::encoding::text::encode;
use prometheus_client::registry::Registry;

use crate::support::Writes;
use crate::support::{NoBroker, command, seed_users};

/// The round trips the session counted for `strategy` so far.
fn counted(registry: &Registry, strategy: InsertStrategy) -> f64 {
    let mut text = String::new();
    encode(&mut text, registry).unwrap();
    chatlab_testdb::sample(
        &text,
        &format!("chatlab_create_chat_round_trips_total{{strategy=\"{strategy}\"}}"),
    )
    .unwrap_or(0.0)
}

#[tokio::test]
async fn every_round_trip_on_the_wire_is_one_the_session_counts() {
    let db = TestDb::new().await;
    let upstream = db.server_addr();
    let proxy = Proxy::start(Settings {
        listen: "127.0.0.1:0".parse().unwrap(),
        upstream,
        distance: Distance::default(),
        control: None,
    })
    .await
    .unwrap();
    let mut config = db.config();
    config.url = db.url_at(proxy.local_addr()).into();
    // One connection: every statement is prepared on it by the warm-up, as
    // on a pooled connection that has served before.
    config.pool_max_size = 1;
    let mut registry = Registry::default();
    let store = PgStore::new(&config, &mut registry, Arc::new(NoBroker));
    let users = seed_users(&store, 50).await;
    for strategy in chatlab_testdb::strategies() {
        for mode in [PublishMode::Off, PublishMode::Outbox] {
            let create = || command("room", users[0], &users[1..]);
            for _ in 0..2 {
                store.create_chat(create(), strategy, mode).await.unwrap();
            }
            let (flights, trips) = (proxy.stats().flights, counted(&registry, strategy));
            store.create_chat(create(), strategy, mode).await.unwrap();
            let on_wire = proxy.stats().flights - flights;
            let by_session = counted(&registry, strategy) - trips;
            assert_eq!(
                on_wire as f64, by_session,
                "{strategy} {mode}: {on_wire} round trips on the wire, {by_session} counted"
            );
        }
    }
}
