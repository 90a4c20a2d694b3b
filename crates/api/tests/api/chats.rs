use std::collections::HashSet;

use reqwest::StatusCode;
use serde_json::{Value, json};
use uuid::Uuid;

use crate::support::{assert_problem, spawn_app, spawn_app_with};

#[tokio::test]
async fn create_chat_writes_chat_members_and_system_message() {
    let app = spawn_app().await;
    let users = app.bulk_users(5).await;
    // The creator is named again and one member twice: both collapse.
    let members = [users[1], users[2], users[0], users[2], users[3], users[4]];
    let resp = app.create_chat(users[0], &members, None).await;
    assert_eq!(resp.status(), StatusCode::CREATED);
    assert_eq!(resp.headers()["x-chatlab-insert-strategy"], "batch");
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["member_count"], 5);
    assert_eq!(body["name"], "room");
    let chat = body["id"].as_str().unwrap();

    // Any member reads the chat, not only its creator.
    let got: Value = app
        .get_as(users[3], &format!("/v1/chats/{chat}"))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(got["member_count"], 5);
    assert_eq!(got["creator_id"], users[0].to_string());
    // What the write returned is what a read returns, to the microsecond.
    assert_eq!(got["created_at"], body["created_at"]);

    let messages: Value = app
        .get_as(users[0], &format!("/v1/chats/{chat}/messages"))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(messages["items"][0]["kind"], "system");
    assert_eq!(messages["items"][0]["body"], "room created");
    assert_eq!(messages["items"][0]["id"], body["system_message_id"]);
    assert!(messages["items"][0]["sender_id"].is_null());
    assert_eq!(app.row_counts().await, [5, 1, 5, 1]);
}

#[tokio::test]
async fn unknown_members_are_listed_in_a_422_and_nothing_is_written() {
    let app = spawn_app().await;
    let users = app.bulk_users(3).await;
    let ghosts = [Uuid::now_v7(), Uuid::now_v7()];
    let members = [users[1], ghosts[0], users[2], ghosts[1]];
    let resp = app.create_chat(users[0], &members, None).await;
    let body = assert_problem(resp, 422, "unknown-users").await;
    let listed: HashSet<String> = body["unknown_user_ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect();
    let expected: HashSet<String> = ghosts.iter().map(Uuid::to_string).collect();
    assert_eq!(listed, expected);
    assert_eq!(app.row_counts().await, [3, 0, 0, 0]);
}

#[tokio::test]
async fn too_many_members_is_422() {
    let app = spawn_app_with(&[("CHAT_MAX_MEMBERS", "3")]).await;
    let users = app.bulk_users(4).await;
    let ok = app.create_chat(users[0], &users[1..3], None).await;
    assert_eq!(ok.status(), StatusCode::CREATED);
    let resp = app.create_chat(users[0], &users[1..], None).await;
    let body = assert_problem(resp, 422, "validation").await;
    assert_eq!(body["errors"][0]["field"], "member_ids");
    assert_eq!(app.row_counts().await, [4, 1, 3, 1]);
}

#[tokio::test]
async fn strategy_header_is_refused_unless_overrides_are_allowed() {
    let app = spawn_app().await;
    let users = app.bulk_users(2).await;
    let resp = app
        .create_chat(users[0], &users[1..], Some("per_row"))
        .await;
    let body = assert_problem(resp, 400, "bad-request").await;
    assert!(
        body["detail"]
            .as_str()
            .unwrap()
            .contains("CHATLAB_ALLOW_OVERRIDES")
    );
    assert_eq!(app.row_counts().await[1], 0);
}

/// `copy` needs the blocking driver: a server on the async one refuses it
/// as a header (a 422 naming the driver, nothing written); one on the
/// blocking driver writes the chat's members, and a message's inbox rows,
/// by COPY.
#[tokio::test]
async fn copy_runs_on_the_blocking_driver_and_is_refused_on_the_async_one() {
    let overrides = ("CHATLAB_ALLOW_OVERRIDES", "true");
    let app = spawn_app_with(&[overrides, ("DB_DRIVER", "async")]).await;
    let users = app.bulk_users(3).await;
    let resp = app.create_chat(users[0], &users[1..], Some("copy")).await;
    let body = assert_problem(resp, 422, "validation").await;
    assert!(body.to_string().contains("DB_DRIVER=blocking"), "{body}");
    assert_eq!(app.row_counts().await[1], 0);

    let blocking =
        crate::support::spawn_on_shared(app.db.clone(), &[overrides, ("DB_DRIVER", "blocking")])
            .await;
    let resp = blocking
        .create_chat(users[0], &users[1..], Some("copy"))
        .await;
    assert_eq!(resp.status(), StatusCode::CREATED);
    assert_eq!(resp.headers()["x-chatlab-insert-strategy"], "copy");
    let chat: Value = resp.json().await.unwrap();
    assert_eq!(chat["member_count"], 3);
    let chat = chat["id"].as_str().unwrap().to_owned();
    let resp = blocking
        .client
        .post(blocking.url(&format!("/v1/chats/{chat}/messages")))
        .header("authorization", blocking.bearer(users[0]))
        .header("x-chatlab-insert-strategy", "copy")
        .header("x-chatlab-message-fanout", "inbox")
        .json(&json!({ "body": "by copy" }))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::CREATED);
    for reader in &users[1..] {
        let state: Value = blocking
            .client
            .get(blocking.url(&format!("/v1/me/chats/{chat}")))
            .header("authorization", blocking.bearer(*reader))
            .header("x-chatlab-message-fanout", "inbox")
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(state["unread_count"], 1, "{state}");
    }
}

#[tokio::test]
async fn with_overrides_each_request_picks_its_strategy_and_the_rows_agree() {
    let app = spawn_app_with(&[
        ("CHATLAB_ALLOW_OVERRIDES", "true"),
        ("CHAT_INSERT_STRATEGY", "unnest"),
    ])
    .await;
    let users = app.bulk_users(50).await;
    let mut member_sets = Vec::new();
    for strategy in [
        Some("per_row"),
        Some("batch"),
        Some("unnest"),
        Some("single"),
        Some("pipeline"),
        None,
    ] {
        let resp = app.create_chat(users[0], &users[1..], strategy).await;
        assert_eq!(resp.status(), StatusCode::CREATED);
        let used = resp.headers()["x-chatlab-insert-strategy"]
            .to_str()
            .unwrap()
            .to_owned();
        assert_eq!(used, strategy.unwrap_or("unnest"));
        let chat: Value = resp.json().await.unwrap();
        let mut members = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..10 {
            let path = match &cursor {
                Some(c) => format!(
                    "/v1/chats/{}/members?limit=20&after={c}",
                    chat["id"].as_str().unwrap()
                ),
                None => format!(
                    "/v1/chats/{}/members?limit=20",
                    chat["id"].as_str().unwrap()
                ),
            };
            let page: Value = app.get_as(users[0], &path).await.json().await.unwrap();
            members.extend(
                page["items"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|m| m["user_id"].as_str().unwrap().to_owned()),
            );
            cursor = page["next_cursor"].as_str().map(str::to_owned);
            if cursor.is_none() {
                break;
            }
        }
        assert_eq!(members.len(), 50);
        member_sets.push(members);
    }
    assert!(member_sets.windows(2).all(|w| w[0] == w[1]));

    let metrics = app.metrics().await;
    for s in ["per_row", "batch", "unnest", "single", "pipeline"] {
        assert!(metrics.contains(&format!(
            "chatlab_create_chat_transactions_total{{strategy=\"{s}\"}}"
        )));
    }

    let resp = app.create_chat(users[0], &[], Some("bulk")).await;
    assert_problem(resp, 400, "bad-request").await;
}

#[tokio::test]
async fn concurrent_creates_through_http_all_succeed() {
    let app = spawn_app().await;
    let users = app.bulk_users(40).await;
    let mut requests = Vec::new();
    for i in 0..16 {
        requests.push(app.create_chat(users[0], &users[i..i + 20], None));
    }
    let responses = futures_util::future::join_all(requests).await;
    assert!(responses.iter().all(|r| r.status() == StatusCode::CREATED));
    assert_eq!(app.row_counts().await[1], 16);
}

#[tokio::test]
async fn unknown_chat_is_404_everywhere() {
    let app = spawn_app().await;
    let chat = Uuid::now_v7();
    let user = app.create_user("a").await;
    assert_problem(
        app.get_as(user, &format!("/v1/chats/{chat}")).await,
        404,
        "not-found",
    )
    .await;
    assert_problem(
        app.get_as(user, &format!("/v1/chats/{chat}/members")).await,
        404,
        "not-found",
    )
    .await;
    assert_problem(
        app.get_as(user, &format!("/v1/chats/{chat}/messages"))
            .await,
        404,
        "not-found",
    )
    .await;
    assert_problem(app.send_message(chat, user, "hi").await, 404, "not-found").await;
}
