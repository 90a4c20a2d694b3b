//! The commands of `chatlab-load`, one module each, and what they share:
//! the server arguments, the HTTP client, the spawned fleet's settings, the
//! results folder and the machine note.

pub(crate) mod charts;
pub(crate) mod crosscheck;
pub(crate) mod matrix;
pub(crate) mod pgbench;
pub(crate) mod run;

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use crate::error::LoadError;
use crate::experiment::parse_kv;
use crate::fleet::FleetSpec;
use crate::report::CellResult;
use crate::schedule::{self, parse_duration};
use crate::thresholds::{Threshold, breaches};

#[derive(Debug, Args, Clone)]
pub(crate) struct ServerArgs {
    /// Servers to load, round robin (comma-separated URLs). Ignored with --spawn.
    #[arg(long, value_delimiter = ',', default_value = "http://127.0.0.1:8080")]
    pub(crate) target: Vec<String>,
    /// Start this many chatlab servers instead (and stop them after).
    #[arg(long)]
    pub(crate) spawn: Option<usize>,
    /// The chatlab binary for --spawn.
    #[arg(long, default_value = "target/release/chatlab")]
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
    /// Base folder of results.
    #[arg(long, default_value = "results")]
    pub(crate) results_dir: PathBuf,
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

pub(crate) fn fleet_spec(args: &ServerArgs, count: usize, out: &std::path::Path) -> FleetSpec {
    let mut env = vec![
        ("DATABASE_URL".to_owned(), args.database_url.clone()),
        ("CHATLAB_ALLOW_OVERRIDES".to_owned(), "true".to_owned()),
        ("RUST_LOG".to_owned(), "warn".to_owned()),
        ("LOG_FORMAT".to_owned(), "json".to_owned()),
    ];
    env.extend(args.server_env.iter().cloned());
    FleetSpec {
        binary: args.chatlab_bin.clone(),
        count,
        env,
        log_dir: out.join("logs"),
    }
}

pub(crate) fn results_dir(base: &std::path::Path, name: &str) -> PathBuf {
    base.join(format!(
        "{name}-{}",
        chrono::Utc::now().format("%Y%m%dT%H%M%SZ")
    ))
}

pub(crate) fn machine_note() -> String {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mem = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))
                .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
        })
        .map_or_else(String::new, |kib| {
            format!(", {:.0} GiB", kib / 1024.0 / 1024.0)
        });
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find_map(|l| l.strip_prefix("model name"))
                .map(|v| v.trim_start_matches([' ', '\t', ':']).to_owned())
        })
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

    #[test]
    fn trace_fractions_are_shares_from_zero_to_one() {
        assert_eq!(parse_fraction("0"), Ok(0.0));
        assert_eq!(parse_fraction("0.01"), Ok(0.01));
        assert_eq!(parse_fraction("1"), Ok(1.0));
        for bad in ["-0.1", "1.5", "1%", "NaN", ""] {
            assert!(parse_fraction(bad).is_err(), "{bad}");
        }
    }
}
