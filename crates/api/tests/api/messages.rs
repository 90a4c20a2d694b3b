use reqwest::StatusCode;
use serde_json::Value;

use crate::support::{assert_problem, spawn_app};

fn bodies(page: &Value) -> Vec<&str> {
    page["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["body"].as_str().unwrap())
        .collect()
}

#[tokio::test]
async fn members_post_and_read_newest_first_with_a_cursor() {
    let app = spawn_app().await;
    let users = app.bulk_users(2).await;
    let chat = app.create_chat_ok(users[0], &users[1..]).await;
    for i in 0..5 {
        let resp = app.send_message(chat, users[i % 2], &format!("m{i}")).await;
        assert_eq!(resp.status(), StatusCode::CREATED);
        let body: Value = resp.json().await.unwrap();
        assert_eq!(body["kind"], "talk");
    }
    let first: Value = app
        .get_as(users[1], &format!("/v1/chats/{chat}/messages?limit=4"))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(bodies(&first), ["m4", "m3", "m2", "m1"]);
    let cursor = first["next_cursor"].as_str().unwrap();
    let second: Value = app
        .get_as(
            users[1],
            &format!("/v1/chats/{chat}/messages?limit=4&before={cursor}"),
        )
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(bodies(&second), ["m0", "room created"]);
    assert!(second["next_cursor"].is_null());
}

/// For a non-member the chat does not exist: the same 404 as for no chat
/// at all (it was 403 `not-a-member`, which told that the chat exists).
#[tokio::test]
async fn a_non_member_gets_404_and_nothing_is_written() {
    let app = spawn_app().await;
    let users = app.bulk_users(2).await;
    let chat = app.create_chat_ok(users[0], &[]).await;
    let resp = app.send_message(chat, users[1], "let me in").await;
    assert_problem(resp, 404, "not-found").await;
    assert_eq!(app.row_counts().await[3], 1);
}

#[tokio::test]
async fn bodies_are_checked_in_characters() {
    let app = spawn_app().await;
    let user = app.create_user("a").await;
    let chat = app.create_chat_ok(user, &[]).await;
    let ok = "ß".repeat(4000);
    assert_eq!(
        app.send_message(chat, user, &ok).await.status(),
        StatusCode::CREATED
    );
    // PostgreSQL refuses NUL in text: it was a 500 before it was checked.
    for bad in [
        String::new(),
        "  \n ".to_owned(),
        "ß".repeat(4001),
        "nul \u{0} inside".to_owned(),
        "bell \u{7}".to_owned(),
    ] {
        let body =
            assert_problem(app.send_message(chat, user, &bad).await, 422, "validation").await;
        assert_eq!(body["errors"][0]["field"], "body");
    }
    assert_eq!(app.row_counts().await[3], 2);
}

#[tokio::test]
async fn page_limits_are_checked() {
    let app = spawn_app().await;
    let user = app.create_user("a").await;
    let chat = app.create_chat_ok(user, &[]).await;
    for limit in ["0", "101"] {
        let resp = app
            .get_as(user, &format!("/v1/chats/{chat}/messages?limit={limit}"))
            .await;
        assert_problem(resp, 422, "validation").await;
    }
    let resp = app
        .get_as(user, &format!("/v1/chats/{chat}/members?limit=100"))
        .await;
    assert_eq!(resp.status(), StatusCode::OK);
    for query in ["limit=abc", "before=not-a-uuid", "sort=asc"] {
        let resp = app
            .get_as(user, &format!("/v1/chats/{chat}/messages?{query}"))
            .await;
        assert_problem(resp, 400, "bad-request").await;
    }
}
