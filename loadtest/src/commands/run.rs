//! `chatlab-load run`: one load, closed or open model, with thresholds.

use std::sync::Arc;
use std::time::Duration;

use clap::Args;

use chatlab_domain::{InsertStrategy, PublishMode};

use crate::load::choice::Choice;
use crate::load::measure::{self, Watched, closed, scenario_name, variants_for};
use crate::load::runner::Model;
use crate::load::scenario::{Scenario, SeedAt, SeedSpec, Workload, seed};
use crate::load::schedule::{self, parse_duration, parse_stages};
use crate::report::results;
use crate::report::results::CellResult;
use crate::stats::thresholds::Threshold;

use super::{ServerArgs, Stages, TraceArgs, check, deploy, http_client, machine_note, results_dir};
use crate::error::LoadError;

#[derive(Debug, Args)]
pub(crate) struct RunArgs {
    #[command(flatten)]
    servers: ServerArgs,
    #[command(flatten)]
    traces: TraceArgs,
    /// create-chat, send-message, read-messages, my-chats, mix[:C:S:R[:L]]
    /// (L: the chat list), import:ROWS:CHUNK:PARALLELISM or get:/path.
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

pub(crate) async fn run(args: RunArgs) -> Result<bool, LoadError> {
    let out = results_dir(&args.servers.results_dir, &args.name);
    let model = if let Some(rate) = args.rate {
        Model::Open {
            schedule: schedule::ArrivalSchedule::new(rate, args.duration)
                .map_err(LoadError::Usage)?,
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
    let deployed = deploy(&args.servers, &out, &client).await?;
    let (first, first_ops) = deployed.first()?;
    let seeded = seed(
        &client,
        SeedAt {
            public: first,
            ops: first_ops,
            signer: &deployed.signer,
        },
        SeedSpec {
            members: args.members,
            users: args.servers.seed_users.max(args.members * 4),
            chats: 50,
        },
        &args.scenario,
    )
    .await?;
    let work = Arc::new(
        Workload::new(args.scenario.clone(), seeded, args.members)
            .with_trace_fraction(args.traces.trace_fraction),
    );
    let strategies: Vec<Choice<InsertStrategy>> =
        args.strategy.map(|s| Choice(Some(s))).into_iter().collect();
    let targets = deployed.targets.clone();
    let watched = Watched {
        targets: targets.clone(),
        ops: deployed.ops.clone(),
        pids: deployed.pids.clone(),
        sample_interval: args.servers.sample_interval,
    };
    let peak = model.peak_concurrency();
    let (outcome, stats) = measure::measure(
        &client,
        &watched,
        work,
        variants_for(&strategies, args.publish_mode),
        model,
        &args.name,
    )
    .await;
    let postgres = deployed.postgres_note(&args.servers.database_url).await?;
    let (db_rtt_ms, db_round_trip_ms) = deployed
        .reach
        .as_ref()
        .map_or((0.0, 0.0), |r| (r.set_rtt_ms(), r.measured_rtt_ms()));
    drop(deployed);
    let mut cell = CellResult {
        db_rtt_ms,
        db_round_trip_ms,
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
        "# {}\n\n{}\n\n{postgres}\n\n{}\n\nScenario {}, {} server(s), {:.0} s.\n",
        args.name,
        machine_note(),
        args.servers.broker_note(&[]),
        scenario_name(&args.scenario),
        targets.len(),
        outcome.elapsed.as_secs_f64()
    );
    results::write(&out, &cells, &notes).map_err(|e| LoadError::file(&out, e))?;
    println!("{}", results::to_markdown(&cells));
    print!("{}", results::traces_markdown(&cells));
    println!("results: {}", out.display());
    Ok(check(&cells, &args.thresholds))
}
