//! `chatlab-load delivery-busy`: does live delivery to a connected member
//! wait on the database?
//!
//! Per cell (a publish mode × how far the live instance's PostgreSQL is),
//! the harness starts a tansu broker and a chatlab instance, the live one
//! (L), whose database is reached straight or through a delay hop. A
//! member holds a live stream (`GET /v1/events`) on L, and a sender posts
//! to the chat they share at a steady pace: each message's latency runs
//! from its POST's 201 answer to its `message.sent` frame on the stream.
//! First quietly, then while client tasks create chats flat out on the
//! same instance; if delivery waited on the database, the busy phase's
//! p99 would carry the database's queue.
//!
//! At `blackhole`, L reaches PostgreSQL through a hop that adds nothing
//! and stops forwarding for the busy phase; the probe and the creators
//! then write to a second instance (W) that reaches it straight, and the
//! stream stays on L: whatever L's delivery waits on in the database, it
//! waits on forever.

mod cell;
mod db_distance;
mod probe;
mod report;

use std::path::PathBuf;
use std::time::Duration;

use chatlab_domain::PublishMode;
use clap::Args;

use crate::commands::{machine_note, postgres_version};
use crate::error::LoadError;
use crate::load::schedule::parse_duration;
use crate::servers::broker::BrokerStorage;
use crate::servers::reach::{DistanceArgs, Reach, show_ms};
use crate::servers::variant::parse_kv;
use db_distance::{DbDistance, parse_db_distance};
use report::Cell;

/// Flags of `delivery-busy`.
#[derive(Debug, Args)]
pub struct DeliveryBusyArgs {
    /// Publish modes (KAFKA_PUBLISH_MODE of every instance), a cell each
    /// per distance.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "in_tx_await,after_commit,outbox"
    )]
    modes: Vec<PublishMode>,
    /// How far the live instance's PostgreSQL is: round-trip times a delay
    /// hop adds (0: straight), or `blackhole` (a hop that adds nothing and
    /// stops forwarding for the busy phase, the writes going to a second
    /// instance that reaches PostgreSQL straight).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "0,5ms,20ms,blackhole",
        value_parser = parse_db_distance
    )]
    db_rtts: Vec<DbDistance>,
    /// The chatlab binary.
    #[arg(long, env = "CHATLAB_BIN", default_value = "target/release/chatlab")]
    binary: PathBuf,
    /// The servers' database.
    #[arg(
        long,
        env = "DATABASE_URL",
        default_value = "postgres://postgres@127.0.0.1:5432/chatlab"
    )]
    database_url: String,
    /// The chatlab-delay binary (the hop in front of the database).
    #[arg(
        long,
        env = "LOAD_DELAY_BIN",
        default_value = "target/release/chatlab-delay"
    )]
    delay_bin: PathBuf,
    /// How long each calibration of a distance (pgbench `SELECT 1`, one
    /// client, straight and through the hop) runs.
    #[arg(long, default_value = "2s", value_parser = parse_duration)]
    calibrate_for: Duration,
    /// The tansu binary: each cell gets a broker of its own.
    #[arg(long)]
    tansu_bin: PathBuf,
    /// The broker's storage engine.
    #[arg(long, value_enum, default_value = "sqlite")]
    tansu_storage: BrokerStorage,
    /// How long the probe runs alone.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    quiet: Duration,
    /// How long the probe runs beside the creators.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    busy: Duration,
    /// How long after a phase its late frames may take; a message not seen
    /// by then is missing.
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    drain: Duration,
    /// Time between two probe messages.
    #[arg(long, default_value = "500ms", value_parser = parse_duration)]
    every: Duration,
    /// Client tasks creating chats back to back in the busy phase.
    #[arg(long, default_value_t = 8)]
    creators: usize,
    /// Members of each created chat besides its creator.
    #[arg(long, default_value_t = 10)]
    members: usize,
    /// Users the created chats are made of (never the probe's two).
    #[arg(long, default_value_t = 200)]
    pool: usize,
    /// The busy p99 may exceed the quiet one by this much.
    #[arg(long, default_value = "100ms", value_parser = parse_duration)]
    max_gap: Duration,
    /// Extra env of every instance, `KEY=VALUE` (repeatable).
    #[arg(long = "env", value_parser = parse_kv)]
    env: Vec<(String, String)>,
    /// Where results.md and the cells' logs go.
    #[arg(long)]
    out: PathBuf,
    /// Exit 1 when a probe message is missing, repeated or not sent, or a
    /// cell's gap exceeds --max-gap.
    #[arg(long)]
    strict: bool,
}

impl DeliveryBusyArgs {
    /// A usage error for settings that cannot run.
    fn check(&self) -> Result<(), LoadError> {
        if self.modes.is_empty() || self.db_rtts.is_empty() {
            return Err(LoadError::Usage(
                "--modes and --db-rtts need at least one entry each".into(),
            ));
        }
        if self.creators == 0 || self.members == 0 || self.every.is_zero() {
            return Err(LoadError::Usage(
                "--creators, --members and --every must be above 0".into(),
            ));
        }
        if self.pool <= self.members {
            return Err(LoadError::Usage(format!(
                "--pool ({}) must be above --members ({}): a chat's members are other users of the pool than its creator",
                self.pool, self.members
            )));
        }
        Ok(())
    }

    /// The hop settings of [`Reach::open`], at the distance each cell sets.
    fn distance_args(&self) -> DistanceArgs {
        DistanceArgs {
            db_rtt: None,
            db_jitter: String::new(),
            delay_bin: self.delay_bin.clone(),
            calibrate_for: self.calibrate_for,
        }
    }
}

/// Runs every cell; whether nothing went missing or repeated and every gap
/// held (always true without `--strict`).
pub async fn run(args: DeliveryBusyArgs) -> Result<bool, LoadError> {
    args.check()?;
    std::fs::create_dir_all(&args.out).map_err(|e| LoadError::file(&args.out, e))?;
    // No overall timeout: the member's stream lasts the whole cell.
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(64)
        .tcp_nodelay(true)
        .build()
        .map_err(|e| LoadError::http("building the HTTP client", e))?;
    let version = postgres_version(&args.database_url).await?;
    let command = command_line();
    let mut reaches = Vec::with_capacity(args.db_rtts.len());
    for distance in &args.db_rtts {
        let reach = Reach::open(&args.database_url, distance.hop(), &args.distance_args()).await?;
        reaches.push((*distance, reach));
    }
    let mut cells: Vec<Cell> = Vec::new();
    for mode in &args.modes {
        for (distance, reach) in &reaches {
            let cell = cell::run_cell(&args, &client, *mode, *distance, reach).await?;
            println!("{}", cell.summary(args.max_gap));
            cells.push(cell);
            let path = args.out.join("results.md");
            let text = results_md(&args, &version, &command, &reaches, &cells);
            std::fs::write(&path, text).map_err(|e| LoadError::file(&path, e))?;
        }
    }
    println!(
        "\n{}\n{}\nwritten to {}",
        report::table(&cells),
        report::verdicts(&cells, args.max_gap),
        args.out.display()
    );
    let clean = cells.iter().all(|c| c.is_clean(args.max_gap));
    if !clean {
        println!(
            "probe messages went missing, repeated or unsent, or a busy p99 was more than {} ms over its quiet one (see results.md)",
            show_ms(args.max_gap.as_secs_f64() * 1e3)
        );
    }
    Ok(clean || !args.strict)
}

/// results.md: the setting, the table, and a verdict per cell.
fn results_md(
    args: &DeliveryBusyArgs,
    version: &str,
    command: &str,
    reaches: &[(DbDistance, Reach)],
    cells: &[Cell],
) -> String {
    let distances: String = reaches
        .iter()
        .map(|(distance, reach)| format!("- {}: {}\n", distance.label(), reach.note()))
        .collect();
    format!(
        "# Does live delivery wait on the database?\n\n\
         {}\n\n\
         PostgreSQL {version}. Where the live instance's database was, as each distance's calibration measured it:\n\n\
         {distances}\n\
         Broker: tansu ({:?} storage), one per cell, a fresh topic each.\n\n\
         Reproduce: `{command}`\n\n\
         Per cell, one chatlab instance, the live one (L), with the cell's KAFKA_PUBLISH_MODE, \
         its database at the cell's distance. A member holds a live stream (`GET /v1/events`) on L; \
         a sender posts a message to the chat they share every {} to the writing instance. \
         A message's latency runs from the moment its POST's 201 answer arrived to the moment its \
         `message.sent` frame arrived on the member's stream (one process, one monotonic clock; a \
         frame that came before its answer counts as 0 and in \"before the answer\": with the event \
         published inside the transaction, the frame can beat the commit's own round trip; \
         the p99 from the POST's start carries the write's time too). The quiet phase runs {} with the probe alone; \
         the busy phase {} with {} client tasks beside it on the writing instance, each creating chats \
         back to back (POST /v1/chats, {} members drawn from {} other users, never the member or the \
         sender). After each phase its late frames have {}; a message not seen by then is missing. \
         At the numeric distances L takes everything: the stream, the probe and the creators. \
         At `blackholed`, L reaches PostgreSQL through a hop that adds nothing, which stops forwarding \
         for the busy phase and forwards again at its end; the probe and the creators then write to a \
         second instance (W) that reaches PostgreSQL straight, and the stream stays on L. \
         The server mean delay is L's own `chatlab_live_delay_seconds` over the phase (its _sum and \
         _count scraped before the phase and after its drain), from an event's write to its hand-over \
         to the connections.\n\n\
         {}\n\
         {}",
        machine_note(),
        args.tansu_storage,
        humantime::format_duration(args.every),
        humantime::format_duration(args.quiet),
        humantime::format_duration(args.busy),
        args.creators,
        args.members,
        args.pool,
        humantime::format_duration(args.drain),
        report::table(cells),
        report::verdicts(cells, args.max_gap),
    )
}

/// This run's command line, quoted for a POSIX shell.
fn command_line() -> String {
    std::env::args()
        .map(|arg| shell_quote(&arg))
        .collect::<Vec<_>>()
        .join(" ")
}

/// `arg` as a shell reads it back: bare when it is plain, else in single
/// quotes.
fn shell_quote(arg: &str) -> String {
    let plain = !arg.is_empty()
        && arg
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:=,@+%".contains(c));
    if plain {
        arg.to_owned()
    } else {
        format!("'{}'", arg.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, clap::Parser)]
    struct Cli {
        #[command(flatten)]
        args: DeliveryBusyArgs,
    }

    fn parse(extra: &[&str]) -> DeliveryBusyArgs {
        use clap::Parser;
        let base = ["chatlab-load", "--tansu-bin", "tansu", "--out", "x"];
        Cli::try_parse_from(base.iter().chain(extra)).unwrap().args
    }

    #[test]
    fn the_defaults_are_three_modes_at_four_distances() {
        let args = parse(&[]);
        assert_eq!(
            args.modes,
            [
                PublishMode::InTxAwait,
                PublishMode::AfterCommit,
                PublishMode::Outbox
            ]
        );
        let labels: Vec<String> = args.db_rtts.iter().map(|d| d.label()).collect();
        assert_eq!(labels, ["0 ms", "5 ms", "20 ms", "blackholed"]);
        assert_eq!(args.max_gap, Duration::from_millis(100));
        assert!(args.check().is_ok());
    }

    #[test]
    fn settings_that_cannot_run_are_refused() {
        assert!(parse(&["--pool", "10", "--members", "10"]).check().is_err());
        assert!(parse(&["--creators", "0"]).check().is_err());
        use clap::Parser;
        let bad = Cli::try_parse_from([
            "chatlab-load",
            "--tansu-bin",
            "t",
            "--out",
            "x",
            "--db-rtts",
            "0,nearby",
        ]);
        assert!(bad.is_err());
    }

    #[test]
    fn command_lines_quote_what_a_shell_would_split() {
        assert_eq!(shell_quote("--db-rtts"), "--db-rtts");
        assert_eq!(shell_quote("0,5ms,blackhole"), "0,5ms,blackhole");
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
        assert_eq!(shell_quote(""), "''");
    }
}
