//! What a browser needs: CORS for the origins the operator lists (and for
//! no other, and never on the operator listener), live tickets that open a
//! stream where `EventSource` and `WebSocket` cannot send `Authorization`,
//! and the web client, served only when asked for.

use diesel_async::RunQueryDsl;
use reqwest::Method;
use serde_json::Value;
use uuid::Uuid;

use crate::support::{TestApp, assert_problem, spawn_app, spawn_app_with};

const PAGE: &str = "http://page.example:5173";
const OTHER: &str = "http://elsewhere.example";

async fn preflight(app: &TestApp, url: String, origin: &str) -> reqwest::Response {
    app.client
        .request(Method::OPTIONS, url)
        .header("origin", origin)
        .header("access-control-request-method", "POST")
        .header(
            "access-control-request-headers",
            "authorization, content-type, x-chatlab-insert-strategy, idempotency-key",
        )
        .send()
        .await
        .unwrap()
}

fn header<'a>(resp: &'a reqwest::Response, name: &str) -> Option<&'a str> {
    resp.headers().get(name).and_then(|v| v.to_str().ok())
}

#[tokio::test]
async fn an_allowed_origin_passes_the_preflight_and_reads_the_answer() {
    let app = spawn_app_with(&[("CORS_ALLOWED_ORIGINS", PAGE)]).await;
    let resp = preflight(&app, app.url("/v1/chats"), PAGE).await;
    assert!(resp.status().is_success(), "{}", resp.status());
    assert_eq!(header(&resp, "access-control-allow-origin"), Some(PAGE));
    let allowed = header(&resp, "access-control-allow-headers")
        .unwrap_or_default()
        .to_ascii_lowercase();
    for name in [
        "authorization",
        "content-type",
        "x-chatlab-insert-strategy",
        "idempotency-key",
    ] {
        assert!(allowed.contains(name), "{name} not allowed: {allowed}");
    }
    assert_eq!(header(&resp, "access-control-allow-credentials"), None);

    // The request itself: the page may read its answer and the headers a
    // client needs.
    let resp = app
        .client
        .post(app.url("/v1/users"))
        .header("origin", PAGE)
        .json(&serde_json::json!({"name": "ada"}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 201);
    assert_eq!(header(&resp, "access-control-allow-origin"), Some(PAGE));
    let exposed = header(&resp, "access-control-expose-headers")
        .unwrap_or_default()
        .to_ascii_lowercase();
    for name in [
        "location",
        "retry-after",
        "idempotent-replayed",
        "x-chatlab-insert-strategy",
    ] {
        assert!(exposed.contains(name), "{name} not exposed: {exposed}");
    }
    // A refusal carries them too, so the page can read the problem.
    let resp = app
        .client
        .get(app.url("/v1/me/chats"))
        .header("origin", PAGE)
        .send()
        .await
        .unwrap();
    assert_eq!(header(&resp, "access-control-allow-origin"), Some(PAGE));
    assert_problem(resp, 401, "unauthorized").await;
}

#[tokio::test]
async fn another_origin_is_refused_and_none_is_allowed_by_default() {
    let app = spawn_app_with(&[("CORS_ALLOWED_ORIGINS", PAGE)]).await;
    let resp = preflight(&app, app.url("/v1/chats"), OTHER).await;
    assert_eq!(header(&resp, "access-control-allow-origin"), None);
    let resp = app
        .client
        .get(app.url("/healthz"))
        .header("origin", OTHER)
        .send()
        .await
        .unwrap();
    assert_eq!(header(&resp, "access-control-allow-origin"), None);

    let same_origin_only = spawn_app().await;
    let resp = preflight(&same_origin_only, same_origin_only.url("/v1/chats"), PAGE).await;
    assert_eq!(header(&resp, "access-control-allow-origin"), None);
}

#[tokio::test]
async fn the_operator_listener_never_answers_cross_origin() {
    let app = spawn_app_with(&[("CORS_ALLOWED_ORIGINS", PAGE)]).await;
    for path in ["/metrics", "/v1/users/bulk"] {
        let resp = preflight(&app, app.ops_url(path), PAGE).await;
        assert_eq!(header(&resp, "access-control-allow-origin"), None, "{path}");
    }
    let resp = app
        .client
        .get(app.ops_url("/metrics"))
        .header("origin", PAGE)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(header(&resp, "access-control-allow-origin"), None);
}

#[test]
fn an_origin_with_a_path_stops_startup_naming_the_setting() {
    let mut vars = std::collections::HashMap::new();
    vars.insert(
        "CORS_ALLOWED_ORIGINS".to_owned(),
        "https://chat.example/app".to_owned(),
    );
    let err = chatlab_api::config::Settings::from_vars(vars)
        .expect_err("an origin with a path is refused")
        .to_string();
    assert!(err.contains("CORS_ALLOWED_ORIGINS"), "{err}");
}

async fn ticket(app: &TestApp, user: Uuid) -> String {
    let resp = app
        .client
        .post(app.url("/v1/live/tickets"))
        .header("authorization", app.bearer(user))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 201);
    assert_eq!(header(&resp, "cache-control"), Some("no-store"));
    let body: Value = resp.json().await.unwrap();
    let expires_at = chrono::DateTime::parse_from_rfc3339(body["expires_at"].as_str().unwrap())
        .unwrap()
        .with_timezone(&chrono::Utc);
    let left = expires_at - chrono::Utc::now();
    assert!(
        left > chrono::Duration::zero() && left <= chrono::Duration::seconds(31),
        "{left}"
    );
    body["ticket"].as_str().unwrap().to_owned()
}

async fn events_with(app: &TestApp, ticket: &str) -> reqwest::Response {
    app.client
        .get(app.url(&format!("/v1/events?ticket={ticket}")))
        .send()
        .await
        .unwrap()
}

#[tokio::test]
async fn a_ticket_opens_one_stream_once_for_its_user() {
    let app = spawn_app().await;
    let ada = app.create_user("ada").await;
    let first = ticket(&app, ada).await;
    let resp = events_with(&app, &first).await;
    assert_eq!(resp.status(), 200);
    assert_eq!(header(&resp, "content-type"), Some("text/event-stream"));
    drop(resp);
    // Used: refused, on the SSE stream and the WebSocket alike.
    assert_problem(events_with(&app, &first).await, 401, "unauthorized").await;
    let ws = app
        .url(&format!("/v1/ws?ticket={first}"))
        .replacen("http://", "ws://", 1);
    match tokio_tungstenite::connect_async(ws).await {
        Err(tokio_tungstenite::tungstenite::Error::Http(resp)) => assert_eq!(resp.status(), 401),
        other => panic!(
            "a used ticket opened a WebSocket: {:?}",
            other.map(|(_, r)| r.status())
        ),
    }
    // A fresh one opens the WebSocket.
    let second = ticket(&app, ada).await;
    let ws = app
        .url(&format!("/v1/ws?ticket={second}"))
        .replacen("http://", "ws://", 1);
    let (_socket, resp) = tokio_tungstenite::connect_async(ws).await.unwrap();
    assert_eq!(resp.status(), 101);
    // Never issued: refused, and the problem never echoes it.
    let made_up = "A".repeat(43);
    let body = assert_problem(events_with(&app, &made_up).await, 401, "unauthorized").await;
    assert!(!body.to_string().contains(&made_up));
}

#[tokio::test]
async fn an_expired_ticket_another_users_ticket_and_a_gone_users_ticket_are_refused() {
    let app = spawn_app_with(&[("LIVE_TICKET_TTL_SECS", "1")]).await;
    let (ada, bob) = (app.create_user("ada").await, app.create_user("bob").await);

    let expired = ticket(&app, ada).await;
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    assert_problem(events_with(&app, &expired).await, 401, "unauthorized").await;

    // Bob's ticket on a request carrying Ada's token.
    let bobs = ticket(&app, bob).await;
    let resp = app
        .client
        .get(app.url(&format!("/v1/events?ticket={bobs}")))
        .header("authorization", app.bearer(ada))
        .send()
        .await
        .unwrap();
    let body = assert_problem(resp, 401, "unauthorized").await;
    assert!(
        body["detail"].as_str().unwrap().contains("another user"),
        "{body}"
    );

    // Ada is deleted after her ticket was issued.
    let adas = ticket(&app, ada).await;
    let mut conn = app.db.connect().await;
    diesel::sql_query("DELETE FROM users WHERE id = $1")
        .bind::<diesel::sql_types::Uuid, _>(ada)
        .execute(&mut conn)
        .await
        .unwrap();
    assert_problem(events_with(&app, &adas).await, 401, "unauthorized").await;
    // And no ticket is issued for a token whose user is gone.
    let resp = app
        .client
        .post(app.url("/v1/live/tickets"))
        .header("authorization", app.bearer(ada))
        .send()
        .await
        .unwrap();
    assert_problem(resp, 401, "unauthorized").await;
}

#[tokio::test]
async fn streams_opened_by_ticket_count_against_the_users_budget() {
    let app = spawn_app_with(&[("LIVE_MAX_STREAMS_PER_USER", "1")]).await;
    let ada = app.create_user("ada").await;
    let first = events_with(&app, &ticket(&app, ada).await).await;
    assert_eq!(first.status(), 200);
    let second = events_with(&app, &ticket(&app, ada).await).await;
    assert_eq!(second.status(), 429);
    assert!(header(&second, "retry-after").is_some());
}

#[tokio::test]
async fn the_web_client_is_served_only_when_asked_for() {
    let app = spawn_app_with(&[("WEB_CLIENT", "true")]).await;
    let resp = app.get("/web/").await;
    assert_eq!(resp.status(), 200);
    assert_eq!(
        header(&resp, "content-type"),
        Some("text/html; charset=utf-8")
    );
    assert!(
        header(&resp, "content-security-policy").is_some_and(|p| p.contains("default-src 'none'"))
    );
    let page = resp.text().await.unwrap();
    assert!(page.contains("app.js"), "the page loads its script");
    for (path, kind) in [
        ("/web/app.js", "text/javascript"),
        ("/web/app.css", "text/css"),
    ] {
        let resp = app.get(path).await;
        assert_eq!(resp.status(), 200, "{path}");
        assert!(
            header(&resp, "content-type").is_some_and(|t| t.starts_with(kind)),
            "{path}"
        );
    }
    let off = spawn_app().await;
    assert_eq!(off.get("/web/").await.status(), 404);
}
