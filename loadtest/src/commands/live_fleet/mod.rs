//! `chatlab-load live-fleet`: the live tier at fleet scale.
//!
//! Several chatlab instances share one tansu broker and the database, and
//! sit behind a balancer of HAProxy processes ([`crate::servers::balancer`])
//! that checks each instance's `/readyz`. Client processes
//! ([`crate::commands::live_clients`]), each under the descriptor limit
//! and on a loopback address of its own, open one stream per user through
//! the balancer; the balancer spreads them over the instances, so every
//! chat has members on several. Messages go to the first instance at a
//! fixed rate, round robin over the chats, and each delivery is timed from
//! its write's start to its frame's arrival on the machine's monotonic
//! clock. With `--kill-at`, one instance (never the writers') is killed
//! (SIGKILL) mid-run: its streams end, reconnect through the balancer to
//! the others with their `Last-Event-ID`, and the run counts what they
//! missed or got twice and how long until all were back.

mod clients;
mod report;
mod tally;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use reqwest::header::HeaderValue;
use uuid::Uuid;

use crate::commands::{machine_note, postgres_line};
use crate::error::LoadError;
use crate::load::auth::{DEFAULT_ISSUER, Signer};
use crate::load::creators::create_groups;
use crate::load::message_writes::write_messages;
use crate::load::monotonic::now_ns;
use crate::load::scenario::seed_users;
use crate::load::schedule::parse_duration;
use crate::observe::{noise, procstat};
use crate::servers::balancer::{Backend, Balancer, BalancerSpec};
use crate::servers::broker::{Broker, BrokerStorage};
use crate::servers::fleet::{Fleet, FleetSpec, send_signal};
use crate::servers::reach::Reach;
use crate::servers::variant::parse_kv;
use tally::Write;

/// Flags of `live-fleet`.
#[derive(Debug, Args)]
pub struct LiveFleetArgs {
    /// chatlab instances behind the balancer; the first also takes the
    /// writes.
    #[arg(long, default_value_t = 6)]
    instances: usize,
    /// Chats, their members together the streams.
    #[arg(long, default_value_t = 100)]
    chats: usize,
    /// Members per chat, each holding one stream.
    #[arg(long, default_value_t = 1000)]
    members: usize,
    /// Client processes the streams are spread over.
    #[arg(long, default_value_t = 8)]
    client_processes: usize,
    /// HAProxy processes sharing the balancer's port (0: as many as the
    /// streams need at 20,000 descriptors each, and two more: the kernel
    /// spreads connections over the processes by a hash, not evenly).
    #[arg(long, default_value_t = 0)]
    balancer_processes: usize,
    /// Messages per second, over all chats.
    #[arg(long, default_value_t = 5.0)]
    rate: f64,
    /// How long the messages are written.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    duration: Duration,
    /// Kill one instance (not the writers') this long into the writes.
    #[arg(long, value_parser = parse_duration)]
    kill_at: Option<Duration>,
    /// How long after the last write deliveries may still arrive.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    drain: Duration,
    /// The delivery p99 each run is held to.
    #[arg(long, default_value = "200ms", value_parser = parse_duration)]
    p99_target: Duration,
    /// The chatlab binary.
    #[arg(long, env = "CHATLAB_BIN", default_value = "target/release/chatlab")]
    binary: PathBuf,
    /// The haproxy binary.
    #[arg(long, default_value = "/usr/sbin/haproxy")]
    haproxy_bin: PathBuf,
    /// The tansu binary.
    #[arg(long)]
    tansu_bin: PathBuf,
    /// The servers' database.
    #[arg(
        long,
        env = "DATABASE_URL",
        default_value = "postgres://postgres@127.0.0.1:5432/chatlab"
    )]
    database_url: String,
    /// Extra env of every instance, `KEY=VALUE` (repeatable).
    #[arg(long = "env", value_parser = parse_kv)]
    env: Vec<(String, String)>,
    /// Where results.md and the logs go.
    #[arg(long)]
    out: PathBuf,
    /// Run HAProxy on its default for responses (no `option
    /// http-no-delay`), to measure what that costs a live frame.
    #[arg(long)]
    haproxy_default_delay: bool,
    /// Exit 1 when a delivery is missing or repeated, a stream never came
    /// back, or the p99 is over its target.
    #[arg(long)]
    strict: bool,
}

/// Source addresses the balancer connects to each instance from (some
/// 14,000 streams each).
const SOURCES_PER_INSTANCE: usize = 2;

/// Streams one client process opens from its one bound address at most
/// (a bound address has some 14,000 ephemeral ports).
const STREAMS_PER_CLIENT: usize = 13_000;

/// Descriptors a process may hold here.
const FILES_PER_PROCESS: usize = 20_000;

impl LiveFleetArgs {
    fn streams(&self) -> usize {
        self.chats * self.members
    }

    fn check(&self) -> Result<(), LoadError> {
        if self.instances < 2 || self.chats == 0 || self.members == 0 || self.rate <= 0.0 {
            return Err(LoadError::Usage(
                "--instances must be 2 or more, --chats, --members and --rate above 0".into(),
            ));
        }
        let per_client = self.streams().div_ceil(self.client_processes.max(1));
        if per_client > STREAMS_PER_CLIENT {
            return Err(LoadError::Usage(format!(
                "{per_client} streams per client process: more than one source address's ports allow ({STREAMS_PER_CLIENT}); raise --client-processes"
            )));
        }
        Ok(())
    }

    fn balancer_spec(&self, dir: PathBuf, backends: Vec<Backend>) -> BalancerSpec {
        let mut spec = BalancerSpec {
            binary: self.haproxy_bin.clone(),
            dir,
            backends,
            processes: self.balancer_processes,
            files_per_process: FILES_PER_PROCESS,
            check_every: Duration::from_millis(500),
            no_delay: !self.haproxy_default_delay,
        };
        if spec.processes == 0 {
            spec.processes = self.streams().div_ceil(spec.streams_per_process().max(1)) + 2;
        }
        spec
    }
}

/// Runs the fleet once; whether every delivery was made once and the p99
/// held (always true without `--strict`).
pub async fn run(args: LiveFleetArgs) -> Result<bool, LoadError> {
    args.check()?;
    std::fs::create_dir_all(&args.out).map_err(|e| LoadError::file(&args.out, e))?;
    let postgres = format!(
        "{} {}",
        postgres_line(&args.database_url).await?,
        Reach::straight(&args.database_url).await?.note()
    );
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(256)
        .tcp_nodelay(true)
        .build()
        .map_err(|e| LoadError::http("building the HTTP client", e))?;
    let tier = Tier::start(&args, &client).await?;
    let mut audience = Audience::open(&args, &client, &tier).await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let spread = streams_per_instance(&client, &tier.fleet.ops_urls()).await;
    let window = write_watched(&args, &client, &tier, &audience).await?;
    tokio::time::sleep(args.drain).await;
    let spread_after = streams_per_instance(&client, &tier.fleet.ops_urls()).await;
    let records = audience.clients.stop().await?;

    let figures = tally::tally(&window.writes, &audience.chats, &records, window.killed_at);
    let run = report::Run {
        streams: audience.users.len(),
        all_open_ms: audience.all_open_ms,
        spread,
        spread_after,
        rss_before: window.rss_before,
        rss_after: window.rss_after,
        balancer_rss: window.balancer_rss,
        broker_cpu: window.broker_cpu,
        cpu: window.cpu,
        figures,
    };
    let text = report::results_md(&args, &tier.balancer_spec, &postgres, &run, &machine_note());
    let path = args.out.join("results.md");
    std::fs::write(&path, &text).map_err(|e| LoadError::file(&path, e))?;
    println!("{text}\nwritten to {}", args.out.display());
    drop(tier);
    Ok(run.is_clean(args.p99_target) || !args.strict)
}

/// The live tier under test: a broker, the chatlab instances, and the
/// balancer in front of them. Dropping it stops them, the balancer first.
struct Tier {
    balancer: Balancer,
    balancer_spec: BalancerSpec,
    fleet: Fleet,
    broker: Broker,
    signer: Arc<Signer>,
}

impl Tier {
    /// Starts the broker, `args.instances` instances publishing after
    /// commit to a topic of their own, and the balancer, which must hold
    /// every stream the run opens.
    async fn start(args: &LiveFleetArgs, client: &reqwest::Client) -> Result<Self, LoadError> {
        let broker = Broker::start(
            &args.tansu_bin,
            &args.out.join("broker"),
            BrokerStorage::Sqlite,
        )
        .await?;
        let signer = Arc::new(Signer::generate(DEFAULT_ISSUER)?);
        let mut env = vec![
            ("DATABASE_URL".to_owned(), args.database_url.clone()),
            ("KAFKA_BROKERS".to_owned(), broker.address.clone()),
            (
                "KAFKA_TOPIC".to_owned(),
                format!("chatlab-live-fleet-{}", Uuid::now_v7().simple()),
            ),
            ("KAFKA_PUBLISH_MODE".to_owned(), "after_commit".to_owned()),
            ("RUST_LOG".to_owned(), "warn".to_owned()),
            ("LOG_FORMAT".to_owned(), "json".to_owned()),
        ];
        env.extend(args.env.iter().cloned());
        let spec = FleetSpec {
            binary: args.binary.clone(),
            count: args.instances,
            env,
            log_dir: args.out.join("servers"),
            signer: Arc::clone(&signer),
        };
        let fleet = Fleet::start(&spec, client).await?;
        let backends = fleet
            .servers
            .iter()
            .enumerate()
            .map(|(n, s)| backend(n, &s.url, &s.ops_url))
            .collect::<Result<Vec<_>, _>>()?;
        let balancer_spec = args.balancer_spec(args.out.join("balancer"), backends);
        if balancer_spec.streams() < args.streams() {
            return Err(LoadError::Usage(format!(
                "{} balancer processes hold {} streams, fewer than {}",
                balancer_spec.processes,
                balancer_spec.streams(),
                args.streams()
            )));
        }
        let balancer = Balancer::start(&balancer_spec).await?;
        Ok(Self {
            balancer,
            balancer_spec,
            fleet,
            broker,
            signer,
        })
    }
}

/// The members listening: seeded users in group chats, each with a live
/// stream open through the balancer.
struct Audience {
    users: Vec<Uuid>,
    bearers: Vec<HeaderValue>,
    /// Each chat and the indexes of its members in `users`.
    chats: Vec<(Uuid, Vec<usize>)>,
    clients: clients::Clients,
    /// How long opening every stream took.
    all_open_ms: f64,
}

impl Audience {
    /// Seeds the users and their chats through the first instance, then
    /// opens one stream each through the balancer.
    async fn open(
        args: &LiveFleetArgs,
        client: &reqwest::Client,
        tier: &Tier,
    ) -> Result<Self, LoadError> {
        let writer = tier.fleet.first()?;
        println!("seeding {} users in {} chats", args.streams(), args.chats);
        let users = seed_users(client, &writer.ops_url, args.streams(), "fleet-").await?;
        let bearers: Vec<HeaderValue> = users
            .iter()
            .map(|u| tier.signer.bearer(*u))
            .collect::<Result<_, _>>()?;
        let chats =
            create_groups(client, &writer.url, &users, &bearers, args.members, "fleet").await?;
        println!(
            "opening {} streams through {} balancer processes",
            users.len(),
            tier.balancer_spec.processes
        );
        let tokens: Vec<String> = users
            .iter()
            .map(|u| tier.signer.token(*u))
            .collect::<Result<_, _>>()?;
        let opened_at = now_ns();
        let clients = clients::Clients::start(
            &args.out.join("clients"),
            &tier.balancer.url,
            &tokens,
            args.client_processes,
        )
        .await?;
        Ok(Self {
            users,
            bearers,
            chats,
            clients,
            all_open_ms: (now_ns() - opened_at) as f64 / 1e6,
        })
    }
}

/// What the writing window measured.
struct Window {
    writes: Vec<Write>,
    /// When the last instance was killed, if the run killed it.
    killed_at: Option<u64>,
    rss_before: Vec<f64>,
    rss_after: Vec<f64>,
    balancer_rss: f64,
    broker_cpu: Option<f64>,
    cpu: report::Cpu,
}

/// Writes messages at the run's rate for its duration (killing the last
/// instance meanwhile when asked), with each process group's CPU and the
/// instances' memory sampled before and after.
async fn write_watched(
    args: &LiveFleetArgs,
    client: &reqwest::Client,
    tier: &Tier,
    audience: &Audience,
) -> Result<Window, LoadError> {
    let writer = tier.fleet.first()?;
    let instance_pids: Vec<u32> = tier.fleet.servers.iter().map(|s| s.pid).collect();
    let rss_before: Vec<f64> = instance_pids.iter().map(|&p| rss(p)).collect();
    let broker_cpu_before = procstat::sample(tier.broker.pid()).map(|s| s.cpu_secs);
    let groups = [
        instance_pids.clone(),
        tier.balancer.pids(),
        audience.clients.pids(),
    ];
    let groups_before: Vec<Vec<f64>> = groups.iter().map(|g| cpu_secs(g)).collect();
    let machine_before = noise::machine_ticks();
    let victim = tier.fleet.servers.last().map(|s| s.pid);
    let start = now_ns();
    let (writes, killed_at) = tokio::join!(
        async {
            write_messages(
                client,
                &writer.url,
                &audience.chats,
                &audience.bearers,
                (args.rate, args.duration),
                |i| format!("fleet {i}"),
            )
            .await
            .into_iter()
            .map(|w| Write {
                chat: w.chat,
                start_ns: w.start_ns,
                id: w.id,
            })
            .collect::<Vec<_>>()
        },
        async {
            let at = args.kill_at?;
            tokio::time::sleep(at).await;
            let pid = victim?;
            println!("killing instance {pid}");
            send_signal(pid, "KILL").ok()?;
            Some(now_ns())
        }
    );
    let writing_secs = (now_ns() - start) as f64 / 1e9;
    let per_core = |secs: f64| secs / writing_secs * 100.0;
    let spent: Vec<f64> = groups
        .iter()
        .zip(&groups_before)
        .map(|(g, before)| per_core(cpu_spent(before, &cpu_secs(g))))
        .collect();
    Ok(Window {
        writes,
        killed_at,
        rss_before,
        rss_after: instance_pids.iter().map(|&p| rss(p)).collect(),
        balancer_rss: tier.balancer.pids().iter().map(|&p| rss(p)).sum(),
        broker_cpu: procstat::sample(tier.broker.pid())
            .map(|s| s.cpu_secs)
            .zip(broker_cpu_before)
            .map(|(after, before)| per_core(after - before)),
        cpu: report::Cpu {
            instances: spent[0],
            balancer: spent[1],
            clients: spent[2],
            machine: machine_busy_per_core(machine_before),
        },
    })
}

/// The whole machine's busy share since `before`, in percent of one core
/// (so 200 is two cores busy).
fn machine_busy_per_core(before: Option<(u64, u64)>) -> Option<f64> {
    noise::machine_ticks()
        .zip(before)
        .map(|((busy, total), (busy0, total0))| {
            let cores = std::thread::available_parallelism().map_or(1, usize::from) as f64;
            busy.saturating_sub(busy0) as f64 / total.saturating_sub(total0).max(1) as f64
                * cores
                * 100.0
        })
}

/// Instance `n` as the balancer sees it.
fn backend(n: usize, url: &str, ops_url: &str) -> Result<Backend, LoadError> {
    let port = |u: &str| {
        u.rsplit(':')
            .next()
            .and_then(|p| p.parse::<u16>().ok())
            .ok_or_else(|| LoadError::Usage(format!("no port in {u}")))
    };
    Ok(Backend {
        name: format!("chatlab{n}"),
        address: url.trim_start_matches("http://").to_owned(),
        check_port: port(ops_url)?,
        sources: (1..=SOURCES_PER_INSTANCE)
            .map(|k| format!("127.0.{k}.{}", n + 1))
            .collect(),
    })
}

/// The CPU seconds of each of `pids` so far (NaN for one that is gone).
fn cpu_secs(pids: &[u32]) -> Vec<f64> {
    pids.iter()
        .map(|&p| procstat::sample(p).map_or(f64::NAN, |s| s.cpu_secs))
        .collect()
}

/// CPU seconds spent between two samples of the same processes; a process
/// gone by the second (the killed instance) counts nothing.
fn cpu_spent(before: &[f64], after: &[f64]) -> f64 {
    before
        .iter()
        .zip(after)
        .map(|(b, a)| {
            if a.is_nan() || b.is_nan() {
                0.0
            } else {
                (a - b).max(0.0)
            }
        })
        .sum()
}

/// The resident memory of `pid`, MiB (0 when it is gone).
fn rss(pid: u32) -> f64 {
    procstat::sample(pid).map_or(0.0, |s| s.rss_mib)
}

/// Each instance's open live connections (`chatlab_live_connections`).
async fn streams_per_instance(client: &reqwest::Client, ops_urls: &[String]) -> Vec<f64> {
    let mut out = Vec::with_capacity(ops_urls.len());
    for ops in ops_urls {
        let n = crate::observe::sampler::scrape(client, ops)
            .await
            .map_or(0.0, |e| e.sum("chatlab_live_connections", &[]));
        out.push(n);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, clap::Parser)]
    struct Cli {
        #[command(flatten)]
        args: LiveFleetArgs,
    }

    fn parse(extra: &[&str]) -> LiveFleetArgs {
        use clap::Parser;
        let base = ["chatlab-load", "--tansu-bin", "tansu", "--out", "x"];
        Cli::try_parse_from(base.iter().chain(extra)).unwrap().args
    }

    #[test]
    fn the_defaults_are_100000_streams_over_six_instances_and_enough_balancers() {
        let args = parse(&[]);
        assert_eq!(args.streams(), 100_000);
        assert_eq!(args.instances, 6);
        assert!(args.check().is_ok());
        let spec = args.balancer_spec(PathBuf::from("b"), Vec::new());
        assert!(spec.streams() >= args.streams() + 2 * spec.streams_per_process());
    }

    #[test]
    fn a_client_process_over_its_address_ports_is_refused() {
        assert!(parse(&["--client-processes", "6"]).check().is_err());
        assert!(parse(&["--instances", "1"]).check().is_err());
        assert!(parse(&["--client-processes", "8"]).check().is_ok());
    }

    #[test]
    fn a_backend_is_its_public_address_and_its_operator_port() {
        let b = backend(2, "http://127.0.0.1:8101", "http://127.0.0.1:9101").unwrap();
        assert_eq!(b.name, "chatlab2");
        assert_eq!(b.address, "127.0.0.1:8101");
        assert_eq!(b.check_port, 9101);
        assert!(backend(0, "http://127.0.0.1:8101", "nowhere").is_err());
    }
}
