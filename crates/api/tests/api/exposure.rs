//! What the public port exposes and what one client may cost: operator
//! endpoints only on the operator listener, methods and their labels, and
//! bodies that trickle.

use std::time::{Duration, Instant};

use reqwest::{Method, StatusCode};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::support::{assert_problem, sample, spawn_app, spawn_app_with};

#[tokio::test]
async fn operator_endpoints_answer_only_on_the_operator_listener() {
    let app = spawn_app().await;
    for path in ["/metrics", "/audit?settle_ms=0"] {
        let public = app.get(path).await;
        assert_problem(public, 404, "no-route").await;
        let ops = app.get_ops(path).await;
        assert_eq!(ops.status(), StatusCode::OK, "{path} on OPS_ADDR");
    }
    let before = app.row_counts().await;
    let public = app
        .post_json("/v1/users/bulk", &json!({"count": 1000}))
        .await;
    // On the public port the path is only `GET /v1/users/{id}` with the id
    // "bulk": no POST there.
    assert_problem(public, 405, "method-not-allowed").await;
    assert_eq!(app.row_counts().await, before, "no user seeded");
    assert_eq!(app.bulk_users(3).await.len(), 3, "seeding on OPS_ADDR");
    for path in ["/healthz", "/readyz"] {
        assert_eq!(app.get(path).await.status(), StatusCode::OK, "{path}");
        assert_eq!(app.get_ops(path).await.status(), StatusCode::OK, "{path}");
    }
    // The public API's document lists no operator endpoint.
    let doc: serde_json::Value = app.get("/openapi.json").await.json().await.unwrap();
    let paths = doc["paths"].as_object().unwrap();
    for path in ["/metrics", "/audit", "/v1/users/bulk"] {
        assert!(!paths.contains_key(path), "{path} in the public document");
    }
}

#[tokio::test]
async fn a_known_path_with_another_method_answers_405_with_allow() {
    let app = spawn_app().await;
    for (method, path, allow) in [
        (Method::DELETE, "/v1/chats", "POST"),
        (Method::PUT, "/healthz", "GET, HEAD"),
        (
            Method::PATCH,
            "/v1/chats/0190f0d4-0000-7000-8000-000000000000/messages",
            "GET, HEAD, POST",
        ),
    ] {
        let resp = app
            .client
            .request(method.clone(), app.url(path))
            .send()
            .await
            .unwrap();
        let allowed = resp
            .headers()
            .get("allow")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        assert_eq!(allowed, allow, "{method} {path}");
        assert_problem(resp, 405, "method-not-allowed").await;
    }
    let resp = app
        .client
        .delete(app.url("/v1/nowhere"))
        .send()
        .await
        .unwrap();
    assert_problem(resp, 404, "no-route").await;
}

#[tokio::test]
async fn head_is_served_as_get_without_the_body() {
    let app = spawn_app().await;
    let resp = app.client.head(app.url("/healthz")).send().await.unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let length: usize = resp
        .headers()
        .get("content-length")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
        .unwrap_or_default();
    assert!(length > 0, "the GET's length is announced");
    assert!(resp.bytes().await.unwrap().is_empty(), "no body");
    // Protected GETs stay protected.
    let users = app.bulk_users(1).await;
    let resp = app
        .client
        .head(app.url(&format!("/v1/users/{}", users[0])))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn made_up_methods_share_one_metric_label() {
    let app = spawn_app().await;
    for i in 0..20 {
        let method = Method::from_bytes(format!("MADEUP{i}").as_bytes()).unwrap();
        let resp = app
            .client
            .request(method, app.url("/healthz"))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::METHOD_NOT_ALLOWED);
    }
    let metrics = app.metrics().await;
    assert!(!metrics.contains("MADEUP"), "a method name became a label");
    let other = sample(
        &metrics,
        "http_server_request_duration_seconds_count{http_request_method=\"_OTHER\",http_route=\"/healthz\",http_response_status_code=\"405\"}",
    );
    assert_eq!(other, Some(20.0));
}

/// A body sent one byte at a time is cut off with 408 once
/// `HTTP_BODY_TIMEOUT_MS` has passed, and holds no database connection
/// while it trickles.
#[tokio::test]
async fn a_trickled_body_is_cut_off_and_holds_no_connection() {
    let app = spawn_app_with(&[("HTTP_BODY_TIMEOUT_MS", "800")]).await;
    let users = app.bulk_users(1).await;
    let port = app.address.rsplit(':').next().unwrap();
    let mut stream = TcpStream::connect(format!("127.0.0.1:{port}"))
        .await
        .unwrap();
    let head = format!(
        "POST /v1/chats HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: {}\r\n\
         Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n",
        app.bearer(users[0])
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    let started = Instant::now();
    let mut response = Vec::new();
    let mut buf = [0u8; 4096];
    let mut trickled = 0;
    let mut used_while_trickling = Vec::new();
    // One byte every 100 ms: the server must answer within a few
    // deadlines; bounded to 10 s either way.
    while started.elapsed() < Duration::from_secs(10) {
        if stream.write_all(b" ").await.is_err() {
            break;
        }
        trickled += 1;
        if trickled % 3 == 0 {
            used_while_trickling.push(
                sample(
                    &app.metrics().await,
                    "db_client_connection_count{db_client_connection_state=\"used\"}",
                )
                .unwrap_or(-1.0),
            );
        }
        match tokio::time::timeout(Duration::from_millis(100), stream.read(&mut buf)).await {
            Ok(Ok(0)) => break,
            Ok(Ok(n)) => {
                response.extend_from_slice(&buf[..n]);
                if response.windows(4).any(|w| w == b"\r\n\r\n") {
                    break;
                }
            }
            Ok(Err(_)) => break,
            Err(_) => {}
        }
    }
    let response = String::from_utf8_lossy(&response);
    assert!(
        response.starts_with("HTTP/1.1 408"),
        "after {:?} and {trickled} bytes: {response:?}",
        started.elapsed()
    );
    assert!(response.to_ascii_lowercase().contains("connection: close"));
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "cut off near the 0.8 s deadline, not at the end of the body"
    );
    assert!(!used_while_trickling.is_empty());
    assert!(
        used_while_trickling.iter().all(|&used| used == 0.0),
        "a pooled connection was held while the body trickled: {used_while_trickling:?}"
    );
    // The server goes on serving.
    assert_eq!(app.get("/healthz").await.status(), StatusCode::OK);
}
