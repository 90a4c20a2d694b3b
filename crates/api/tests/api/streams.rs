//! What live streams may cost, on the embedded broker: a user holds at
//! most `LIVE_MAX_STREAMS_PER_USER` streams and an instance
//! `LIVE_MAX_STREAMS`, each beyond answered 429; a token's user must exist.

use std::time::Duration;

use reqwest::StatusCode;
use uuid::Uuid;

use crate::support::{TestApp, assert_problem, spawn_app_with};

/// `GET /v1/events` as `user`: the response (a stream while it is kept).
async fn open_events(app: &TestApp, user: Uuid) -> reqwest::Response {
    app.client
        .get(app.url("/v1/events"))
        .header("authorization", app.bearer(user))
        .send()
        .await
        .unwrap()
}

/// A WebSocket handshake as `user`: the status it is answered.
async fn open_ws_status(app: &TestApp, user: Uuid) -> u16 {
    use tokio_tungstenite::tungstenite::Error;
    use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;
    let url = app.url("/v1/ws").replacen("http://", "ws://", 1);
    let mut request = url.into_client_request().unwrap();
    request
        .headers_mut()
        .insert("authorization", app.bearer(user).parse().unwrap());
    match tokio_tungstenite::connect_async(request).await {
        Ok((_socket, response)) => response.status().as_u16(),
        Err(Error::Http(response)) => response.status().as_u16(),
        Err(e) => panic!("handshake: {e}"),
    }
}

/// Asserts a 429 problem with a `Retry-After` and `Connection: close`;
/// returns its detail.
async fn assert_too_many_streams(resp: reqwest::Response) -> String {
    let retry_after: u64 = resp
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
        .expect("a Retry-After in seconds");
    assert!(retry_after >= 1, "Retry-After: {retry_after}");
    let connection = resp
        .headers()
        .get("connection")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    assert_eq!(connection, "close");
    let problem = assert_problem(resp, 429, "too-many-streams").await;
    problem["detail"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn one_user_holds_at_most_its_streams_and_the_api_keeps_answering() {
    let app = spawn_app_with(&[
        ("LIVE_MAX_STREAMS_PER_USER", "2"),
        ("LIVE_HEARTBEAT_SECS", "1"),
    ])
    .await;
    let users = app.bulk_users(2).await;
    let (ada, bob) = (users[0], users[1]);
    let first = open_events(&app, ada).await;
    let second = open_events(&app, ada).await;
    assert_eq!(
        (first.status(), second.status()),
        (StatusCode::OK, StatusCode::OK)
    );
    let detail = assert_too_many_streams(open_events(&app, ada).await).await;
    assert!(detail.contains("LIVE_MAX_STREAMS_PER_USER"), "{detail}");
    assert_eq!(open_ws_status(&app, ada).await, 429, "the WebSocket too");
    // Another user, and the API, are untouched.
    let bobs = open_events(&app, bob).await;
    assert_eq!(bobs.status(), StatusCode::OK);
    assert_eq!(app.get("/healthz").await.status(), StatusCode::OK);
    app.create_user("still answered").await;
    // Once a stream ends, its place is free again (the server notices a
    // client gone at a heartbeat).
    drop(first);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    let third = loop {
        let resp = open_events(&app, ada).await;
        if resp.status() == StatusCode::OK {
            break resp;
        }
        assert_eq!(resp.status(), StatusCode::TOO_MANY_REQUESTS);
        assert!(
            tokio::time::Instant::now() < deadline,
            "the closed stream's place was not freed within 15 s"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    drop((second, third, bobs));
}

#[tokio::test]
async fn an_instance_holds_at_most_its_streams() {
    let app = spawn_app_with(&[("LIVE_MAX_STREAMS", "2")]).await;
    let users = app.bulk_users(3).await;
    let held = [
        open_events(&app, users[0]).await,
        open_events(&app, users[1]).await,
    ];
    assert!(held.iter().all(|r| r.status() == StatusCode::OK));
    let detail = assert_too_many_streams(open_events(&app, users[2]).await).await;
    assert!(detail.contains("LIVE_MAX_STREAMS"), "{detail}");
    assert_eq!(open_ws_status(&app, users[2]).await, 429);
    assert_eq!(app.get("/healthz").await.status(), StatusCode::OK);
    let metrics = app.metrics().await;
    assert!(
        metrics.lines().any(
            |l| l.starts_with("chatlab_live_refused_total{reason=\"instance\"} ")
                && !l.ends_with(" 0")
        ),
        "the refusals are counted: {metrics}"
    );
}

#[tokio::test]
async fn a_token_for_a_user_that_does_not_exist_opens_no_stream() {
    let app = spawn_app_with(&[]).await;
    let nobody = Uuid::now_v7();
    let resp = open_events(&app, nobody).await;
    let problem = assert_problem(resp, 401, "unauthorized").await;
    assert!(
        problem["detail"]
            .as_str()
            .unwrap()
            .contains("does not exist"),
        "{problem}"
    );
    assert_eq!(open_ws_status(&app, nobody).await, 401);
    // The same token is refused again (from the cache or not), and a user
    // who exists is served.
    assert_eq!(open_events(&app, nobody).await.status(), 401);
    let real = app.bulk_users(1).await[0];
    assert_eq!(open_events(&app, real).await.status(), StatusCode::OK);
}
