use reqwest::StatusCode;
use serde_json::{Value, json};
use uuid::Uuid;

use crate::support::{TestApp, assert_problem, spawn_app, spawn_app_with};

/// `POST /v1/users/bulk`, which the operator listener serves.
async fn post_bulk(app: &TestApp, body: &Value) -> reqwest::Response {
    app.client
        .post(app.ops_url("/v1/users/bulk"))
        .json(body)
        .send()
        .await
        .unwrap()
}

/// The new user reads itself back with the token its creation answered.
#[tokio::test]
async fn a_created_user_can_be_read_back() {
    let app = spawn_app().await;
    let resp = app
        .post_json("/v1/users", &json!({ "name": "  ada  " }))
        .await;
    assert_eq!(resp.status(), StatusCode::CREATED);
    let created: Value = resp.json().await.unwrap();
    let id = created["id"].as_str().unwrap().to_owned();
    let token = created["token"].as_str().unwrap();
    assert!(created["token_expires_at"].is_string(), "{created}");
    let resp = app
        .client
        .get(app.url(&format!("/v1/users/{id}")))
        .header("authorization", format!("Bearer {token}"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["name"], "ada");
    assert_eq!(body["id"], id);
    assert_eq!(body["created_at"], created["created_at"]);
}

#[tokio::test]
async fn an_unknown_user_is_404() {
    let app = spawn_app().await;
    let reader = app.create_user("reader").await;
    let resp = app
        .get_as(reader, &format!("/v1/users/{}", Uuid::now_v7()))
        .await;
    assert_problem(resp, 404, "not-found").await;
}

#[tokio::test]
async fn invalid_names_are_422_and_write_nothing() {
    let app = spawn_app().await;
    let too_long = "x".repeat(101);
    // PostgreSQL refuses NUL in text: it was a 500 before it was checked.
    for name in ["", "   ", too_long.as_str(), "a\u{0}b", "two\nlines"] {
        let resp = app.post_json("/v1/users", &json!({ "name": name })).await;
        let body = assert_problem(resp, 422, "validation").await;
        assert_eq!(body["errors"][0]["field"], "name");
    }
    assert_eq!(app.row_counts().await, [0, 0, 0, 0]);
}

#[tokio::test]
async fn bulk_creates_by_count_or_by_names() {
    let app = spawn_app().await;
    let ids = app.bulk_users(250).await;
    assert_eq!(ids.len(), 250);
    let resp = post_bulk(&app, &json!({ "names": ["a", "b"] })).await;
    assert_eq!(resp.status(), StatusCode::CREATED);
    assert_eq!(resp.headers()["x-chatlab-insert-strategy"], "batch");
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["count"], 2);
    assert_eq!(app.row_counts().await[0], 252);
}

#[tokio::test]
async fn bulk_rejects_bad_requests_and_writes_nothing() {
    let app = spawn_app_with(&[("USERS_BULK_MAX", "10")]).await;
    for body in [
        json!({ "count": 11 }),
        json!({ "count": 0 }),
        json!({}),
        json!({ "count": 2, "names": ["a"] }),
        json!({ "names": ["ok", ""] }),
        json!({ "names": ["ok", "n\u{0}l"] }),
        json!({ "count": 3, "name_prefix": "p\u{0}" }),
    ] {
        let resp = post_bulk(&app, &body).await;
        assert_problem(resp, 422, "validation").await;
    }
    assert_eq!(app.row_counts().await, [0, 0, 0, 0]);
}

#[tokio::test]
async fn a_bulk_answer_stays_small_however_many_names_fail() {
    let app = spawn_app().await;
    let names = vec!["bad\u{0}"; 1000];
    let resp = post_bulk(&app, &json!({ "names": names })).await;
    let body = assert_problem(resp, 422, "validation").await;
    let errors = body["errors"].as_array().unwrap();
    assert_eq!(errors.len(), 11, "ten names and a summary");
    assert!(
        errors[10]["message"].as_str().unwrap().contains("990 more"),
        "{body}"
    );
    assert_eq!(app.row_counts().await, [0, 0, 0, 0]);
}
