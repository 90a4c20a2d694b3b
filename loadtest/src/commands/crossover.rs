//! `chatlab-load crossover`: where COPY starts to beat INSERT, straight to
//! PostgreSQL, without chatlab in the way.
//!
//! Each transaction writes one message's inbox rows, N of them, the way
//! chatlab's strategies write them (the same statements, on tables of
//! their own so nothing else shares them):
//!
//! - `copy`: the recipients read (one round trip), then `COPY ... FROM
//!   STDIN (FORMAT binary)`, the rows streamed in the COPY protocol;
//! - `unnest`: the recipients read, then one `INSERT ... SELECT FROM
//!   unnest($3::uuid[], $4::bool[])`, two arrays as two parameters;
//! - `batch`: the recipients read, then multi-row `INSERT ... VALUES`, five
//!   parameters a row, 13,107 rows a statement at most (PostgreSQL's
//!   65,535 parameters), each statement parsed anew as diesel sends it;
//! - `single`: no read, one `INSERT ... SELECT FROM members`: the server
//!   makes the rows itself.
//!
//! Row counts on a grid, methods interleaved, rounds alternating their
//! order; the inbox table is emptied before each cell so each starts on
//! the same index. Rows per second on one connection are the figure (one
//! transaction at a time: the cost of a transaction, not a contention
//! effect), beside transaction latency and WAL bytes per row.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use clap::Args;
use futures_util::pin_mut;
use tokio_postgres::binary_copy::BinaryCopyInWriter;
use tokio_postgres::types::{IsNull, ToSql, Type, accepts, to_sql_checked};
use uuid::Uuid;

use chatlab_domain::InsertStrategy;
use chatlab_domain::write_plan::rows_per_statement;

use crate::error::LoadError;
use crate::load::latency::Latencies;
use crate::load::schedule::parse_duration;
use crate::observe::wal::WalProbe;
use crate::servers::reach::{DistanceArgs, Reach};
use crate::stats::uncertainty::{Call, Interval};

use super::{machine_note, postgres_line, results_dir, round_order, write_results};

#[derive(Debug, Args)]
pub(crate) struct CrossoverArgs {
    /// The database (its tables `crossover_members` and `crossover_inbox`
    /// are made for the run and dropped after).
    #[arg(
        long,
        env = "DATABASE_URL",
        default_value = "postgres://postgres@127.0.0.1:5432/chatlab"
    )]
    database_url: String,
    /// Rows per transaction, the grid.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "10,50,200,1000,5000,25000"
    )]
    rows: Vec<usize>,
    /// Methods.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "copy,unnest,batch,single"
    )]
    methods: Vec<Method>,
    /// Length of each cell (at least `--min-transactions` run anyway).
    #[arg(long, default_value = "3s", value_parser = parse_duration)]
    duration: Duration,
    /// Fewest transactions of a cell.
    #[arg(long, default_value_t = 5)]
    min_transactions: u64,
    /// Rounds; each runs every cell, in an order that alternates.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Base folder of results.
    #[arg(long, default_value = "results")]
    results_dir: std::path::PathBuf,
    /// Where PostgreSQL is: straight, or behind a delay hop.
    #[command(flatten)]
    distance: DistanceArgs,
}

/// How the rows travel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, clap::ValueEnum)]
pub(crate) enum Method {
    /// `COPY ... FROM STDIN (FORMAT binary)`.
    Copy,
    /// One `INSERT ... SELECT FROM unnest(...)`.
    Unnest,
    /// Multi-row `INSERT ... VALUES`.
    Batch,
    /// `INSERT ... SELECT FROM members`, made by the server.
    Single,
}

impl Method {
    /// The chatlab strategy whose inbox rows this method writes; its
    /// [`WritePlan`](chatlab_domain::WritePlan) says what the method sends
    /// (a test holds the two together).
    fn strategy(self) -> InsertStrategy {
        match self {
            Self::Copy => InsertStrategy::Copy,
            Self::Unnest => InsertStrategy::Unnest,
            Self::Batch => InsertStrategy::Batch,
            Self::Single => InsertStrategy::Single,
        }
    }

    fn as_str(self) -> &'static str {
        self.strategy().as_str()
    }
}

/// Columns of an inbox row: five parameters a row in a multi-row INSERT.
const INBOX_COLUMNS: usize = 5;

/// Rows per multi-row INSERT: chatlab's for inbox rows (five parameters a
/// row under PostgreSQL's 65,535).
const BATCH_ROWS: usize = rows_per_statement(INBOX_COLUMNS);

/// A UUID as a parameter or a COPY field: its 16 bytes (tokio-postgres is
/// built here without its uuid feature).
#[derive(Debug, Clone, Copy)]
struct RawUuid(Uuid);

impl ToSql for RawUuid {
    fn to_sql(
        &self,
        _ty: &Type,
        out: &mut BytesMut,
    ) -> Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        out.extend_from_slice(self.0.as_bytes());
        Ok(IsNull::No)
    }

    accepts!(UUID);
    to_sql_checked!();
}

const SCHEMA: &str = "\
DROP TABLE IF EXISTS crossover_inbox, crossover_members;
CREATE TABLE crossover_members (chat_id uuid NOT NULL, user_id uuid NOT NULL, PRIMARY KEY (chat_id, user_id));
CREATE TABLE crossover_inbox (
    user_id uuid NOT NULL, chat_id uuid NOT NULL, message_id uuid NOT NULL,
    read boolean NOT NULL DEFAULT false, mentioned boolean NOT NULL DEFAULT false,
    PRIMARY KEY (user_id, chat_id, message_id));
CREATE INDEX crossover_inbox_unread ON crossover_inbox (user_id, chat_id) WHERE NOT read;";

const RECIPIENTS: &str =
    "SELECT user_id FROM crossover_members WHERE chat_id = $1 AND user_id <> $2";
const SINGLE: &str = "INSERT INTO crossover_inbox (user_id, chat_id, message_id, read, mentioned) \
     SELECT m.user_id, $1, $2, false, strpos($4, '@' || m.user_id::text) > 0 \
     FROM crossover_members m WHERE m.chat_id = $1 AND m.user_id <> $3";
const UNNEST: &str = "INSERT INTO crossover_inbox (user_id, chat_id, message_id, read, mentioned) \
     SELECT u.user_id, $1, $2, false, u.mentioned FROM unnest($3::uuid[], $4::bool[]) AS u(user_id, mentioned)";
const COPY: &str = "COPY crossover_inbox (user_id, chat_id, message_id, read, mentioned) FROM STDIN (FORMAT binary)";

/// The body every message has: it mentions nobody.
const BODY: &str = "crossover";

/// One chat of the grid: its id, its sender, and N other members.
struct Chat {
    id: Uuid,
    sender: Uuid,
}

/// One cell's figures.
struct Cell {
    rows: usize,
    method: Method,
    round: usize,
    transactions: u64,
    rows_written: u64,
    seconds: f64,
    latencies: Latencies,
    wal_bytes: Option<u64>,
    statements: u64,
}

impl Cell {
    fn rows_per_second(&self) -> f64 {
        self.rows_written as f64 / self.seconds.max(1e-9)
    }
}

pub(crate) async fn crossover(args: CrossoverArgs) -> Result<bool, LoadError> {
    let out = results_dir(&args.results_dir, "crossover");
    let reach = Reach::open(
        &args.database_url,
        args.distance.distance()?,
        &args.distance,
    )
    .await?;
    let (client, connection) = tokio_postgres::connect(&reach.url(), tokio_postgres::NoTls)
        .await
        .map_err(|e| LoadError::Usage(format!("crossover: {}: {e}", args.database_url)))?;
    let driver = tokio::spawn(async move {
        let _ = connection.await;
    });
    let wal = WalProbe::connect(&args.database_url).await?;
    client.batch_execute(SCHEMA).await.map_err(db)?;
    let mut chats = Vec::new();
    for &n in &args.rows {
        chats.push(seed_chat(&client, n).await?);
    }
    let cells: Vec<(usize, Method)> = args
        .rows
        .iter()
        .enumerate()
        .flat_map(|(i, _)| args.methods.iter().map(move |&m| (i, m)))
        .collect();
    let mut results = Vec::new();
    for round in 0..args.rounds.max(1) {
        for (i, method) in round_order(&cells, round) {
            client
                .batch_execute("TRUNCATE crossover_inbox")
                .await
                .map_err(db)?;
            let cell =
                run_cell(&client, &wal, &args, &chats[i], args.rows[i], method, round).await?;
            eprintln!(
                "crossover round {}: {} rows by {}: {:.0} rows/s",
                round + 1,
                cell.rows,
                method.as_str(),
                cell.rows_per_second()
            );
            results.push(cell);
        }
    }
    client
        .batch_execute("DROP TABLE crossover_inbox, crossover_members")
        .await
        .map_err(db)?;
    drop(client);
    let _ = driver.await;
    results.sort_by_key(|c| (c.rows, c.method, c.round));
    let summary = summary(&results, &args);
    let postgres = postgres_line(&args.database_url).await?;
    let notes = format!(
        "# crossover: where COPY starts to beat INSERT, straight to PostgreSQL\n\n{}\n\n{postgres} {}\n\nOne connection, one transaction at a time; each transaction writes one message's inbox rows (five columns, the inbox's primary key and partial index) for a chat of N recipients, the way chatlab's strategies write them: `copy` reads the recipients, then streams the rows as binary COPY; `unnest` reads them, then one INSERT from two arrays; `batch` reads them, then multi-row INSERTs of at most {BATCH_ROWS} rows, each parsed anew; `single` lets the server make the rows (`INSERT ... SELECT FROM members`). Each cell runs {} (at least {} transactions) on an emptied inbox; {} rounds, cells interleaved and their order alternating. WAL per row is the cluster's insert position moved per row written: run nothing else against the cluster.\n\n",
        machine_note(),
        reach.note(),
        humantime::format_duration(args.duration),
        args.min_transactions,
        args.rounds.max(1),
    );
    write_results(&out, &notes, &format!("{summary}\n{}", table(&results)))
}

fn db(e: tokio_postgres::Error) -> LoadError {
    LoadError::program("crossover: PostgreSQL", e.to_string())
}

/// A chat of `n` recipients and its sender.
async fn seed_chat(client: &tokio_postgres::Client, n: usize) -> Result<Chat, LoadError> {
    let chat = Chat {
        id: Uuid::now_v7(),
        sender: Uuid::now_v7(),
    };
    let mut members: Vec<RawUuid> = (0..n).map(|_| RawUuid(Uuid::now_v7())).collect();
    members.push(RawUuid(chat.sender));
    client
        .execute(
            "INSERT INTO crossover_members (chat_id, user_id) SELECT $1, u FROM unnest($2::uuid[]) u",
            &[&RawUuid(chat.id), &members],
        )
        .await
        .map_err(db)?;
    client
        .batch_execute("ANALYZE crossover_members")
        .await
        .map_err(db)?;
    Ok(chat)
}

async fn run_cell(
    client: &tokio_postgres::Client,
    wal: &WalProbe,
    args: &CrossoverArgs,
    chat: &Chat,
    rows: usize,
    method: Method,
    round: usize,
) -> Result<Cell, LoadError> {
    let recipients = client.prepare(RECIPIENTS).await.map_err(db)?;
    let prepared = match method {
        Method::Copy => Some(client.prepare(COPY).await.map_err(db)?),
        Method::Unnest => Some(client.prepare(UNNEST).await.map_err(db)?),
        Method::Single => Some(client.prepare(SINGLE).await.map_err(db)?),
        Method::Batch => None,
    };
    let mut latencies = Latencies::new();
    let (mut transactions, mut written, mut statements) = (0u64, 0u64, 0u64);
    let wal_before = wal.position().await;
    let started = Instant::now();
    while transactions < args.min_transactions || started.elapsed() < args.duration {
        let began = Instant::now();
        client.batch_execute("BEGIN").await.map_err(db)?;
        let message = RawUuid(Uuid::now_v7());
        let (n, sent) = match (method, &prepared) {
            (Method::Single, Some(single)) => {
                let n = client
                    .execute(
                        single,
                        &[&RawUuid(chat.id), &message, &RawUuid(chat.sender), &BODY],
                    )
                    .await
                    .map_err(db)?;
                (n, 1)
            }
            _ => {
                let users: Vec<RawUuid> = client
                    .query(&recipients, &[&RawUuid(chat.id), &RawUuid(chat.sender)])
                    .await
                    .map_err(db)?
                    .iter()
                    .map(|r| RawUuid(uuid_of(r.get::<_, RawUuidOut>(0))))
                    .collect();
                write(client, method, prepared.as_ref(), chat.id, message, &users).await?
            }
        };
        client.batch_execute("COMMIT").await.map_err(db)?;
        latencies.record_micros(began.elapsed().as_micros() as u64);
        transactions += 1;
        written += n;
        statements += sent;
    }
    let seconds = started.elapsed().as_secs_f64();
    let wal_after = wal.position().await;
    Ok(Cell {
        rows,
        method,
        round,
        transactions,
        rows_written: written,
        seconds,
        latencies,
        wal_bytes: wal_before.zip(wal_after).map(|(b, a)| a.saturating_sub(b)),
        statements,
    })
}

/// Writes `users`' rows by `method` (not `single`); answers the rows
/// written and the write statements sent (the recipients' read apart).
async fn write(
    client: &tokio_postgres::Client,
    method: Method,
    prepared: Option<&tokio_postgres::Statement>,
    chat: Uuid,
    message: RawUuid,
    users: &[RawUuid],
) -> Result<(u64, u64), LoadError> {
    let chat = RawUuid(chat);
    match (method, prepared) {
        (Method::Copy, Some(copy)) => {
            let sink = client.copy_in(copy).await.map_err(db)?;
            let writer = BinaryCopyInWriter::new(
                sink,
                &[Type::UUID, Type::UUID, Type::UUID, Type::BOOL, Type::BOOL],
            );
            pin_mut!(writer);
            for user in users {
                writer
                    .as_mut()
                    .write(&[user, &chat, &message, &false, &false])
                    .await
                    .map_err(db)?;
            }
            Ok((writer.finish().await.map_err(db)?, 1))
        }
        (Method::Unnest, Some(unnest)) => {
            let mentioned = vec![false; users.len()];
            let n = client
                .execute(unnest, &[&chat, &message, &users, &mentioned])
                .await
                .map_err(db)?;
            Ok((n, 1))
        }
        _ => {
            let (mut n, mut sent) = (0, 0);
            for chunk in users.chunks(BATCH_ROWS) {
                let mut sql = String::from(
                    "INSERT INTO crossover_inbox (user_id, chat_id, message_id, read, mentioned) VALUES ",
                );
                let mut params: Vec<&(dyn ToSql + Sync)> = Vec::with_capacity(chunk.len() * 5);
                for (i, user) in chunk.iter().enumerate() {
                    let p = i * 5;
                    let _ = write!(
                        sql,
                        "{}(${}, ${}, ${}, ${}, ${})",
                        if i == 0 { "" } else { ", " },
                        p + 1,
                        p + 2,
                        p + 3,
                        p + 4,
                        p + 5
                    );
                    params.extend([user as &(dyn ToSql + Sync), &chat, &message, &false, &false]);
                }
                n += client.execute(sql.as_str(), &params).await.map_err(db)?;
                sent += 1;
            }
            Ok((n, sent))
        }
    }
}

/// A UUID read back (tokio-postgres without its uuid feature): its bytes.
struct RawUuidOut([u8; 16]);

impl<'a> tokio_postgres::types::FromSql<'a> for RawUuidOut {
    fn from_sql(
        _ty: &Type,
        raw: &'a [u8],
    ) -> Result<Self, Box<dyn std::error::Error + Sync + Send>> {
        Ok(Self(raw.try_into()?))
    }

    tokio_postgres::types::accepts!(UUID);
}

fn uuid_of(raw: RawUuidOut) -> Uuid {
    Uuid::from_bytes(raw.0)
}

/// The mean over rounds of rows per second, per row count and method.
fn means(cells: &[Cell], rows: usize, method: Method) -> Option<f64> {
    let of: Vec<f64> = cells
        .iter()
        .filter(|c| c.rows == rows && c.method == method)
        .map(Cell::rows_per_second)
        .collect();
    (!of.is_empty()).then(|| of.iter().sum::<f64>() / of.len() as f64)
}

/// `a`'s rows/s over `b`'s at `rows`, paired by round: its interval when
/// two rounds or more ran, else the ratio of the one round's figures.
fn ratio(cells: &[Cell], rows: usize, a: Method, b: Method) -> Option<(f64, Option<Interval>)> {
    let of = |m: Method| {
        cells
            .iter()
            .filter(move |c| c.rows == rows && c.method == m)
    };
    let pairs: Vec<(f64, f64)> = of(a)
        .filter_map(|ca| {
            let cb = of(b).find(|cb| cb.round == ca.round)?;
            Some((ca.rows_per_second(), cb.rows_per_second()))
        })
        .collect();
    let first = pairs.first()?;
    let bare = first.0 / first.1.max(1e-9);
    Some(match Interval::of_ratio(&pairs) {
        Some(i) => (i.estimate, Some(i)),
        None => (bare, None),
    })
}

/// A ratio as the summary shows it: with its interval and `~` for a tie,
/// or bare when there was one round.
fn show(r: Option<(f64, Option<Interval>)>) -> String {
    match r {
        Some((_, Some(i))) => i.show_called(),
        Some((bare, None)) => format!("{bare:.2}"),
        None => "-".to_owned(),
    }
}

/// Per row count: each method's mean rows/s, the best INSERT that sends
/// its rows (`unnest`, `batch`: the question COPY answers), COPY against
/// it and against `single` (whose rows never travel), paired by round with
/// 95% intervals; then the crossover: the smallest row count of the grid
/// from which COPY is ahead of every INSERT that sends rows (its interval
/// above 1), at it and at every larger one, and the row counts where the
/// two are level (the interval holds 1).
fn summary(cells: &[Cell], args: &CrossoverArgs) -> String {
    let mut sizes = args.rows.clone();
    sizes.sort_unstable();
    sizes.dedup();
    let mut methods = args.methods.clone();
    methods.sort_unstable();
    methods.dedup();
    let mut out = String::from("| rows per transaction |");
    for m in &methods {
        let _ = write!(out, " {} rows/s |", m.as_str());
    }
    out.push_str(" best INSERT sending rows | copy ÷ it | copy ÷ single |\n|---|");
    for _ in &methods {
        out.push_str("---|");
    }
    out.push_str("---|---|---|\n");
    let mut calls = Vec::new();
    for &n in &sizes {
        let _ = write!(out, "| {n} |");
        for &m in &methods {
            match means(cells, n, m) {
                Some(v) => {
                    let _ = write!(out, " {v:.0} |");
                }
                None => out.push_str(" - |"),
            }
        }
        let best = methods
            .iter()
            .filter(|&&m| matches!(m, Method::Unnest | Method::Batch))
            .filter_map(|&m| means(cells, n, m).map(|v| (m, v)))
            .max_by(|a, b| a.1.total_cmp(&b.1));
        let single = show(ratio(cells, n, Method::Copy, Method::Single));
        match best.and_then(|(m, _)| Some((m, ratio(cells, n, Method::Copy, m)?))) {
            Some((m, r)) => {
                let _ = writeln!(out, " {} | {} | {single} |", m.as_str(), show(Some(r)));
                let call = match r {
                    (_, Some(i)) => i.call(),
                    (bare, None) if bare > 1.0 => Call::Ahead,
                    _ => Call::Behind,
                };
                calls.push((n, call));
            }
            None => {
                let _ = writeln!(out, " - | - | {single} |");
            }
        }
    }
    out.push_str(&crossover_words(&sizes, &calls));
    out
}

/// The crossover in words, from COPY's call against the best INSERT at each
/// row count.
fn crossover_words(sizes: &[usize], calls: &[(usize, Call)]) -> String {
    let from = calls
        .iter()
        .enumerate()
        .find(|(i, _)| calls[*i..].iter().all(|(_, c)| *c == Call::Ahead))
        .map(|(_, (n, _))| *n);
    let level: Vec<String> = calls
        .iter()
        .filter(|(_, c)| *c == Call::Tie)
        .map(|(n, _)| n.to_string())
        .collect();
    let level = if level.is_empty() {
        String::new()
    } else {
        format!(
            " At {} rows the two are level: the interval of their ratio holds 1.",
            level.join(", ")
        )
    };
    let verdict = match from {
        Some(n) if Some(&n) == sizes.first() => format!(
            "Crossover: COPY is ahead of every INSERT that sends rows at every row count of the grid, from {n} rows on."
        ),
        Some(n) => {
            let below = sizes.iter().rev().find(|&&s| s < n).copied().unwrap_or(n);
            format!(
                "Crossover: between {below} and {n} rows per transaction; COPY is ahead of every INSERT that sends rows from {n} rows on."
            )
        }
        None if calls.is_empty() => "Crossover: not measured (no copy cells).".to_owned(),
        None => {
            "Crossover: none on this grid; COPY is not clearly ahead up to its largest row count."
                .to_owned()
        }
    };
    format!("\n{verdict}{level}\n")
}

fn table(cells: &[Cell]) -> String {
    let mut table = String::from(
        "| rows per transaction | method | round | transactions | rows/s | transaction p50 ms | p95 ms | write statements per transaction | WAL bytes per row |\n|---|---|---|---|---|---|---|---|---|\n",
    );
    for c in cells {
        let wal = c.wal_bytes.map_or_else(
            || "-".to_owned(),
            |w| format!("{:.0}", w as f64 / (c.rows_written.max(1) as f64)),
        );
        let _ = writeln!(
            table,
            "| {} | {} | {} | {} | {:.0} | {:.2} | {:.2} | {:.1} | {} |",
            c.rows,
            c.method.as_str(),
            c.round + 1,
            c.transactions,
            c.rows_per_second(),
            c.latencies.quantile_ms(0.5),
            c.latencies.quantile_ms(0.95),
            c.statements as f64 / c.transactions.max(1) as f64,
            wal,
        );
    }
    table
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What each method sends is what its strategy's plan says chatlab
    /// sends for a message's inbox rows, so the yardstick cannot drift.
    #[test]
    fn every_method_sends_its_strategy_s_plan() {
        use chatlab_domain::{Recipients, RowsBy};
        for method in [Method::Copy, Method::Unnest, Method::Batch, Method::Single] {
            let plan = method.strategy().plan();
            assert_eq!(method.as_str(), method.strategy().as_str());
            let server_made = plan.recipients == Recipients::OnServer;
            assert_eq!(method == Method::Single, server_made, "{method:?}");
            if !server_made {
                let by = match method {
                    Method::Copy => RowsBy::Copy,
                    Method::Unnest => RowsBy::Unnest,
                    Method::Batch | Method::Single => RowsBy::Values,
                };
                assert_eq!(plan.rows, by, "{method:?}");
            }
        }
        // A multi-row INSERT carries as many inbox rows as chatlab's does.
        assert_eq!(RowsBy::Values.statements(BATCH_ROWS + 1, INBOX_COLUMNS), 2);
        assert_eq!(RowsBy::Values.statements(BATCH_ROWS, INBOX_COLUMNS), 1);
    }

    fn cell(rows: usize, method: Method, rows_per_second: f64) -> Cell {
        Cell {
            rows,
            method,
            round: 0,
            transactions: 1,
            rows_written: rows_per_second as u64,
            seconds: 1.0,
            latencies: Latencies::new(),
            wal_bytes: None,
            statements: 1,
        }
    }

    fn args(rows: &[usize]) -> CrossoverArgs {
        CrossoverArgs {
            database_url: String::new(),
            rows: rows.to_vec(),
            methods: vec![Method::Copy, Method::Unnest],
            duration: Duration::from_secs(1),
            min_transactions: 1,
            rounds: 1,
            results_dir: "results".into(),
            distance: DistanceArgs {
                db_rtt: None,
                db_jitter: String::new(),
                delay_bin: "chatlab-delay".into(),
                calibrate_for: Duration::from_secs(1),
            },
        }
    }

    #[test]
    fn the_crossover_is_where_copy_stays_ahead() {
        let cells = [
            cell(10, Method::Copy, 50.0),
            cell(10, Method::Unnest, 100.0),
            cell(50, Method::Copy, 300.0),
            cell(50, Method::Unnest, 200.0),
            cell(200, Method::Copy, 500.0),
            cell(200, Method::Unnest, 600.0),
            cell(1000, Method::Copy, 900.0),
            cell(1000, Method::Unnest, 700.0),
        ];
        let s = summary(&cells, &args(&[10, 50, 200, 1000]));
        assert!(
            s.contains("between 200 and 1000 rows per transaction"),
            "{s}"
        );
        assert!(
            s.contains("| 1000 | 900 | 700 | unnest | 1.29 | - |"),
            "{s}"
        );
    }

    #[test]
    fn rounds_give_the_ratio_an_interval_and_a_level_pair_is_no_crossover() {
        let round = |rows, method, rps, round| Cell {
            round,
            ..cell(rows, method, rps)
        };
        // At 5000 rows copy leads in every round; at 1000 it trades places.
        let cells = [
            round(1000, Method::Copy, 1000.0, 0),
            round(1000, Method::Unnest, 980.0, 0),
            round(1000, Method::Copy, 970.0, 1),
            round(1000, Method::Unnest, 1010.0, 1),
            round(1000, Method::Copy, 1005.0, 2),
            round(1000, Method::Unnest, 995.0, 2),
            round(5000, Method::Copy, 1100.0, 0),
            round(5000, Method::Unnest, 1000.0, 0),
            round(5000, Method::Copy, 1120.0, 1),
            round(5000, Method::Unnest, 1010.0, 1),
            round(5000, Method::Copy, 1090.0, 2),
            round(5000, Method::Unnest, 1000.0, 2),
        ];
        let s = summary(&cells, &args(&[1000, 5000]));
        assert!(s.contains("| 1000 | 992 | 995 | unnest | ~ 1.00× ["), "{s}");
        assert!(s.contains("| 5000 | 1103 | 1003 | unnest | 1.10× ["), "{s}");
        assert!(
            s.contains("between 1000 and 5000 rows per transaction")
                && s.contains("At 1000 rows the two are level"),
            "{s}"
        );
    }

    #[test]
    fn no_crossover_when_copy_falls_behind_at_the_end() {
        let cells = [
            cell(10, Method::Copy, 200.0),
            cell(10, Method::Unnest, 100.0),
            cell(50, Method::Copy, 100.0),
            cell(50, Method::Unnest, 200.0),
        ];
        assert!(summary(&cells, &args(&[10, 50])).contains("none on this grid"));
    }
}
