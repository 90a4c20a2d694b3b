//! `chatlab-load markers`: read markers at a steady rate on one chat, per
//! `READ_MARKER_MODE` and message fan-out, and what a SIGKILL loses.
//!
//! Each cell starts one server of its mode and fan-out, seeds a chat of
//! `--members` members and `--messages` messages from its creator, then
//! sends `POST /v1/chats/{id}/read` at `--rate` per second (an open model:
//! a request every period, at most `--in-flight` at once) for
//! `--duration`, each by a random member moving to their next message. At
//! the end it scrapes the server's metrics and kills it (SIGKILL) while the
//! load still runs, then compares each member's marker in the database
//! with the moves the server acknowledged: a move acknowledged and not
//! written is lost, and its age at the kill is how stale it was; moves in
//! flight at the kill have no answer and are counted apart. Around
//! the cell it reads PostgreSQL's statistics of `chat_members` and `inbox`
//! (row updates, HOT updates, dead tuples, net of any autovacuum meanwhile) and of the database (deadlocks,
//! rolled-back transactions); the killed server's sessions end with it, so
//! their statistics are counted by then. Cells alternate their order round
//! by round.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::Args;
use reqwest::header::{AUTHORIZATION, HeaderValue};
use serde_json::{Value, json};
use uuid::Uuid;

use chatlab_domain::{MessageFanout, ReadMarkerMode};

use crate::error::LoadError;
use crate::load::latency::Latencies;
use crate::load::scenario::{Rng, Scenario, SeedAt, SeedSpec, seed, seed_chats};
use crate::load::schedule::parse_duration;
use crate::observe::prom::Exposition;
use crate::servers::fleet::Fleet;
use crate::servers::reach::Reach;

use super::{
    ServerArgs, broker_note, fleet_spec, http_client, machine_note, postgres_line, results_dir,
    round_order, write_results,
};

#[derive(Debug, Args)]
pub(crate) struct MarkersArgs {
    #[command(flatten)]
    servers: ServerArgs,
    /// Members of the one chat, creator included.
    #[arg(long, default_value_t = 1000)]
    members: usize,
    /// Messages seeded into it (each member moves through them in turn).
    #[arg(long, default_value_t = 100)]
    messages: usize,
    /// Marker moves sent per second.
    #[arg(long, default_value_t = 2000.0)]
    rate: f64,
    /// Most moves in flight; a move due while that many wait is not sent
    /// (counted as dropped).
    #[arg(long, default_value_t = 256)]
    in_flight: usize,
    /// Length of each cell's load.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    duration: Duration,
    /// Rounds; each runs every cell, in an order that alternates.
    #[arg(long, default_value_t = 2)]
    rounds: usize,
    /// Read marker modes.
    #[arg(long, value_delimiter = ',', default_value = "direct,log,coalesced")]
    modes: Vec<ReadMarkerMode>,
    /// Message fan-outs (with `inbox`, a move also flags the reader's rows).
    #[arg(long, value_delimiter = ',', default_value = "none,inbox")]
    fanouts: Vec<MessageFanout>,
    /// READ_MARKER_FLUSH_MS of the `coalesced` servers (their flush) and
    /// the `log` servers (their compaction).
    #[arg(long, default_value_t = 500)]
    flush_ms: u64,
}

/// PostgreSQL's counters that a cell reads before and after.
#[derive(Debug, Clone, Copy, Default)]
struct DbCounters {
    member_updates: i64,
    member_hot_updates: i64,
    member_dead: i64,
    inbox_updates: i64,
    log_inserts: i64,
    deadlocks: i64,
    rollbacks: i64,
}

const COUNTERS_SQL: &str = "SELECT \
     coalesce((SELECT n_tup_upd FROM pg_stat_user_tables WHERE relname = 'chat_members'), 0), \
     coalesce((SELECT n_tup_hot_upd FROM pg_stat_user_tables WHERE relname = 'chat_members'), 0), \
     coalesce((SELECT n_dead_tup FROM pg_stat_user_tables WHERE relname = 'chat_members'), 0), \
     coalesce((SELECT n_tup_upd FROM pg_stat_user_tables WHERE relname = 'inbox'), 0), \
     coalesce((SELECT n_tup_ins FROM pg_stat_user_tables WHERE relname = 'read_marker_log'), 0), \
     deadlocks, xact_rollback FROM pg_stat_database WHERE datname = current_database()";

/// The load tool's own connection to the servers' database.
struct Db {
    client: tokio_postgres::Client,
    _driver: tokio::task::JoinHandle<()>,
}

impl Db {
    async fn connect(url: &str) -> Result<Self, LoadError> {
        let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
            .await
            .map_err(|e| LoadError::Usage(format!("markers: {url}: {e}")))?;
        let driver = tokio::spawn(async move {
            let _ = connection.await;
        });
        Ok(Self {
            client,
            _driver: driver,
        })
    }

    async fn counters(&self) -> Result<DbCounters, LoadError> {
        let row = self.client.query_one(COUNTERS_SQL, &[]).await.map_err(db)?;
        Ok(DbCounters {
            member_updates: row.get(0),
            member_hot_updates: row.get(1),
            member_dead: row.get(2),
            inbox_updates: row.get(3),
            log_inserts: row.get(4),
            deadlocks: row.get(5),
            rollbacks: row.get(6),
        })
    }

    /// Waits (10 s at most) until no session of a chatlab server is left,
    /// so the statistics of the killed server's sessions are counted.
    async fn until_sessions_end(&self) -> Result<(), LoadError> {
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            let row = self
                .client
                .query_one(
                    "SELECT count(*) FROM pg_stat_activity \
                     WHERE datname = current_database() AND application_name LIKE 'chatlab%'",
                    &[],
                )
                .await
                .map_err(db)?;
            if row.get::<_, i64>(0) == 0 {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(())
    }

    /// Each member's marker in `chat`, as text: the newer of the member
    /// row's and the read marker log's (`log` servers; empty otherwise).
    async fn markers(&self, chat: Uuid) -> Result<HashMap<String, Option<String>>, LoadError> {
        let rows = self
            .client
            .query(
                "SELECT cm.user_id::text, GREATEST(cm.read_up_to, (SELECT l.up_to FROM read_marker_log l \
                 WHERE l.chat_id = cm.chat_id AND l.user_id = cm.user_id ORDER BY l.up_to DESC LIMIT 1))::text \
                 FROM chat_members cm WHERE cm.chat_id = $1::text::uuid",
                &[&chat.to_string()],
            )
            .await
            .map_err(db)?;
        Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
    }
}

fn db(e: tokio_postgres::Error) -> LoadError {
    LoadError::program("markers: PostgreSQL", e.to_string())
}

/// The chat under load and what each member has been acknowledged.
struct Marks {
    chat: Uuid,
    members: Vec<Uuid>,
    bearers: Vec<HeaderValue>,
    /// The seeded messages, oldest first.
    messages: Vec<Uuid>,
    /// Each member's next message index.
    next: Vec<AtomicUsize>,
    /// Each member's acknowledged moves: (message index, when).
    acked: Vec<Mutex<Vec<(usize, Instant)>>>,
}

/// One cell's figures.
#[derive(Debug, Clone)]
struct Cell {
    mode: ReadMarkerMode,
    fanout: MessageFanout,
    round: usize,
    sent: u64,
    ok: u64,
    /// Other answers by status (0: no answer: a transport error or timeout).
    failed: BTreeMap<u16, u64>,
    dropped: u64,
    seconds: f64,
    latencies: Latencies,
    db: DbCounters,
    flushes: f64,
    flushed: f64,
    staleness_p99_ms: f64,
    lost: u64,
    lost_members: u64,
    oldest_lost_ms: f64,
}

pub(crate) async fn markers(args: MarkersArgs) -> Result<bool, LoadError> {
    let out = results_dir(&args.servers.results_dir, "markers");
    let client = http_client(args.in_flight)?;
    let database = Db::connect(&args.servers.database_url).await?;
    // The servers reach PostgreSQL through a hop when one is asked for;
    // the load tool's probes go straight.
    let reach = Reach::open(
        &args.servers.database_url,
        args.servers.distance.distance()?,
        &args.servers.distance,
    )
    .await?;
    let cells: Vec<(ReadMarkerMode, MessageFanout)> = args
        .modes
        .iter()
        .flat_map(|&m| args.fanouts.iter().map(move |&f| (m, f)))
        .collect();
    let mut results = Vec::new();
    for round in 0..args.rounds.max(1) {
        for (mode, fanout) in round_order(&cells, round) {
            let cell = run_cell(
                &args,
                &client,
                &database,
                &reach,
                &out,
                (mode, fanout),
                round,
            )
            .await?;
            eprintln!(
                "markers round {}: {mode} {fanout}: {} of {} answered 2xx (errors: {}), p99 {:.1} ms, {} lost",
                round + 1,
                cell.ok,
                cell.sent,
                errors(&cell.failed),
                cell.latencies.quantile_ms(0.99),
                cell.lost
            );
            results.push(cell);
        }
    }
    results.sort_by_key(|c| (c.mode, c.fanout, c.round));
    let table = table(&results);
    let postgres = postgres_line(&args.servers.database_url).await?;
    let notes = format!(
        "# markers: read markers at a steady rate on one chat\n\n{}\n\n{postgres} {}\n\n{}\n\nOne server per cell, a chat of {} members and {} messages from its creator; `POST /v1/chats/{{id}}/read` at {} per second for {} (open model, at most {} in flight), each by a random member moving to their next message; `coalesced` servers flush, and `log` servers compact their log, every {} ms. A `log` server's marker is the newer of the member row's and the log's, as its reads take it. At the end the server is killed (SIGKILL) under load; `lost` are acknowledged moves its database does not have, `oldest lost` the age of the oldest of them at the kill. PostgreSQL's statistics of `chat_members` and `inbox` and of the database are read before the load and after the killed server's sessions ended. {} rounds, cells alternating.\n\n",
        machine_note(),
        reach.note(),
        broker_note(
            args.servers.broker.as_deref(),
            &[args.servers.server_env.as_slice()]
        ),
        args.members,
        args.messages,
        args.rate,
        humantime::format_duration(args.duration),
        args.in_flight,
        args.flush_ms,
        args.rounds.max(1),
    );
    write_results(&out, &notes, &table)
}

/// Answers other than 2xx, as `503×12, 409×3`, or `0`; moves with no
/// answer (cut by the kill) are counted apart.
fn errors(failed: &BTreeMap<u16, u64>) -> String {
    let answered: Vec<String> = failed
        .iter()
        .filter(|(status, _)| **status != 0)
        .map(|(status, n)| format!("{status}×{n}"))
        .collect();
    if answered.is_empty() {
        "0".to_owned()
    } else {
        answered.join(", ")
    }
}

/// The figures of `cells`, one row each.
fn table(cells: &[Cell]) -> String {
    let mut table = String::from(
        "| mode | fanout | round | moves/s answered | dropped | errors | cut by the kill | p50 ms | p99 ms | max ms | member-row writes/s | moves per member-row write | UPDATE statements/s | markers per flush | log INSERTs/s | HOT % | dead tuples added | inbox rows flagged/s | deadlocks | rollbacks | staleness p99 ms | lost | members with a loss | oldest lost ms |\n\
         |---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for c in cells {
        let secs = c.seconds.max(1e-9);
        let (updates, hot) = (c.db.member_updates, c.db.member_hot_updates);
        // Direct: one statement per row; log and coalesced: one per
        // compaction or flush.
        let statements = match c.mode {
            ReadMarkerMode::Direct => updates as f64,
            ReadMarkerMode::Log | ReadMarkerMode::Coalesced => c.flushes,
        };
        // With log, reads see a move at once (they read the log too), so
        // no reader sees a stale marker; per flush: member rows moved per
        // compaction.
        let (staleness, per_flush) = match c.mode {
            ReadMarkerMode::Direct => ("-".to_owned(), "-".to_owned()),
            ReadMarkerMode::Log => (
                "0".to_owned(),
                format!("{:.0}", c.flushed / c.flushes.max(1.0)),
            ),
            ReadMarkerMode::Coalesced => (
                format!("{:.0}", c.staleness_p99_ms),
                format!("{:.0}", c.flushed / c.flushes.max(1.0)),
            ),
        };
        table.push_str(&format!(
            "| {} | {} | {} | {:.0} | {} | {} | {} | {:.1} | {:.1} | {:.1} | {:.0} | {:.1} | {:.1} | {} | {:.0} | {:.0} | {} | {:.0} | {} | {} | {} | {} | {} | {:.0} |\n",
            c.mode,
            c.fanout,
            c.round + 1,
            c.ok as f64 / secs,
            c.dropped,
            errors(&c.failed),
            c.failed.get(&0).copied().unwrap_or(0),
            c.latencies.quantile_ms(0.5),
            c.latencies.quantile_ms(0.99),
            c.latencies.max_ms(),
            updates as f64 / secs,
            c.ok as f64 / (updates.max(1) as f64),
            statements / secs,
            per_flush,
            c.db.log_inserts as f64 / secs,
            if updates > 0 { 100.0 * hot as f64 / updates as f64 } else { 0.0 },
            c.db.member_dead,
            c.db.inbox_updates as f64 / secs,
            c.db.deadlocks,
            c.db.rollbacks,
            staleness,
            c.lost,
            c.lost_members,
            c.oldest_lost_ms,
        ));
    }
    table
}

async fn run_cell(
    args: &MarkersArgs,
    client: &reqwest::Client,
    database: &Db,
    reach: &Reach,
    out: &std::path::Path,
    (mode, fanout): (ReadMarkerMode, MessageFanout),
    round: usize,
) -> Result<Cell, LoadError> {
    let mut spec = fleet_spec(&args.servers, 1, out)?.with_database_url(&reach.url());
    spec.env.extend([
        ("READ_MARKER_MODE".to_owned(), mode.as_str().to_owned()),
        ("MESSAGE_FANOUT".to_owned(), fanout.as_str().to_owned()),
        ("READ_MARKER_FLUSH_MS".to_owned(), args.flush_ms.to_string()),
    ]);
    let mut fleet = Fleet::start(&spec, client).await?;
    let first = fleet.first()?;
    let (url, ops) = (first.url.clone(), first.ops_url.clone());
    let marks = Arc::new(seed_marks(args, client, &url, &ops, &spec.signer).await?);
    let before = database.counters().await?;
    let (sent, dropped, outcome) = load(args, client, &url, marks.clone()).await;
    let exposition = scrape(client, &ops).await?;
    // Killed under load: what it held is what a crash loses.
    fleet.signal(0, "KILL")?;
    let killed = Instant::now();
    fleet.wait_exit(0, Duration::from_secs(10)).await;
    let (ok, failed, latencies, seconds) = outcome.await?;
    database.until_sessions_end().await?;
    let after = database.counters().await?;
    let (lost, lost_members, oldest_lost_ms) =
        losses(&marks, &database.markers(marks.chat).await?, killed);
    let flushes = exposition.sum("chatlab_read_marker_flushes_total", &[]);
    let flushed = exposition.sum("chatlab_read_marker_flushed_markers_total", &[]);
    let staleness = exposition.histogram("chatlab_read_marker_staleness_seconds", &[]);
    Ok(Cell {
        mode,
        fanout,
        round,
        sent,
        ok,
        failed,
        dropped,
        seconds,
        latencies,
        db: DbCounters {
            member_updates: after.member_updates - before.member_updates,
            member_hot_updates: after.member_hot_updates - before.member_hot_updates,
            member_dead: after.member_dead - before.member_dead,
            inbox_updates: after.inbox_updates - before.inbox_updates,
            log_inserts: after.log_inserts - before.log_inserts,
            deadlocks: after.deadlocks - before.deadlocks,
            rollbacks: after.rollbacks - before.rollbacks,
        },
        flushes,
        flushed,
        staleness_p99_ms: staleness.quantile(0.99) * 1000.0,
        lost,
        lost_members,
        oldest_lost_ms,
    })
}

/// Seeds the members, their chat (created by the first) and its messages.
async fn seed_marks(
    args: &MarkersArgs,
    client: &reqwest::Client,
    url: &str,
    ops: &str,
    signer: &crate::load::auth::Signer,
) -> Result<Marks, LoadError> {
    let at = SeedAt {
        public: url,
        ops,
        signer,
    };
    let mut seeded = seed(
        client,
        at,
        SeedSpec {
            members: args.members,
            users: args.members,
            chats: 0,
        },
        &Scenario::CreateChat,
    )
    .await?;
    seed_chats(client, at, &mut seeded, args.members, 1).await?;
    let (chat, members) = seeded
        .chats
        .first()
        .cloned()
        .ok_or_else(|| LoadError::http("seeding the chat", "no chat"))?;
    let bearers: Vec<HeaderValue> = members
        .iter()
        .map(|m| {
            seeded
                .bearer(m)
                .cloned()
                .ok_or_else(|| LoadError::http("seeding the chat", "a member without a token"))
        })
        .collect::<Result<_, _>>()?;
    let mut messages = Vec::with_capacity(args.messages);
    for i in 0..args.messages.max(1) {
        let resp = client
            .post(format!("{url}/v1/chats/{chat}/messages"))
            .header(AUTHORIZATION, bearers[0].clone())
            .json(&json!({ "body": format!("marker load {i}") }))
            .timeout(Duration::from_secs(60))
            .send()
            .await
            .map_err(|e| LoadError::http("seeding messages", e))?;
        let status = resp.status();
        let body: Value = resp
            .json()
            .await
            .map_err(|e| LoadError::http("seeding messages", e))?;
        let id = body["id"]
            .as_str()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| LoadError::http("seeding messages", format!("{status}: {body}")))?;
        messages.push(id);
    }
    Ok(Marks {
        chat,
        next: members.iter().map(|_| AtomicUsize::new(0)).collect(),
        acked: members.iter().map(|_| Mutex::new(Vec::new())).collect(),
        members,
        bearers,
        messages,
    })
}

/// What the load answered: moves answered 200, other answers, their
/// latencies, and the seconds it ran.
type Outcome = (u64, BTreeMap<u16, u64>, Latencies, f64);

/// Sends the moves for `--duration`; answers how many were sent and
/// dropped, and a task that ends with the outcome once every move sent has
/// its answer (or its error).
async fn load(
    args: &MarkersArgs,
    client: &reqwest::Client,
    url: &str,
    marks: Arc<Marks>,
) -> (u64, u64, tokio::task::JoinHandle<Outcome>) {
    let period = Duration::from_secs_f64(1.0 / args.rate.max(1.0));
    let total = (args.duration.as_secs_f64() * args.rate).ceil() as u64;
    let mut ticks = tokio::time::interval(period);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let gate = Arc::new(tokio::sync::Semaphore::new(args.in_flight.max(1)));
    let answers = Arc::new(Mutex::new((
        0u64,
        BTreeMap::<u16, u64>::new(),
        Latencies::new(),
    )));
    let mut tasks = tokio::task::JoinSet::new();
    let mut rng = Rng::new(0x3A7C);
    let (mut sent, mut dropped) = (0u64, 0u64);
    let started = Instant::now();
    for _ in 0..total {
        ticks.tick().await;
        let Ok(permit) = gate.clone().try_acquire_owned() else {
            dropped += 1;
            continue;
        };
        sent += 1;
        let member = rng.below(marks.members.len());
        let (client, marks, answers) = (client.clone(), marks.clone(), answers.clone());
        let url = format!("{url}/v1/chats/{}/read", marks.chat);
        tasks.spawn(async move {
            let index = marks.next[member]
                .fetch_add(1, Ordering::Relaxed)
                .min(marks.messages.len() - 1);
            let began = Instant::now();
            let answered = client
                .post(url)
                .header(AUTHORIZATION, marks.bearers[member].clone())
                .json(&json!({ "up_to": marks.messages[index] }))
                .timeout(Duration::from_secs(30))
                .send()
                .await;
            let status = answered.as_ref().map_or(0, |r| r.status().as_u16());
            let ok = (200..300).contains(&status);
            if ok && let Ok(mut acked) = marks.acked[member].lock() {
                acked.push((index, Instant::now()));
            }
            if let Ok(mut a) = answers.lock() {
                if ok {
                    a.0 += 1;
                    a.2.record_micros(began.elapsed().as_micros() as u64);
                } else {
                    *a.1.entry(status).or_default() += 1;
                }
            }
            drop(permit);
        });
    }
    let outcome = tokio::spawn(async move {
        while tasks.join_next().await.is_some() {}
        let seconds = started.elapsed().as_secs_f64();
        let (ok, failed, latencies) = answers
            .lock()
            .map(|a| (a.0, a.1.clone(), a.2.clone()))
            .unwrap_or_default();
        (ok, failed, latencies, seconds)
    });
    (sent, dropped, outcome)
}

/// Acknowledged moves the database does not have after the kill: how many,
/// of how many members, and the age at the kill of the oldest (ms).
fn losses(
    marks: &Marks,
    stored: &HashMap<String, Option<String>>,
    killed: Instant,
) -> (u64, u64, f64) {
    let index: HashMap<String, usize> = marks
        .messages
        .iter()
        .enumerate()
        .map(|(i, id)| (id.to_string(), i))
        .collect();
    let (mut lost, mut members, mut oldest) = (0u64, 0u64, 0.0f64);
    for (member, acked) in marks.members.iter().zip(&marks.acked) {
        let stored_index = stored
            .get(&member.to_string())
            .cloned()
            .flatten()
            .and_then(|m| index.get(&m).copied());
        let Ok(acked) = acked.lock() else { continue };
        let missing: Vec<&(usize, Instant)> = acked
            .iter()
            .filter(|(i, _)| stored_index.is_none_or(|s| *i > s))
            .collect();
        if missing.is_empty() {
            continue;
        }
        lost += missing.len() as u64;
        members += 1;
        for (_, at) in missing {
            oldest = oldest.max(killed.saturating_duration_since(*at).as_secs_f64() * 1000.0);
        }
    }
    (lost, members, oldest)
}

/// The server's metrics.
async fn scrape(client: &reqwest::Client, ops: &str) -> Result<Exposition, LoadError> {
    let text = client
        .get(format!("{ops}/metrics"))
        .timeout(Duration::from_secs(10))
        .send()
        .await
        .map_err(|e| LoadError::http("scraping metrics", e))?
        .text()
        .await
        .map_err(|e| LoadError::http("scraping metrics", e))?;
    Ok(Exposition::parse(&text))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn marks(acked: Vec<Vec<(usize, Instant)>>) -> Marks {
        let n = acked.len();
        Marks {
            chat: Uuid::nil(),
            members: (0..n as u128).map(Uuid::from_u128).collect(),
            bearers: Vec::new(),
            messages: (100..110u128).map(Uuid::from_u128).collect(),
            next: (0..n).map(|_| AtomicUsize::new(0)).collect(),
            acked: acked.into_iter().map(Mutex::new).collect(),
        }
    }

    #[test]
    fn a_loss_is_an_acknowledged_move_past_the_stored_marker() {
        let killed = Instant::now();
        let at = |ms: u64| killed - Duration::from_millis(ms);
        let marks = marks(vec![
            // Stored up to message 2: nothing lost.
            vec![(1, at(900)), (2, at(500))],
            // Stored up to 1: the moves to 2 and 3 are lost, the older 400 ms.
            vec![(1, at(900)), (2, at(400)), (3, at(100))],
            // Nothing stored: every move is lost.
            vec![(0, at(50))],
            // No move at all.
            vec![],
        ]);
        let id = |i: u128| Some(Uuid::from_u128(100 + i).to_string());
        let stored: HashMap<String, Option<String>> = [
            (Uuid::from_u128(0).to_string(), id(2)),
            (Uuid::from_u128(1).to_string(), id(1)),
            (Uuid::from_u128(2).to_string(), None),
            (Uuid::from_u128(3).to_string(), None),
        ]
        .into_iter()
        .collect();
        let (lost, members, oldest) = losses(&marks, &stored, killed);
        assert_eq!((lost, members), (3, 2));
        assert!((oldest - 400.0).abs() < 1.0, "{oldest}");
    }
}
