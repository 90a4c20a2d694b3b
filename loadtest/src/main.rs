//! `chatlab-load`: chatlab's load generator and experiment runner.
//!
//! - `run`: one load (closed model with optional ramp stages, or open model
//!   at a constant arrival rate) with thresholds;
//! - `matrix`: a grid over strategy × members × VUs × publish mode × pool
//!   size, strategies alternating A B A B (or mixed per request), with
//!   optional pgbench baselines; writes `results/<name>-<timestamp>/`;
//! - `crosscheck`: wrk and this harness against the same endpoint, to prove
//!   the harness is not the bottleneck;
//! - `fault`: a real fault under load (database, broker, server, client
//!   hang-ups, or a soak), then the invariants.
//!
//! Traffic goes only to the given (loopback) servers, and every loop is
//! bounded by its duration.

mod baseline;
mod broker_check;
mod charts;
mod choice;
mod experiment;
mod fault;
mod fleet;
mod latency;
mod procstat;
mod prom;
mod report;
mod runner;
mod sampler;
mod scenario;
mod schedule;
mod thresholds;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use chatlab_domain::{InsertStrategy, PublishMode};

use crate::choice::Choice;

use crate::experiment::{
    MatrixSpec, ServerVariant, Servers, Watched, closed, parse_kv, run_matrix, scenario_name,
    variants_for,
};
use crate::fleet::{Fleet, FleetSpec};
use crate::report::CellResult;
use crate::runner::Model;
use crate::scenario::{Scenario, SeedSpec, Workload, seed};
use crate::schedule::{parse_duration, parse_stages};
use crate::thresholds::{Threshold, breaches};

#[derive(Debug, Parser)]
#[command(
    name = "chatlab-load",
    version,
    about = "Load generator and experiment runner for chatlab"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// One load run.
    Run(RunArgs),
    /// A grid of runs, with tables and charts.
    Matrix(MatrixArgs),
    /// wrk and this harness against the same GET endpoint.
    Crosscheck(CrosscheckArgs),
    /// pgbench alone on each strategy's createChat SQL (users are seeded
    /// through a spawned server first).
    Baseline(BaselineArgs),
    /// Does the broker keep what it acknowledges? Produces to a fresh topic
    /// from several producers (optionally beside busy threads), keeps every
    /// receipt, reads the topic back and reconciles the two.
    BrokerCheck(broker_check::BrokerCheckArgs),
    /// Faults under load: PostgreSQL restarted, stopped or its sessions
    /// ended, the broker killed or frozen, the server killed or stopped,
    /// clients hanging up, or a steady soak; then the invariants.
    Fault(fault::FaultArgs),
}

#[derive(Debug, Args)]
struct BaselineArgs {
    #[command(flatten)]
    servers: ServerArgs,
    /// Strategies.
    #[arg(long, value_delimiter = ',', default_value = "per_row,batch,unnest")]
    strategies: Vec<InsertStrategy>,
    /// Members per chat.
    #[arg(long, value_delimiter = ',', default_value = "50")]
    members: Vec<usize>,
    /// pgbench clients.
    #[arg(long, value_delimiter = ',', default_value = "8,20")]
    clients: Vec<usize>,
    /// Length of each measurement.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    duration: Duration,
}

#[derive(Debug, Args, Clone)]
struct ServerArgs {
    /// Servers to load, round robin (comma-separated URLs). Ignored with --spawn.
    #[arg(long, value_delimiter = ',', default_value = "http://127.0.0.1:8080")]
    target: Vec<String>,
    /// Start this many chatlab servers instead (and stop them after).
    #[arg(long)]
    spawn: Option<usize>,
    /// The chatlab binary for --spawn.
    #[arg(long, default_value = "target/release/chatlab")]
    chatlab_bin: PathBuf,
    /// DATABASE_URL of spawned servers (and of pgbench baselines).
    #[arg(
        long,
        env = "DATABASE_URL",
        default_value = "postgres://postgres@127.0.0.1:5432/chatlab"
    )]
    database_url: String,
    /// Extra env of spawned servers, KEY=VALUE (repeatable).
    #[arg(long = "server-env", value_parser = parse_kv)]
    server_env: Vec<(String, String)>,
    /// Metrics sampling period.
    #[arg(long, default_value = "250ms", value_parser = parse_duration)]
    sample_interval: Duration,
    /// Users to seed.
    #[arg(long, default_value_t = 2000)]
    seed_users: usize,
    /// Base folder of results.
    #[arg(long, default_value = "results")]
    results_dir: PathBuf,
}

#[derive(Debug, Args)]
struct RunArgs {
    #[command(flatten)]
    servers: ServerArgs,
    /// create-chat, send-message, read-messages, mix[:C:S:R] or get:/path.
    #[arg(long, default_value = "create-chat", value_parser = |s: &str| s.parse::<Scenario>())]
    scenario: Scenario,
    /// Members per created chat.
    #[arg(long, default_value_t = 50)]
    members: usize,
    /// Virtual users (closed model).
    #[arg(long, default_value_t = 20)]
    vus: usize,
    /// Length of the run.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    duration: Duration,
    /// Ramp stages VUS:DURATION,... (closed model; overrides --vus/--duration).
    #[arg(long, value_parser = |s: &str| parse_stages(s).map(Stages))]
    stages: Option<Stages>,
    /// Constant arrival rate, requests/s (open model).
    #[arg(long)]
    rate: Option<f64>,
    /// Open model: most requests in flight.
    #[arg(long, default_value_t = 400)]
    max_in_flight: usize,
    /// Pause between a VU's requests.
    #[arg(long, default_value = "0ms", value_parser = parse_duration)]
    think_time: Duration,
    /// X-Chatlab-Insert-Strategy to send (the server must allow overrides).
    #[arg(long)]
    strategy: Option<InsertStrategy>,
    /// X-Chatlab-Publish-Mode to send (the server must allow overrides).
    #[arg(long)]
    publish_mode: Option<PublishMode>,
    /// Thresholds, e.g. p95<150, errors<0.01, rps>100 (repeatable).
    #[arg(long = "threshold")]
    thresholds: Vec<Threshold>,
    /// Name of the results folder.
    #[arg(long, default_value = "run")]
    name: String,
}

#[derive(Debug, Args)]
struct MatrixArgs {
    #[command(flatten)]
    servers: ServerArgs,
    /// Name of the results folder.
    #[arg(long, default_value = "matrix")]
    name: String,
    /// Scenarios, each a dimension of the grid (comma-separated).
    #[arg(long = "scenario", value_delimiter = ',', default_value = "create-chat",
        value_parser = |s: &str| s.parse::<Scenario>())]
    scenarios: Vec<Scenario>,
    /// Server variants, NAME or NAME:KEY=VALUE+KEY=VALUE (repeatable;
    /// spawned servers restart with each), e.g. `--variant
    /// async:DB_DRIVER=async --variant blocking:DB_DRIVER=blocking`.
    #[arg(long = "variant", value_parser = |s: &str| s.parse::<ServerVariant>())]
    variants: Vec<ServerVariant>,
    /// Strategies (`-`: the server's own).
    #[arg(long, value_delimiter = ',', default_value = "per_row,batch")]
    strategies: Vec<Choice<InsertStrategy>>,
    /// Members per chat.
    #[arg(long, value_delimiter = ',', default_value = "50")]
    members: Vec<usize>,
    /// Virtual users.
    #[arg(long, value_delimiter = ',', default_value = "30")]
    vus: Vec<usize>,
    /// Publish modes (`-`: the server's own).
    #[arg(long, value_delimiter = ',', default_value = "off")]
    publish_modes: Vec<Choice<PublishMode>>,
    /// Pool sizes (spawned servers restart with each; 0: the server default).
    #[arg(long, value_delimiter = ',', default_value = "0")]
    pool_sizes: Vec<u32>,
    /// Length of each cell.
    #[arg(long, default_value = "20s", value_parser = parse_duration)]
    duration: Duration,
    /// Unmeasured load before the cells.
    #[arg(long, default_value = "3s", value_parser = parse_duration)]
    warmup: Duration,
    /// Rounds per cell (strategies alternate A B, B A, ...).
    #[arg(long, default_value_t = 1)]
    rounds: usize,
    /// Mix strategies per request in one run instead of alternating runs.
    #[arg(long)]
    mix_strategies: bool,
    /// Pause between a VU's requests.
    #[arg(long, default_value = "0ms", value_parser = parse_duration)]
    think_time: Duration,
    /// Also run pgbench on each strategy's SQL (needs pgbench).
    #[arg(long)]
    baseline: bool,
    /// Thresholds checked on every cell (repeatable).
    #[arg(long = "threshold")]
    thresholds: Vec<Threshold>,
}

#[derive(Debug, Args)]
struct CrosscheckArgs {
    #[command(flatten)]
    servers: ServerArgs,
    /// Path to GET; default: the newest messages of a seeded chat (a
    /// database-bound read, where the server, not a client, should be the
    /// limit).
    #[arg(long)]
    path: Option<String>,
    /// Connections of both tools.
    #[arg(long, default_value_t = 32)]
    vus: usize,
    /// Length of each measurement.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    duration: Duration,
    /// Largest acceptable difference of throughput, percent.
    #[arg(long, default_value_t = 5.0)]
    tolerance: f64,
}

/// Ramp stages as one argument.
#[derive(Debug, Clone)]
struct Stages(Vec<schedule::Stage>);

fn http_client(max_idle: usize) -> Result<reqwest::Client, String> {
    reqwest::Client::builder()
        .pool_max_idle_per_host(max_idle.max(16))
        .tcp_nodelay(true)
        // Below actix's 5 s keep-alive, so an idle connection is never
        // reused just as the server closes it.
        .pool_idle_timeout(Duration::from_secs(2))
        .timeout(Duration::from_secs(60))
        .build()
        .map_err(|e| format!("cannot build the HTTP client: {e}"))
}

fn fleet_spec(args: &ServerArgs, count: usize, out: &std::path::Path) -> FleetSpec {
    let mut env = vec![
        ("DATABASE_URL".to_owned(), args.database_url.clone()),
        ("CHATLAB_ALLOW_OVERRIDES".to_owned(), "true".to_owned()),
        ("RUST_LOG".to_owned(), "warn".to_owned()),
        ("LOG_FORMAT".to_owned(), "json".to_owned()),
    ];
    env.extend(args.server_env.iter().cloned());
    FleetSpec {
        binary: args.chatlab_bin.clone(),
        count,
        env,
        log_dir: out.join("logs"),
    }
}

fn results_dir(base: &std::path::Path, name: &str) -> PathBuf {
    base.join(format!(
        "{name}-{}",
        chrono::Utc::now().format("%Y%m%dT%H%M%SZ")
    ))
}

fn machine_note() -> String {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mem = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))
                .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
        })
        .map_or_else(String::new, |kib| {
            format!(", {:.0} GiB", kib / 1024.0 / 1024.0)
        });
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find_map(|l| l.strip_prefix("model name"))
                .map(|v| v.trim_start_matches([' ', '\t', ':']).to_owned())
        })
        .unwrap_or_default();
    format!(
        "Machine: {cores} cores{mem} ({cpu}); PostgreSQL, the servers and the load tool share it. {}",
        chrono::Utc::now().format("%Y-%m-%d %H:%M UTC")
    )
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Run(args) => run(args).await,
        Command::Matrix(args) => matrix(args).await,
        Command::Crosscheck(args) => crosscheck(args).await,
        Command::Baseline(args) => pgbench_baseline(args).await,
        Command::BrokerCheck(args) => broker_check::run(args).await,
        Command::Fault(args) => fault::run(args).await,
    };
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("chatlab-load: {e}");
            ExitCode::from(2)
        }
    }
}

/// Prints breaches; answers whether every threshold held.
fn check(cells: &[CellResult], thresholds: &[Threshold]) -> bool {
    let mut ok = true;
    for c in cells {
        for b in breaches(thresholds, &c.figures()) {
            eprintln!("{} m={} vus={}: {b}", c.strategy, c.members, c.vus);
            ok = false;
        }
    }
    ok
}

async fn run(args: RunArgs) -> Result<bool, String> {
    let out = results_dir(&args.servers.results_dir, &args.name);
    let model = if let Some(rate) = args.rate {
        schedule::ArrivalSchedule::new(rate, args.duration)?;
        Model::Open {
            rate,
            duration: args.duration,
            max_in_flight: args.max_in_flight,
        }
    } else if let Some(Stages(stages)) = args.stages.clone() {
        Model::Closed {
            stages,
            think_time: args.think_time,
        }
    } else {
        closed(args.vus, args.duration, args.think_time)
    };
    let client = http_client(model.peak_concurrency())?;
    let fleet = match args.servers.spawn {
        Some(n) => Some(Fleet::start(&fleet_spec(&args.servers, n, &out), &client).await?),
        None => None,
    };
    let (targets, pids) = match &fleet {
        Some(f) => (f.urls(), f.pids()),
        None => (
            args.servers.target.clone(),
            sampler::external_pids(&args.servers.target),
        ),
    };
    let first = targets.first().ok_or("no target server")?.clone();
    let seeded = seed(
        &client,
        &first,
        SeedSpec {
            members: args.members,
            users: args.servers.seed_users.max(args.members * 4),
            chats: 50,
        },
        &args.scenario,
    )
    .await?;
    let work = Arc::new(Workload::new(args.scenario.clone(), seeded, args.members));
    let strategies: Vec<Choice<InsertStrategy>> =
        args.strategy.map(|s| Choice(Some(s))).into_iter().collect();
    let watched = Watched {
        targets: targets.clone(),
        pids,
        sample_interval: args.servers.sample_interval,
    };
    let peak = model.peak_concurrency();
    let (outcome, stats) = experiment::measure(
        &client,
        &watched,
        work,
        variants_for(&strategies, args.publish_mode),
        model,
        &args.name,
    )
    .await;
    drop(fleet);
    let mut cell = CellResult {
        strategy: Choice(args.strategy).to_string(),
        publish_mode: Choice(args.publish_mode).to_string(),
        scenario: scenario_name(&args.scenario),
        members: args.members,
        vus: peak,
        servers: targets.len(),
        concurrency_per_server: peak as f64 / targets.len().max(1) as f64,
        ..CellResult::default()
    };
    cell.set_client(
        &outcome.total(),
        outcome.elapsed.as_secs_f64(),
        outcome.dropped,
    );
    cell.set_server(&stats, None);
    let cells = vec![cell];
    let notes = format!(
        "# {}\n\n{}\n\nScenario {}, {} server(s), {:.0} s.\n",
        args.name,
        machine_note(),
        scenario_name(&args.scenario),
        targets.len(),
        outcome.elapsed.as_secs_f64()
    );
    report::write(&out, &cells, &notes).map_err(|e| e.to_string())?;
    println!("{}", report::to_markdown(&cells));
    println!("results: {}", out.display());
    Ok(check(&cells, &args.thresholds))
}

async fn matrix(args: MatrixArgs) -> Result<bool, String> {
    let out = results_dir(&args.servers.results_dir, &args.name);
    let client = http_client(args.vus.iter().copied().max().unwrap_or(1))?;
    let servers = match args.servers.spawn {
        Some(n) => Servers::Spawn(fleet_spec(&args.servers, n, &out)),
        None => {
            if args.pool_sizes.iter().any(|&p| p > 0) || !args.variants.is_empty() {
                return Err(
                    "--pool-sizes and --variant need --spawn: external servers keep their settings"
                        .into(),
                );
            }
            Servers::External(args.servers.target.clone())
        }
    };
    let variants = if args.variants.is_empty() {
        vec![ServerVariant {
            name: "-".into(),
            env: Vec::new(),
        }]
    } else {
        args.variants.clone()
    };
    let spec = MatrixSpec {
        servers,
        variants: variants.clone(),
        scenarios: args.scenarios.clone(),
        strategies: args.strategies.clone(),
        members: args.members.clone(),
        vus: args.vus.clone(),
        publish_modes: args.publish_modes.clone(),
        pool_sizes: args.pool_sizes.clone(),
        duration: args.duration,
        warmup: args.warmup,
        rounds: args.rounds,
        mix_strategies: args.mix_strategies,
        think_time: args.think_time,
        baseline: args.baseline.then(|| args.servers.database_url.clone()),
        sample_interval: args.servers.sample_interval,
        seed_users: args.servers.seed_users,
        work_dir: baseline::default_work_dir(&out),
    };
    let cells = run_matrix(&client, &spec).await?;
    let notes = format!(
        "# {}\n\n{}\n\nScenarios {}; server variants {}; strategies {}; {} per cell, {} round(s){}; servers: {}.\n",
        args.name,
        machine_note(),
        args.scenarios
            .iter()
            .map(scenario_name)
            .collect::<Vec<_>>()
            .join(", "),
        variants
            .iter()
            .map(|v| {
                let env: Vec<String> = v.env.iter().map(|(k, val)| format!("{k}={val}")).collect();
                if env.is_empty() {
                    v.name.clone()
                } else {
                    format!("{} ({})", v.name, env.join(" "))
                }
            })
            .collect::<Vec<_>>()
            .join(", "),
        args.strategies
            .iter()
            .map(Choice::to_string)
            .collect::<Vec<_>>()
            .join(", "),
        humantime::format_duration(args.duration),
        args.rounds,
        if args.mix_strategies {
            ", strategies mixed per request"
        } else {
            ", strategies alternating"
        },
        args.servers
            .spawn
            .map_or_else(|| args.servers.target.join(" "), |n| format!("{n} spawned")),
    );
    report::write(&out, &cells, &notes).map_err(|e| e.to_string())?;
    let charts = charts::standard(&out, &cells)?;
    println!("{}", report::to_markdown(&cells));
    println!("results: {} ({})", out.display(), charts.join(", "));
    Ok(check(&cells, &args.thresholds))
}

async fn crosscheck(args: CrosscheckArgs) -> Result<bool, String> {
    let out = results_dir(&args.servers.results_dir, "crosscheck");
    let client = http_client(args.vus)?;
    let fleet = match args.servers.spawn {
        Some(n) => Some(Fleet::start(&fleet_spec(&args.servers, n, &out), &client).await?),
        None => None,
    };
    let target = match &fleet {
        Some(f) => f.urls().first().cloned().ok_or("no server")?,
        None => args.servers.target.first().cloned().ok_or("no target")?,
    };
    let path = match &args.path {
        Some(p) => p.clone(),
        None => {
            let seeded = seed(
                &client,
                &target,
                SeedSpec {
                    members: 10,
                    users: 100,
                    chats: 1,
                },
                &Scenario::ReadMessages,
            )
            .await?;
            let (chat, _) = seeded.chats.first().ok_or("no chat seeded")?;
            format!("/v1/chats/{chat}/messages?limit=20")
        }
    };
    let url = format!("{target}{path}");
    let secs = args.duration.as_secs().max(1);
    let wrk = std::process::Command::new("wrk")
        .arg("-t2")
        .arg(format!("-c{}", args.vus))
        .arg(format!("-d{secs}s"))
        .arg(&url)
        .output()
        .map_err(|e| format!("cannot run wrk (apt-get install wrk): {e}"))?;
    let wrk_out = String::from_utf8_lossy(&wrk.stdout);
    let wrk_rps: f64 = wrk_out
        .lines()
        .find_map(|l| l.trim().strip_prefix("Requests/sec:"))
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| format!("no Requests/sec in wrk's output:\n{wrk_out}"))?;
    let work = Arc::new(Workload::new(
        Scenario::Get { path: path.clone() },
        scenario::Seeded::default(),
        1,
    ));
    let outcome = runner::run(
        client,
        vec![target],
        work,
        Vec::new(),
        closed(args.vus, args.duration, Duration::ZERO),
        "chatlab-load",
    )
    .await;
    drop(fleet);
    let ours = outcome.total().requests() as f64 / outcome.elapsed.as_secs_f64();
    let diff = 100.0 * (ours - wrk_rps).abs() / wrk_rps.max(1e-9);
    println!(
        "GET {} with {} connections for {secs} s\n| tool | req/s |\n|---|---|\n| wrk | {wrk_rps:.0} |\n| chatlab-load | {ours:.0} |\ndifference: {diff:.1}% (tolerance {}%)",
        path, args.vus, args.tolerance
    );
    Ok(diff <= args.tolerance)
}

async fn pgbench_baseline(args: BaselineArgs) -> Result<bool, String> {
    let out = results_dir(&args.servers.results_dir, "baseline");
    let client = http_client(4)?;
    let users = {
        let fleet = Fleet::start(&fleet_spec(&args.servers, 1, &out), &client).await?;
        let first = fleet.urls().first().cloned().ok_or("no server")?;
        let max_members = args.members.iter().copied().max().unwrap_or(2);
        seed(
            &client,
            &first,
            SeedSpec {
                members: max_members,
                users: args.servers.seed_users.max(max_members * 4),
                chats: 0,
            },
            &Scenario::CreateChat,
        )
        .await?
        .users
    };
    let mut table = String::from(
        "| strategy | members | clients | pgbench protocol | tps |\n|---|---|---|---|---|\n",
    );
    for &members in &args.members {
        for &clients in &args.clients {
            for &strategy in &args.strategies {
                let spec = baseline::BaselineSpec {
                    database_url: args.servers.database_url.clone(),
                    strategy,
                    members,
                    clients,
                    duration: args.duration,
                    users: users.clone(),
                    work_dir: baseline::default_work_dir(&out),
                };
                let tps = tokio::task::spawn_blocking(move || baseline::run(&spec))
                    .await
                    .map_err(|e| e.to_string())??;
                table.push_str(&format!(
                    "| {strategy} | {members} | {clients} | {} | {tps:.0} |\n",
                    baseline::protocol(strategy)
                ));
            }
        }
    }
    let notes = format!("# pgbench baseline\n\n{}\n\n", machine_note());
    std::fs::create_dir_all(&out).map_err(|e| e.to_string())?;
    std::fs::write(out.join("results.md"), format!("{notes}{table}")).map_err(|e| e.to_string())?;
    println!("{table}");
    println!("results: {}", out.display());
    Ok(true)
}
