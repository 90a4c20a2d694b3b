//! Fault experiments: a bounded open-model load of createChat and
//! sendMessage against a chatlab server the harness starts, a real fault in
//! the middle of it (PostgreSQL restarted, stopped or its sessions ended;
//! the broker killed or frozen; the server killed or stopped; clients
//! hanging up), then the invariants: every acknowledged write complete in
//! the database, no write half done, no event lost by a no-loss mode, the
//! outbox drained, nothing left checked out or idle in a transaction.
//! Writes `table.md` (one row per fault × server variant) and each cell's
//! audit and server log to the output directory.
use crate::error::LoadError;
use crate::load::choice::Choice;
use crate::load::schedule::ArrivalSchedule;
use chatlab_domain::PublishMode;

mod checks;
mod figures;
mod inject;
mod load;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::Utc;
use clap::Args;

use crate::load::auth::{DEFAULT_ISSUER, Signer};
use crate::load::scenario::{Scenario, SeedAt, SeedSpec, seed};
use crate::load::schedule::parse_duration;
use crate::servers::broker::{Broker, BrokerStorage};
use crate::servers::fleet::{Fleet, FleetSpec};
use crate::servers::reach::{DistanceArgs, Reach};
use crate::servers::variant::{ServerVariant, parse_kv};
use chatlab_delay::Distance;
use checks::Watcher;
use figures::CellFigures;
pub use inject::Fault;
use inject::{Database, Targets};
use load::LoadSpec;

/// `chatlab-load fault`.
#[derive(Debug, Args)]
pub struct FaultArgs {
    /// Faults, each run in every variant: db-restart, db-terminate,
    /// db-stop, broker-kill, broker-freeze, server-kill, server-term,
    /// cancel, soak.
    #[arg(long, value_delimiter = ',', required = true)]
    faults: Vec<Fault>,
    /// Server variants, `NAME:KEY=VALUE+KEY=VALUE`.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "async-pool:DB_DRIVER=async"
    )]
    variants: Vec<ServerVariant>,
    /// The chatlab binary.
    #[arg(long, env = "CHATLAB_BIN", default_value = "target/release/chatlab")]
    binary: PathBuf,
    /// The database, on a private cluster that `scripts/ensure-postgres.sh`
    /// made (the database faults stop and restart it).
    #[arg(long)]
    database_url: String,
    /// Where PostgreSQL is: straight, or behind a delay hop (db-blackhole
    /// always puts one in front of it, at this distance or none).
    #[command(flatten)]
    distance: DistanceArgs,
    /// The script that stops and starts the private cluster.
    #[arg(long, default_value = "scripts/pg-private.sh")]
    pg_script: PathBuf,
    /// A tansu binary: each cell then gets a broker of its own, on SQLite
    /// storage (needed by the broker and server faults; without it the
    /// servers use the embedded mock cluster).
    #[arg(long)]
    tansu_bin: Option<PathBuf>,
    /// The storage engine of the run's broker.
    #[arg(long, value_enum, default_value = "sqlite")]
    tansu_storage: BrokerStorage,
    /// Publish modes sent per request in `X-Chatlab-Publish-Mode`, in turn
    /// (`-`: no header).
    #[arg(long, value_delimiter = ',', default_value = "-")]
    publish_modes: Vec<Choice<PublishMode>>,
    /// Requests per second.
    #[arg(long, default_value_t = 100.0)]
    rate: f64,
    /// Length of the load.
    #[arg(long, default_value = "20s", value_parser = parse_duration)]
    duration: Duration,
    /// When the fault begins.
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    fault_at: Duration,
    /// How long a stop, kill or freeze lasts.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    down: Duration,
    /// Share of createChat (the rest are sendMessage and marker moves).
    #[arg(long, default_value_t = 0.5)]
    create_share: f64,
    /// Share of read-marker moves (`POST /v1/chats/{id}/read`), each up to
    /// the newest message of its chat the load has seen acknowledged.
    #[arg(long, default_value_t = 0.0)]
    mark_share: f64,
    /// Members per created chat.
    #[arg(long, default_value_t = 10)]
    members: usize,
    /// The client's deadline per request: `30s`, or a range `5ms..80ms`
    /// drawn uniformly (hang-ups at random points).
    #[arg(long, default_value = "30s")]
    deadline: String,
    /// Env of the servers, `KEY=VALUE` (repeatable).
    #[arg(long = "env", value_parser = parse_kv)]
    env: Vec<(String, String)>,
    /// No request may wait longer (the acquire timeout plus one statement
    /// timeout, and a margin).
    #[arg(long, default_value = "8s", value_parser = parse_duration)]
    latency_bound: Duration,
    /// How long the outbox may take to drain after the load.
    #[arg(long, default_value = "120s", value_parser = parse_duration)]
    drain_limit: Duration,
    /// Sampling period of the outbox, the pool and memory.
    #[arg(long, default_value = "500ms", value_parser = parse_duration)]
    sample_every: Duration,
    /// Where the table and the cells' files go.
    #[arg(long)]
    out: PathBuf,
    /// Exit 1 when an invariant breaks (the QUICK form in CI).
    #[arg(long)]
    strict: bool,
    /// Times a request that got no answer, was abandoned, or got a 503 or
    /// 409 is sent again (backoff 50 ms doubling).
    #[arg(long, default_value_t = 0)]
    retries: u32,
    /// Send every request with an `Idempotency-Key`, the same on its
    /// retries; then no createChat may be written twice (an invariant).
    #[arg(long)]
    idempotency_keys: bool,
}

/// Runs every cell; whether every invariant held.
pub async fn run(args: FaultArgs) -> Result<bool, LoadError> {
    std::fs::create_dir_all(&args.out).map_err(|e| LoadError::file(&args.out, e))?;
    // A new connection per request: a refused connect then means the
    // server was down, and a cut one that it dropped an answer.
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .map_err(|e| LoadError::http("building the HTTP client", e))?;
    let port = args
        .database_url
        .rsplit_once("://")
        .and_then(|(_, rest)| rest.split('/').next())
        .and_then(|authority| authority.rsplit_once(':'))
        .and_then(|(_, port)| port.parse().ok())
        .unwrap_or(5432);
    let db = Database {
        url: args.database_url.clone(),
        script: args.pg_script.clone(),
        port,
    };
    let deadline = parse_deadline(&args.deadline).map_err(LoadError::Usage)?;
    // A blackhole needs a hop to stop; at no distance asked, one that adds
    // none (a microsecond).
    let distance = args.distance.distance()?.or_else(|| {
        args.faults
            .contains(&Fault::DbBlackhole)
            .then_some(Distance {
                rtt: Duration::from_micros(1),
                jitter: Duration::ZERO,
            })
    });
    let reach = Reach::open(&args.database_url, distance, &args.distance).await?;
    let postgres = crate::commands::postgres_line(&args.database_url).await?;
    let mut cells = Vec::new();
    for fault in &args.faults {
        for variant in &args.variants {
            let cell = run_cell(&args, &client, &db, &reach, *fault, variant, deadline).await?;
            let broken = figures::broken_invariants(&cell, *fault, args.latency_bound);
            println!(
                "{} / {}: {} requests, {} ok, failed {:?}, max wait {} ms: {}",
                cell.fault,
                cell.variant,
                cell.requests,
                cell.succeeded,
                cell.failed,
                cell.max_latency.as_millis(),
                if broken.is_empty() {
                    "invariants held".to_owned()
                } else {
                    format!("BROKEN: {}", broken.join("; "))
                }
            );
            cells.push((cell, broken));
            let table = figures::to_markdown(&cells);
            let path = args.out.join("table.md");
            std::fs::write(&path, &table).map_err(|e| LoadError::file(&path, e))?;
        }
    }
    let table = figures::to_markdown(&cells);
    let notes = format!(
        "{}\n\n{postgres} {}\n\n{}\n\n{}",
        crate::commands::machine_note(),
        reach.note(),
        broker_note(&args),
        notes(&args, &cells)
    );
    let path = args.out.join("table.md");
    std::fs::write(&path, format!("{table}\n{notes}")).map_err(|e| LoadError::file(&path, e))?;
    println!("\n{table}\n{notes}\nwritten to {}", args.out.display());
    let held = cells.iter().all(|(_, broken)| broken.is_empty());
    if !held {
        println!("some invariants broke (see the table)");
    }
    Ok(held || !args.strict)
}

/// The cells' broker, for the table's notes: a tansu of each cell's own
/// (started here, on loopback), or what [`crate::commands::broker_note`]
/// finds in the servers' env.
fn broker_note(args: &FaultArgs) -> String {
    match &args.tansu_bin {
        Some(bin) => format!(
            "Broker: tansu ({}, {:?} storage), one per cell, on loopback beside the server; its round trip not measured.",
            bin.display(),
            args.tansu_storage
        ),
        None => {
            let variants: Vec<&[(String, String)]> =
                args.variants.iter().map(|v| v.env.as_slice()).collect();
            let mut envs = vec![args.env.as_slice()];
            envs.extend(variants);
            crate::commands::broker_note(None, &envs)
        }
    }
}

async fn run_cell(
    args: &FaultArgs,
    client: &reqwest::Client,
    db: &Database,
    reach: &Reach,
    fault: Fault,
    variant: &ServerVariant,
    deadline: (Duration, Duration),
) -> Result<CellFigures, LoadError> {
    let dir = args.out.join(format!("{}-{}", fault.name(), variant.name));
    let mut broker = match &args.tansu_bin {
        Some(bin) => Some(Broker::start(bin, &dir.join("broker"), args.tansu_storage).await?),
        None => None,
    };
    let spec = fleet_spec(
        args,
        &dir,
        server_env(args, variant, reach, broker.as_ref()),
    )?;
    let mut fleet = Fleet::start(&spec, client).await?;
    let first = fleet.first()?;
    let (url, ops_url, pid) = (first.url.clone(), first.ops_url.clone(), first.pid);
    let at = SeedAt {
        public: &url,
        ops: &ops_url,
        signer: &spec.signer,
    };
    let seeded = seed(client, at, cell_seed(args), &Scenario::SendMessage).await?;
    let load_spec = Arc::new(load_spec(args, fault, variant, deadline)?);
    let tag = load_spec.chat_name.clone();
    let since = Utc::now() - chrono::Duration::seconds(1);
    let started = Instant::now();
    let watcher = Watcher::start(
        client.clone(),
        db.clone(),
        ops_url.clone(),
        pid,
        started,
        args.sample_every,
    );
    let load = tokio::spawn(load::run(
        client.clone(),
        url.clone(),
        Arc::new(seeded),
        load_spec.clone(),
        started,
    ));
    tokio::time::sleep_until((started + args.fault_at).into()).await;
    let timeline = inject::inject(
        fault,
        args.down,
        Targets {
            database: db,
            reach,
            broker: broker.as_mut(),
            fleet: &mut fleet,
            client,
        },
        started,
    )
    .await?;
    let result = load.await?;
    let load_end = Instant::now();
    let drained = checks::wait_outbox_drained(db, args.drain_limit).await;
    let samples = watcher.finish().await;

    let mut cell = CellFigures {
        variant: variant.name.clone(),
        fault: fault.name().to_owned(),
        keyed: args.idempotency_keys,
        shutdown_timeout: env_value(&spec.env, "HTTP_SHUTDOWN_TIMEOUT_SECS")
            .and_then(|v| v.parse().ok())
            .map(Duration::from_secs),
        ..CellFigures::default()
    };
    figures::from_requests(&mut cell, &result.requests, &load_spec.modes, &timeline);
    figures::from_samples(&mut cell, &samples);
    cell.outbox_drained_after = drained.map(|_| load_end.elapsed());
    settle_sessions(&mut cell, client, db, &ops_url).await?;
    if result.requests.iter().any(|r| r.op == load::Op::Mark) {
        wait_marker_flush(&spec.env).await;
    }
    let (db2, requests, tag2, members) = (db.clone(), result.requests, tag.clone(), args.members);
    cell.rows =
        tokio::task::spawn_blocking(move || checks::check_rows(&db2, &requests, &tag2, members))
            .await??;
    audit_into(&mut cell, client, &ops_url, since, &dir).await?;
    if result.not_sent > 0 {
        cell.failed
            .insert("not sent (client cap)".into(), result.not_sent);
    }
    drop(fleet);
    drop(broker);
    Ok(cell)
}

/// One server with `env`, its log in `dir`, its tokens signed for the
/// issuer it would take from `env` (the fleet gives it explicitly, with a
/// secret made up for the cell).
fn fleet_spec(
    args: &FaultArgs,
    dir: &Path,
    env: Vec<(String, String)>,
) -> Result<FleetSpec, LoadError> {
    let issuer = env_value(&env, "CHATLAB_JWT_ISSUER")
        .unwrap_or(DEFAULT_ISSUER)
        .to_owned();
    Ok(FleetSpec {
        binary: args.binary.clone(),
        count: 1,
        env,
        log_dir: dir.to_path_buf(),
        signer: Arc::new(Signer::generate(&issuer)?),
    })
}

/// Reads the server's audit since `since` into `cell` and its table into
/// `dir/audit.md`; an audit that could not be read is noted in `cell`.
async fn audit_into(
    cell: &mut CellFigures,
    client: &reqwest::Client,
    ops_url: &str,
    since: chrono::DateTime<Utc>,
    dir: &Path,
) -> Result<(), LoadError> {
    match checks::audit(client, ops_url, since, Utc::now()).await {
        Ok((events, table)) => {
            cell.events = events;
            let path = dir.join("audit.md");
            std::fs::write(&path, table).map_err(|e| LoadError::file(&path, e))?;
        }
        Err(e) => cell.audit_error = Some(e.to_string()),
    }
    Ok(())
}

/// What a cell seeds: four users a chat member (at least 200), and twenty
/// chats of `args.members` for the sends and marks.
fn cell_seed(args: &FaultArgs) -> SeedSpec {
    SeedSpec {
        members: args.members,
        users: (args.members * 4).max(200),
        chats: 20,
    }
}

/// The env of a cell's server: the command's, the variant's, the database
/// (through its hop) and the broker, with override headers allowed.
fn server_env(
    args: &FaultArgs,
    variant: &ServerVariant,
    reach: &Reach,
    broker: Option<&Broker>,
) -> Vec<(String, String)> {
    let mut env = args.env.clone();
    env.extend(variant.env.iter().cloned());
    env.push(("DATABASE_URL".into(), reach.url()));
    env.push(("CHATLAB_ALLOW_OVERRIDES".into(), "true".into()));
    if let Some(b) = broker {
        env.push(("KAFKA_BROKERS".into(), b.address.clone()));
    }
    env
}

/// The load of one cell, its chats named after the fault and the variant
/// (and a tag of their own, so the row checks find this cell's alone).
fn load_spec(
    args: &FaultArgs,
    fault: Fault,
    variant: &ServerVariant,
    deadline: (Duration, Duration),
) -> Result<LoadSpec, LoadError> {
    let tag = format!(
        "fault {} {} {}",
        fault.name(),
        variant.name,
        &uuid::Uuid::now_v7().simple().to_string()[20..]
    );
    Ok(LoadSpec {
        arrivals: ArrivalSchedule::new(args.rate, args.duration).map_err(LoadError::Usage)?,
        create_share: args.create_share,
        mark_share: args.mark_share,
        members: args.members,
        chat_name: tag,
        modes: args.publish_modes.iter().map(|m| m.named()).collect(),
        deadline,
        max_in_flight: 2_000,
        retries: args.retries,
        keyed: args.idempotency_keys,
    })
}

/// Reads the sessions idle in a transaction and the pool's connections in
/// use into `cell`, again for up to 10 s until both are none: a hung-up
/// request's session ends within a moment.
async fn settle_sessions(
    cell: &mut CellFigures,
    client: &reqwest::Client,
    db: &Database,
    ops_url: &str,
) -> Result<(), LoadError> {
    let settle = Instant::now() + Duration::from_secs(10);
    loop {
        cell.idle_in_transaction = checks::idle_in_transaction(db)?;
        cell.connections_in_use = checks::connections_in_use(client, ops_url).await?;
        if (cell.idle_in_transaction == 0 && cell.connections_in_use == 0.0)
            || Instant::now() > settle
        {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Waits two of the server's marker flush windows: coalesced markers reach
/// the database at the next flush (one held through a failed flush goes at
/// the one after).
async fn wait_marker_flush(env: &[(String, String)]) {
    let window = env_value(env, "READ_MARKER_FLUSH_MS")
        .and_then(|v| v.parse().ok())
        .unwrap_or(500);
    tokio::time::sleep(Duration::from_millis(2 * window + 500)).await;
}

fn parse_deadline(s: &str) -> Result<(Duration, Duration), String> {
    match s.split_once("..") {
        Some((lo, hi)) => {
            let (lo, hi) = (parse_duration(lo)?, parse_duration(hi)?);
            if lo > hi || lo.is_zero() {
                return Err(format!(
                    "deadline range {s:?}: want LOW..HIGH with 0 < LOW <= HIGH"
                ));
            }
            Ok((lo, hi))
        }
        None => {
            let d = parse_duration(s)?;
            Ok((d, d))
        }
    }
}

fn notes(args: &FaultArgs, cells: &[(CellFigures, Vec<String>)]) -> String {
    let mut s = format!(
        "Load: {} req/s for {} s ({}% createChat of {} members, {}% read-marker moves, \
         the rest sendMessage), \
         fault at {} s, down {} s, client deadline {}, publish modes {}, retries {} {}.\n\
         Bound on any wait: {} ms. Failures: `refused` = no server listening, \
         `unanswered` = connection closed or reset before any answer, `cut` = an \
         answer broken off after its head, `abandoned` = the client's own deadline.\n",
        args.rate,
        args.duration.as_secs(),
        (args.create_share * 100.0).round(),
        args.members,
        (args.mark_share * 100.0).round(),
        args.fault_at.as_secs_f64(),
        args.down.as_secs_f64(),
        args.deadline,
        args.publish_modes
            .iter()
            .map(Choice::to_string)
            .collect::<Vec<_>>()
            .join(","),
        args.retries,
        if args.idempotency_keys {
            "with an Idempotency-Key"
        } else {
            "without a key"
        },
        args.latency_bound.as_millis()
    );
    for (c, _) in cells {
        if c.rows.marks_acked > 0 {
            s.push_str(&format!(
                "\n{} / {}: {} read-marker moves acknowledged, {} of them lost or moved back.",
                c.fault, c.variant, c.rows.marks_acked, c.rows.marks_lost
            ));
        }
        if c.rows.messages_fanned > 0 {
            s.push_str(&format!(
                "\n{} / {}: {} messages committed with inbox rows, {} of them with only part.",
                c.fault, c.variant, c.rows.messages_fanned, c.rows.messages_inbox_partial
            ));
        }
        if let Some((took, code)) = c.timeline.exit {
            s.push_str(&format!(
                "\n{} / {}: SIGTERM → exit {:?} after {} ms.",
                c.fault,
                c.variant,
                code,
                took.as_millis()
            ));
        }
        if c.fault == "cancel" || c.fault == "soak" {
            s.push_str(&format!(
                "\n{} / {}: {} sessions idle in transaction and {} connections checked out \
                 after the load; {} chats committed, {} in part.",
                c.fault,
                c.variant,
                c.idle_in_transaction,
                c.connections_in_use,
                c.rows.chats_committed,
                c.rows.chats_partial
            ));
        }
        if c.fault == "soak" {
            s.push_str(&format!(
                "\nsoak / {}: RSS {:.1} → {:.1} MiB; slopes per minute: RSS {:+.2} MiB, \
                 connections {:+.2}, waiters {:+.2}, outbox rows {:+.2}.",
                c.variant,
                c.rss.0,
                c.rss.1,
                c.slopes.rss_mib,
                c.slopes.connections,
                c.slopes.pending,
                c.slopes.outbox
            ));
        }
    }
    s.push('\n');
    s
}

/// The value the servers see for `key` in `env` (the last one set wins, as
/// it does for a process's environment).
fn env_value<'a>(env: &'a [(String, String)], key: &str) -> Option<&'a str> {
    env.iter()
        .rev()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}
