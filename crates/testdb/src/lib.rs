//! One PostgreSQL database per test.
//!
//! The first test of a run (in any process) migrates a template database,
//! named after a hash of `migrations/`, under an advisory lock; every test
//! then clones it with `CREATE DATABASE ... TEMPLATE`, which copies files
//! instead of replaying DDL, and drops its clone when the [`TestDb`] drops.
//! Tests therefore run in parallel and never see each other's rows.
//!
//! The server comes from `DATABASE_URL` (default
//! `postgres://postgres@127.0.0.1:5432/postgres`); its database is used only
//! to issue `CREATE DATABASE` and `DROP DATABASE`.
#![allow(clippy::expect_used, clippy::unwrap_used)] // test support: failing loudly is the point

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::path::Path;
use std::time::Duration;

use chatlab_persistence::DbConfig;
use diesel_async::{AsyncConnection, AsyncPgConnection, SimpleAsyncConnection};
use tokio::sync::OnceCell;

/// Lock key serialising template creation across test processes.
const TEMPLATE_LOCK_KEY: i64 = 0x63_6c_74_65_6d_70;

static TEMPLATE: OnceCell<String> = OnceCell::const_new();

/// The server URL tests use, from `DATABASE_URL`.
pub fn server_url() -> String {
    std::env::var("DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_owned())
}

/// `url` with its database name replaced by `db` (its query kept). A URL
/// that does not parse is returned as it is, and the connection then says
/// what is wrong with it.
pub fn with_database(url: &str, db: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut parsed) => {
            parsed.set_path(db);
            parsed.into()
        }
        Err(_) => url.to_owned(),
    }
}

/// A fresh, migrated database that is dropped with this value.
#[derive(Debug)]
pub struct TestDb {
    name: String,
    url: String,
}

impl TestDb {
    /// Clones the migrated template into a new database.
    pub async fn new() -> Self {
        let template = TEMPLATE.get_or_init(ensure_template).await.clone();
        let name = format!("chatlab_test_{}", uuid::Uuid::now_v7().simple());
        let mut admin = admin_connection().await;
        let mut attempt = 0;
        loop {
            match admin
                .batch_execute(&format!("CREATE DATABASE {name} TEMPLATE {template}"))
                .await
            {
                Ok(()) => break,
                // Another process may still be closing its connection to the
                // template it just built; that passes within moments.
                Err(e) if attempt < 50 && e.to_string().contains("being accessed") => {
                    attempt += 1;
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(e) => panic!("cannot create test database {name}: {e}"),
            }
        }
        let url = with_database(&server_url(), &name);
        Self { name, url }
    }

    /// The database's URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The server this database lives on, as a socket address (what a
    /// hop in front of it forwards to).
    pub fn server_addr(&self) -> std::net::SocketAddr {
        let url = url::Url::parse(&self.url).expect("a test database URL parses");
        let host = url
            .host_str()
            .unwrap_or("127.0.0.1")
            .replace("localhost", "127.0.0.1");
        format!("{host}:{}", url.port().unwrap_or(5432))
            .parse()
            .expect("a test database's host is an IP address or localhost")
    }

    /// This database's URL with its server replaced by `at` (a hop in
    /// front of the server).
    pub fn url_at(&self, at: std::net::SocketAddr) -> String {
        let mut url = url::Url::parse(&self.url).expect("a test database URL parses");
        url.set_host(Some(&at.ip().to_string()))
            .expect("a URL with a host takes another");
        url.set_port(Some(at.port()))
            .expect("a URL with a host takes a port");
        url.into()
    }

    /// The database's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// chatlab's defaults pointed at this database, with a short acquire
    /// timeout so a leaked connection fails a test quickly. Under
    /// `CHATLAB_TEST_POOLER` ([`pooler`]) the pool connects through the
    /// pooler, with the settings a transaction pooler needs (no session
    /// `SET`s, no prepared-statement cache); everything else of the test
    /// (creating the database, its assertions) goes straight to PostgreSQL.
    pub fn config(&self) -> DbConfig {
        let mut config = DbConfig::with_url(match pooler() {
            Some(at) => through(&self.url, &at),
            None => self.url.clone(),
        });
        config.driver = driver();
        config.layout = layout();
        config.pool_max_size = 4;
        config.acquire_timeout = Duration::from_secs(10);
        if pooler().is_some() {
            config.session.apply_on_connect = false;
            config.session.statement_cache = false;
        }
        config
    }

    /// The name of the one role a test may create for this database (to
    /// lower a connection limit, say); it is dropped with the database.
    pub fn role_name(&self) -> String {
        format!("{}_role", self.name)
    }

    /// A direct connection outside any pool, for assertions.
    pub async fn connect(&self) -> AsyncPgConnection {
        AsyncPgConnection::establish(&self.url)
            .await
            .expect("connect to test database")
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        let name = self.name.clone();
        // Drop may run inside a runtime that is shutting down; a thread with
        // its own runtime does the async work regardless.
        let dropped = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            runtime.block_on(async move {
                let mut admin = admin_connection().await;
                // Two round trips: statements sent together run as one
                // transaction, and DROP DATABASE refuses to run in one.
                admin
                    .batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                    .await?;
                admin
                    .batch_execute(&format!("DROP ROLE IF EXISTS {name}_role"))
                    .await
            })
        })
        .join();
        if let Ok(Err(e)) = dropped {
            eprintln!("warning: could not drop test database {}: {e}", self.name);
        }
    }
}

async fn admin_connection() -> AsyncPgConnection {
    let url = server_url();
    AsyncPgConnection::establish(&url)
        .await
        .unwrap_or_else(|e| panic!("cannot reach PostgreSQL at DATABASE_URL ({url}): {e}"))
}

/// Name of the template for the current migrations.
fn template_name() -> String {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../migrations");
    let mut files = Vec::new();
    walk(&dir, &mut files);
    files.sort();
    let mut hasher = DefaultHasher::new();
    for file in files {
        file.strip_prefix(&dir).unwrap_or(&file).hash(&mut hasher);
        std::fs::read(&file)
            .expect("read migration")
            .hash(&mut hasher);
    }
    format!("chatlab_template_{:016x}", hasher.finish())
}

fn walk(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir)
        .expect("read migrations dir")
        .flatten()
    {
        let path = entry.path();
        if path.is_dir() {
            walk(&path, out);
        } else {
            out.push(path);
        }
    }
}

async fn ensure_template() -> String {
    let name = template_name();
    let mut admin = admin_connection().await;
    admin
        .batch_execute(&format!("SELECT pg_advisory_lock({TEMPLATE_LOCK_KEY})"))
        .await
        .expect("lock");
    let exists: bool = {
        use diesel::prelude::*;
        use diesel::sql_types::{Bool, Text};
        use diesel_async::RunQueryDsl;
        #[derive(QueryableByName)]
        struct Exists {
            #[diesel(sql_type = Bool)]
            exists: bool,
        }
        diesel::sql_query("SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1) AS exists")
            .bind::<Text, _>(&name)
            .get_result::<Exists>(&mut admin)
            .await
            .expect("look up template")
            .exists
    };
    if !exists {
        let building = format!("{name}_building");
        // A crashed run may have left a half-built template behind.
        admin
            .batch_execute(&format!("DROP DATABASE IF EXISTS {building} WITH (FORCE)"))
            .await
            .expect("drop stale template");
        admin
            .batch_execute(&format!("CREATE DATABASE {building}"))
            .await
            .expect("create template");
        let url = with_database(&server_url(), &building);
        chatlab_persistence::migrations::run_pending(&url.into())
            .await
            .expect("migrate template");
        admin
            .batch_execute(&format!("ALTER DATABASE {building} RENAME TO {name}"))
            .await
            .expect("publish template");
    }
    admin
        .batch_execute(&format!("SELECT pg_advisory_unlock({TEMPLATE_LOCK_KEY})"))
        .await
        .expect("unlock");
    name
}

/// The value of one sample of a Prometheus text exposition, by name and
/// labels as printed (`db_client_connection_count{db_client_connection_state="used"}`):
/// the first sample of that name whose labels include the ones given (so
/// `db_client_connection_max` matches the series whatever pool name it
/// carries). An exemplar after the value is ignored.
pub fn sample(exposition: &str, name: &str) -> Option<f64> {
    let (want_name, want_labels) = split_series(name)?;
    exposition
        .lines()
        .filter(|l| !l.starts_with('#'))
        .find_map(|line| {
            let (series, rest) = match line.find('{') {
                Some(open) => {
                    let close = open + line[open..].find('}')?;
                    (&line[..=close], &line[close + 1..])
                }
                None => line.split_at(line.find(' ')?),
            };
            let (line_name, labels) = split_series(series)?;
            let matches = line_name == want_name && want_labels.iter().all(|l| labels.contains(l));
            matches
                .then(|| rest.split_whitespace().next()?.parse().ok())
                .flatten()
        })
}

/// `name{a="1",b="2"}` as the name and its `a="1"` parts.
fn split_series(series: &str) -> Option<(&str, Vec<&str>)> {
    match series.find('{') {
        Some(open) => {
            let inner = series[open + 1..].strip_suffix('}')?;
            let labels = inner
                .split("\",")
                .map(|l| l.trim_end_matches('"'))
                .filter(|l| !l.is_empty())
                .collect();
            Some((&series[..open], labels))
        }
        None => Some((series.trim(), Vec::new())),
    }
}

/// The driver the suites run on: `CHATLAB_TEST_DB_DRIVER` (`async`, the
/// default, or `blocking`). `make test` runs the repository and HTTP suites
/// once per driver.
///
/// # Panics
/// On a value that names no driver: a typo must not quietly test the
/// default twice.
pub fn driver() -> chatlab_persistence::Driver {
    match std::env::var("CHATLAB_TEST_DB_DRIVER") {
        Ok(v) => v
            .parse()
            .unwrap_or_else(|e| panic!("CHATLAB_TEST_DB_DRIVER: {e}")),
        Err(_) => chatlab_persistence::Driver::default(),
    }
}

/// The insert strategies the suites' driver runs: every one on the
/// blocking driver; on the async one all but `copy`, which needs the
/// blocking driver (diesel-async has no COPY).
pub fn strategies() -> Vec<chatlab_domain::InsertStrategy> {
    let blocking = driver() == chatlab_persistence::Driver::Blocking;
    chatlab_domain::InsertStrategy::ALL
        .into_iter()
        .filter(|s| blocking || !s.needs_blocking_driver())
        .collect()
}

/// A connection pooler the suites' pools go through: `CHATLAB_TEST_POOLER`
/// (`127.0.0.1:6432`: PgBouncer in transaction mode in front of the test
/// server, as `make test` runs the repository suite once). Unset, none.
pub fn pooler() -> Option<String> {
    std::env::var("CHATLAB_TEST_POOLER")
        .ok()
        .filter(|v| !v.trim().is_empty())
}

/// `url` with its host and port replaced by `at` (`HOST:PORT`).
fn through(url: &str, at: &str) -> String {
    let (host, port) = at.rsplit_once(':').unwrap_or((at, "6432"));
    match url::Url::parse(url) {
        Ok(mut parsed) => {
            let _ = parsed.set_host(Some(host));
            let _ = parsed.set_port(port.parse().ok());
            parsed.into()
        }
        Err(_) => url.to_owned(),
    }
}

/// The pool layout the suites run on: `CHATLAB_TEST_POOL_LAYOUT` (`shared`
/// or `per_worker`; unset, the server's default).
///
/// # Panics
/// On a value that names no layout.
pub fn layout() -> chatlab_persistence::PoolLayout {
    match std::env::var("CHATLAB_TEST_POOL_LAYOUT") {
        Ok(v) => v
            .parse()
            .unwrap_or_else(|e| panic!("CHATLAB_TEST_POOL_LAYOUT: {e}")),
        Err(_) => chatlab_persistence::PoolLayout::default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_the_database_name() {
        assert_eq!(
            with_database("postgres://u@h:5432/postgres", "t1"),
            "postgres://u@h:5432/t1"
        );
        assert_eq!(
            with_database("postgres://u@h/db?sslmode=disable", "t2"),
            "postgres://u@h/t2?sslmode=disable"
        );
        assert_eq!(with_database("postgres://h", "t3"), "postgres://h/t3");
        assert_eq!(
            through("postgres://u@127.0.0.1:5432/t1?x=y", "127.0.0.1:6432"),
            "postgres://u@127.0.0.1:6432/t1?x=y"
        );
    }

    #[test]
    fn samples_are_found_by_exact_name() {
        let text = "a_total 3\na_total{x=\"1\"} 4\nab 5\n";
        assert_eq!(sample(text, "a_total"), Some(3.0));
        assert_eq!(sample(text, "a_total{x=\"1\"}"), Some(4.0));
        assert_eq!(sample(text, "a"), None);
    }
}

#[cfg(test)]
mod sample_tests {
    use super::sample;

    const TEXT: &str = "# TYPE x counter\n\
        db_client_connection_count{db_client_connection_pool_name=\"chatlab\",db_client_connection_state=\"used\"} 2\n\
        db_client_connection_count{db_client_connection_pool_name=\"chatlab\",db_client_connection_state=\"idle\"} 3\n\
        db_client_connection_max{db_client_connection_pool_name=\"chatlab\"} 5\n\
        h_bucket{le=\"0.5\"} 7 # {trace_id=\"abc\"} 0.4 1.0\n\
        plain_total 9\n";

    #[test]
    fn samples_match_by_name_and_a_subset_of_labels() {
        let used = "db_client_connection_count{db_client_connection_state=\"used\"}";
        assert_eq!(sample(TEXT, used), Some(2.0));
        assert_eq!(sample(TEXT, "db_client_connection_max"), Some(5.0));
        assert_eq!(sample(TEXT, "h_bucket{le=\"0.5\"}"), Some(7.0));
        assert_eq!(sample(TEXT, "plain_total"), Some(9.0));
        assert_eq!(sample(TEXT, "plain"), None);
        assert_eq!(
            sample(
                TEXT,
                "db_client_connection_count{db_client_connection_state=\"gone\"}"
            ),
            None
        );
    }
}
