//! `TestApp`: a server on port 0 with its own database, and a typed helper
//! per endpoint. Logs are quiet unless `TEST_LOG` is set.

use std::collections::HashMap;

use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use reqwest::{Response, StatusCode};
use serde_json::{Value, json};
use uuid::Uuid;

use chatlab_api::config::{LogFormat, Settings};
use chatlab_api::startup::Application;
use chatlab_persistence::schema::{chat_members, chats, messages, users};
use chatlab_testdb::TestDb;
pub use chatlab_testdb::sample;

/// The HS256 secret every test server signs with, so tests can mint
/// tokens (expired ones too) for any user.
pub const TEST_JWT_SECRET: &str = "chatlab-test-secret-0123456789abcdef";

pub struct TestApp {
    pub address: String,
    /// The operator listener (`/metrics`, `/audit`, `/v1/users/bulk`).
    pub ops_address: String,
    /// Keys with the server's secret.
    pub keys: chatlab_auth::TokenKeys,
    pub client: reqwest::Client,
    /// Shared, so a second server can start on the same database (a
    /// restart).
    pub db: std::sync::Arc<TestDb>,
    /// The in-process mock cluster, when the test set no `KAFKA_BROKERS`.
    pub embedded: Option<std::sync::Arc<chatlab_kafka::EmbeddedBroker>>,
    handle: actix_web::dev::ServerHandle,
}

impl Drop for TestApp {
    fn drop(&mut self) {
        // Stop the server so its pool lets go of the database before the
        // database is dropped.
        let handle = self.handle.clone();
        drop(tokio::spawn(async move { handle.stop(false).await }));
    }
}

pub async fn spawn_app() -> TestApp {
    spawn_app_with(&[]).await
}

/// A server with extra env settings on top of the test defaults.
pub async fn spawn_app_with(extra: &[(&str, &str)]) -> TestApp {
    let db = TestDb::new().await;
    spawn_on(db, extra).await
}

pub async fn spawn_on(db: TestDb, extra: &[(&str, &str)]) -> TestApp {
    spawn_on_shared(std::sync::Arc::new(db), extra).await
}

/// A server on a database another server may have used (or still use).
pub async fn spawn_on_shared(db: std::sync::Arc<TestDb>, extra: &[(&str, &str)]) -> TestApp {
    if std::env::var_os("TEST_LOG").is_some() {
        let filter = std::env::var("RUST_LOG").unwrap_or_else(|_| "debug".to_owned());
        chatlab_api::telemetry::init(LogFormat::Pretty, &filter);
    }
    let mut vars: HashMap<String, String> = HashMap::from([
        ("DATABASE_URL".into(), db.url().to_owned()),
        ("HTTP_ADDR".into(), "127.0.0.1:0".into()),
        ("OPS_ADDR".into(), "127.0.0.1:0".into()),
        ("CHATLAB_JWT_SECRET".into(), TEST_JWT_SECRET.into()),
        ("HTTP_WORKERS".into(), "2".into()),
        ("DB_POOL_MAX_SIZE".into(), "4".into()),
        ("DB_DRIVER".into(), chatlab_testdb::driver().as_str().into()),
        (
            "DB_POOL_LAYOUT".into(),
            chatlab_testdb::layout().as_str().into(),
        ),
        // The template is already migrated; running them again is a no-op
        // but proves startup tolerates it.
        ("DB_RUN_MIGRATIONS".into(), "true".into()),
    ]);
    for (k, v) in extra {
        vars.insert((*k).to_owned(), (*v).to_owned());
    }
    let settings = Settings::from_vars(vars.clone()).expect("test settings");
    let app = Application::build(settings).await.expect("build app");
    let address = format!("http://127.0.0.1:{}", app.port());
    let ops_address = format!("http://127.0.0.1:{}", app.ops_port());
    let issuer = vars
        .get("CHATLAB_JWT_ISSUER")
        .cloned()
        .unwrap_or_else(|| "chatlab".to_owned());
    let keys = chatlab_auth::TokenKeys::new(
        chatlab_auth::KeyMaterial::Secret(TEST_JWT_SECRET.as_bytes().to_vec()),
        &issuer,
        std::time::Duration::from_secs(3600),
    )
    .expect("test keys");
    let handle = app.handle();
    let embedded = app.embedded_broker();
    tokio::spawn(app.run_until_stopped());
    TestApp {
        address,
        ops_address,
        keys,
        // Idle connections are dropped before actix's keep-alive (5 s) can
        // close them under a request that reuses one (hyper then reports
        // `IncompleteMessage`: seen once in 50 stressed runs).
        client: reqwest::Client::builder()
            .pool_idle_timeout(std::time::Duration::from_secs(2))
            .build()
            .expect("HTTP client"),
        db,
        embedded,
        handle,
    }
}

impl TestApp {
    /// Stops the server gracefully and waits until it has.
    pub async fn stop(&self) {
        self.handle.stop(true).await;
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.address, path)
    }

    /// A path on the operator listener.
    pub fn ops_url(&self, path: &str) -> String {
        format!("{}{}", self.ops_address, path)
    }

    /// A bearer token acting as `user`.
    pub fn token(&self, user: Uuid) -> String {
        self.keys
            .issue(chatlab_domain::UserId::from_uuid(user))
            .expect("sign")
            .token
    }

    /// `Authorization: Bearer <token for user>`.
    pub fn bearer(&self, user: Uuid) -> String {
        format!("Bearer {}", self.token(user))
    }

    /// GET without credentials.
    pub async fn get(&self, path: &str) -> Response {
        self.client.get(self.url(path)).send().await.unwrap()
    }

    /// GET acting as `user`.
    pub async fn get_as(&self, user: Uuid, path: &str) -> Response {
        self.client
            .get(self.url(path))
            .header("authorization", self.bearer(user))
            .send()
            .await
            .unwrap()
    }

    /// GET on the operator listener.
    pub async fn get_ops(&self, path: &str) -> Response {
        self.client.get(self.ops_url(path)).send().await.unwrap()
    }

    /// POST without credentials.
    pub async fn post_json(&self, path: &str, body: &Value) -> Response {
        self.client
            .post(self.url(path))
            .json(body)
            .send()
            .await
            .unwrap()
    }

    /// POST acting as `user`.
    pub async fn post_json_as(&self, user: Uuid, path: &str, body: &Value) -> Response {
        self.client
            .post(self.url(path))
            .header("authorization", self.bearer(user))
            .json(body)
            .send()
            .await
            .unwrap()
    }

    pub async fn create_user(&self, name: &str) -> Uuid {
        let resp = self.post_json("/v1/users", &json!({ "name": name })).await;
        assert_eq!(resp.status(), StatusCode::CREATED);
        let body: Value = resp.json().await.unwrap();
        body["id"].as_str().unwrap().parse().unwrap()
    }

    /// Seeds users through the operator listener's bulk endpoint.
    pub async fn bulk_users(&self, count: usize) -> Vec<Uuid> {
        let resp = self
            .client
            .post(self.ops_url("/v1/users/bulk"))
            .json(&json!({ "count": count }))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::CREATED);
        let body: Value = resp.json().await.unwrap();
        body["ids"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().parse().unwrap())
            .collect()
    }

    /// `POST /v1/chats` as `creator`, optionally naming a strategy in the
    /// header.
    pub async fn create_chat(
        &self,
        creator: Uuid,
        members: &[Uuid],
        strategy: Option<&str>,
    ) -> Response {
        let mut req = self
            .client
            .post(self.url("/v1/chats"))
            .header("authorization", self.bearer(creator))
            .json(&json!({
                "name": "room",
                "member_ids": members,
            }));
        if let Some(s) = strategy {
            req = req.header("x-chatlab-insert-strategy", s);
        }
        req.send().await.unwrap()
    }

    pub async fn create_chat_ok(&self, creator: Uuid, members: &[Uuid]) -> Uuid {
        let resp = self.create_chat(creator, members, None).await;
        assert_eq!(resp.status(), StatusCode::CREATED);
        let body: Value = resp.json().await.unwrap();
        body["id"].as_str().unwrap().parse().unwrap()
    }

    /// `POST /v1/chats/{chat}/messages` as `sender`.
    pub async fn send_message(&self, chat: Uuid, sender: Uuid, body: &str) -> Response {
        self.post_json_as(
            sender,
            &format!("/v1/chats/{chat}/messages"),
            &json!({ "body": body }),
        )
        .await
    }

    /// `/metrics`, from the operator listener.
    pub async fn metrics(&self) -> String {
        let resp = self.get_ops("/metrics").await;
        assert_eq!(resp.status(), StatusCode::OK);
        resp.text().await.unwrap()
    }

    /// Rows in users, chats, chat_members and messages.
    pub async fn row_counts(&self) -> [i64; 4] {
        let mut conn = self.db.connect().await;
        [
            users::table.count().get_result(&mut conn).await.unwrap(),
            chats::table.count().get_result(&mut conn).await.unwrap(),
            chat_members::table
                .count()
                .get_result(&mut conn)
                .await
                .unwrap(),
            messages::table.count().get_result(&mut conn).await.unwrap(),
        ]
    }
}

/// Asserts a problem+json response with the given status and type slug;
/// returns its body.
pub async fn assert_problem(resp: Response, status: u16, slug: &str) -> Value {
    assert_eq!(resp.status().as_u16(), status, "status");
    let content_type = resp
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    assert_eq!(content_type, "application/problem+json");
    let body: Value = resp.json().await.unwrap();
    assert_eq!(
        body["type"],
        format!("urn:chatlab:problem:{slug}"),
        "{body}"
    );
    assert_eq!(body["status"], status);
    assert!(body["title"].as_str().is_some_and(|t| !t.is_empty()));
    assert!(body["detail"].as_str().is_some_and(|d| !d.is_empty()));
    body
}
