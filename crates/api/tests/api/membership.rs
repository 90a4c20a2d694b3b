//! Membership after creation: the owner adds and removes members, anyone
//! leaves, the owner hands over before leaving; each change is a
//! `membership` message with its event, and refusals write nothing.

use reqwest::{Response, StatusCode};
use serde_json::{Value, json};
use uuid::Uuid;

use crate::events::{spawn_on_tansu, wait_for_records};
use crate::support::{TestApp, assert_problem, spawn_app_with};

async fn add(app: &TestApp, actor: Uuid, chat: Uuid, ids: &[Uuid], strategy: &str) -> Response {
    app.client
        .post(app.url(&format!("/v1/chats/{chat}/members")))
        .header("authorization", app.bearer(actor))
        .header("x-chatlab-insert-strategy", strategy)
        .json(&json!({ "user_ids": ids }))
        .send()
        .await
        .unwrap()
}

async fn remove(app: &TestApp, actor: Uuid, chat: Uuid, user: Uuid) -> Response {
    app.client
        .delete(app.url(&format!("/v1/chats/{chat}/members/{user}")))
        .header("authorization", app.bearer(actor))
        .send()
        .await
        .unwrap()
}

async fn hand_over(app: &TestApp, actor: Uuid, chat: Uuid, owner: Uuid) -> Response {
    app.client
        .put(app.url(&format!("/v1/chats/{chat}/owner")))
        .header("authorization", app.bearer(actor))
        .json(&json!({ "user_id": owner }))
        .send()
        .await
        .unwrap()
}

async fn member_ids(app: &TestApp, viewer: Uuid, chat: Uuid) -> Vec<Uuid> {
    let resp = app
        .get_as(viewer, &format!("/v1/chats/{chat}/members?limit=100"))
        .await;
    assert_eq!(resp.status(), StatusCode::OK);
    let page: Value = resp.json().await.unwrap();
    let mut ids: Vec<Uuid> = page["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["user_id"].as_str().unwrap().parse().unwrap())
        .collect();
    ids.sort();
    ids
}

fn sorted(ids: &[Uuid]) -> Vec<Uuid> {
    let mut ids = ids.to_vec();
    ids.sort();
    ids
}

#[tokio::test]
async fn the_owner_adds_members_by_every_strategy() {
    let app = spawn_app_with(&[("CHATLAB_ALLOW_OVERRIDES", "true")]).await;
    let users = app.bulk_users(12).await;
    let owner = users[0];
    let chat = app.create_chat_ok(owner, &[users[1]]).await;
    let mut expected = vec![owner, users[1]];
    for (i, strategy) in ["per_row", "batch", "unnest", "single", "pipeline"]
        .iter()
        .enumerate()
    {
        let new = &users[2 + 2 * i..4 + 2 * i];
        let resp = add(&app, owner, chat, &[new[0], new[1], new[0]], strategy).await;
        assert_eq!(resp.status(), StatusCode::CREATED, "{strategy}");
        assert_eq!(resp.headers()["x-chatlab-insert-strategy"], *strategy);
        let body: Value = resp.json().await.unwrap();
        assert_eq!(body["user_ids"], json!(new), "duplicates collapse");
        expected.extend_from_slice(new);
        assert_eq!(member_ids(&app, owner, chat).await, sorted(&expected));
    }
    // Each addition is a membership message in the timeline, by the owner.
    let page: Value = app
        .get_as(users[5], &format!("/v1/chats/{chat}/messages"))
        .await
        .json()
        .await
        .unwrap();
    let changes: Vec<&Value> = page["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["kind"] == "membership")
        .collect();
    assert_eq!(changes.len(), 5);
    assert!(changes.iter().all(|m| m["sender_id"] == json!(owner)));
    assert_eq!(changes[0]["body"], "added 2 members");
}

#[tokio::test]
async fn additions_that_cannot_be_made_write_nothing() {
    let app = spawn_app_with(&[("CHATLAB_ALLOW_OVERRIDES", "true")]).await;
    let users = app.bulk_users(5).await;
    let (owner, member, outsider) = (users[0], users[1], users[4]);
    let chat = app.create_chat_ok(owner, &[member]).await;
    let before = app.row_counts().await;
    // A member who is not the owner.
    assert_problem(
        add(&app, member, chat, &[users[2]], "batch").await,
        403,
        "not-the-owner",
    )
    .await;
    // A non-member: the chat does not exist for them.
    assert_problem(
        add(&app, outsider, chat, &[users[2]], "batch").await,
        404,
        "not-found",
    )
    .await;
    // Someone already in, beside someone new: named, and neither added.
    let problem = assert_problem(
        add(&app, owner, chat, &[users[2], member], "batch").await,
        409,
        "already-members",
    )
    .await;
    assert_eq!(problem["already_member_ids"], json!([member]));
    // An unknown user.
    let ghost = Uuid::now_v7();
    let problem = assert_problem(
        add(&app, owner, chat, &[users[2], ghost], "per_row").await,
        422,
        "unknown-users",
    )
    .await;
    assert_eq!(problem["unknown_user_ids"], json!([ghost]));
    // Nobody.
    assert_problem(
        add(&app, owner, chat, &[], "batch").await,
        422,
        "validation",
    )
    .await;
    assert_eq!(app.row_counts().await, before, "nothing written");
}

#[tokio::test]
async fn members_leave_the_owner_removes_and_hands_over_before_leaving() {
    let app = spawn_app_with(&[("CHATLAB_ALLOW_OVERRIDES", "true")]).await;
    let users = app.bulk_users(4).await;
    let (owner, a, b, c) = (users[0], users[1], users[2], users[3]);
    let chat = app.create_chat_ok(owner, &[a, b, c]).await;

    // A member cannot remove another.
    assert_problem(remove(&app, a, chat, b).await, 403, "not-the-owner").await;
    // A member leaves; the chat is gone for them.
    assert_eq!(
        remove(&app, a, chat, a).await.status(),
        StatusCode::NO_CONTENT
    );
    assert_problem(
        app.get_as(a, &format!("/v1/chats/{chat}")).await,
        404,
        "not-found",
    )
    .await;
    assert_problem(app.send_message(chat, a, "back?").await, 404, "not-found").await;
    // Leaving twice: no longer a member, so no such chat.
    assert_problem(remove(&app, a, chat, a).await, 404, "not-found").await;
    // The owner removes b; removing someone not in the chat is a 404.
    assert_eq!(
        remove(&app, owner, chat, b).await.status(),
        StatusCode::NO_CONTENT
    );
    assert_problem(remove(&app, owner, chat, b).await, 404, "not-found").await;
    assert_eq!(member_ids(&app, owner, chat).await, sorted(&[owner, c]));

    // The owner cannot leave while owning it.
    assert_problem(
        remove(&app, owner, chat, owner).await,
        409,
        "owner-cannot-leave",
    )
    .await;
    // Only the owner hands over, and only to a member.
    assert_problem(hand_over(&app, c, chat, c).await, 403, "not-the-owner").await;
    assert_problem(hand_over(&app, owner, chat, b).await, 403, "not-a-member").await;
    assert_problem(hand_over(&app, owner, chat, owner).await, 409, "conflict").await;
    let resp = hand_over(&app, owner, chat, c).await;
    assert_eq!(resp.status(), StatusCode::OK);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["owner_id"], json!(c));
    let seen: Value = app
        .get_as(c, &format!("/v1/chats/{chat}"))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(seen["owner_id"], json!(c));
    assert_eq!(seen["creator_id"], json!(owner));
    // The former owner is an ordinary member now: may leave, may not add.
    assert_problem(
        add(&app, owner, chat, &[a], "batch").await,
        403,
        "not-the-owner",
    )
    .await;
    assert_eq!(
        remove(&app, owner, chat, owner).await.status(),
        StatusCode::NO_CONTENT
    );
    // The new owner adds and imports.
    assert_eq!(
        add(&app, c, chat, &[a], "batch").await.status(),
        StatusCode::CREATED
    );
    assert_eq!(member_ids(&app, c, chat).await, sorted(&[a, c]));
    let timeline: Value = app
        .get_as(c, &format!("/v1/chats/{chat}/messages"))
        .await
        .json()
        .await
        .unwrap();
    let bodies: Vec<&str> = timeline["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["kind"] == "membership")
        .map(|m| m["body"].as_str().unwrap())
        .collect();
    assert_eq!(
        bodies,
        [
            format!("added {a}"),
            "left".to_owned(),
            format!("made {c} the owner"),
            format!("removed {b}"),
            "left".to_owned(),
        ]
    );
}

#[tokio::test]
async fn a_retried_addition_writes_once() {
    let app = spawn_app_with(&[]).await;
    let users = app.bulk_users(3).await;
    let chat = app.create_chat_ok(users[0], &[]).await;
    let post = || {
        app.client
            .post(app.url(&format!("/v1/chats/{chat}/members")))
            .header("authorization", app.bearer(users[0]))
            .header("idempotency-key", "add-once")
            .json(&json!({ "user_ids": [users[1], users[2]] }))
            .send()
    };
    let first = post().await.unwrap();
    assert_eq!(first.status(), StatusCode::CREATED);
    let first = first.text().await.unwrap();
    // Without the key this retry would be a 409 (members already).
    let again = post().await.unwrap();
    assert_eq!(again.status(), StatusCode::CREATED);
    assert_eq!(again.headers()["idempotent-replayed"], "true");
    assert_eq!(again.text().await.unwrap(), first);
    assert_eq!(member_ids(&app, users[0], chat).await.len(), 3);
}

#[tokio::test]
async fn membership_events_reach_the_topic_and_the_audit_matches_them() {
    let (app, brokers, topic) = spawn_on_tansu().await;
    let users = app.bulk_users(3).await;
    let (owner, a, b) = (users[0], users[1], users[2]);
    let mut expected_types = Vec::new();
    for mode in ["in_tx_await", "in_tx_enqueue", "after_commit", "outbox"] {
        let chat = app.create_chat_ok(owner, &[]).await;
        let with_mode = |req: reqwest::RequestBuilder| {
            req.header("authorization", app.bearer(owner))
                .header("x-chatlab-publish-mode", mode)
        };
        let added = with_mode(
            app.client
                .post(app.url(&format!("/v1/chats/{chat}/members"))),
        )
        .json(&json!({ "user_ids": [a, b] }))
        .send()
        .await
        .unwrap();
        assert_eq!(added.status(), StatusCode::CREATED, "{mode}");
        let removed = with_mode(
            app.client
                .delete(app.url(&format!("/v1/chats/{chat}/members/{b}"))),
        )
        .send()
        .await
        .unwrap();
        assert_eq!(removed.status(), StatusCode::NO_CONTENT, "{mode}");
        let handed = with_mode(app.client.put(app.url(&format!("/v1/chats/{chat}/owner"))))
            .json(&json!({ "user_id": a }))
            .send()
            .await
            .unwrap();
        assert_eq!(handed.status(), StatusCode::OK, "{mode}");
        expected_types.extend(["members.added", "member.removed", "chat.owner_changed"]);
    }
    // The server's default mode (outbox) publishes each chat's creation.
    let expected = expected_types.len() + 4;
    let records = wait_for_records(&app, &brokers, &topic, expected).await;
    let mut types: Vec<&str> = records
        .iter()
        .filter_map(|r| r.event.as_ref().ok())
        .map(|e| e.event_type())
        .filter(|t| *t != "chat.created")
        .collect();
    types.sort_unstable();
    expected_types.sort_unstable();
    assert_eq!(types, expected_types);
    let report = crate::events::audit(&app).await;
    for mode in ["in_tx_await", "in_tx_enqueue", "after_commit", "outbox"] {
        let row = crate::events::mode_row(&report, mode);
        assert_eq!(row["lost"], 0, "{mode}: {report}");
        assert_eq!(row["phantom"], 0, "{mode}: {report}");
        assert_eq!(row["duplicated"], 0, "{mode}: {report}");
    }
}

#[tokio::test]
async fn delete_on_the_import_path_is_a_405_not_a_member_id() {
    let app = spawn_app_with(&[]).await;
    let users = app.bulk_users(1).await;
    let chat = app.create_chat_ok(users[0], &[]).await;
    let resp = app
        .client
        .delete(app.url(&format!("/v1/chats/{chat}/members/import")))
        .header("authorization", app.bearer(users[0]))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.headers()["allow"], "POST");
    assert_problem(resp, 405, "method-not-allowed").await;
}

#[tokio::test]
async fn a_member_id_that_is_no_uuid_is_a_400() {
    let app = spawn_app_with(&[]).await;
    let users = app.bulk_users(1).await;
    let chat = app.create_chat_ok(users[0], &[]).await;
    let resp = app
        .client
        .delete(app.url(&format!("/v1/chats/{chat}/members/null,null")))
        .header("authorization", app.bearer(users[0]))
        .send()
        .await
        .unwrap();
    assert_problem(resp, 400, "bad-request").await;
}
