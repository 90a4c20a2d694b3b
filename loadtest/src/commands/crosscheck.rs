//! `chatlab-load crosscheck`: wrk and this harness against the same GET,
//! to show the harness is not the bottleneck.

use std::sync::Arc;
use std::time::Duration;

use clap::Args;

use crate::load::measure::closed;
use crate::load::scenario::{Scenario, SeedAt, SeedSpec, Workload, seed};
use crate::load::schedule::parse_duration;
use crate::load::{runner, scenario};

use super::{ServerArgs, deploy, http_client, results_dir};
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
    let deployed = deploy(&args.servers, &out, &client).await?;
    let (target, target_ops) = deployed.first()?;
    let target = target.to_owned();
    // The default path reads a seeded chat: both tools send the same
    // member's token. A given path goes without one.
    let (path, bearer) = match &args.path {
        Some(p) => (p.clone(), None),
        None => {
            let seeded = seed(
                &client,
                SeedAt {
                    public: &target,
                    ops: target_ops,
                    signer: &deployed.signer,
                },
                SeedSpec {
                    members: 10,
                    users: 100,
                    chats: 1,
                },
                &Scenario::ReadMessages,
            )
            .await?;
            let (chat, members) = seeded
                .chats
                .first()
                .ok_or_else(|| LoadError::http("seeding chats", "none seeded"))?;
            let bearer = members.first().and_then(|m| seeded.bearer(m)).cloned();
            (format!("/v1/chats/{chat}/messages?limit=20"), bearer)
        }
    };
    let url = format!("{target}{path}");
    let secs = args.duration.as_secs().max(1);
    let mut wrk = std::process::Command::new("wrk");
    wrk.arg("-t2")
        .arg(format!("-c{}", args.vus))
        .arg(format!("-d{secs}s"));
    if let Some(bearer) = &bearer {
        let value = bearer
            .to_str()
            .map_err(|e| LoadError::Auth(format!("the token as a header: {e}")))?;
        wrk.arg("-H").arg(format!("Authorization: {value}"));
    }
    let wrk = wrk
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
    let work = Arc::new(
        Workload::new(
            Scenario::Get { path: path.clone() },
            scenario::Seeded::default(),
            1,
        )
        .with_get_bearer(bearer),
    );
    let outcome = runner::run(
        client,
        vec![target],
        work,
        Vec::new(),
        closed(args.vus, args.duration, Duration::ZERO),
        "chatlab-load",
    )
    .await;
    let postgres = deployed.postgres_note(&args.servers.database_url).await?;
    drop(deployed);
    let ours = outcome.total().requests() as f64 / outcome.elapsed.as_secs_f64();
    let diff = 100.0 * (ours - wrk_rps).abs() / wrk_rps.max(1e-9);
    let report = format!(
        "GET {} with {} connections for {secs} s, wrk first, then chatlab-load\n\n| tool | req/s |\n|---|---|\n| wrk | {wrk_rps:.0} |\n| chatlab-load | {ours:.0} |\n\ndifference: {diff:.1}% (tolerance {}%)\n",
        path, args.vus, args.tolerance
    );
    print!("{report}");
    let md = format!(
        "# crosscheck\n\n{}\n\n{postgres}\n\n{}\n\n{report}",
        super::machine_note(),
        args.servers.broker_note(&[])
    );
    std::fs::create_dir_all(&out)
        .and_then(|()| std::fs::write(out.join("results.md"), md))
        .map_err(|e| LoadError::file(&out, e))?;
    Ok(diff <= args.tolerance)
}
