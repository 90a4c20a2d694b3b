//! `chatlab-load`: chatlab's load generator and experiment runner.
//!
//! Its subcommands, one module each under [`commands`]:
//! - `run`: one load (closed model with optional ramp stages, or open model
//!   at a constant arrival rate) with thresholds;
//! - `matrix`: a grid over strategy × members × VUs × publish mode × pool
//!   size, strategies alternating A B A B (or mixed per request), with
//!   optional pgbench baselines; writes `results/<name>-<timestamp>/`;
//! - `charts`: a run's charts drawn again from its `results.csv`;
//! - `intervals`: a committed run's 95% intervals computed again from its
//!   per-round table;
//! - `crosscheck`: wrk and this harness against the same endpoint, to prove
//!   the harness is not the bottleneck;
//! - `baseline`: pgbench alone on each strategy's createChat SQL;
//! - `broker-check`: does the broker keep what it acknowledges?
//! - `fault`: a real fault under load (database, broker, server, client
//!   hang-ups, or a soak), then the invariants;
//! - `delivery`: commit-to-screen latency per publish mode, over live
//!   connections to several instances sharing a broker;
//! - `delivery-busy`: does live delivery wait on the database? A member's
//!   message latency quiet and while chats are created flat out, per
//!   publish mode and distance to PostgreSQL, a blackholed one included;
//! - `live-fleet`: the live tier over several instances behind HAProxy,
//!   an instance killed mid-run;
//! - `syncs`: what one Sync is worth, straight to PostgreSQL;
//! - `markers`: read markers at a steady rate, per mode and fan-out;
//! - `crossover`: where COPY starts to beat INSERT, straight to PostgreSQL;
//! - `docs`: the docs' tables of results rendered from their committed runs,
//!   or checked;
//! - `setting`: where a run ran (machine, PostgreSQL's version and
//!   distance, broker), for the scripts that write their own results.md.
//!
//! What they share lives beside them by concern: [`load`] (what the virtual
//! users send), [`servers`] (the fleet under test and its broker),
//! [`observe`] (watching a run), [`stats`] (what the figures say),
//! [`report`] (the files a run leaves), [`grid`] (the matrix's engine) and
//! [`figures`] (the docs' cited figures).
//!
//! Traffic goes only to the given (loopback) servers, and every loop is
//! bounded by its duration. Load goes to the servers' public listeners, as
//! seeded users holding bearer tokens the harness signed; metrics, audits
//! and bulk seeding go to their operator listeners (`OPS_ADDR`).

mod commands;
mod error;
mod figures;
mod grid;
mod load;
mod observe;
mod report;
mod servers;
mod stats;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::commands::{
    baseline, broker_check, charts, crosscheck, crossover, delivery, delivery_busy, docs, fault,
    intervals, live_clients, live_fleet, markers, matrix, run, setting, syncs,
};

#[derive(Debug, Parser)]
#[command(
    name = "chatlab-load",
    version,
    about = "Load generator and experiment runner for chatlab"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// One load run.
    Run(run::RunArgs),
    /// A grid of runs, with tables and charts.
    Matrix(matrix::MatrixArgs),
    /// Draw a run's charts again from its results.csv.
    Charts(charts::ChartsArgs),
    /// The 95% intervals a committed run's rounds give, computed again from
    /// its per-round table into intervals.md (for a run whose results.md
    /// has its rounds but not their intervals).
    Intervals(intervals::IntervalsArgs),
    /// wrk and this harness against the same GET endpoint.
    Crosscheck(crosscheck::CrosscheckArgs),
    /// pgbench alone on each strategy's createChat SQL (users are seeded
    /// through a spawned server first).
    Baseline(baseline::BaselineArgs),
    /// Does the broker keep what it acknowledges? Produces to a fresh topic
    /// from several producers (optionally beside busy threads), keeps every
    /// receipt, reads the topic back and reconciles the two.
    BrokerCheck(broker_check::BrokerCheckArgs),
    /// Faults under load: PostgreSQL restarted, stopped or its sessions
    /// ended, the broker killed or frozen, the server killed or stopped,
    /// clients hanging up, or a steady soak; then the invariants.
    Fault(fault::FaultArgs),
    /// Commit-to-screen latency per publish mode: members connected live to
    /// some instances, messages written at a fixed rate on another; the
    /// writer's latency and pooled connection time beside the delivery
    /// latency, with deliveries lost and repeated.
    Delivery(delivery::DeliveryArgs),
    /// Does live delivery wait on the database? A member's message latency
    /// on its live stream, quiet and while other clients create chats flat
    /// out, per publish mode and distance to PostgreSQL (a blackholed one
    /// included), with the gap between the two p99s and a verdict.
    DeliveryBusy(delivery_busy::DeliveryBusyArgs),
    /// The live tier at fleet scale: streams through a balancer of HAProxy
    /// processes to several instances on one broker, from several client
    /// processes; delivery p99, memory per instance, the broker's load, and
    /// an instance killed mid-run (what its clients missed or got twice,
    /// and how long until all were back).
    LiveFleet(live_fleet::LiveFleetArgs),
    /// One client process of `live-fleet` (started by it).
    #[command(hide = true)]
    LiveClients(live_clients::LiveClientsArgs),
    /// What one Sync is worth: the `pipeline` strategy's transaction straight
    /// to PostgreSQL, under one Sync (pgbench's pipeline) against one per
    /// statement (tokio-postgres, joined or awaited) and pgbench without a
    /// pipeline, rounds alternating.
    Syncs(syncs::SyncsArgs),
    /// Read markers at a steady rate on one chat, per READ_MARKER_MODE and
    /// fan-out: latency, PostgreSQL's row writes, HOT updates, dead tuples,
    /// deadlocks, and the acknowledged moves a SIGKILL loses.
    Markers(markers::MarkersArgs),
    /// Where COPY starts to beat INSERT: one message's inbox rows per
    /// transaction by binary COPY, unnest, multi-row INSERTs and the
    /// server's own INSERT ... SELECT, on a grid of row counts, straight to
    /// PostgreSQL, rounds interleaved.
    Crossover(crossover::CrossoverArgs),
    /// Render the docs' tables of results from their committed runs, or
    /// (`--check`) fail when one is stale or a cited figure is not in its run.
    Docs(docs::DocsArgs),
    /// Where a run ran, as results.md opens with it: the machine,
    /// PostgreSQL's version and distance (or "not used"), the broker; for
    /// the scripts that write their own results.md.
    Setting(setting::SettingArgs),
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Run(args) => run::run(args).await,
        Command::Matrix(args) => matrix::matrix(args).await,
        Command::Crosscheck(args) => crosscheck::crosscheck(args).await,
        Command::Charts(args) => charts::charts(args),
        Command::Intervals(args) => intervals::intervals(args),
        Command::Baseline(args) => baseline::baseline(args).await,
        Command::BrokerCheck(args) => broker_check::run(args).await,
        Command::Fault(args) => fault::run(args).await,
        Command::Delivery(args) => delivery::run(args).await,
        Command::DeliveryBusy(args) => delivery_busy::run(args).await,
        Command::LiveFleet(args) => live_fleet::run(args).await,
        Command::LiveClients(args) => live_clients::run(args).await,
        Command::Syncs(args) => syncs::syncs(args).await,
        Command::Markers(args) => markers::markers(args).await,
        Command::Crossover(args) => crossover::crossover(args).await,
        Command::Docs(args) => docs::docs(args),
        Command::Setting(args) => setting::run(args).await,
    };
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("chatlab-load: {e}");
            ExitCode::from(2)
        }
    }
}
