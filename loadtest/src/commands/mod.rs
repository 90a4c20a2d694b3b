//! The commands of `chatlab-load`, one module each, and what they share:
//! the server arguments, the HTTP client, the spawned fleet's settings, the
//! results folder and the machine note.

pub(crate) mod baseline;
pub(crate) mod broker_check;
pub(crate) mod charts;
pub(crate) mod crosscheck;
pub(crate) mod crossover;
pub(crate) mod delivery;
pub(crate) mod delivery_busy;
pub(crate) mod docs;
pub(crate) mod fault;
pub(crate) mod intervals;
pub(crate) mod live_clients;
pub(crate) mod live_fleet;
pub(crate) mod markers;
pub(crate) mod matrix;
pub(crate) mod run;
pub(crate) mod setting;
pub(crate) mod syncs;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;

use crate::error::LoadError;
use crate::load::auth::{DEFAULT_ISSUER, Signer};
use crate::load::schedule::{self, parse_duration};
use crate::observe::sampler;
use crate::report::results::CellResult;
use crate::servers::fleet::{External, Fleet, FleetSpec};
use crate::servers::reach::{DistanceArgs, Reach};
use crate::servers::variant::parse_kv;
use crate::stats::thresholds::{Threshold, breaches};

#[derive(Debug, Args, Clone)]
pub(crate) struct ServerArgs {
    /// Servers to load, round robin (comma-separated URLs). Ignored with --spawn.
    #[arg(long, value_delimiter = ',', default_value = "http://127.0.0.1:8080")]
    pub(crate) target: Vec<String>,
    /// Operator URLs of the --target servers (their OPS_ADDR, comma-separated):
    /// where /metrics is scraped, /audit read and users seeded
    /// (POST /v1/users/bulk, on the first). Needed without --spawn.
    #[arg(long, env = "CHATLAB_OPS_URL", value_delimiter = ',')]
    pub(crate) ops_url: Vec<String>,
    /// The --target servers' CHATLAB_JWT_SECRET, to sign tokens for the
    /// users the harness seeds. Needed without --spawn (spawned servers get
    /// a secret made up for the run).
    #[arg(long, env = "CHATLAB_JWT_SECRET", hide_env_values = true)]
    pub(crate) jwt_secret: Option<String>,
    /// The servers' CHATLAB_JWT_ISSUER (spawned servers are given it).
    #[arg(long, env = "CHATLAB_JWT_ISSUER", default_value = DEFAULT_ISSUER)]
    pub(crate) jwt_issuer: String,
    /// Start this many chatlab servers instead (and stop them after).
    #[arg(long)]
    pub(crate) spawn: Option<usize>,
    /// The chatlab binary for --spawn.
    #[arg(long, env = "CHATLAB_BIN", default_value = "target/release/chatlab")]
    pub(crate) chatlab_bin: PathBuf,
    /// DATABASE_URL of spawned servers (and of pgbench baselines).
    #[arg(
        long,
        env = "DATABASE_URL",
        default_value = "postgres://postgres@127.0.0.1:5432/chatlab"
    )]
    pub(crate) database_url: String,
    /// Extra env of spawned servers, KEY=VALUE (repeatable).
    #[arg(long = "server-env", value_parser = parse_kv)]
    pub(crate) server_env: Vec<(String, String)>,
    /// Metrics sampling period.
    #[arg(long, default_value = "250ms", value_parser = parse_duration)]
    pub(crate) sample_interval: Duration,
    /// Users to seed.
    #[arg(long, default_value_t = 2000)]
    pub(crate) seed_users: usize,
    /// Where PostgreSQL is: straight, or behind a delay hop.
    #[command(flatten)]
    pub(crate) distance: DistanceArgs,
    /// Base folder of results.
    #[arg(long, default_value = "results")]
    pub(crate) results_dir: PathBuf,
    /// What the spawned servers' broker is, for results.md, when it was
    /// started outside chatlab-load (`tansu behind a 5 ms hop`); without
    /// it results.md names their KAFKA_BROKERS, or the mock cluster each
    /// embeds when that is unset.
    #[arg(long)]
    pub(crate) broker: Option<String>,
}

impl ServerArgs {
    /// The servers' broker, for results.md: see [`broker_note`]; `variants`
    /// are the env the servers get beside `--server-env`. External servers'
    /// broker is theirs, and not recorded.
    pub(crate) fn broker_note(&self, variants: &[&[(String, String)]]) -> String {
        if self.spawn.is_none() {
            return "Broker: the external servers' own; not recorded.".to_owned();
        }
        let mut envs = vec![self.server_env.as_slice()];
        envs.extend_from_slice(variants);
        broker_note(self.broker.as_deref(), &envs)
    }
}

/// Which requests carry a W3C `traceparent`.
#[derive(Debug, Args, Clone, Copy)]
pub(crate) struct TraceArgs {
    /// Send a sampled `traceparent` on this share of requests (0 to 1; 0:
    /// none), and list each cell's slowest traced requests in results.md.
    #[arg(long, default_value_t = 0.0, value_parser = parse_fraction)]
    pub(crate) trace_fraction: f64,
}

/// A share from 0 to 1.
fn parse_fraction(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(f) if (0.0..=1.0).contains(&f) => Ok(f),
        _ => Err(format!("{s:?} is not a fraction from 0 to 1, e.g. 0.01")),
    }
}

/// Ramp stages as one argument.
#[derive(Debug, Clone)]
pub(crate) struct Stages(Vec<schedule::Stage>);

pub(crate) fn http_client(max_idle: usize) -> Result<reqwest::Client, LoadError> {
    reqwest::Client::builder()
        .pool_max_idle_per_host(max_idle.max(16))
        .tcp_nodelay(true)
        // Below actix's 5 s keep-alive, so an idle connection is never
        // reused just as the server closes it.
        .pool_idle_timeout(Duration::from_secs(2))
        .timeout(Duration::from_secs(60))
        .build()
        .map_err(|e| LoadError::http("building the HTTP client", e))
}

/// The servers a command loads, started here or someone else's.
pub(crate) struct Deployed {
    /// The servers started here, held so that they stop when this is
    /// dropped; `None` for external ones.
    _fleet: Option<Fleet>,
    /// Public URLs, where the load goes.
    pub(crate) targets: Vec<String>,
    /// Operator URLs: metrics, audit, seeding.
    pub(crate) ops: Vec<String>,
    /// Pids in the order of `ops`, when known.
    pub(crate) pids: Vec<Option<u32>>,
    /// Signs the seeded users' tokens.
    pub(crate) signer: Arc<Signer>,
    /// PostgreSQL as the spawned servers reach it (`None`: external
    /// servers, whose database is theirs to know).
    pub(crate) reach: Option<Reach>,
}

impl Deployed {
    /// PostgreSQL's version and where it was, for results.md; for external
    /// servers, that their database is theirs and not recorded here.
    pub(crate) async fn postgres_note(&self, url: &str) -> Result<String, LoadError> {
        match &self.reach {
            Some(r) => Ok(format!("{} {}", postgres_line(url).await?, r.note())),
            None => Ok(EXTERNAL_POSTGRES.to_owned()),
        }
    }
}

impl Deployed {
    /// The first server's public and operator URLs.
    pub(crate) fn first(&self) -> Result<(&str, &str), LoadError> {
        match (self.targets.first(), self.ops.first()) {
            (Some(public), Some(ops)) => Ok((public, ops)),
            _ => Err(LoadError::Usage("no target server".into())),
        }
    }
}

/// Starts `args.spawn` servers, or takes the `--target` ones.
pub(crate) async fn deploy(
    args: &ServerArgs,
    out: &std::path::Path,
    client: &reqwest::Client,
) -> Result<Deployed, LoadError> {
    match args.spawn {
        Some(n) => {
            let reach = Reach::open(
                &args.database_url,
                args.distance.distance()?,
                &args.distance,
            )
            .await?;
            let spec = fleet_spec(args, n, out)?.with_database_url(&reach.url());
            let fleet = Fleet::start(&spec, client).await?;
            Ok(Deployed {
                targets: fleet.urls(),
                ops: fleet.ops_urls(),
                pids: fleet.pids(),
                _fleet: Some(fleet),
                signer: spec.signer,
                reach: Some(reach),
            })
        }
        None => {
            let external = external(args)?;
            Ok(Deployed {
                _fleet: None,
                pids: sampler::external_pids(&external.ops),
                targets: external.targets,
                ops: external.ops,
                signer: external.signer,
                reach: None,
            })
        }
    }
}

/// The `--target` servers, with their operator URLs and token secret; a
/// usage error naming what is missing.
pub(crate) fn external(args: &ServerArgs) -> Result<External, LoadError> {
    let targets: Vec<String> = args
        .target
        .iter()
        .map(|t| t.trim().trim_end_matches('/').to_owned())
        .filter(|t| !t.is_empty())
        .collect();
    if targets.is_empty() {
        return Err(LoadError::Usage("no --target server".into()));
    }
    let ops: Vec<String> = args
        .ops_url
        .iter()
        .map(|t| t.trim().trim_end_matches('/').to_owned())
        .filter(|t| !t.is_empty())
        .collect();
    if ops.is_empty() {
        return Err(LoadError::Usage(
            "servers given by --target need --ops-url (or CHATLAB_OPS_URL): the URL of their \
             operator listener (OPS_ADDR, e.g. http://127.0.0.1:9464), where /metrics, /audit \
             and POST /v1/users/bulk answer; or let the harness start servers with --spawn N"
                .into(),
        ));
    }
    let secret = args
        .jwt_secret
        .as_deref()
        .filter(|s| !s.is_empty())
        .ok_or_else(|| {
            LoadError::Usage(
                "servers given by --target need --jwt-secret (or CHATLAB_JWT_SECRET): their \
             CHATLAB_JWT_SECRET, to sign tokens for the users the harness seeds; or let the \
             harness start servers with --spawn N"
                    .into(),
            )
        })?;
    Ok(External {
        targets,
        ops,
        signer: Arc::new(Signer::new(secret, &args.jwt_issuer)?),
    })
}

/// How to start `count` servers: the shared settings, the extra env, and a
/// token secret made up for the run.
pub(crate) fn fleet_spec(
    args: &ServerArgs,
    count: usize,
    out: &std::path::Path,
) -> Result<FleetSpec, LoadError> {
    let mut env = vec![
        ("DATABASE_URL".to_owned(), args.database_url.clone()),
        ("CHATLAB_ALLOW_OVERRIDES".to_owned(), "true".to_owned()),
        ("RUST_LOG".to_owned(), "warn".to_owned()),
        ("LOG_FORMAT".to_owned(), "json".to_owned()),
    ];
    env.extend(args.server_env.iter().cloned());
    Ok(FleetSpec {
        binary: args.chatlab_bin.clone(),
        count,
        env,
        log_dir: out.join("logs"),
        signer: Arc::new(Signer::generate(&args.jwt_issuer)?),
    })
}

/// Writes `notes` then `table` to `out/results.md`, prints the table and
/// where the results went; answers success.
pub(crate) fn write_results(
    out: &std::path::Path,
    notes: &str,
    table: &str,
) -> Result<bool, LoadError> {
    std::fs::create_dir_all(out).map_err(|e| LoadError::file(out, e))?;
    let md = out.join("results.md");
    std::fs::write(&md, format!("{notes}{table}")).map_err(|e| LoadError::file(&md, e))?;
    println!("{table}");
    println!("results: {}", out.display());
    Ok(true)
}

/// `cells` in the order round `round` runs them: as given in even rounds,
/// reversed in odd ones, so a drifting machine weighs on every cell alike.
pub(crate) fn round_order<T: Clone>(cells: &[T], round: usize) -> Vec<T> {
    let mut order = cells.to_vec();
    if round % 2 == 1 {
        order.reverse();
    }
    order
}

pub(crate) fn results_dir(base: &std::path::Path, name: &str) -> PathBuf {
    base.join(format!(
        "{name}-{}",
        chrono::Utc::now().format("%Y%m%dT%H%M%SZ")
    ))
}

/// The `server_version` of the PostgreSQL at `url`, for a run to state.
pub(crate) async fn postgres_version(url: &str) -> Result<String, LoadError> {
    let fail = |e: tokio_postgres::Error| LoadError::program("PostgreSQL's version", e);
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .map_err(fail)?;
    let connection = tokio::spawn(async move {
        let _ = connection.await;
    });
    let version = client
        .query_one("SHOW server_version", &[])
        .await
        .and_then(|row| row.try_get::<_, String>(0))
        .map_err(fail);
    drop(client);
    let _ = connection.await;
    version
}

/// What a results.md says of PostgreSQL when the servers are someone
/// else's (`--target`): the harness does not know their database.
pub(crate) const EXTERNAL_POSTGRES: &str =
    "PostgreSQL: the external servers' own; its version and distance are not recorded.";

/// `PostgreSQL <version>.`, the version of the PostgreSQL at `url`: the
/// start of the line in which a results.md says where its database was.
pub(crate) async fn postgres_line(url: &str) -> Result<String, LoadError> {
    Ok(format!("PostgreSQL {}.", postgres_version(url).await?))
}

/// The broker spawned servers publish to, for results.md: `stated` when the
/// command was told what it is (a broker started outside chatlab-load, say
/// behind a hop of its own), else the `KAFKA_BROKERS` the servers are given
/// (in `envs`, or inherited from this process), else the mock cluster each
/// server embeds when it is unset.
pub(crate) fn broker_note(stated: Option<&str>, envs: &[&[(String, String)]]) -> String {
    if let Some(stated) = stated.map(str::trim).filter(|s| !s.is_empty()) {
        return format!("Broker: {}.", stated.trim_end_matches('.'));
    }
    let set = |key: &str| -> Vec<String> {
        let mut values: Vec<String> = envs
            .iter()
            .flat_map(|env| env.iter())
            .filter(|(k, _)| k == key)
            .map(|(_, v)| v.trim().to_owned())
            .collect();
        if values.is_empty() {
            values.extend(std::env::var(key).ok().map(|v| v.trim().to_owned()));
        }
        values.sort_by(|a, b| (a.len(), a).cmp(&(b.len(), b)));
        values.dedup();
        values
    };
    let brokers: Vec<String> = set("KAFKA_BROKERS")
        .into_iter()
        .filter(|v| !v.is_empty())
        .collect();
    if !brokers.is_empty() {
        return format!(
            "Broker: KAFKA_BROKERS={}, started outside chatlab-load; its distance is not measured here.",
            brokers.join(" and ")
        );
    }
    let rtts = set("KAFKA_MOCK_BROKER_RTT_MS");
    format!(
        "Broker: Kafka's mock cluster inside each server (KAFKA_BROKERS unset), {}.",
        if rtts.is_empty() {
            "no round trip injected".to_owned()
        } else {
            format!("KAFKA_MOCK_BROKER_RTT_MS={} ms injected", rtts.join(", "))
        }
    )
}

/// The first line of every results.md: the machine the run shared with
/// PostgreSQL and the servers (cores, memory and CPU model, from
/// `/proc/meminfo` and `/proc/cpuinfo` through the procfs crate) and when.
pub(crate) fn machine_note() -> String {
    use procfs::Current as _;

    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mem = procfs::Meminfo::current()
        .ok()
        .map_or_else(String::new, |m| {
            format!(", {:.0} GiB", m.mem_total as f64 / 1024.0 / 1024.0 / 1024.0)
        });
    let cpu = procfs::CpuInfo::current()
        .ok()
        .and_then(|c| c.model_name(0).map(str::to_owned))
        .unwrap_or_default();
    format!(
        "Machine: {cores} cores{mem} ({cpu}); PostgreSQL, the servers and the load tool share it. {}",
        chrono::Utc::now().format("%Y-%m-%d %H:%M UTC")
    )
}

/// The charts' subtitle: pool, cell length, rounds and the machine.
pub(crate) fn chart_subtitle(pool_sizes: &[u32], duration: Duration, rounds: usize) -> String {
    let pools: Vec<String> = pool_sizes
        .iter()
        .map(|&p| {
            if p == 0 {
                "the server's default".to_owned()
            } else {
                p.to_string()
            }
        })
        .collect();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    format!(
        "pool size {}; {} a cell, {rounds} round(s); {cores} cores shared by PostgreSQL, the servers and the load tool; {}",
        pools.join(", "),
        humantime::format_duration(duration),
        chrono::Utc::now().format("%Y-%m-%d")
    )
}

/// Prints breaches; answers whether every threshold held.
pub(crate) fn check(cells: &[CellResult], thresholds: &[Threshold]) -> bool {
    let mut ok = true;
    for c in cells {
        for b in breaches(thresholds, &c.figures()) {
            eprintln!("{} m={} vus={}: {b}", c.strategy, c.members, c.vus);
            ok = false;
        }
    }
    ok
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, clap::Parser)]
    struct Cli {
        #[command(flatten)]
        servers: ServerArgs,
    }

    fn server_args(args: &[&str]) -> ServerArgs {
        use clap::Parser;
        Cli::try_parse_from(std::iter::once("chatlab-load").chain(args.iter().copied()))
            .unwrap()
            .servers
    }

    #[test]
    fn external_servers_need_an_ops_url_and_the_secret() {
        let secret = "0123456789abcdef0123456789abcdef";
        // Flags win over the environment, so these hold whatever it says.
        let mut args = server_args(&["--target", "http://127.0.0.1:8080"]);
        args.ops_url.clear();
        args.jwt_secret = Some(secret.into());
        let err = external(&args).unwrap_err().to_string();
        assert!(
            err.contains("--ops-url") && err.contains("CHATLAB_OPS_URL"),
            "{err}"
        );

        args.ops_url = vec!["http://127.0.0.1:9464/".into()];
        args.jwt_secret = None;
        let err = external(&args).unwrap_err().to_string();
        assert!(
            err.contains("--jwt-secret") && err.contains("CHATLAB_JWT_SECRET"),
            "{err}"
        );

        args.jwt_secret = Some("short".into());
        let err = external(&args).unwrap_err().to_string();
        assert!(err.contains("at least 32"), "{err}");

        args.jwt_secret = Some(secret.into());
        let ext = external(&args).unwrap();
        assert_eq!(ext.targets, ["http://127.0.0.1:8080"]);
        assert_eq!(ext.ops, ["http://127.0.0.1:9464"]);
        assert_eq!(ext.signer.secret(), secret);
    }

    #[test]
    fn ops_urls_and_secret_parse_from_flags() {
        let args = server_args(&[
            "--target",
            "http://127.0.0.1:8080",
            "--ops-url",
            "http://127.0.0.1:9464,http://127.0.0.1:9465",
            "--jwt-secret",
            "0123456789abcdef0123456789abcdef",
            "--jwt-issuer",
            "lab",
        ]);
        assert_eq!(args.ops_url.len(), 2);
        let ext = external(&args).unwrap();
        assert_eq!(ext.signer.issuer(), "lab");
    }

    #[test]
    fn spawned_fleets_get_a_fresh_secret_each() {
        let args = server_args(&["--spawn", "2", "--jwt-issuer", "chatlab"]);
        let out = std::path::Path::new("results/x");
        let a = fleet_spec(&args, 2, out).unwrap();
        let b = fleet_spec(&args, 2, out).unwrap();
        assert_eq!(a.signer.secret().len(), 64);
        assert_ne!(a.signer.secret(), b.signer.secret());
        assert_eq!(a.signer.issuer(), "chatlab");
    }

    #[test]
    fn trace_fractions_are_shares_from_zero_to_one() {
        assert_eq!(parse_fraction("0"), Ok(0.0));
        assert_eq!(parse_fraction("0.01"), Ok(0.01));
        assert_eq!(parse_fraction("1"), Ok(1.0));
        for bad in ["-0.1", "1.5", "1%", "NaN", ""] {
            assert!(parse_fraction(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_broker_is_named_as_the_servers_get_it() {
        let kv = |k: &str, v: &str| (k.to_owned(), v.to_owned());
        assert_eq!(
            broker_note(Some("tansu behind a 5 ms hop."), &[]),
            "Broker: tansu behind a 5 ms hop."
        );
        let env = [kv("KAFKA_BROKERS", "127.0.0.1:4000")];
        let note = broker_note(None, &[&env]);
        assert!(
            note.contains("KAFKA_BROKERS=127.0.0.1:4000") && note.contains("not measured"),
            "{note}"
        );
        let base = [kv("KAFKA_BROKERS", "")];
        let (a, b) = (
            [kv("KAFKA_MOCK_BROKER_RTT_MS", "20")],
            [kv("KAFKA_MOCK_BROKER_RTT_MS", "5")],
        );
        assert_eq!(
            broker_note(None, &[&base, &a, &b]),
            "Broker: Kafka's mock cluster inside each server (KAFKA_BROKERS unset), KAFKA_MOCK_BROKER_RTT_MS=5, 20 ms injected."
        );
    }

    #[test]
    fn the_machine_note_gives_this_machine_s_memory_and_cpu() {
        let note = machine_note();
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        assert!(
            note.starts_with(&format!("Machine: {cores} cores, ")),
            "{note}"
        );
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap();
        let kib: f64 = meminfo
            .lines()
            .find_map(|l| l.strip_prefix("MemTotal:"))
            .and_then(|v| v.split_whitespace().next())
            .unwrap()
            .parse()
            .unwrap();
        let gib = format!(", {:.0} GiB (", kib / 1024.0 / 1024.0);
        assert!(note.contains(&gib), "{note} lacks {gib}");
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap();
        if let Some(model) = cpuinfo
            .lines()
            .find_map(|l| l.strip_prefix("model name"))
            .map(|v| v.trim_start_matches([' ', '\t', ':']))
        {
            assert!(note.contains(&format!("({model})")), "{note} lacks {model}");
        }
    }
}
