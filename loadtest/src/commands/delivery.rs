//! `chatlab-load delivery`: commit-to-screen latency per publish mode.
//!
//! Per server variant (a publish mode, or the outbox with another relay
//! poll), the harness starts a tansu broker and a fleet of chatlab
//! instances sharing it and the database, seeds chats whose members all
//! hold a live connection (`GET /v1/events`) spread over every instance but
//! the first, and posts messages to the chats at a fixed rate on the first
//! instance. For every message it knows when its write started, and for
//! every subscriber when the message reached it; so each row of the table
//! sets what a mode costs the writer (latency, pooled connection time)
//! beside what it costs the reader (delivery latency from the write's
//! start), with the deliveries lost and repeated.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Args;
use reqwest::header::HeaderValue;
use tokio::sync::mpsc;
use uuid::Uuid;

mod lag;
mod storm;

use crate::commands::{machine_note, postgres_version};
use crate::error::LoadError;
use crate::load::auth::{DEFAULT_ISSUER, Signer};
use crate::load::creators::{Created, Creators, create_groups};
use crate::load::latency::Latencies;
use crate::load::live_stream::Sighting;
use crate::load::message_writes::{Written as Write, write_messages};
use crate::load::scenario::seed_users;
use crate::load::schedule::parse_duration;
use crate::observe::prom::{Exposition, HistogramSnapshot};
use crate::servers::broker::{Broker, BrokerStorage};
use crate::servers::fleet::{Fleet, FleetSpec};
use crate::servers::reach::{DistanceArgs, Reach};
use crate::servers::variant::{ServerVariant, parse_kv};

/// Flags of `delivery`.
#[derive(Debug, Args)]
pub struct DeliveryArgs {
    /// Server variants, `NAME:KEY=VALUE+KEY=VALUE`, one row each.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "in_tx_await:KAFKA_PUBLISH_MODE=in_tx_await,\
                         in_tx_enqueue:KAFKA_PUBLISH_MODE=in_tx_enqueue,\
                         after_commit:KAFKA_PUBLISH_MODE=after_commit,\
                         outbox:KAFKA_PUBLISH_MODE=outbox,\
                         outbox-poll-10ms:KAFKA_PUBLISH_MODE=outbox+OUTBOX_POLL_MS=10"
    )]
    variants: Vec<ServerVariant>,
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
    /// Where PostgreSQL is: straight, or behind a delay hop.
    #[command(flatten)]
    distance: DistanceArgs,
    /// The tansu binary: each row gets a broker of its own, which its
    /// instances share.
    #[arg(long)]
    tansu_bin: PathBuf,
    /// The broker's storage engine (in memory, tansu acknowledges some
    /// pipelined records it then does not serve: they would count as lost).
    #[arg(long, value_enum, default_value = "sqlite")]
    tansu_storage: BrokerStorage,
    /// chatlab instances: the first takes the writes, the others the
    /// subscribers (one instance takes both).
    #[arg(long, default_value_t = 3)]
    instances: usize,
    /// Chats written to.
    #[arg(long, default_value_t = 20)]
    chats: usize,
    /// Members per chat, each with a live connection.
    #[arg(long, default_value_t = 10)]
    members: usize,
    /// Messages per second, over all chats.
    #[arg(long, default_value_t = 50.0)]
    rate: f64,
    /// How long the writers write.
    #[arg(long, default_value = "20s", value_parser = parse_duration)]
    duration: Duration,
    /// Characters of each message's text (at least its `delivery N` label;
    /// longer texts are padded), so what the text costs a frame shows.
    #[arg(long, default_value_t = 0)]
    body_chars: usize,
    /// How long after the last write the subscribers may take to receive
    /// everything.
    #[arg(long, default_value = "15s", value_parser = parse_duration)]
    drain: Duration,
    /// Extra env of every instance, `KEY=VALUE` (repeatable).
    #[arg(long = "env", value_parser = parse_kv)]
    env: Vec<(String, String)>,
    /// Where the table and the cells' logs go.
    #[arg(long)]
    out: PathBuf,
    /// Exit 1 when a delivery is lost or repeated.
    #[arg(long)]
    strict: bool,
    /// Kill the broker (SIGKILL) this long after the writes start, and
    /// start it again on the same storage `--broker-down` later; the
    /// subscribers stay connected to their instances through it.
    #[arg(long, value_parser = parse_duration)]
    kill_broker_at: Option<Duration>,
    /// How long a killed broker stays down.
    #[arg(long, default_value = "3s", value_parser = parse_duration)]
    broker_down: Duration,
    /// Cut every live stream this long after the writes start and open them
    /// all again at once, each with `Last-Event-ID` of the last id it
    /// carried (a reconnect storm); the storm's table then says how long
    /// until all were back, where their catch-ups came from, and the
    /// subscriber instances' broker connections and memory at the peak.
    #[arg(long, value_parser = parse_duration)]
    reconnect_at: Option<Duration>,
    /// How long the streams sit idle (heartbeats only) before the writes,
    /// while the subscriber instances' CPU is measured.
    #[arg(long, default_value = "0s", value_parser = parse_duration)]
    idle: Duration,
    /// A delivery p99 to hold each variant to: the results then say, per
    /// variant, whether its p99 was within it (Centrifugo publishes 200 ms).
    #[arg(long, value_parser = parse_duration)]
    p99_target: Option<Duration>,
    /// Client tasks creating chats back to back on the writers' instance
    /// while the messages are written (a mixed load: chats of 10 users of
    /// a pool of 200 that holds no stream); 0: messages alone.
    #[arg(long, default_value_t = 0)]
    creators: usize,
}

/// One row of the table.
#[derive(Debug, Default)]
struct Row {
    variant: String,
    written: u64,
    failed: u64,
    write: Latencies,
    hold: HistogramSnapshot,
    expected: u64,
    delivered: u64,
    /// Deliveries not made whose message never reached the topic (a mode
    /// that may lose events lost it while the broker was away): not the
    /// live feed's to deliver.
    unpublished: u64,
    duplicated: u64,
    delivery: Latencies,
    /// Bytes of the first-delivery `message.sent` frames, and their count.
    frame_bytes: (u64, u64),
    /// `overflow` or `reset` frames, or streams that ended.
    cut: u64,
    /// Live connections per subscriber instance.
    per_instance: usize,
    /// Largest RSS of a subscriber instance before the connections opened
    /// and after the writes, MiB.
    rss_mib: (f64, f64),
    /// The reconnect storm, if the run had one.
    storm: Option<storm::Storm>,
    /// Why the topic could not be read back to tell lost deliveries whose
    /// message never reached it (all then count as lost).
    topic_unread: Option<String>,
    /// The busiest subscriber instance's CPU while the streams sat idle,
    /// percent of one core (`None`: no idle window).
    idle_cpu: Option<f64>,
    /// The subscriber instances' own `chatlab_live_delay_seconds` over the
    /// writes: from the event's creation to its hand-over to the
    /// connections.
    server_delay: HistogramSnapshot,
    /// How late this process's 10 ms timer fired during the writes: the
    /// client's own share of a delivery's latency.
    client_lag: Latencies,
    /// The chats the creators made meanwhile, if there were creators.
    created: Option<Created>,
    /// Outbox rows an earlier row of the run left unpublished, deleted
    /// before this one started (its relays would publish them first, to
    /// its own topic).
    dropped_backlog: u64,
}

impl Row {
    /// Whether every delivery the live feed owed was made, once. Through a
    /// broker kill, writes may fail and a mode may lose events before they
    /// reach the topic; the feed still owes every message that reached it.
    fn is_clean(&self, broker_killed: bool) -> bool {
        let lost = self.expected.saturating_sub(self.delivered);
        if self.storm.as_ref().is_some_and(|s| s.lost > 0) {
            return false;
        }
        if broker_killed {
            lost == self.unpublished && self.duplicated == 0
        } else {
            lost == 0 && self.duplicated == 0 && self.failed == 0
        }
    }
}

/// Runs every variant; whether nothing was lost or repeated.
pub async fn run(args: DeliveryArgs) -> Result<bool, LoadError> {
    if args.instances == 0 || args.chats == 0 || args.members == 0 || args.rate <= 0.0 {
        return Err(LoadError::Usage(
            "--instances, --chats, --members and --rate must be above 0".into(),
        ));
    }
    std::fs::create_dir_all(&args.out).map_err(|e| LoadError::file(&args.out, e))?;
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(256)
        .tcp_nodelay(true)
        .build()
        .map_err(|e| LoadError::http("building the HTTP client", e))?;
    let reach = Reach::open(
        &args.database_url,
        args.distance.distance()?,
        &args.distance,
    )
    .await?;
    let version = postgres_version(&args.database_url).await?;
    let mut rows = Vec::new();
    for variant in &args.variants {
        let row = run_cell(&args, &client, &reach, variant).await?;
        println!(
            "{}: {} written, {} of {} deliveries, {} lost, {} of their messages not in the topic, {} repeated, p99 {:.1} ms",
            row.variant,
            row.written,
            row.delivered,
            row.expected,
            row.expected.saturating_sub(row.delivered),
            row.unpublished,
            row.duplicated,
            row.delivery.quantile_ms(0.99)
        );
        rows.push(row);
        let path = args.out.join("table.md");
        std::fs::write(&path, to_markdown(&rows)).map_err(|e| LoadError::file(&path, e))?;
    }
    let table = results_table(&args, &rows);
    let notes = notes(&args);
    let path = args.out.join("results.md");
    std::fs::write(
        &path,
        format!(
            "# Commit-to-screen latency{}\n\nPostgreSQL {version}. {}\n\n{table}\n{notes}",
            if args.kill_broker_at.is_some() {
                " through a broker kill"
            } else {
                ""
            },
            reach.note()
        ),
    )
    .map_err(|e| LoadError::file(&path, e))?;
    println!("\n{table}\n{notes}\nwritten to {}", args.out.display());
    let clean = rows
        .iter()
        .all(|r| r.is_clean(args.kill_broker_at.is_some()));
    if !clean {
        println!("deliveries were lost or repeated, or writes failed (see the table)");
    }
    Ok(clean || !args.strict)
}

/// The run's table, with what each row needs said beside it: where the
/// time went, the reconnect storm, an outbox backlog dropped before a row,
/// a topic that could not be read back, and each row against the p99
/// target.
fn results_table(args: &DeliveryArgs, rows: &[Row]) -> String {
    let mut table = to_markdown(rows);
    table.push_str(&format!(
        "\nWhere the time went: the subscriber instances' own delay (from an event's \
         creation to its hand-over to the connections, their `chatlab_live_delay_seconds` \
         over the writes and the drain; its p99 interpolated within a bucket) beside the \
         delivery latency the client measured, and how late the client's own 10 ms timer \
         fired meanwhile (its share: a frame that arrived waits at least that long to be \
         read).\n\n{}",
        costs_markdown(rows)
    ));
    let storms: Vec<(String, storm::Storm)> = rows
        .iter()
        .filter_map(|r| Some((r.variant.clone(), r.storm.clone()?)))
        .collect();
    if !storms.is_empty() {
        table.push_str(&format!(
            "\nThe reconnect storm, {} into the writes:\n\n{}",
            humantime::format_duration(args.reconnect_at.unwrap_or_default()),
            storm::to_markdown(&storms)
        ));
    }
    for row in rows.iter().filter(|r| r.dropped_backlog > 0) {
        table.push_str(&format!(
            "\n{}: the row before it left {} outbox rows unpublished; they were deleted before it started, so its relays published its own.\n",
            row.variant, row.dropped_backlog
        ));
    }
    for row in rows.iter().filter(|r| r.topic_unread.is_some()) {
        table.push_str(&format!(
            "\n{}: the topic could not be read back after the run ({}), so \"of them not in the topic\" counts nothing.\n",
            row.variant,
            row.topic_unread.as_deref().unwrap_or_default()
        ));
    }
    if let Some(target) = args.p99_target {
        table.push('\n');
        for row in rows {
            table.push_str(&format!("- {}\n", p99_verdict(row, target)));
        }
    }
    table
}

/// One variant: its broker and instances, the chats and their members'
/// streams, the writes at the run's rate (with the faults asked for), and
/// what was delivered.
async fn run_cell(
    args: &DeliveryArgs,
    client: &reqwest::Client,
    reach: &Reach,
    variant: &ServerVariant,
) -> Result<Row, LoadError> {
    let dropped = drop_outbox_backlog(&args.database_url).await?;
    let mut servers = CellServers::start(args, client, reach, variant).await?;
    let cast = Cast::seed(args, client, &servers).await?;
    let subscribers = servers.subscribers();
    let subscriber_pids: Vec<u32> = subscribers.iter().map(|s| s.0).collect();
    let subscriber_ops: Vec<String> = subscribers.into_iter().map(|s| s.1).collect();
    let rss_before = storm::largest_rss(&subscriber_pids);
    let urls = servers.fleet.urls();
    // Every member listens on every instance but the writers' (or on it,
    // when it is the only one).
    let mut streams = storm::Streams::open(client, &cast.bearers, |index| {
        if urls.len() > 1 {
            urls[1 + index % (urls.len() - 1)].clone()
        } else {
            urls[0].clone()
        }
    })
    .await?;
    // Let the chats' own creation events go by before the clock starts.
    tokio::time::sleep(Duration::from_secs(2)).await;
    while streams.seen.try_recv().is_ok() {}

    let watched = storm::Watched {
        pids: &subscriber_pids,
        ops_urls: &subscriber_ops,
        broker_port: port_of(&servers.broker.address)?,
    };
    let idle_cpu = idle_cpu(&subscriber_pids, args.idle).await;
    let before = scrape(client, &servers.writer_ops).await?;
    let delay_before = delay_of(client, &subscriber_ops).await;
    let lag = lag::Watch::start();
    let (writes, killed, storm, created) = tokio::join!(
        write_messages(
            client,
            &servers.writer_url,
            &cast.chats,
            &cast.bearers,
            (args.rate, args.duration),
            |i| text(i, args.body_chars),
        ),
        broker_fault(args, &mut servers.broker, &variant.name),
        async {
            let at = args.reconnect_at?;
            tokio::time::sleep(at).await;
            println!("{}: every stream cut and reopened", variant.name);
            Some(storm::storm(client, &mut streams, &cast.bearers, &watched).await)
        },
        async {
            match &cast.creators {
                Some(creators) => Some(creators.create_for(args.duration).await),
                None => None,
            }
        }
    );
    killed?;
    let client_lag = lag.stop().await;
    let after = scrape(client, &servers.writer_ops).await?;

    let mut row = Row {
        variant: variant.name.clone(),
        per_instance: cast.users.len().div_ceil(subscriber_pids.len().max(1)),
        rss_mib: (rss_before, storm::largest_rss(&subscriber_pids)),
        storm,
        idle_cpu,
        client_lag,
        created,
        dropped_backlog: dropped,
        hold: after
            .histogram("db_client_connection_use_time_seconds", &[])
            .since(&before.histogram("db_client_connection_use_time_seconds", &[])),
        ..Row::default()
    };
    let (expected, got) = tally(
        &mut row,
        &writes,
        &cast.chats,
        &mut streams.seen,
        &mut streams.cuts,
        args.drain,
    )
    .await;
    row.server_delay = delay_of(client, &subscriber_ops).await.since(&delay_before);
    if row.delivered < row.expected {
        count_unpublished(&mut row, &servers, &expected, &got).await;
    }
    streams.abort();
    drop(servers);
    Ok(row)
}

/// A variant's servers: a broker of its own, the instances on a topic of
/// their own, and where the first (the writer) answers.
struct CellServers {
    fleet: Fleet,
    broker: Broker,
    topic: String,
    signer: Arc<Signer>,
    writer_url: String,
    writer_ops: String,
}

impl CellServers {
    async fn start(
        args: &DeliveryArgs,
        client: &reqwest::Client,
        reach: &Reach,
        variant: &ServerVariant,
    ) -> Result<Self, LoadError> {
        let dir = args.out.join(&variant.name);
        let broker =
            Broker::start(&args.tansu_bin, &dir.join("broker"), args.tansu_storage).await?;
        let topic = format!("chatlab-delivery-{}", Uuid::now_v7().simple());
        let mut env = vec![
            ("DATABASE_URL".to_owned(), reach.url()),
            ("KAFKA_BROKERS".to_owned(), broker.address.clone()),
            ("KAFKA_TOPIC".to_owned(), topic.clone()),
            ("RUST_LOG".to_owned(), "warn".to_owned()),
            ("LOG_FORMAT".to_owned(), "json".to_owned()),
        ];
        env.extend(args.env.iter().cloned());
        env.extend(variant.env.iter().cloned());
        let spec = FleetSpec {
            binary: args.binary.clone(),
            count: args.instances,
            env,
            log_dir: dir,
            signer: Arc::new(Signer::generate(DEFAULT_ISSUER)?),
        };
        let fleet = Fleet::start(&spec, client).await?;
        let writer = fleet.first()?;
        let (writer_url, writer_ops) = (writer.url.clone(), writer.ops_url.clone());
        Ok(Self {
            fleet,
            broker,
            topic,
            signer: spec.signer,
            writer_url,
            writer_ops,
        })
    }

    /// The instances the members listen on, pid and ops address: every one
    /// but the writer (or the writer, when it is the only one).
    fn subscribers(&self) -> Vec<(u32, String)> {
        self.fleet
            .servers
            .iter()
            .skip(usize::from(self.fleet.servers.len() > 1))
            .map(|s| (s.pid, s.ops_url.clone()))
            .collect()
    }
}

/// Who takes part: the members, their chats, and the creators of new
/// chats when the run mixes them in.
struct Cast {
    users: Vec<Uuid>,
    bearers: Vec<HeaderValue>,
    /// Each chat and the indexes of its members in `users`.
    chats: Vec<(Uuid, Vec<usize>)>,
    creators: Option<Creators>,
}

impl Cast {
    async fn seed(
        args: &DeliveryArgs,
        client: &reqwest::Client,
        servers: &CellServers,
    ) -> Result<Self, LoadError> {
        let (url, ops) = (&servers.writer_url, &servers.writer_ops);
        let users = seed_users(client, ops, args.chats * args.members, "delivery-").await?;
        let bearers: Vec<HeaderValue> = users
            .iter()
            .map(|u| servers.signer.bearer(*u))
            .collect::<Result<_, _>>()?;
        let chats = create_groups(client, url, &users, &bearers, args.members, "delivery").await?;
        let creators = if args.creators > 0 {
            let pool = seed_users(client, ops, CREATOR_POOL, "mixed-").await?;
            let bearers: Vec<HeaderValue> = pool
                .iter()
                .map(|u| servers.signer.bearer(*u))
                .collect::<Result<_, _>>()?;
            Some(Creators {
                client: client.clone(),
                url: url.clone(),
                pool: Arc::new(pool),
                bearers: Arc::new(bearers),
                members: CREATOR_MEMBERS,
                tasks: args.creators,
            })
        } else {
            None
        };
        Ok(Self {
            users,
            bearers,
            chats,
            creators,
        })
    }
}

/// Of the deliveries missing, those whose message the topic does not hold
/// either (never published, rather than lost on the way); when the topic
/// cannot be read back (the broker may be what failed), says so and counts
/// nothing.
async fn count_unpublished(
    row: &mut Row,
    servers: &CellServers,
    expected: &HashMap<(usize, Uuid), Instant>,
    got: &HashMap<(usize, Uuid), u32>,
) {
    match messages_in_topic(&servers.broker.address, &servers.topic).await {
        Ok(published) => {
            row.unpublished = expected
                .keys()
                .filter(|key| !got.contains_key(key) && !published.contains(&key.1))
                .count() as u64;
        }
        Err(e) => {
            println!("{}: the topic could not be read back: {e}", row.variant);
            row.topic_unread = Some(e.to_string());
        }
    }
}

/// Kills the broker `args.kill_broker_at` into the writes, if asked, and
/// starts it again after `args.broker_down`.
async fn broker_fault(
    args: &DeliveryArgs,
    broker: &mut Broker,
    variant: &str,
) -> Result<(), LoadError> {
    let Some(at) = args.kill_broker_at else {
        return Ok(());
    };
    tokio::time::sleep(at).await;
    println!("{variant}: broker killed, down for {:?}", args.broker_down);
    broker.kill_and_restart(args.broker_down).await
}

/// Counts into `row` the writes, the deliveries each subscriber was due
/// (drained for at most `drain`), the repeats and the cut streams; answers
/// the deliveries expected (with their write's start) and those seen.
async fn tally(
    row: &mut Row,
    writes: &[Write],
    chats: &[(Uuid, Vec<usize>)],
    seen: &mut mpsc::UnboundedReceiver<Sighting>,
    cuts: &mut mpsc::UnboundedReceiver<usize>,
    drain: Duration,
) -> (HashMap<(usize, Uuid), Instant>, HashMap<(usize, Uuid), u32>) {
    // Which subscriber expects which message, and when it was written.
    let mut expected: HashMap<(usize, Uuid), Instant> = HashMap::new();
    for w in writes {
        match w.id {
            Some(id) => {
                row.written += 1;
                row.write.record_micros(w.took.as_micros() as u64);
                for member in &chats[w.chat].1 {
                    expected.insert((*member, id), w.start);
                }
            }
            None => row.failed += 1,
        }
    }
    row.expected = expected.len() as u64;
    let mut got: HashMap<(usize, Uuid), u32> = HashMap::with_capacity(expected.len());
    let drain_until = tokio::time::Instant::now() + drain;
    while (row.delivered as usize) < expected.len() {
        let sighting = tokio::time::timeout_at(drain_until, seen.recv()).await;
        let Ok(Some((subscriber, message, at, bytes))) = sighting else {
            break;
        };
        let Some(start) = expected.get(&(subscriber, message)) else {
            continue;
        };
        let count = got.entry((subscriber, message)).or_default();
        *count += 1;
        if *count == 1 {
            row.delivered += 1;
            row.frame_bytes.0 += bytes as u64;
            row.frame_bytes.1 += 1;
            row.delivery
                .record_micros(at.saturating_duration_since(*start).as_micros() as u64);
        } else {
            row.duplicated += 1;
        }
    }
    // Repeats that arrive after the last first delivery still count.
    tokio::time::sleep(Duration::from_millis(500)).await;
    while let Ok((subscriber, message, _, _)) = seen.try_recv() {
        if expected.contains_key(&(subscriber, message)) {
            row.duplicated += 1;
        }
    }
    while cuts.try_recv().is_ok() {
        row.cut += 1;
    }
    (expected, got)
}

/// The ids of the messages whose `message.sent` event is in `topic`.
async fn messages_in_topic(bootstrap: &str, topic: &str) -> Result<HashSet<Uuid>, LoadError> {
    let (bootstrap, topic) = (bootstrap.to_owned(), topic.to_owned());
    let snapshot = tokio::task::spawn_blocking(move || {
        chatlab_kafka::topic_reader::read_all(&bootstrap, &topic, Duration::from_secs(60))
    })
    .await?
    .map_err(|e| LoadError::Broker(e.to_string()))?;
    Ok(snapshot
        .records
        .iter()
        .filter_map(|r| r.event.as_ref().ok())
        .filter(|e| e.event_type() == "message.sent")
        .map(chatlab_domain::Event::subject_id)
        .collect())
}

/// The text of message `i`: `delivery i`, padded with `x` to `chars`.
fn text(i: usize, chars: usize) -> String {
    let mut text = format!("delivery {i}");
    let pad = chars.saturating_sub(text.chars().count());
    text.extend(std::iter::repeat_n('x', pad));
    text
}

/// Deletes the outbox rows still pending in the run's database: an earlier
/// row's backlog, which this row's relays would otherwise publish first.
/// Answers how many there were.
async fn drop_outbox_backlog(url: &str) -> Result<u64, LoadError> {
    let fail = |e: tokio_postgres::Error| LoadError::program("delivery: the outbox backlog", e);
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .map_err(fail)?;
    let connection = tokio::spawn(async move {
        let _ = connection.await;
    });
    let dropped = match client
        .execute("DELETE FROM outbox WHERE published_at IS NULL", &[])
        .await
    {
        // A database no server has migrated yet has no backlog.
        Err(e) if e.code() == Some(&tokio_postgres::error::SqlState::UNDEFINED_TABLE) => Ok(0),
        other => other.map_err(fail),
    };
    drop(client);
    let _ = connection.await;
    dropped
}

/// Users the creators' chats are made of (none of them holds a stream).
const CREATOR_POOL: usize = 200;

/// Members of each creator's chat besides its creator.
const CREATOR_MEMBERS: usize = 10;

/// The busiest of `pids`' CPU over `window`, percent of one core; `None`
/// for an empty window.
async fn idle_cpu(pids: &[u32], window: Duration) -> Option<f64> {
    if window.is_zero() {
        return None;
    }
    let cpu = |pid: u32| crate::observe::procstat::sample(pid).map(|s| s.cpu_secs);
    let before: Vec<Option<f64>> = pids.iter().map(|&p| cpu(p)).collect();
    tokio::time::sleep(window).await;
    pids.iter()
        .zip(before)
        .filter_map(|(&pid, then)| Some(cpu(pid)? - then?))
        .map(|secs| secs / window.as_secs_f64() * 100.0)
        .reduce(f64::max)
}

/// The live delay histogram summed over the instances at `ops_urls`.
async fn delay_of(client: &reqwest::Client, ops_urls: &[String]) -> HistogramSnapshot {
    let mut total = HistogramSnapshot::default();
    for ops in ops_urls {
        if let Some(exposition) = crate::observe::sampler::scrape(client, ops).await {
            total = total.add(&exposition.histogram("chatlab_live_delay_seconds", &[]));
        }
    }
    total
}

/// The port of a broker's `host:port` address.
fn port_of(address: &str) -> Result<u16, LoadError> {
    address
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .ok_or_else(|| LoadError::Broker(format!("no port in the broker's address {address:?}")))
}

async fn scrape(client: &reqwest::Client, ops: &str) -> Result<Exposition, LoadError> {
    let text = client
        .get(format!("{ops}/metrics"))
        .send()
        .await
        .map_err(|e| LoadError::http("scraping /metrics", e))?
        .text()
        .await
        .map_err(|e| LoadError::http("scraping /metrics", e))?;
    Ok(Exposition::parse(&text))
}

fn to_markdown(rows: &[Row]) -> String {
    let mut out = String::from(
        "| variant | messages written | failed | write p50 ms | write p99 ms | pooled connection mean ms | p95 ms | deliveries | lost | of them not in the topic | repeated | delivery p50 ms | p95 ms | p99 ms | max ms | message.sent frame bytes (mean) | streams cut | connections per subscriber instance | its RSS MiB before → after |\n\
         |---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        out.push_str(&format!(
            "| {} | {} | {} | {:.1} | {:.1} | {:.2} | {:.2} | {} | {} | {} | {} | {:.1} | {:.1} | {:.1} | {:.1} | {:.0} | {} | {} | {:.1} → {:.1} |\n",
            r.variant,
            r.written,
            r.failed,
            r.write.quantile_ms(0.5),
            r.write.quantile_ms(0.99),
            r.hold.mean() * 1000.0,
            r.hold.quantile(0.95) * 1000.0,
            r.delivered,
            r.expected.saturating_sub(r.delivered),
            r.unpublished,
            r.duplicated,
            r.delivery.quantile_ms(0.5),
            r.delivery.quantile_ms(0.95),
            r.delivery.quantile_ms(0.99),
            r.delivery.max_ms(),
            r.frame_bytes.0 as f64 / r.frame_bytes.1.max(1) as f64,
            r.cut,
            r.per_instance,
            r.rss_mib.0,
            r.rss_mib.1,
        ));
    }
    out
}

/// Whether `row`'s delivery p99 was within `target`, as the results say it.
fn p99_verdict(row: &Row, target: Duration) -> String {
    let target_ms = target.as_secs_f64() * 1e3;
    let p99 = row.delivery.quantile_ms(0.99);
    let within = if row.delivered == 0 {
        "nothing delivered"
    } else if p99 <= target_ms {
        "within"
    } else {
        "NOT within"
    };
    format!(
        "{}: delivery p99 {p99:.1} ms over {} deliveries: {within} the {} ms target",
        row.variant,
        row.delivered,
        crate::servers::reach::show_ms(target_ms)
    )
}

/// The second table: the server's share and the client's, the idle CPU.
fn costs_markdown(rows: &[Row]) -> String {
    let mut out = String::from(
        "| variant | chats created/s meanwhile | delivery p50 ms | p99 ms | server delay mean ms | server p99 ms (within its bucket) | client timer lag p50 ms | p99 ms | max ms | idle CPU of the busiest subscriber instance, % of a core | its RSS growth per connection KiB |\n\
         |---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        out.push_str(&format!(
            "| {} | {} | {:.1} | {:.1} | {:.1} | {:.1} | {:.2} | {:.2} | {:.1} | {} | {:.1} |\n",
            r.variant,
            r.created.as_ref().map_or_else(
                || "–".to_owned(),
                |c| match &c.first_failure {
                    None => format!("{:.0}", c.per_second()),
                    Some(failure) => format!(
                        "{:.0} ({} failed, the first: {})",
                        c.per_second(),
                        c.failed,
                        failure.replace('|', "/")
                    ),
                }
            ),
            r.delivery.quantile_ms(0.5),
            r.delivery.quantile_ms(0.99),
            r.server_delay.mean() * 1e3,
            r.server_delay.quantile(0.99) * 1e3,
            r.client_lag.quantile_ms(0.5),
            r.client_lag.quantile_ms(0.99),
            r.client_lag.max_ms(),
            r.idle_cpu
                .map_or_else(|| "–".to_owned(), |cpu| format!("{cpu:.1}")),
            (r.rss_mib.1 - r.rss_mib.0) * 1024.0 / r.per_instance.max(1) as f64,
        ));
    }
    out
}

fn notes(args: &DeliveryArgs) -> String {
    format!(
        "{} on one tansu broker ({:?} storage) and the database; {} the {} live connections \
         ({} chats of {} members, every member connected). Messages{} at {} per \
         second for {:?}, round robin over the chats. Delivery latency runs from \
         the write's start (before the POST is sent) to the frame's arrival at \
         the subscriber; a delivery is lost when it did not arrive within {:?} \
         of the last write. The pooled connection time is every checkout on the \
         writers' instance during the writes (the outbox relay's included).{}{}{}\n\n{}\n",
        if args.instances == 1 {
            "One instance".to_owned()
        } else {
            format!("{} instances share", args.instances)
        },
        args.tansu_storage,
        if args.instances == 1 {
            "it takes the writes and holds"
        } else {
            "instance 1 takes the writes, the others hold"
        },
        args.chats * args.members,
        args.chats,
        args.members,
        if args.body_chars > 0 {
            format!(" of {} characters", args.body_chars)
        } else {
            String::new()
        },
        args.rate,
        args.duration,
        args.drain,
        args.kill_broker_at.map_or_else(String::new, |at| format!(
            " The broker was killed (SIGKILL) {at:?} into the writes and started \
             again on the same storage {:?} later; \"not in the topic\" counts \
             the lost deliveries whose message's event never reached the broker.",
            args.broker_down
        )),
        if args.creators > 0 {
            format!(
                " Meanwhile {} client tasks created chats back to back on instance 1, \
                 each of its creator and {CREATOR_MEMBERS} other users of a pool of \
                 {CREATOR_POOL} that holds no stream (their pooled connection time counts \
                 in the writers' figure).",
                args.creators
            )
        } else {
            String::new()
        },
        args.reconnect_at.map_or_else(String::new, |at| format!(
            " {} into the writes every stream was cut (the client dropped its \
             connection) and all were opened again at once, each with \
             `Last-Event-ID` of the last id it carried, a refused or failed \
             open retried every {} ms (at most {} times): \"all back\" runs \
             from the cut to the last stream's answer; catch-ups and broker \
             connections are the subscriber instances' own (their \
             `chatlab_live_catch_ups_total` by source, and their TCP \
             connections to the broker's port sampled every {} ms); deliveries \
             owed across the cut count in the main table, missed or repeated.",
            humantime::format_duration(at),
            storm::RETRY_AFTER.as_millis(),
            storm::ATTEMPTS,
            storm::SAMPLE_EVERY.as_millis(),
        )),
        machine_note()
    )
}

#[cfg(test)]
mod tests {
    use super::Row;

    fn row(expected: u64, delivered: u64, unpublished: u64, duplicated: u64, failed: u64) -> Row {
        Row {
            expected,
            delivered,
            unpublished,
            duplicated,
            failed,
            ..Row::default()
        }
    }

    #[test]
    fn the_p99_verdict_is_rendered_from_the_deliveries() {
        let mut fast = row(3, 3, 0, 0, 0);
        fast.variant = "after_commit".into();
        for ms in [10, 20, 150] {
            fast.delivery.record_micros(ms * 1000);
        }
        let target = std::time::Duration::from_millis(200);
        assert_eq!(
            super::p99_verdict(&fast, target),
            "after_commit: delivery p99 150.0 ms over 3 deliveries: within the 200 ms target"
        );
        fast.delivery.record_micros(900_000);
        assert!(super::p99_verdict(&fast, target).ends_with("NOT within the 200 ms target"));
        assert!(super::p99_verdict(&row(3, 0, 0, 0, 0), target).contains("nothing delivered"));
    }

    #[test]
    fn a_text_is_its_label_padded_to_the_length_asked() {
        assert_eq!(super::text(7, 0), "delivery 7");
        assert_eq!(super::text(7, 12), "delivery 7xx");
        assert_eq!(super::text(123, 140).chars().count(), 140);
    }

    #[test]
    fn only_what_never_reached_the_topic_may_go_undelivered_through_a_kill() {
        assert!(row(100, 100, 0, 0, 0).is_clean(false));
        assert!(!row(100, 99, 0, 0, 0).is_clean(false));
        assert!(!row(100, 100, 0, 0, 3).is_clean(false), "failed writes");
        assert!(!row(100, 100, 0, 1, 0).is_clean(false), "a repeat");
        // Through a kill: failed writes are expected, events lost before
        // the topic too, but nothing the topic holds.
        assert!(row(100, 90, 10, 0, 7).is_clean(true));
        assert!(!row(100, 89, 10, 0, 0).is_clean(true));
        assert!(!row(100, 90, 10, 1, 0).is_clean(true));
    }
}
