//! `chatlab-load crosscheck`: wrk and this harness against the same GET,
//! to show the harness is not the bottleneck.

use std::sync::Arc;
use std::time::Duration;

use clap::Args;

use crate::experiment::closed;
use crate::fleet::Fleet;
use crate::scenario::{Scenario, SeedSpec, Workload, seed};
use crate::schedule::parse_duration;
use crate::{runner, scenario};

use super::{ServerArgs, fleet_spec, http_client, results_dir};
use crate::error::LoadError;

#[derive(Debug, Args)]
pub(crate) struct CrosscheckArgs {
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

pub(crate) async fn crosscheck(args: CrosscheckArgs) -> Result<bool, LoadError> {
    let out = results_dir(&args.servers.results_dir, "crosscheck");
    let client = http_client(args.vus)?;
    let fleet = match args.servers.spawn {
        Some(n) => Some(Fleet::start(&fleet_spec(&args.servers, n, &out), &client).await?),
        None => None,
    };
    let target = match &fleet {
        Some(f) => f
            .urls()
            .first()
            .cloned()
            .ok_or_else(|| LoadError::Usage("no server started".into()))?,
        None => args
            .servers
            .target
            .first()
            .cloned()
            .ok_or_else(|| LoadError::Usage("no --target".into()))?,
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
            let (chat, _) = seeded
                .chats
                .first()
                .ok_or_else(|| LoadError::http("seeding chats", "none seeded"))?;
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
        .map_err(|e| LoadError::program("wrk", format!("{e} (apt-get install wrk)")))?;
    let wrk_out = String::from_utf8_lossy(&wrk.stdout);
    let wrk_rps: f64 = wrk_out
        .lines()
        .find_map(|l| l.trim().strip_prefix("Requests/sec:"))
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| {
            LoadError::program("wrk", format!("no Requests/sec in its output:\n{wrk_out}"))
        })?;
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
