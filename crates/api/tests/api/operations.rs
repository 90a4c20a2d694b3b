use reqwest::StatusCode;
use serde_json::Value;

use crate::support::{sample, spawn_app};

#[tokio::test]
async fn health_and_readiness_answer() {
    let app = spawn_app().await;
    let health: Value = app.get("/healthz").await.json().await.unwrap();
    assert_eq!(health["status"], "ok");
    let ready = app.get("/readyz").await;
    assert_eq!(ready.status(), StatusCode::OK);
    // The operator listener answers them too, so a scraper needs one port.
    let health: Value = app.get_ops("/healthz").await.json().await.unwrap();
    assert_eq!(health["status"], "ok");
    assert_eq!(app.get_ops("/readyz").await.status(), StatusCode::OK);
}

#[tokio::test]
async fn metrics_count_checkouts_and_return_every_connection() {
    let app = spawn_app().await;
    let users = app.bulk_users(50).await;
    let before = app.metrics().await;
    let uses_before = sample(&before, "db_client_connection_use_time_seconds_count").unwrap();
    app.create_chat_ok(users[0], &users[1..]).await;
    let after = app.metrics().await;
    assert_eq!(
        sample(&after, "db_client_connection_use_time_seconds_count").unwrap(),
        uses_before + 1.0
    );
    assert!(sample(&after, "db_client_connection_wait_time_seconds_count").unwrap() >= 2.0);
    assert_eq!(
        sample(
            &after,
            "db_client_connection_count{db_client_connection_state=\"used\"}"
        ),
        Some(0.0)
    );
    assert_eq!(
        sample(&after, "db_client_connection_pending_requests"),
        Some(0.0)
    );
    assert_eq!(sample(&after, "db_client_connection_max"), Some(4.0));
    assert_eq!(
        sample(&after, "db_client_connection_timeouts_total"),
        Some(0.0)
    );
    assert_eq!(
        sample(
            &after,
            "chatlab_create_chat_statements_total{strategy=\"batch\"}"
        ),
        Some(3.0)
    );
    assert_eq!(
        sample(
            &after,
            "chatlab_create_chat_rows_inserted_total{strategy=\"batch\"}"
        ),
        Some(52.0)
    );
    assert!(after.contains(
        "http_server_request_duration_seconds_count{http_request_method=\"POST\",http_route=\"/v1/chats\",http_response_status_code=\"201\"} 1"
    ));
}

/// The committed `openapi/openapi.json` is what the code generates; run
/// `make openapi` after changing an endpoint.
#[tokio::test]
async fn committed_openapi_document_is_current_and_served() {
    let generated = chatlab_api::openapi::document_json().unwrap();
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../openapi/openapi.json");
    let committed = std::fs::read_to_string(path).unwrap_or_default();
    assert!(
        committed == generated,
        "openapi/openapi.json is stale: run `make openapi` and commit the result"
    );
    let doc: Value = serde_json::from_str(&generated).unwrap();
    assert_eq!(doc["openapi"], "3.1.0");
    for path in [
        "/v1/users",
        "/v1/users/{id}",
        "/v1/tokens",
        "/v1/chats",
        "/v1/chats/{id}",
        "/v1/chats/{id}/members",
        "/v1/chats/{id}/messages",
        "/healthz",
        "/readyz",
    ] {
        assert!(
            doc["paths"].get(path).is_some(),
            "{path} missing from the spec"
        );
    }
    // The operator listener's paths are not the public API's.
    for path in ["/v1/users/bulk", "/metrics", "/audit"] {
        assert!(
            doc["paths"].get(path).is_none(),
            "{path} is an operator path, not in the public spec"
        );
    }

    let app = spawn_app().await;
    let served: Value = app.get("/openapi.json").await.json().await.unwrap();
    assert_eq!(served, doc);
    let docs = app.get("/docs/").await;
    assert_eq!(docs.status(), StatusCode::OK);
    assert!(docs.text().await.unwrap().contains("swagger"));
}
