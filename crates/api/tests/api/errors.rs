//! Bad input of every kind: a clear problem+json 4xx, never a 5xx, and no
//! row written. Every request carries a valid token, so that what is
//! refused is the input, not the caller.

use serde_json::json;

use crate::support::{assert_problem, spawn_app};

#[tokio::test]
async fn malformed_requests_get_4xx_problems_and_change_nothing() {
    let app = spawn_app().await;
    let user = app.create_user("a").await;
    let chat = app.create_chat_ok(user, &[]).await;
    let before = app.row_counts().await;
    let json_type = "application/json";
    let cases: Vec<(&str, String, &str, String, u16, &str)> = vec![
        (
            "POST",
            "/v1/chats".into(),
            json_type,
            "{".into(),
            400,
            "bad-request",
        ),
        (
            "POST",
            "/v1/chats".into(),
            json_type,
            "[]".into(),
            400,
            "bad-request",
        ),
        (
            "POST",
            "/v1/chats".into(),
            json_type,
            "null".into(),
            400,
            "bad-request",
        ),
        (
            "POST",
            "/v1/chats".into(),
            json_type,
            json!({"name": "r", "member_ids": ["nope"]}).to_string(),
            400,
            "bad-request",
        ),
        (
            "POST",
            "/v1/chats".into(),
            json_type,
            json!({"name": 5}).to_string(),
            400,
            "bad-request",
        ),
        (
            "POST",
            "/v1/chats".into(),
            json_type,
            json!({"name": "r", "members": []}).to_string(),
            400,
            "bad-request",
        ),
        // The creator is the token's subject: the field is gone, and a body
        // that still names one is refused, not obeyed.
        (
            "POST",
            "/v1/chats".into(),
            json_type,
            json!({"name": "r", "creator_id": user}).to_string(),
            400,
            "bad-request",
        ),
        (
            "POST",
            "/v1/chats".into(),
            "text/plain",
            json!({"name": "r"}).to_string(),
            415,
            "unsupported-media-type",
        ),
        (
            "POST",
            "/v1/chats".into(),
            json_type,
            json!({"name": ""}).to_string(),
            422,
            "validation",
        ),
        (
            "POST",
            "/v1/chats".into(),
            json_type,
            json!({"name": "r".repeat(201)}).to_string(),
            422,
            "validation",
        ),
        (
            "POST",
            format!("/v1/chats/{chat}/messages"),
            json_type,
            json!({}).to_string(),
            400,
            "bad-request",
        ),
        // Likewise the sender.
        (
            "POST",
            format!("/v1/chats/{chat}/messages"),
            json_type,
            json!({"sender_id": user, "body": "x"}).to_string(),
            400,
            "bad-request",
        ),
        (
            "POST",
            "/v1/chats/not-a-uuid/messages".into(),
            json_type,
            json!({"body": "x"}).to_string(),
            400,
            "bad-request",
        ),
        (
            "POST",
            "/v1/users".into(),
            json_type,
            "{\"name\": \"a\"".into(),
            400,
            "bad-request",
        ),
        (
            "POST",
            "/v1/users".into(),
            json_type,
            format!("{{\"name\": \"{}\"}}", "x".repeat(5 * 1024 * 1024)),
            413,
            "payload-too-large",
        ),
        (
            "GET",
            "/v1/users/123".into(),
            "",
            String::new(),
            400,
            "bad-request",
        ),
        (
            "GET",
            "/v2/chats".into(),
            "",
            String::new(),
            404,
            "no-route",
        ),
        // A known path with a method it does not take (was 404 no-route).
        (
            "DELETE",
            format!("/v1/chats/{chat}"),
            "",
            String::new(),
            405,
            "method-not-allowed",
        ),
    ];
    for (method, path, content_type, body, status, slug) in cases {
        let mut req = app
            .client
            .request(method.parse().unwrap(), app.url(&path))
            .header("authorization", app.bearer(user))
            .body(body);
        if !content_type.is_empty() {
            req = req.header("content-type", content_type);
        }
        let resp = req.send().await.unwrap();
        assert_eq!(resp.status().as_u16(), status, "{method} {path}");
        if status == 405 {
            assert_eq!(resp.headers()["allow"], "GET, HEAD", "{method} {path}");
        }
        assert_problem(resp, status, slug).await;
    }
    assert_eq!(app.row_counts().await, before);
}

/// The audit holds a window's ids and the topic in memory: a window wider
/// than `CHATLAB_AUDIT_MAX_WINDOW_SECS`, or one that ends before it starts,
/// is refused with a problem that says so, before anything is read.
#[tokio::test]
async fn an_audit_window_too_wide_or_backwards_is_refused() {
    let app = spawn_app().await;
    let body = assert_problem(
        app.get_ops("/audit?since=2000-01-01T00:00:00Z").await,
        400,
        "bad-request",
    )
    .await;
    assert!(
        body["detail"]
            .as_str()
            .is_some_and(|d| d.contains("CHATLAB_AUDIT_MAX_WINDOW_SECS")),
        "{body}"
    );
    assert_problem(
        app.get_ops("/audit?since=2030-01-02T00:00:00Z&until=2030-01-01T00:00:00Z")
            .await,
        400,
        "bad-request",
    )
    .await;
}
