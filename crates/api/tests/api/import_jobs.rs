//! Import jobs over HTTP: the report on success, the problem document of a
//! job that stopped part-way, and malformed jobs that write nothing.

use reqwest::StatusCode;
use serde_json::{Value, json};
use uuid::Uuid;

use crate::support::{assert_problem, spawn_app, spawn_app_with};

#[tokio::test]
async fn a_member_import_reports_every_row_written() {
    let app = spawn_app().await;
    let users = app.bulk_users(2_501).await;
    let chat = app.create_chat_ok(users[0], &[]).await;
    let resp = app
        .post_json_as(
            users[0],
            &format!("/v1/chats/{chat}/members/import"),
            &json!({"user_ids": &users[1..], "chunk_size": 1000, "parallelism": 4}),
        )
        .await;
    assert_eq!(resp.status(), StatusCode::CREATED);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["rows_requested"], 2_500);
    assert_eq!(body["rows_written"], 2_500);
    assert_eq!(body["chunks"], 3);
    assert_eq!(body["parallelism"], 4);
    // An imported member reads the chat.
    let chat: Value = app
        .get_as(users[2_500], &format!("/v1/chats/{chat}"))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(chat["member_count"], 2_501);
}

#[tokio::test]
async fn a_stopped_import_names_the_committed_chunks_and_the_failed_one() {
    let app = spawn_app().await;
    let users = app.bulk_users(25).await;
    let chat = app.create_chat_ok(users[0], &[]).await;
    let ghost = Uuid::now_v7();
    let mut ids: Vec<Uuid> = users[1..].to_vec(); // 24 users
    ids.insert(15, ghost); // row 15: chunk 1 of chunks of 10
    let resp = app
        .post_json_as(
            users[0],
            &format!("/v1/chats/{chat}/members/import"),
            &json!({"user_ids": ids, "chunk_size": 10}),
        )
        .await;
    let problem = assert_problem(resp, 422, "import-stopped").await;
    assert_eq!(problem["cause_type"], "urn:chatlab:problem:unknown-users");
    assert_eq!(problem["unknown_user_ids"], json!([ghost]));
    assert_eq!(problem["rows_written"], 10);
    assert_eq!(
        problem["committed_chunks"],
        json!([{"index": 0, "first_row": 0, "rows": 10}])
    );
    assert_eq!(
        problem["failed_chunk"],
        json!({"index": 1, "first_row": 10, "rows": 10})
    );
    let chat: Value = app
        .get_as(users[0], &format!("/v1/chats/{chat}"))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(chat["member_count"], 11, "the creator and chunk 0");
}

#[tokio::test]
async fn a_message_import_writes_them_all_and_a_bad_job_writes_nothing() {
    let app = spawn_app_with(&[("CHAT_IMPORT_MAX_ROWS", "3000")]).await;
    let users = app.bulk_users(2).await;
    let chat = app.create_chat_ok(users[0], &users[1..]).await;
    let messages: Vec<Value> = (0..3_000)
        .map(|i| json!({"sender_id": users[i % 2], "body": format!("m{i}")}))
        .collect();
    let path = format!("/v1/chats/{chat}/messages/import");
    let owner = users[0];
    let resp = app
        .post_json_as(
            owner,
            &path,
            &json!({"messages": messages, "chunk_size": 700, "parallelism": 2}),
        )
        .await;
    assert_eq!(resp.status(), StatusCode::CREATED);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["rows_written"], 3_000);
    assert_eq!(body["chunks"], 5);
    let outsider = app.create_user("x").await;
    let before = app.row_counts().await;

    // Over the row limit, a bad plan, an empty body: 422, nothing written.
    let mut too_many = messages.clone();
    too_many.push(json!({"sender_id": users[0], "body": "one more"}));
    let resp = app
        .post_json_as(owner, &path, &json!({"messages": too_many}))
        .await;
    assert_problem(resp, 422, "validation").await;
    let resp = app
        .post_json_as(
            owner,
            &path,
            &json!({"messages": [{"sender_id": users[0], "body": " "}], "parallelism": 0}),
        )
        .await;
    let problem = assert_problem(resp, 422, "validation").await;
    assert_eq!(problem["errors"].as_array().unwrap().len(), 2, "{problem}");
    // A sender outside the chat: 403, nothing written.
    let resp = app
        .post_json_as(
            owner,
            &path,
            &json!({"messages": [{"sender_id": outsider, "body": "hi"}]}),
        )
        .await;
    assert_problem(resp, 403, "not-a-member").await;
    // No such chat: 404.
    let resp = app
        .post_json_as(
            owner,
            &format!("/v1/chats/{}/messages/import", Uuid::now_v7()),
            &json!({"messages": [{"sender_id": users[0], "body": "hi"}]}),
        )
        .await;
    assert_problem(resp, 404, "not-found").await;
    // Imports are the owner's: a member who is not gets 403, and for a
    // non-member the chat does not exist.
    let fine = json!({"messages": [{"sender_id": users[1], "body": "hi"}]});
    let resp = app.post_json_as(users[1], &path, &fine).await;
    assert_problem(resp, 403, "not-the-owner").await;
    let resp = app.post_json_as(outsider, &path, &fine).await;
    assert_problem(resp, 404, "not-found").await;
    // Not JSON: 415; malformed: 400.
    let resp = app
        .client
        .post(app.url(&path))
        .header("authorization", app.bearer(owner))
        .header("content-type", "text/plain")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_problem(resp, 415, "unsupported-media-type").await;
    let resp = app
        .client
        .post(app.url(&path))
        .header("authorization", app.bearer(owner))
        .header("content-type", "application/json")
        .body("{\"messages\": [")
        .send()
        .await
        .unwrap();
    assert_problem(resp, 400, "bad-request").await;
    assert_eq!(app.row_counts().await, before);
}

#[tokio::test]
async fn an_import_body_over_the_limit_is_413() {
    let app = spawn_app_with(&[("HTTP_IMPORT_LIMIT_BYTES", "1024")]).await;
    let users = app.bulk_users(1).await;
    let chat = app.create_chat_ok(users[0], &[]).await;
    let messages: Vec<Value> = (0..100)
        .map(|i| json!({"sender_id": users[0], "body": format!("message number {i}")}))
        .collect();
    let resp = app
        .post_json_as(
            users[0],
            &format!("/v1/chats/{chat}/messages/import"),
            &json!({ "messages": messages }),
        )
        .await;
    assert_problem(resp, 413, "payload-too-large").await;
}
