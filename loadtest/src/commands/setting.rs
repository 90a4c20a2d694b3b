//! `chatlab-load setting`: where a run ran, in the lines every results.md
//! opens with, for the scripts that write a results.md of their own
//! (`scripts/broker-check.sh`, `hold-time.sh`, `profile-server.sh`,
//! `fault-collector.sh`, `fault-slow-clients.py`, `live-idle.py`,
//! `time-cold.sh`), so they state it in the same words as the commands:
//! the machine, PostgreSQL's version and its distance (pgbench `SELECT 1`
//! from one client, straight) or that none was used, and the broker.

use std::time::Duration;

use clap::Args;

use crate::error::LoadError;
use crate::load::schedule::parse_duration;
use crate::servers::reach::{DistanceArgs, Reach};

use super::{machine_note, postgres_line};

/// Flags of `setting`.
#[derive(Debug, Args)]
pub struct SettingArgs {
    /// The database the run uses; without it the lines say PostgreSQL was
    /// not used.
    #[arg(long)]
    database_url: Option<String>,
    /// The broker the run uses, as results.md should name it (`tansu 0.6.0
    /// on loopback`); without it no broker line.
    #[arg(long)]
    broker: Option<String>,
    /// How long the calibration (pgbench `SELECT 1`, one client) runs.
    #[arg(long, default_value = "2s", value_parser = parse_duration)]
    calibrate_for: Duration,
}

/// Prints the lines, each a paragraph of its own.
pub async fn run(args: SettingArgs) -> Result<bool, LoadError> {
    let postgres = match &args.database_url {
        Some(url) => {
            let distance = DistanceArgs {
                db_rtt: None,
                db_jitter: String::new(),
                delay_bin: std::path::PathBuf::new(),
                calibrate_for: args.calibrate_for,
            };
            let reach = Reach::open(url, None, &distance).await?;
            format!("{} {}", postgres_line(url).await?, reach.note())
        }
        None => "PostgreSQL: not used.".to_owned(),
    };
    let mut lines = vec![machine_note(), postgres];
    lines.extend(
        args.broker
            .as_deref()
            .map(|b| super::broker_note(Some(b), &[])),
    );
    println!("{}", lines.join("\n\n"));
    Ok(true)
}
