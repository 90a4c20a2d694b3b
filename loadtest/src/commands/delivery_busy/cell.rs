//! One cell of `delivery-busy`: a publish mode at one distance of the
//! live instance's database. Its own broker and servers, the probe pair
//! and the pool seeded, the member's stream opened, then the quiet phase
//! and the busy one.

use std::sync::Arc;
use std::time::Duration;

use chatlab_domain::PublishMode;
use reqwest::header::HeaderValue;
use tokio::sync::mpsc;
use uuid::Uuid;

use super::DeliveryBusyArgs;
use super::db_distance::DbDistance;
use super::probe::{self, Probe};
use super::report::{Cell, Phase, PhaseFigures};
use crate::error::LoadError;
use crate::load::auth::{DEFAULT_ISSUER, Signer};
use crate::load::creators::{self, Created, Creators};
use crate::load::live_stream::{self, Sighting};
use crate::load::scenario::seed_users;
use crate::observe::sampler::scrape;
use crate::servers::broker::Broker;
use crate::servers::fleet::{Fleet, FleetSpec, Server};
use crate::servers::reach::Reach;

/// The live instance's histogram of the time from an event's write to its
/// hand-over to the connections.
const LIVE_DELAY: &str = "chatlab_live_delay_seconds";

/// How long the probe chat's own events are given to go by before the
/// clock starts.
const SETTLE: Duration = Duration::from_secs(1);

/// Runs `mode` with the live instance's database at `distance`, reached
/// through `reach`.
pub(crate) async fn run_cell(
    args: &DeliveryBusyArgs,
    client: &reqwest::Client,
    mode: PublishMode,
    distance: DbDistance,
    reach: &Reach,
) -> Result<Cell, LoadError> {
    let servers = CellServers::start(args, client, mode, distance, reach).await?;
    let (live, writer) = (servers.live()?, servers.writer()?);
    let users = seed_users(client, &writer.ops_url, 2 + args.pool, "busy-").await?;
    let [member, sender, pool @ ..] = users.as_slice() else {
        return Err(LoadError::http("seeding users", "fewer users than asked"));
    };
    let signer = &servers.signer;
    let member_bearer = signer.bearer(*member)?;
    let sender_bearer = signer.bearer(*sender)?;
    let pool_bearers: Vec<HeaderValue> = pool
        .iter()
        .map(|u| signer.bearer(*u))
        .collect::<Result<_, _>>()?;

    // The member listens, then the sender makes a chat with them.
    let (seen_tx, seen) = mpsc::unbounded_channel();
    let (cut_tx, cuts) = mpsc::unbounded_channel();
    let stream = live_stream::open(client, &live.url, &member_bearer).await?;
    let reader = tokio::spawn(live_stream::read(
        stream,
        0,
        seen_tx,
        cut_tx,
        live_stream::LastId::default(),
    ));
    let chat = creators::create_chat(
        client,
        &writer.url,
        &sender_bearer,
        "busy probe",
        &[*member],
    )
    .await
    .map_err(|e| LoadError::http("creating the probe chat", e))?;
    let mut phases = Phases {
        client,
        live_ops: &live.ops_url,
        probe: Probe {
            client: client.clone(),
            url: writer.url.clone(),
            chat,
            bearer: sender_bearer,
            every: args.every,
        },
        creators: Creators {
            client: client.clone(),
            url: writer.url.clone(),
            pool: Arc::new(pool.to_vec()),
            bearers: Arc::new(pool_bearers),
            members: args.members,
            tasks: args.creators,
        },
        hole: distance.is_blackholed().then_some(reach),
        drain: args.drain,
        seen,
        cuts,
    };
    tokio::time::sleep(SETTLE).await;
    while phases.seen.try_recv().is_ok() {}

    let quiet = phases.run(Phase::Quiet, args.quiet).await?;
    let busy = phases.run(Phase::Busy, args.busy).await?;
    reader.abort();
    Ok(Cell {
        mode,
        distance,
        quiet,
        busy,
    })
}

/// A cell's servers: its broker, the live instance (its database at the
/// cell's distance) and, when that database is blackholed, a writer that
/// reaches PostgreSQL straight. Dropping it stops them, the instances
/// first.
struct CellServers {
    live: Fleet,
    writer: Option<Fleet>,
    _broker: Broker,
    signer: Arc<Signer>,
}

impl CellServers {
    async fn start(
        args: &DeliveryBusyArgs,
        client: &reqwest::Client,
        mode: PublishMode,
        distance: DbDistance,
        reach: &Reach,
    ) -> Result<Self, LoadError> {
        let dir = args.out.join(format!("{mode}-{}", distance.slug()));
        let broker =
            Broker::start(&args.tansu_bin, &dir.join("broker"), args.tansu_storage).await?;
        let signer = Arc::new(Signer::generate(DEFAULT_ISSUER)?);
        // One topic for both instances: the live one reads what the writer
        // publishes.
        let topic = topic_of(&dir);
        let spec = |name: &str, database_url: &str| {
            let mut env = vec![
                ("KAFKA_BROKERS".to_owned(), broker.address.clone()),
                ("KAFKA_TOPIC".to_owned(), topic.clone()),
                ("KAFKA_PUBLISH_MODE".to_owned(), mode.as_str().to_owned()),
                ("RUST_LOG".to_owned(), "warn".to_owned()),
                ("LOG_FORMAT".to_owned(), "json".to_owned()),
            ];
            env.extend(args.env.iter().cloned());
            FleetSpec {
                binary: args.binary.clone(),
                count: 1,
                env,
                log_dir: dir.join(name),
                signer: Arc::clone(&signer),
            }
            .with_database_url(database_url)
        };
        let live = Fleet::start(&spec("live", &reach.url()), client).await?;
        // Nothing could be written through a dead database: with the live
        // instance's going dark, the writes go to an instance that reaches
        // PostgreSQL straight.
        let writer = if distance.is_blackholed() {
            Some(Fleet::start(&spec("writer", &args.database_url), client).await?)
        } else {
            None
        };
        Ok(Self {
            live,
            writer,
            _broker: broker,
            signer,
        })
    }

    /// The instance the member listens on.
    fn live(&self) -> Result<&Server, LoadError> {
        self.live.first()
    }

    /// The instance the writes go to: the live one, unless its database
    /// is blackholed.
    fn writer(&self) -> Result<&Server, LoadError> {
        match &self.writer {
            Some(fleet) => fleet.first(),
            None => self.live.first(),
        }
    }
}

/// A fresh topic per cell, so no cell reads another's events.
fn topic_of(dir: &std::path::Path) -> String {
    let cell = dir
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().replace('_', "-"));
    format!("chatlab-delivery-busy-{cell}-{}", Uuid::now_v7().simple())
}

/// What the two phases of a cell share.
struct Phases<'a> {
    client: &'a reqwest::Client,
    /// The live instance's operator URL, whose `/metrics` is scraped.
    live_ops: &'a str,
    probe: Probe,
    creators: Creators,
    /// The hop blackholed for the busy phase, if the cell has one.
    hole: Option<&'a Reach>,
    drain: Duration,
    seen: mpsc::UnboundedReceiver<Sighting>,
    cuts: mpsc::UnboundedReceiver<usize>,
}

impl Phases<'_> {
    /// One phase of `duration`, then its drain.
    async fn run(&mut self, phase: Phase, duration: Duration) -> Result<PhaseFigures, LoadError> {
        let before = scrape(self.client, self.live_ops).await;
        let busy = phase == Phase::Busy;
        let hole = self.hole.filter(|_| busy);
        if let Some(reach) = hole {
            reach.blackhole(true).await?;
        }
        let (posted, created, reopened) = tokio::join!(
            self.probe.post_for(duration),
            async {
                if busy {
                    self.creators.create_for(duration).await
                } else {
                    Created::default()
                }
            },
            async {
                match hole {
                    Some(reach) => {
                        tokio::time::sleep(duration).await;
                        reach.blackhole(false).await
                    }
                    None => Ok(()),
                }
            },
        );
        reopened?;
        let deliveries = probe::tally(&posted, &mut self.seen, self.drain).await;
        let after = scrape(self.client, self.live_ops).await;
        let server_delay = match (before, after) {
            (Some(before), Some(after)) => Some(
                after
                    .histogram(LIVE_DELAY, &[])
                    .since(&before.histogram(LIVE_DELAY, &[])),
            ),
            _ => None,
        };
        let mut cuts = 0;
        while self.cuts.try_recv().is_ok() {
            cuts += 1;
        }
        Ok(PhaseFigures {
            phase,
            deliveries,
            created,
            server_delay,
            cuts,
        })
    }
}
