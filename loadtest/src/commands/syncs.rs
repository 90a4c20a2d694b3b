//! `chatlab-load syncs`: what one Sync is worth, measured without chatlab.
//!
//! The `pipeline` strategy sends unnest's transaction (BEGIN, the chat,
//! its members from an array, the system message, COMMIT) in one flight,
//! but tokio-postgres, under diesel-async, ends every statement it sends
//! with a Sync of its own: PostgreSQL executes each, answers and flushes
//! each, and the transaction costs five Syncs. pgbench's `\startpipeline`
//! sends the same statements under one Sync. No layer of chatlab's stack
//! can do that (tokio-postgres writes the Sync in its private encoder,
//! diesel-async keeps its client private), so this measures what would be
//! gained, the same statements from four clients straight to PostgreSQL,
//! at the same concurrency, in rounds that alternate their order:
//!
//! - pgbench, `\startpipeline` … `\endpipeline`: one flight, one Sync;
//! - tokio-postgres, the five futures joined: one flight, five Syncs (what
//!   chatlab's `pipeline` sends);
//! - tokio-postgres, each awaited in turn: five round trips, five Syncs
//!   (what chatlab's `unnest` sends);
//! - pgbench without a pipeline: five round trips, five Syncs;
//! - tokio-postgres, the transaction as one simple query (one text of five
//!   statements, the values written into it): one message, one answer, no
//!   prepared statement. diesel-async could send this (`batch_execute`),
//!   at the price of values inlined as literals.

use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Args;
use tokio::sync::Barrier;
use uuid::Uuid;

use chatlab_domain::InsertStrategy;

use crate::load::scenario::{Rng, Scenario, SeedAt, SeedSpec, pick_members, seed};
use crate::load::schedule::parse_duration;
use crate::load::yardstick_sql::{self, uuid_array};
use crate::servers::fleet::Fleet;
use crate::servers::reach::Reach;
use crate::stats::uncertainty::Interval;

use super::{
    ServerArgs, fleet_spec, http_client, machine_note, postgres_line, results_dir, write_results,
};
use crate::error::LoadError;

#[derive(Debug, Args)]
pub(crate) struct SyncsArgs {
    #[command(flatten)]
    servers: ServerArgs,
    /// Members per chat, creator included.
    #[arg(long, default_value_t = 50)]
    members: usize,
    /// Connections, each running one transaction at a time (the default
    /// pool's size on 2 cores).
    #[arg(long, default_value_t = 5)]
    clients: usize,
    /// Length of each measurement.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    duration: Duration,
    /// Rounds; each runs the four clients, in an order that alternates.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
}

/// One way of sending the transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sender {
    PgbenchPipeline,
    DirectJoined,
    DirectAwaited,
    PgbenchPlain,
    DirectSimple,
}

impl Sender {
    const ALL: [Self; 5] = [
        Self::PgbenchPipeline,
        Self::DirectJoined,
        Self::DirectAwaited,
        Self::PgbenchPlain,
        Self::DirectSimple,
    ];

    fn describe(self) -> (&'static str, &'static str, &'static str) {
        match self {
            Self::PgbenchPipeline => ("pgbench, \\startpipeline", "1", "1 flight"),
            Self::DirectJoined => (
                "tokio-postgres, joined (chatlab's pipeline)",
                "5",
                "1 flight",
            ),
            Self::DirectAwaited => ("tokio-postgres, awaited (chatlab's unnest)", "5", "5"),
            Self::PgbenchPlain => ("pgbench, no pipeline", "5", "5"),
            Self::DirectSimple => ("tokio-postgres, one simple query", "1", "1"),
        }
    }
}

pub(crate) async fn syncs(args: SyncsArgs) -> Result<bool, LoadError> {
    let out = results_dir(&args.servers.results_dir, "syncs");
    let client = http_client(4)?;
    // A server migrates the database and seeds the users, then stops.
    let users = {
        let spec = fleet_spec(&args.servers, 1, &out)?;
        let fleet = Fleet::start(&spec, &client).await?;
        let first = fleet.first()?;
        seed(
            &client,
            SeedAt {
                public: &first.url,
                ops: &first.ops_url,
                signer: &spec.signer,
            },
            SeedSpec {
                members: args.members,
                users: args.servers.seed_users.max(args.members * 4),
                chats: 0,
            },
            &Scenario::CreateChat,
        )
        .await?
        .users
    };
    let reach = Reach::open(
        &args.servers.database_url,
        args.servers.distance.distance()?,
        &args.servers.distance,
    )
    .await?;
    let url = reach.url();
    let mut tps: Vec<Vec<f64>> = vec![Vec::new(); Sender::ALL.len()];
    for round in 0..args.rounds.max(1) {
        let mut order: Vec<usize> = (0..Sender::ALL.len()).collect();
        if round % 2 == 1 {
            order.reverse();
        }
        for i in order {
            let sender = Sender::ALL[i];
            let measured = measure(sender, &args, &url, &users, &out).await?;
            eprintln!("syncs round {}: {:?}: {measured:.0} tps", round + 1, sender);
            tps[i].push(measured);
        }
    }
    let mut table = String::from(
        "| sender | Syncs per transaction | round trips | tps, each round | tps, mean | against chatlab's pipeline |\n|---|---|---|---|---|---|\n",
    );
    let joined = Sender::ALL
        .iter()
        .position(|&s| s == Sender::DirectJoined)
        .and_then(|i| tps.get(i))
        .cloned()
        .unwrap_or_default();
    for (sender, rounds) in Sender::ALL.iter().zip(&tps) {
        let (name, syncs, trips) = sender.describe();
        let mean = rounds.iter().sum::<f64>() / rounds.len().max(1) as f64;
        let each: Vec<String> = rounds.iter().map(|t| format!("{t:.0}")).collect();
        // Paired by round: the senders of one round ran a few seconds apart.
        let pairs: Vec<(f64, f64)> = rounds.iter().copied().zip(joined.iter().copied()).collect();
        let against = if *sender == Sender::DirectJoined {
            "-".to_owned()
        } else {
            Interval::of_ratio(&pairs).map_or_else(|| "-".to_owned(), |r| r.show_called())
        };
        table.push_str(&format!(
            "| {name} | {syncs} | {trips} | {} | {mean:.0} | {against} |\n",
            each.join(", ")
        ));
    }
    let postgres = postgres_line(&args.servers.database_url).await?;
    let notes = format!(
        "# syncs: what one Sync is worth\n\n{}\n\n{postgres} {}\n\nThe `pipeline` strategy's transaction (BEGIN, the chat, {} members from an array, the system message, COMMIT), straight to PostgreSQL from {} connections for {} per measurement, {} rounds, their order alternating; each sender's tps against chatlab's pipeline (tokio-postgres, joined) is paired round by round, with its 95% interval (`~`: a tie). pgbench runs its prepared protocol; tokio-postgres prepares the statements once per connection.\n\n",
        machine_note(),
        reach.note(),
        args.members,
        args.clients,
        humantime::format_duration(args.duration),
        args.rounds.max(1),
    );
    write_results(&out, &notes, &table)
}

async fn measure(
    sender: Sender,
    args: &SyncsArgs,
    url: &str,
    users: &[Uuid],
    out: &std::path::Path,
) -> Result<f64, LoadError> {
    let url = url.to_owned();
    match sender {
        Sender::PgbenchPipeline | Sender::PgbenchPlain => {
            let spec = yardstick_sql::BaselineSpec {
                database_url: url,
                strategy: if sender == Sender::PgbenchPipeline {
                    InsertStrategy::Pipeline
                } else {
                    InsertStrategy::Unnest
                },
                members: args.members,
                clients: args.clients,
                duration: args.duration,
                users: users.to_vec(),
                work_dir: yardstick_sql::default_work_dir(out),
            };
            tokio::task::spawn_blocking(move || yardstick_sql::run(&spec)).await?
        }
        Sender::DirectJoined | Sender::DirectAwaited | Sender::DirectSimple => {
            direct(
                &url,
                users,
                args.members,
                args.clients,
                args.duration,
                sender,
            )
            .await
        }
    }
}

/// The transaction's statements, prepared on one connection.
struct Prepared {
    begin: tokio_postgres::Statement,
    chat: tokio_postgres::Statement,
    members: tokio_postgres::Statement,
    message: tokio_postgres::Statement,
    commit: tokio_postgres::Statement,
}

impl Prepared {
    async fn on(client: &tokio_postgres::Client) -> Result<Self, tokio_postgres::Error> {
        // Ids travel as text and are cast, so no uuid support is needed in
        // the client; the casts cost the server the same in every round.
        Ok(Self {
            begin: client.prepare("BEGIN").await?,
            chat: client
                .prepare(
                    "INSERT INTO chats (id, name, creator_id, created_at, publish_mode) \
                     VALUES ($1::text::uuid, 'direct', $2::text::uuid, now(), 'off')",
                )
                .await?,
            members: client
                .prepare(
                    "INSERT INTO chat_members (chat_id, user_id, joined_at) \
                     SELECT $1::text::uuid, u.user_id, now() FROM unnest($2::text::uuid[]) AS u(user_id)",
                )
                .await?,
            message: client
                .prepare(
                    "INSERT INTO messages (id, chat_id, sender_id, kind, body, created_at, publish_mode) \
                     VALUES (gen_random_uuid(), $1::text::uuid, NULL, 'system', 'room created', now(), 'off')",
                )
                .await?,
            commit: client.prepare("COMMIT").await?,
        })
    }
}

/// `clients` tokio-postgres connections sending the transaction for
/// `duration`, its statements joined (one flight), awaited in turn, or as
/// one simple query; answers transactions per second.
async fn direct(
    url: &str,
    users: &[Uuid],
    members: usize,
    clients: usize,
    duration: Duration,
    sender: Sender,
) -> Result<f64, LoadError> {
    let clients = clients.max(1);
    let start = Arc::new(Barrier::new(clients + 1));
    let users: Arc<Vec<Uuid>> = Arc::new(users.to_vec());
    let mut tasks = Vec::with_capacity(clients);
    for c in 0..clients {
        let (url, users, start) = (url.to_owned(), users.clone(), start.clone());
        tasks.push(tokio::spawn(async move {
            let connected = tokio_postgres::connect(&url, tokio_postgres::NoTls).await;
            let (client, connection) = match connected {
                Ok(pair) => pair,
                Err(e) => {
                    start.wait().await;
                    return Err(e);
                }
            };
            let driver = tokio::spawn(connection);
            let prepared = Prepared::on(&client).await;
            start.wait().await;
            let s = prepared?;
            let deadline = Instant::now() + duration;
            let mut rng = Rng::new(0x5_1C5 + c as u64);
            let mut done = 0u64;
            while Instant::now() < deadline {
                let picked = pick_members(&users, members, &mut rng);
                let id = Uuid::now_v7().to_string();
                let creator = picked.first().map(Uuid::to_string).unwrap_or_default();
                let ids = uuid_array(&picked);
                if sender == Sender::DirectSimple {
                    // Ids only, all made here or read from the database:
                    // nothing to escape.
                    client
                        .batch_execute(&format!(
                            "BEGIN; \
                             INSERT INTO chats (id, name, creator_id, created_at, publish_mode) \
                             VALUES ('{id}', 'direct', '{creator}', now(), 'off'); \
                             INSERT INTO chat_members (chat_id, user_id, joined_at) \
                             SELECT '{id}', u.user_id, now() FROM unnest('{ids}'::uuid[]) AS u(user_id); \
                             INSERT INTO messages (id, chat_id, sender_id, kind, body, created_at, publish_mode) \
                             VALUES (gen_random_uuid(), '{id}', NULL, 'system', 'room created', now(), 'off'); \
                             COMMIT"
                        ))
                        .await?;
                } else if sender == Sender::DirectJoined {
                    let chat: [&(dyn tokio_postgres::types::ToSql + Sync); 2] = [&id, &creator];
                    let rows: [&(dyn tokio_postgres::types::ToSql + Sync); 2] = [&id, &ids];
                    let message: [&(dyn tokio_postgres::types::ToSql + Sync); 1] = [&id];
                    tokio::try_join!(
                        client.execute(&s.begin, &[]),
                        client.execute(&s.chat, &chat),
                        client.execute(&s.members, &rows),
                        client.execute(&s.message, &message),
                        client.execute(&s.commit, &[]),
                    )?;
                } else {
                    client.execute(&s.begin, &[]).await?;
                    client.execute(&s.chat, &[&id, &creator]).await?;
                    client.execute(&s.members, &[&id, &ids]).await?;
                    client.execute(&s.message, &[&id]).await?;
                    client.execute(&s.commit, &[]).await?;
                }
                done += 1;
            }
            drop(client);
            let _ = driver.await;
            Ok(done)
        }));
    }
    start.wait().await;
    let began = Instant::now();
    let mut total = 0u64;
    for task in tasks {
        total += task
            .await?
            .map_err(|e| LoadError::program("tokio-postgres", e.to_string()))?;
    }
    Ok(total as f64 / began.elapsed().as_secs_f64().max(1e-9))
}
