//! Who may do what: bearer tokens on every chat endpoint, membership on
//! every read and post, ownership of imports, and the development token
//! endpoint.

use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use uuid::Uuid;

use chatlab_auth::{KeyMaterial, TokenKeys};
use chatlab_domain::UserId;

use crate::support::{TEST_JWT_SECRET, TestApp, assert_problem, spawn_app, spawn_app_with};

/// Every endpoint that needs a token, with a body it would accept.
fn protected(chat: Uuid, user: Uuid) -> Vec<(Method, String, Option<Value>)> {
    vec![
        (
            Method::POST,
            "/v1/chats".to_owned(),
            Some(json!({"name": "r", "member_ids": []})),
        ),
        (Method::GET, format!("/v1/chats/{chat}"), None),
        (Method::GET, format!("/v1/chats/{chat}/members"), None),
        (Method::GET, format!("/v1/chats/{chat}/messages"), None),
        (
            Method::POST,
            format!("/v1/chats/{chat}/messages"),
            Some(json!({"body": "hi"})),
        ),
        (
            Method::POST,
            format!("/v1/chats/{chat}/members/import"),
            Some(json!({"user_ids": [user]})),
        ),
        (
            Method::POST,
            format!("/v1/chats/{chat}/messages/import"),
            Some(json!({"messages": [{"sender_id": user, "body": "x"}]})),
        ),
        (Method::GET, format!("/v1/users/{user}"), None),
    ]
}

async fn call(
    app: &TestApp,
    method: &Method,
    path: &str,
    body: Option<&Value>,
    authorization: Option<&str>,
) -> reqwest::Response {
    let mut req = app.client.request(method.clone(), app.url(path));
    if let Some(a) = authorization {
        req = req.header("authorization", a);
    }
    if let Some(b) = body {
        req = req.json(b);
    }
    req.send().await.unwrap()
}

fn www_authenticate(resp: &reqwest::Response) -> String {
    resp.headers()
        .get("www-authenticate")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned()
}

/// A token signed with `secret` for `user`, issued `age` ago, living `ttl`.
fn token_with(secret: &[u8], issuer: &str, user: Uuid, age: u64, ttl: u64) -> String {
    let keys = TokenKeys::new(
        KeyMaterial::Secret(secret.to_vec()),
        issuer,
        Duration::from_secs(ttl),
    )
    .unwrap();
    let now = now_secs();
    keys.issue_at(UserId::from_uuid(user), now - age, Duration::from_secs(ttl))
        .unwrap()
        .token
}

fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// `claims` signed with HS256 and `secret` (RFC 2104's HMAC over SHA-256,
/// written out so a test can sign claims `TokenKeys` would never issue).
fn hs256_signed(secret: &[u8], claims: &Value) -> String {
    use base64::Engine as _;
    use sha2::{Digest, Sha256};
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let signing_input = format!(
        "{}.{}",
        b64.encode(json!({"alg": "HS256", "typ": "JWT"}).to_string()),
        b64.encode(claims.to_string())
    );
    let mut key = [0u8; 64];
    key[..secret.len()].copy_from_slice(secret);
    let pad = |byte: u8| key.iter().map(|k| k ^ byte).collect::<Vec<u8>>();
    let inner = Sha256::new()
        .chain_update(pad(0x36))
        .chain_update(signing_input.as_bytes())
        .finalize();
    let mac = Sha256::new()
        .chain_update(pad(0x5c))
        .chain_update(inner)
        .finalize();
    format!("{signing_input}.{}", b64.encode(mac))
}

/// `header.payload.` base64url, unsigned.
fn unsigned(header: &Value, payload: &Value) -> String {
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    format!(
        "{}.{}.",
        b64.encode(header.to_string()),
        b64.encode(payload.to_string())
    )
}

#[tokio::test]
async fn every_chat_endpoint_refuses_a_request_without_a_token_and_writes_nothing() {
    let app = spawn_app().await;
    let users = app.bulk_users(2).await;
    let chat = app.create_chat_ok(users[0], &[users[1]]).await;
    let before = app.row_counts().await;
    for (method, path, body) in protected(chat, users[1]) {
        let resp = call(&app, &method, &path, body.as_ref(), None).await;
        assert_eq!(resp.status(), StatusCode::UNAUTHORIZED, "{method} {path}");
        let challenge = www_authenticate(&resp);
        assert_eq!(challenge, r#"Bearer realm="chatlab""#, "{method} {path}");
        let problem = assert_problem(resp, 401, "unauthorized").await;
        assert!(
            problem["detail"].as_str().unwrap().contains("bearer token"),
            "{problem}"
        );
    }
    assert_eq!(app.row_counts().await, before, "nothing written");
}

#[tokio::test]
async fn bad_tokens_are_refused_with_invalid_token() {
    let app = spawn_app().await;
    let users = app.bulk_users(1).await;
    let me = users[0];
    let exp = now_secs() + 600;
    let claims = json!({"sub": me.to_string(), "iss": "chatlab", "iat": 0, "exp": exp});
    let cases: Vec<(&str, String, &str)> = vec![
        (
            "expired",
            format!(
                "Bearer {}",
                token_with(TEST_JWT_SECRET.as_bytes(), "chatlab", me, 7200, 3600)
            ),
            "expired",
        ),
        (
            "signed with another key",
            format!(
                "Bearer {}",
                token_with(
                    b"not the server's secret, 32+ bytes long",
                    "chatlab",
                    me,
                    0,
                    600
                )
            ),
            "signature",
        ),
        (
            "another issuer",
            format!(
                "Bearer {}",
                token_with(TEST_JWT_SECRET.as_bytes(), "someone-else", me, 0, 600)
            ),
            "issued",
        ),
        (
            "alg none",
            format!(
                "Bearer {}",
                unsigned(&json!({"alg": "none", "typ": "JWT"}), &claims)
            ),
            "",
        ),
        (
            "alg HS512",
            format!(
                "Bearer {}",
                unsigned(&json!({"alg": "HS512", "typ": "JWT"}), &claims)
            ),
            "algorithm",
        ),
        ("not a JWT", "Bearer not-a-jwt".to_owned(), ""),
        (
            "not valid before tomorrow (nbf)",
            format!(
                "Bearer {}",
                hs256_signed(
                    TEST_JWT_SECRET.as_bytes(),
                    &json!({"sub": me.to_string(), "iss": "chatlab", "iat": now_secs(),
                            "exp": now_secs() + 2 * 86_400, "nbf": now_secs() + 86_400})
                )
            ),
            "not valid yet",
        ),
    ];
    for (what, authorization, says) in cases {
        let resp = app
            .client
            .get(app.url(&format!("/v1/users/{me}")))
            .header("authorization", &authorization)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::UNAUTHORIZED, "{what}");
        let challenge = www_authenticate(&resp);
        assert!(
            challenge.starts_with(r#"Bearer realm="chatlab", error="invalid_token""#),
            "{what}: {challenge}"
        );
        let problem = assert_problem(resp, 401, "unauthorized").await;
        assert!(
            problem["detail"].as_str().unwrap().contains(says),
            "{what}: {problem}"
        );
        let token = authorization.trim_start_matches("Bearer ");
        assert!(
            !problem.to_string().contains(token),
            "the token is never echoed"
        );
    }
    // The same signing, with `nbf` in the past, is accepted: the case
    // above failed on its `nbf` alone.
    let started = hs256_signed(
        TEST_JWT_SECRET.as_bytes(),
        &json!({"sub": me.to_string(), "iss": "chatlab", "iat": now_secs(),
                "exp": now_secs() + 600, "nbf": now_secs() - 60}),
    );
    let resp = app
        .client
        .get(app.url(&format!("/v1/users/{me}")))
        .header("authorization", format!("Bearer {started}"))
        .send()
        .await
        .unwrap();
    assert_eq!(
        resp.status(),
        StatusCode::OK,
        "a token whose nbf has passed"
    );
    // Another scheme is a malformed request, not a bad token.
    let resp = app
        .client
        .get(app.url(&format!("/v1/users/{me}")))
        .header("authorization", "Basic dXNlcjpwYXNz")
        .send()
        .await
        .unwrap();
    assert!(www_authenticate(&resp).contains(r#"error="invalid_request""#));
    assert_problem(resp, 401, "unauthorized").await;
}

#[tokio::test]
async fn the_acting_user_is_the_token_subject_never_a_body_field() {
    let app = spawn_app().await;
    let users = app.bulk_users(2).await;
    // A body naming someone else is refused outright: the field is gone.
    let resp = app
        .post_json_as(
            users[0],
            "/v1/chats",
            &json!({"name": "r", "creator_id": users[1], "member_ids": []}),
        )
        .await;
    assert_problem(resp, 400, "bad-request").await;
    let chat = app.create_chat_ok(users[0], &[]).await;
    let resp = app.get_as(users[0], &format!("/v1/chats/{chat}")).await;
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["creator_id"], users[0].to_string());
    assert_eq!(body["member_count"], 1, "the creator is a member");
    let resp = app
        .post_json_as(
            users[0],
            &format!("/v1/chats/{chat}/messages"),
            &json!({"sender_id": users[1], "body": "spoofed"}),
        )
        .await;
    assert_problem(resp, 400, "bad-request").await;
    let sent = app.send_message(chat, users[0], "mine").await;
    assert_eq!(sent.status(), StatusCode::CREATED);
    let sent: Value = sent.json().await.unwrap();
    assert_eq!(sent["sender_id"], users[0].to_string());
}

/// A non-member meets, on every chat endpoint, the very answer a chat that
/// does not exist gives; and changes nothing.
#[tokio::test]
async fn for_a_non_member_the_chat_does_not_exist() {
    let app = spawn_app().await;
    let users = app.bulk_users(3).await;
    let (owner, member, outsider) = (users[0], users[1], users[2]);
    let chat = app.create_chat_ok(owner, &[member]).await;
    let ghost = Uuid::now_v7();
    let before = app.row_counts().await;
    for ((method, path, body), (_, ghost_path, _)) in protected(chat, outsider)
        .into_iter()
        .zip(protected(ghost, outsider))
    {
        if path == "/v1/chats" || path.starts_with("/v1/users/") {
            continue;
        }
        let bearer = app.bearer(outsider);
        let seen = call(&app, &method, &path, body.as_ref(), Some(&bearer)).await;
        let seen = assert_problem(seen, 404, "not-found").await;
        let missing = call(&app, &method, &ghost_path, body.as_ref(), Some(&bearer)).await;
        let missing = assert_problem(missing, 404, "not-found").await;
        let same = |v: &Value, id: Uuid| {
            let mut v = v.clone();
            v.as_object_mut().unwrap().remove("trace_id");
            v.to_string().replace(&id.to_string(), "<id>")
        };
        assert_eq!(same(&seen, chat), same(&missing, ghost), "{method} {path}");
    }
    assert_eq!(app.row_counts().await, before, "nothing written");
    // Members do see it.
    for user in [owner, member] {
        for path in ["", "/members", "/messages"] {
            let resp = app.get_as(user, &format!("/v1/chats/{chat}{path}")).await;
            assert_eq!(resp.status(), StatusCode::OK, "{path}");
        }
    }
}

#[tokio::test]
async fn only_the_owner_imports() {
    let app = spawn_app().await;
    let users = app.bulk_users(4).await;
    let (owner, member, newcomer) = (users[0], users[1], users[2]);
    let chat = app.create_chat_ok(owner, &[member]).await;
    let before = app.row_counts().await;
    let members = format!("/v1/chats/{chat}/members/import");
    let messages = format!("/v1/chats/{chat}/messages/import");
    let add = json!({"user_ids": [newcomer]});
    let history = json!({"messages": [{"sender_id": member, "body": "old"}]});
    for (path, body) in [(&members, &add), (&messages, &history)] {
        let resp = app.post_json_as(member, path, body).await;
        let problem = assert_problem(resp, 403, "not-the-owner").await;
        assert!(problem["detail"].as_str().unwrap().contains("owner"));
    }
    assert_eq!(app.row_counts().await, before, "nothing written");
    let resp = app.post_json_as(owner, &members, &add).await;
    assert_eq!(resp.status(), StatusCode::CREATED);
    let resp = app.post_json_as(owner, &messages, &history).await;
    assert_eq!(resp.status(), StatusCode::CREATED);
}

#[tokio::test]
async fn a_new_user_gets_a_token_that_works() {
    let app = spawn_app().await;
    let resp = app.post_json("/v1/users", &json!({"name": "ada"})).await;
    assert_eq!(resp.status(), StatusCode::CREATED);
    let body: Value = resp.json().await.unwrap();
    let id = body["id"].as_str().unwrap();
    let token = body["token"].as_str().unwrap();
    assert!(body["token_expires_at"].as_str().is_some());
    let resp = app
        .client
        .get(app.url(&format!("/v1/users/{id}")))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let me: Value = resp.json().await.unwrap();
    assert_eq!(me["name"], "ada");
}

#[tokio::test]
async fn development_tokens_exist_only_in_development_mode() {
    let app = spawn_app().await;
    let users = app.bulk_users(1).await;
    let resp = app
        .post_json("/v1/tokens", &json!({"user_id": users[0]}))
        .await;
    assert_problem(resp, 404, "no-route").await;

    let dev = spawn_app_with(&[("CHATLAB_DEV_TOKENS", "true")]).await;
    let users = dev.bulk_users(1).await;
    let resp = dev
        .post_json("/v1/tokens", &json!({"user_id": users[0]}))
        .await;
    assert_eq!(resp.status(), StatusCode::CREATED);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["token_type"], "Bearer");
    let chat = dev
        .client
        .post(dev.url("/v1/chats"))
        .bearer_auth(body["token"].as_str().unwrap())
        .json(&json!({"name": "dev", "member_ids": []}))
        .send()
        .await
        .unwrap();
    assert_eq!(chat.status(), StatusCode::CREATED);
    let resp = dev
        .post_json("/v1/tokens", &json!({"user_id": Uuid::now_v7()}))
        .await;
    assert_problem(resp, 404, "not-found").await;
}

#[tokio::test]
async fn an_eddsa_server_verifies_its_identity_providers_tokens_only() {
    let dir = std::env::temp_dir().join(format!("chatlab-keys-{}", Uuid::now_v7()));
    std::fs::create_dir_all(&dir).unwrap();
    let public = dir.join("public.pem");
    let root = env!("CARGO_MANIFEST_DIR");
    std::fs::copy(
        format!("{root}/../auth/testdata/ed25519-public.pem"),
        &public,
    )
    .unwrap();
    let app = spawn_app_with(&[
        ("CHATLAB_JWT_SECRET", ""),
        ("CHATLAB_JWT_ALGORITHM", "EdDSA"),
        ("CHATLAB_JWT_PUBLIC_KEY_FILE", public.to_str().unwrap()),
    ])
    .await;
    let users = app.bulk_users(1).await;
    let idp = TokenKeys::new(
        KeyMaterial::Ed25519 {
            public_pem: include_bytes!("../../../auth/testdata/ed25519-public.pem").to_vec(),
            private_pem: Some(
                include_bytes!("../../../auth/testdata/ed25519-private.pem").to_vec(),
            ),
        },
        "chatlab",
        Duration::from_secs(600),
    )
    .unwrap();
    let token = idp.issue(UserId::from_uuid(users[0])).unwrap().token;
    let resp = app
        .client
        .post(app.url("/v1/chats"))
        .bearer_auth(&token)
        .json(&json!({"name": "idp", "member_ids": []}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::CREATED);
    // An HS256 token, even one signed with the public key's bytes as the
    // secret (the classic confusion attack), is refused.
    let confused = token_with(
        include_bytes!("../../../auth/testdata/ed25519-public.pem"),
        "chatlab",
        users[0],
        0,
        600,
    );
    let resp = app
        .client
        .get(app.url(&format!("/v1/users/{}", users[0])))
        .bearer_auth(confused)
        .send()
        .await
        .unwrap();
    assert_problem(resp, 401, "unauthorized").await;
    // A verify-only server creates users without a token.
    let resp = app.post_json("/v1/users", &json!({"name": "eve"})).await;
    assert_eq!(resp.status(), StatusCode::CREATED);
    let body: Value = resp.json().await.unwrap();
    assert!(body.get("token").is_none(), "{body}");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_short_secret_stops_startup_naming_the_variable_not_the_value() {
    let vars =
        std::collections::HashMap::from([("CHATLAB_JWT_SECRET".to_owned(), "hunter2".to_owned())]);
    let err = chatlab_api::config::Settings::from_vars(vars)
        .expect_err("a 7-byte secret is refused")
        .to_string();
    assert!(err.contains("CHATLAB_JWT_SECRET"), "{err}");
    assert!(err.contains("32 bytes"), "{err}");
    assert!(!err.contains("hunter2"), "{err}");
}

/// `chatlab token USER_ID`, run as the binary, prints a token the server
/// accepts; without the server's key it refuses rather than sign with a
/// random one.
#[tokio::test]
async fn chatlab_token_prints_a_token_the_server_accepts() {
    let app = spawn_app().await;
    let users = app.bulk_users(1).await;
    let run = |vars: Vec<(&'static str, String)>| {
        let user = users[0].to_string();
        tokio::task::spawn_blocking(move || {
            std::process::Command::new(env!("CARGO_BIN_EXE_chatlab"))
                .args(["token", &user])
                .env_clear()
                .envs(vars)
                .output()
                .unwrap()
        })
    };
    let out = run(vec![("CHATLAB_JWT_SECRET", TEST_JWT_SECRET.to_owned())])
        .await
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let token = String::from_utf8(out.stdout).unwrap().trim().to_owned();
    let resp = app
        .client
        .get(app.url(&format!("/v1/users/{}", users[0])))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);

    let out = run(vec![]).await.unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("CHATLAB_JWT_SECRET"));
    assert!(out.stdout.is_empty());
}
