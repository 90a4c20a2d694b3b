//! `chatlab-load baseline`: pgbench alone on each strategy's createChat
//! SQL, at the given client counts.

use std::time::Duration;

use clap::Args;

use chatlab_domain::InsertStrategy;

use crate::load::scenario::{Scenario, SeedAt, SeedSpec, seed};
use crate::load::schedule::parse_duration;
use crate::load::yardstick_sql;
use crate::servers::fleet::Fleet;
use crate::servers::reach::Reach;

use super::{
    ServerArgs, fleet_spec, http_client, machine_note, postgres_line, results_dir, write_results,
};
use crate::error::LoadError;

#[derive(Debug, Args)]
pub(crate) struct BaselineArgs {
    #[command(flatten)]
    servers: ServerArgs,
    /// Strategies.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "per_row,batch,unnest,single"
    )]
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

pub(crate) async fn baseline(args: BaselineArgs) -> Result<bool, LoadError> {
    let out = results_dir(&args.servers.results_dir, "baseline");
    let client = http_client(4)?;
    let users = {
        let spec = fleet_spec(&args.servers, 1, &out)?;
        let fleet = Fleet::start(&spec, &client).await?;
        let first = fleet.first()?;
        let max_members = args.members.iter().copied().max().unwrap_or(2);
        seed(
            &client,
            SeedAt {
                public: &first.url,
                ops: &first.ops_url,
                signer: &spec.signer,
            },
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
    let reach = Reach::open(
        &args.servers.database_url,
        args.servers.distance.distance()?,
        &args.servers.distance,
    )
    .await?;
    let mut table = String::from(
        "| strategy | members | clients | pgbench protocol | tps |\n|---|---|---|---|---|\n",
    );
    for &members in &args.members {
        for &clients in &args.clients {
            for &strategy in &args.strategies {
                let spec = yardstick_sql::BaselineSpec {
                    database_url: reach.url(),
                    strategy,
                    members,
                    clients,
                    duration: args.duration,
                    users: users.clone(),
                    work_dir: yardstick_sql::default_work_dir(&out),
                };
                let tps = tokio::task::spawn_blocking(move || yardstick_sql::run(&spec)).await??;
                table.push_str(&format!(
                    "| {strategy} | {members} | {clients} | {} | {tps:.0} |\n",
                    yardstick_sql::protocol(strategy)
                ));
            }
        }
    }
    let notes = format!(
        "# pgbench baseline\n\n{}\n\n{} {}\n\n",
        machine_note(),
        postgres_line(&args.servers.database_url).await?,
        reach.note()
    );
    write_results(&out, &notes, &table)
}
