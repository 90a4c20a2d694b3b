//! What the fault experiments check after the load, and what they watch
//! during it: the rows of acknowledged writes, sessions left in a
//! transaction, connections left checked out, the outbox backlog, the
//! server's memory, and the event audit.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::Value;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use uuid::Uuid;

use super::inject::Database;
use super::load::{Op, Request};
use crate::error::LoadError;
use crate::observe::procstat;
use crate::observe::sampler::scrape;

/// The database's side of the invariants.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RowChecks {
    /// Chats answered 201 that are not in the database.
    pub chats_missing: u64,
    /// Chats of the run (acknowledged or not) without all their members or
    /// without exactly one system message: a write half done.
    pub chats_partial: u64,
    /// Chats of the run in the database (acknowledged or not).
    pub chats_committed: u64,
    /// Messages answered 201 that are not in the database.
    pub messages_missing: u64,
    /// Messages of the run in the database (acknowledged or not).
    pub messages_committed: u64,
    /// Answers 201 without an id in their body.
    pub acked_without_id: u64,
    /// Chats of the run written more than once for one request (a retry
    /// that wrote again): the second and later copies of each name.
    pub chats_duplicated: u64,
    /// Messages of the run with inbox rows (`MESSAGE_FANOUT=inbox`).
    pub messages_fanned: u64,
    /// Messages of the run with some of their inbox rows but not one per
    /// member but the sender: a fan-out half done (with `none` a message
    /// has none; with `inbox`, all).
    pub messages_inbox_partial: u64,
    /// Read-marker moves answered 200.
    pub marks_acked: u64,
    /// Moves answered 200 whose marker the database does not hold at or
    /// past the message they marked read (the member row and the marker
    /// log both read, as every read of the server takes the newer): a move
    /// acknowledged and lost, or a marker moved back.
    pub marks_lost: u64,
}

/// Checks every acknowledged write of `requests` against the database, and
/// every chat of the run (named `tag #n`, see [`super::load::chat_name`])
/// for completeness (`members` members and one system message) and for
/// being written once per request.
pub fn check_rows(
    db: &Database,
    requests: &[Request],
    tag: &str,
    members: usize,
) -> Result<RowChecks, LoadError> {
    let (mut sql, acked_without_id) = acked_tables_sql(requests);
    sql.push_str(&run_checks_sql(tag, members));
    let out = db.psql(&sql)?;
    let figures: Vec<u64> = out
        .trim()
        .split('|')
        .map(|x| {
            x.trim()
                .parse()
                .map_err(|_| LoadError::Database(format!("unexpected answer {out:?}")))
        })
        .collect::<Result<_, _>>()?;
    let [
        chats_missing,
        chats_partial,
        chats_committed,
        messages_missing,
        messages_committed,
        chats_duplicated,
        messages_fanned,
        messages_inbox_partial,
        marks_acked,
        marks_lost,
    ] = figures[..]
    else {
        return Err(LoadError::Database(format!("unexpected answer {out:?}")));
    };
    Ok(RowChecks {
        chats_missing,
        chats_partial,
        chats_committed,
        messages_missing,
        messages_committed,
        acked_without_id,
        chats_duplicated,
        messages_fanned,
        messages_inbox_partial,
        marks_acked,
        marks_lost,
    })
}

/// SQL that loads the acknowledged writes of `requests` into temporary
/// tables (chats, messages, marker moves); answers it and the count of
/// acknowledged creates and sends that came without an id.
fn acked_tables_sql(requests: &[Request]) -> (String, u64) {
    let mut sql = String::from(
        "CREATE TEMP TABLE acked_chats (id uuid PRIMARY KEY);\n\
         CREATE TEMP TABLE acked_messages (id uuid PRIMARY KEY);\n\
         CREATE TEMP TABLE acked_marks (chat_id uuid, user_id uuid, up_to uuid);\n",
    );
    let marks: Vec<_> = requests
        .iter()
        .filter(|r| r.op == Op::Mark && r.acknowledged())
        .filter_map(|r| r.mark)
        .collect();
    for chunk in marks.chunks(5_000) {
        sql.push_str("INSERT INTO acked_marks VALUES ");
        for (i, m) in chunk.iter().enumerate() {
            let sep = if i == 0 { "" } else { "," };
            let _ = write!(sql, "{sep}('{}','{}','{}')", m.chat, m.reader, m.up_to);
        }
        sql.push_str(";\n");
    }
    let mut acked_without_id = 0;
    for (op, table) in [(Op::Create, "acked_chats"), (Op::Send, "acked_messages")] {
        let ids: Vec<Uuid> = requests
            .iter()
            .filter(|r| r.op == op && r.acknowledged())
            .filter_map(|r| {
                if r.id.is_none() {
                    acked_without_id += 1;
                }
                r.id
            })
            .collect();
        for chunk in ids.chunks(5_000) {
            let _ = write!(sql, "INSERT INTO {table} VALUES ");
            for (i, id) in chunk.iter().enumerate() {
                let sep = if i == 0 { "" } else { "," };
                let _ = write!(sql, "{sep}('{id}')");
            }
            sql.push_str(" ON CONFLICT DO NOTHING;\n");
        }
    }
    (sql, acked_without_id)
}

/// SQL that answers, in one row, the figures of [`RowChecks`] for the run's
/// chats (named `tag #n`, of `members` members) against the acknowledged
/// writes loaded by [`acked_tables_sql`].
fn run_checks_sql(tag: &str, members: usize) -> String {
    let mut sql = String::new();
    let tag = tag.replace('\'', "''");
    let of_run = format!("starts_with(c.name, '{tag} #')");
    // Each message of the run: its inbox rows (one pass over the inbox),
    // and the members it owed one to.
    let _ = writeln!(
        sql,
        "CREATE TEMP TABLE run_messages AS SELECT m.id, coalesce(i.n, 0) AS rows, \
         (SELECT count(*) FROM chat_members cm WHERE cm.chat_id = m.chat_id \
             AND cm.user_id <> m.sender_id AND cm.joined_at <= m.created_at) AS recipients \
         FROM messages m LEFT JOIN (SELECT message_id, count(*) AS n FROM inbox GROUP BY message_id) i \
             ON i.message_id = m.id \
         WHERE m.kind = 'talk' AND m.body = '{tag}';"
    );
    let _ = writeln!(
        sql,
        "SELECT \
         (SELECT count(*) FROM acked_chats a WHERE NOT EXISTS (SELECT 1 FROM chats c WHERE c.id = a.id)), \
         (SELECT count(*) FROM chats c WHERE {of_run} AND ( \
             (SELECT count(*) FROM chat_members m WHERE m.chat_id = c.id) <> {members} \
             OR (SELECT count(*) FROM messages s WHERE s.chat_id = c.id AND s.kind = 'system') <> 1)), \
         (SELECT count(*) FROM chats c WHERE {of_run}), \
         (SELECT count(*) FROM acked_messages a WHERE NOT EXISTS (SELECT 1 FROM messages m WHERE m.id = a.id)), \
         (SELECT count(*) FROM messages m WHERE m.kind = 'talk' AND m.body = '{tag}'), \
         (SELECT coalesce(sum(n - 1), 0) FROM \
             (SELECT count(*) AS n FROM chats c WHERE {of_run} GROUP BY c.name) AS copies), \
         (SELECT count(*) FROM run_messages WHERE rows > 0), \
         (SELECT count(*) FROM run_messages WHERE rows > 0 AND rows <> recipients), \
         (SELECT count(*) FROM acked_marks), \
         (SELECT count(*) FROM acked_marks a LEFT JOIN chat_members cm \
             ON cm.chat_id = a.chat_id AND cm.user_id = a.user_id \
             WHERE coalesce(GREATEST(cm.read_up_to, (SELECT l.up_to FROM read_marker_log l \
                 WHERE l.chat_id = a.chat_id AND l.user_id = a.user_id \
                 ORDER BY l.up_to DESC LIMIT 1)) >= a.up_to, false) = false);"
    );
    sql
}

/// Sessions of chatlab's database left `idle in transaction`.
pub fn idle_in_transaction(db: &Database) -> Result<u64, LoadError> {
    db.psql(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() \
         AND state LIKE 'idle in transaction%' AND pid <> pg_backend_pid()",
    )?
    .trim()
    .parse()
    .map_err(|e| LoadError::Database(format!("idle in transaction: {e}")))
}

/// Outbox rows waiting to be published (dead rows left out).
pub fn outbox_pending(db: &Database) -> Result<u64, LoadError> {
    db.psql("SELECT count(*) FROM outbox WHERE published_at IS NULL AND dead_at IS NULL")?
        .trim()
        .parse()
        .map_err(|e| LoadError::Database(format!("outbox pending: {e}")))
}

/// Waits until the outbox is empty (deadline `limit`); how long it took,
/// or `None` when it was not empty in time.
pub async fn wait_outbox_drained(db: &Database, limit: Duration) -> Option<Duration> {
    let start = Instant::now();
    while start.elapsed() < limit {
        if outbox_pending(db).is_ok_and(|n| n == 0) {
            return Some(start.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    None
}

/// Connections the server's pool has checked out now (its `used` gauge).
pub async fn connections_in_use(client: &reqwest::Client, url: &str) -> Result<f64, LoadError> {
    let metrics = scrape(client, url)
        .await
        .ok_or_else(|| LoadError::server(url, "/metrics did not answer"))?;
    Ok(metrics.sum(
        "db_client_connection_count",
        &[("db_client_connection_state", "used")],
    ))
}

/// The audit's figures for one publish mode.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ModeEvents {
    /// The mode.
    pub mode: String,
    /// Committed writes.
    pub committed: u64,
    /// Committed writes whose event is not on the topic.
    pub lost: u64,
    /// Of them, the broker had acknowledged.
    pub lost_after_ack: u64,
    /// Events without a committed write.
    pub phantom: u64,
    /// Extra copies.
    pub duplicated: u64,
}

/// The event audit of the run's window, from a server's `GET /audit`; its
/// figures per mode and its Markdown tables.
pub async fn audit(
    client: &reqwest::Client,
    url: &str,
    since: DateTime<Utc>,
    until: DateTime<Utc>,
) -> Result<(Vec<ModeEvents>, String), LoadError> {
    let deadline = Instant::now() + Duration::from_secs(180);
    let body: Value = loop {
        let resp = client
            .get(format!(
                "{url}/audit?since={}&until={}",
                since.to_rfc3339_opts(SecondsFormat::Micros, true),
                until.to_rfc3339_opts(SecondsFormat::Micros, true)
            ))
            .timeout(Duration::from_secs(120))
            .send()
            .await;
        match resp {
            Ok(r) if r.status().is_success() => {
                break r
                    .json()
                    .await
                    .map_err(|e| LoadError::http("the audit", e))?;
            }
            // The broker may still be coming back: ask again.
            Ok(_) | Err(_) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_secs(2)).await;
            }
            Ok(r) => return Err(LoadError::http("the audit", r.status())),
            Err(e) => return Err(LoadError::http("the audit", e)),
        }
    };
    let n = |v: &Value, k: &str| v[k].as_u64().unwrap_or(0);
    let modes = body["modes"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|m| ModeEvents {
            mode: m["mode"].as_str().unwrap_or("?").to_owned(),
            committed: n(m, "committed"),
            lost: n(m, "lost"),
            lost_after_ack: n(m, "lost_after_ack"),
            phantom: n(m, "phantom"),
            duplicated: n(m, "duplicated"),
        })
        .collect();
    Ok((modes, body["table"].as_str().unwrap_or_default().to_owned()))
}

/// One sample of what is watched during the run.
#[derive(Debug, Clone, Copy, Default)]
pub struct Sample {
    /// From the start of the run.
    pub at: Duration,
    /// Outbox rows pending (`None`: the database did not answer).
    pub outbox_pending: Option<u64>,
    /// The server's pooled connections, open (used + idle).
    pub connections: Option<f64>,
    /// Requests waiting for a connection.
    pub pending: Option<f64>,
    /// The server's resident memory, MiB.
    pub rss_mib: Option<f64>,
}

/// Samples the outbox, the server's pool and its memory every `every`.
pub struct Watcher {
    stop: oneshot::Sender<()>,
    task: JoinHandle<Vec<Sample>>,
}

impl Watcher {
    /// Starts sampling.
    pub fn start(
        client: reqwest::Client,
        db: Database,
        url: String,
        pid: u32,
        started: Instant,
        every: Duration,
    ) -> Self {
        let (stop, mut stopped) = oneshot::channel();
        let task = tokio::spawn(async move {
            let mut samples = Vec::new();
            let mut tick = tokio::time::interval(every);
            loop {
                tokio::select! {
                    _ = &mut stopped => break,
                    _ = tick.tick() => {}
                }
                let db = db.clone();
                let outbox = tokio::task::spawn_blocking(move || outbox_pending(&db).ok())
                    .await
                    .ok()
                    .flatten();
                let metrics = scrape(&client, &url).await;
                samples.push(Sample {
                    at: started.elapsed(),
                    outbox_pending: outbox,
                    connections: metrics
                        .as_ref()
                        .map(|m| m.sum("db_client_connection_count", &[])),
                    pending: metrics
                        .as_ref()
                        .map(|m| m.sum("db_client_connection_pending_requests", &[])),
                    rss_mib: procstat::sample(pid).map(|p| p.rss_mib),
                });
            }
            samples
        });
        Self { stop, task }
    }

    /// Stops sampling; the samples.
    pub async fn finish(self) -> Vec<Sample> {
        let _ = self.stop.send(());
        self.task.await.unwrap_or_default()
    }
}
