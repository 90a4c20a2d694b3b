//! `chatlab-load matrix`: a grid of runs, written as a table, a CSV and
//! charts under `results/`.

use std::path::Path;
use std::time::Duration;

use clap::Args;

use chatlab_domain::{InsertStrategy, PublishMode};

use crate::grid::schedule::{Rounds, Stopped};
use crate::grid::yardstick::Yardstick;
use crate::grid::{GridOutcome, GridSpec, Servers, run_grid};
use crate::load::choice::Choice;
use crate::load::measure::scenario_name;
use crate::load::scenario::Scenario;
use crate::load::schedule::{ArrivalSchedule, parse_duration};
use crate::load::yardstick_sql;
use crate::observe::otlp_sink::{self, OtlpSink, SinkCounts};
use crate::report::charts;
use crate::report::results::{self, CellResult};
use crate::servers::reach::parse_distances;
use crate::servers::variant::ServerVariant;
use crate::stats::rounds;
use crate::stats::thresholds::Threshold;

use super::{
    EXTERNAL_POSTGRES, ServerArgs, TraceArgs, chart_subtitle, check, external, fleet_spec,
    http_client, machine_note, postgres_line, results_dir,
};
use crate::error::LoadError;

#[derive(Debug, Args)]
pub(crate) struct MatrixArgs {
    #[command(flatten)]
    servers: ServerArgs,
    #[command(flatten)]
    traces: TraceArgs,
    /// Name of the results folder.
    #[arg(long, default_value = "matrix")]
    name: String,
    /// Scenarios, each a dimension of the grid (comma-separated).
    #[arg(long = "scenario", value_delimiter = ',', default_value = "create-chat",
        value_parser = |s: &str| s.parse::<Scenario>())]
    scenarios: Vec<Scenario>,
    /// Server variants, NAME or NAME:KEY=VALUE+KEY=VALUE (repeatable;
    /// spawned servers restart with each, and alternate round by round),
    /// e.g. `--variant async:DB_DRIVER=async --variant
    /// blocking:DB_DRIVER=blocking`. `OTEL_EXPORTER_OTLP_ENDPOINT=sink`
    /// sends the variant's traces to a built-in OTLP/HTTP receiver, whose
    /// counts go in results.md.
    #[arg(long = "variant", value_parser = |s: &str| s.parse::<ServerVariant>())]
    variants: Vec<ServerVariant>,
    /// Strategies (`-`: the server's own).
    #[arg(long, value_delimiter = ',', default_value = "per_row,batch")]
    strategies: Vec<Choice<InsertStrategy>>,
    /// Members per chat.
    #[arg(long, value_delimiter = ',', default_value = "50")]
    members: Vec<usize>,
    /// Virtual users.
    #[arg(long, value_delimiter = ',', default_value = "30")]
    vus: Vec<usize>,
    /// Publish modes (`-`: the server's own).
    #[arg(long, value_delimiter = ',', default_value = "off")]
    publish_modes: Vec<Choice<PublishMode>>,
    /// Pool sizes (spawned servers restart with each; 0: the server default).
    #[arg(long, value_delimiter = ',', default_value = "0")]
    pool_sizes: Vec<u32>,
    /// Distances of PostgreSQL, a dimension of the grid: round-trip times
    /// (`0,200us,1ms,5ms`; 0 is straight) that a delay hop of each adds
    /// between PostgreSQL and the spawned servers and pgbench (which restart
    /// with each). Without it, --db-rtt (one distance, or straight).
    #[arg(long)]
    db_rtts: Option<String>,
    /// Length of each cell.
    #[arg(long, default_value = "20s", value_parser = parse_duration)]
    duration: Duration,
    /// Unmeasured load before the cells.
    #[arg(long, default_value = "3s", value_parser = parse_duration)]
    warmup: Duration,
    /// Rounds per cell (strategies alternate A B, B A, ...; with several
    /// variants or pool sizes, so do the servers, restarted each round);
    /// with --until-within, the fewest.
    #[arg(long, default_value_t = 1)]
    rounds: usize,
    /// Keep adding rounds until every ratio the verdict uses (each pair of
    /// cells that differ in one setting, each cell's share of pgbench) has
    /// a 95% interval within this share of its estimate, e.g. `5%` or
    /// `0.05`; or until --budget or --max-rounds.
    #[arg(long, value_parser = parse_share)]
    until_within: Option<f64>,
    /// With --until-within: start no round after this long.
    #[arg(long, default_value = "10m", value_parser = parse_duration)]
    budget: Duration,
    /// With --until-within: at most this many rounds.
    #[arg(long, default_value_t = 30)]
    max_rounds: usize,
    /// Mix strategies per request in one run instead of alternating runs.
    #[arg(long)]
    mix_strategies: bool,
    /// Pause between a VU's requests.
    #[arg(long, default_value = "0ms", value_parser = parse_duration)]
    think_time: Duration,
    /// An open model: this many requests per second in every cell, whatever
    /// the answers take (k6's constant-arrival-rate); `--vus` is then the
    /// most in flight, arrivals beyond it dropped and counted.
    #[arg(long)]
    rate: Option<f64>,
    /// Run pgbench on each strategy's createChat SQL beside each cell, in
    /// every round, at the cell's database concurrency (needs pgbench).
    #[arg(long)]
    baseline: bool,
    /// Thresholds checked on every cell (repeatable).
    #[arg(long = "threshold")]
    thresholds: Vec<Threshold>,
    /// Print the short table (strategy, req/s, p95, connection held, round
    /// trips, CPU per request, share of pgbench), each round's throughput
    /// and the verdict; the full table goes to results.md only.
    #[arg(long)]
    compact: bool,
}

pub(crate) async fn matrix(args: MatrixArgs) -> Result<bool, LoadError> {
    let out = results_dir(&args.servers.results_dir, &args.name);
    eprintln!("{}", plan(&args));
    let client = http_client(args.vus.iter().copied().max().unwrap_or(1))?;
    let servers = servers(&args, &out)?;
    let variants = if args.variants.is_empty() {
        vec![ServerVariant {
            name: "-".into(),
            env: Vec::new(),
        }]
    } else {
        args.variants.clone()
    };
    let sink = if otlp_sink::wanted(&variants) {
        Some(OtlpSink::start()?)
    } else {
        None
    };
    let served = match &sink {
        Some(sink) => otlp_sink::point_at(&variants, &sink.base_url()).map_err(LoadError::Usage)?,
        None => variants.clone(),
    };
    let postgres = match args.servers.spawn {
        Some(_) => postgres_line(&args.servers.database_url).await?,
        None => EXTERNAL_POSTGRES.to_owned(),
    };
    let spec = grid_spec(&args, &out, servers, served)?;
    let outcome = run_grid(&client, &spec, sink.as_ref()).await;
    let sink_base = sink.as_ref().map(OtlpSink::base_url);
    if let Some(sink) = sink {
        sink.stop().await;
    }
    let outcome = outcome?;
    let sink_table = sink_base.map_or_else(String::new, |base| {
        sink_markdown(&base, &variants, &outcome.sink_counts)
    });
    report(&args, &out, &variants, &outcome, &sink_table, &postgres)
}

/// Spawned servers, or the `--target` ones when the grid changes nothing
/// of theirs.
fn servers(args: &MatrixArgs, out: &Path) -> Result<Servers, LoadError> {
    match args.servers.spawn {
        Some(n) => Ok(Servers::Spawn(fleet_spec(&args.servers, n, out)?)),
        None => {
            if args.pool_sizes.iter().any(|&p| p > 0)
                || !args.variants.is_empty()
                || args.db_rtts.is_some()
            {
                return Err(LoadError::Usage(
                    "--pool-sizes, --variant and --db-rtts need --spawn: external servers keep their settings"
                        .into(),
                ));
            }
            Ok(Servers::External(external(&args.servers)?))
        }
    }
}

/// The grid the arguments ask for, its servers given the `variants`.
fn grid_spec(
    args: &MatrixArgs,
    out: &Path,
    servers: Servers,
    variants: Vec<ServerVariant>,
) -> Result<GridSpec, LoadError> {
    let distances = match &args.db_rtts {
        Some(list) => {
            parse_distances(list, &args.servers.distance.db_jitter).map_err(LoadError::Usage)?
        }
        None => vec![args.servers.distance.distance()?],
    };
    Ok(GridSpec {
        servers,
        variants,
        scenarios: args.scenarios.clone(),
        strategies: args.strategies.clone(),
        members: args.members.clone(),
        vus: args.vus.clone(),
        publish_modes: args.publish_modes.clone(),
        pool_sizes: args.pool_sizes.clone(),
        database_url: args.servers.database_url.clone(),
        distances,
        distance_args: args.servers.distance.clone(),
        duration: args.duration,
        warmup: args.warmup,
        rounds: Rounds {
            min: args.rounds.max(1),
            max: args.max_rounds.max(args.rounds).max(1),
            within: args.until_within,
            budget: args.until_within.map(|_| args.budget),
        },
        mix_strategies: args.mix_strategies,
        think_time: args.think_time,
        arrivals: args
            .rate
            .map(|rate| ArrivalSchedule::new(rate, args.duration))
            .transpose()
            .map_err(LoadError::Usage)?,
        trace_fraction: args.traces.trace_fraction,
        yardstick: args.baseline.then(|| Yardstick {
            work_dir: yardstick_sql::default_work_dir(out),
        }),
        sample_interval: args.servers.sample_interval,
        seed_users: args.servers.seed_users,
        // Spawned servers write to this database's cluster and nothing
        // else of the run does; external ones may share theirs.
        wal_url: args
            .servers
            .spawn
            .is_some()
            .then(|| args.servers.database_url.clone()),
    })
}

/// Writes the grid's results, tables and charts, and prints them (the
/// short view with `--compact`); answers whether every threshold held.
fn report(
    args: &MatrixArgs,
    out: &Path,
    variants: &[ServerVariant],
    outcome: &GridOutcome,
    sink_table: &str,
    postgres: &str,
) -> Result<bool, LoadError> {
    let cells = &outcome.cells;
    let rounds_run = cells.iter().map(|c| c.rounds.len()).max().unwrap_or(0);
    let mut notes = run_note(args, variants, outcome, rounds_run, postgres);
    let verdict = crate::stats::verdict::verdict(cells);
    let summary = crate::stats::summary::summary_markdown(cells);
    let short = if summary.is_empty() {
        crate::stats::summary::intervals_markdown(cells)
    } else {
        summary.clone()
    };
    notes.push_str(&analysis_note(cells, verdict.as_deref(), &short));
    if !sink_table.is_empty() {
        notes.push_str(&format!("\n{sink_table}"));
    }
    results::write(out, cells, &notes).map_err(|e| LoadError::file(out, e))?;
    let subtitle = chart_subtitle(&args.pool_sizes, args.duration, rounds_run);
    let charts = charts::standard(out, cells, &subtitle)?;
    let warnings = rounds::warnings(cells, &crate::stats::summary::labels(cells));
    if args.compact && !summary.is_empty() {
        println!("{summary}");
        if let Some(v) = verdict {
            println!("{v}\n");
        }
        for w in &warnings {
            println!("Warning: {w}");
        }
        let charts = if charts.is_empty() {
            String::new()
        } else {
            format!("; charts: {}", charts.join(", "))
        };
        println!(
            "results: {}/results.md (every round beside its yardstick, every column: pool, pending, rows/s, RSS ...){charts}",
            out.display()
        );
        return Ok(check(cells, &args.thresholds));
    }
    println!("{}", results::to_markdown(cells));
    if !short.is_empty() {
        println!("{short}");
    }
    if !sink_table.is_empty() {
        println!("{sink_table}");
    }
    print!("{}", results::traces_markdown(cells));
    if let Some(v) = verdict {
        println!("{v}\n");
    }
    for w in &warnings {
        println!("Warning: {w}");
    }
    println!("results: {} ({})", out.display(), charts.join(", "));
    Ok(check(cells, &args.thresholds))
}

/// The head of results.md: the machine, PostgreSQL's version and
/// distance, the broker, what the grid varied, the load model and why it
/// stopped.
fn run_note(
    args: &MatrixArgs,
    variants: &[ServerVariant],
    outcome: &GridOutcome,
    rounds_run: usize,
    postgres: &str,
) -> String {
    let reach_notes = if outcome.reach_notes.is_empty() {
        String::new()
    } else {
        format!("\n\n{}", outcome.reach_notes.join("\n\n"))
    };
    let notes = format!(
        "# {}\n\n{}\n\n{postgres}{reach_notes}\n\n{}\n\nScenarios {}; server variants {}; strategies {}; {} per cell, {} round(s){}; servers: {}.\n",
        args.name,
        machine_note(),
        args.servers.broker_note(
            &variants
                .iter()
                .map(|v| v.env.as_slice())
                .collect::<Vec<_>>()
        ),
        args.scenarios
            .iter()
            .map(scenario_name)
            .collect::<Vec<_>>()
            .join(", "),
        variants
            .iter()
            .map(|v| {
                let env: Vec<String> = v.env.iter().map(|(k, val)| format!("{k}={val}")).collect();
                if env.is_empty() {
                    v.name.clone()
                } else {
                    format!("{} ({})", v.name, env.join(" "))
                }
            })
            .collect::<Vec<_>>()
            .join(", "),
        args.strategies
            .iter()
            .map(Choice::to_string)
            .collect::<Vec<_>>()
            .join(", "),
        humantime::format_duration(args.duration),
        rounds_run,
        if args.mix_strategies {
            ", strategies mixed per request"
        } else {
            ", strategies alternating"
        },
        args.servers
            .spawn
            .map_or_else(|| args.servers.target.join(" "), |n| format!("{n} spawned")),
    );
    let mut notes = match args.rate {
        Some(rate) => format!(
            "{notes}Open model: {rate} requests per second in every cell; the VUs column is the most in flight.\n"
        ),
        None => notes,
    };
    if args.baseline {
        notes.push_str(
            "Yardstick: pgbench on each createChat cell's SQL, at its database concurrency, right beside it in every round (after it in odd rounds, before it in even ones); a cell's share of pgbench is the geometric mean of the rounds' paired shares.\n",
        );
    }
    notes.push_str(&format!("\n{}\n", stopping_note(&outcome.stopped, args)));
    notes
}

/// The verdict, the summary, the comparisons and the round-trip model,
/// each under its heading when there is one, then the heading of the full
/// table.
fn analysis_note(cells: &[CellResult], verdict: Option<&str>, short: &str) -> String {
    let mut notes = String::new();
    if let Some(v) = verdict {
        notes.push_str(&format!("\n{v}\n"));
    }
    if !short.is_empty() {
        notes.push_str(&format!("\n## Summary\n\n{INTERVALS}\n\n{short}"));
    }
    let comparisons = crate::stats::summary::comparisons_markdown(cells);
    if !comparisons.is_empty() {
        notes.push_str(&format!(
            "\n## Comparisons\n\nEvery pair of cells that differ in one setting, the faster first: the ratio of each figure, paired by round, with its 95% interval; `~` marks a tie (the interval holds 1).\n\n{comparisons}"
        ));
    }
    let model = crate::stats::model::model_markdown(cells);
    if !model.is_empty() {
        notes.push_str(&format!(
            "\n## The round-trip model\n\nEach cell at a distance against its twin on loopback (0 ms): the hold predicted is the twin's plus the round trips the server counted times the round trip added (pgbench `SELECT 1` through the hop, less straight); `on the wire` are the round trips the hop counted per request (a client chunk after a server chunk), `implied by the hold` the hold's growth over the added round trip. The p50 predicted adds the same to the twin's p50, which holds for one client; with more clients than connections the queue adds to it.\n\n{model}"
        ));
    }
    notes.push_str("\n## Every figure\n");
    notes
}

/// How the summary's intervals are made, said above it.
const INTERVALS: &str = "Each figure is the mean of the rounds with its 95% interval in brackets (Student's t over the rounds); the share of pgbench pairs each round with the pgbench run beside it. Strategies that share a letter in `group` are not told apart (every pair called by a paired t test on the rounds, Holm-adjusted at a family-wise 5%); a run of one round has no groups (`-`).";

/// How many rounds ran and why no more: one line per point, or one for
/// the grid when the fleets alternated.
fn stopping_note(stopped: &[(String, Stopped)], args: &MatrixArgs) -> String {
    let within = args.until_within;
    let budget = within.map(|_| args.budget);
    match stopped {
        [(_, one)] => format!("Rounds: {}", one.describe(within, budget)),
        many => {
            let mut out = String::from("Rounds, per point of the grid:\n");
            for (name, s) in many {
                out.push_str(&format!("- {name}: {}\n", s.describe(within, budget)));
            }
            out
        }
    }
}

/// `5%` or `0.05` as a share; more than 0 and under 1.
fn parse_share(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let v = match t.strip_suffix('%') {
        Some(p) => p.trim().parse::<f64>().map(|v| v / 100.0),
        None => t.parse::<f64>(),
    }
    .map_err(|_| format!("{s:?}: expected a share such as 5% or 0.05"))?;
    if v > 0.0 && v < 1.0 {
        Ok(v)
    } else {
        Err(format!("{s:?}: a share must be above 0 and below 100%"))
    }
}

/// What the run will do and about how long it will take, said before it
/// starts: cells × rounds × cell length, a warm-up and a server start per
/// fleet, and pgbench on each strategy's SQL when asked.
fn plan(args: &MatrixArgs) -> String {
    let strategies = args.strategies.len().max(1);
    let points = args.scenarios.len().max(1)
        * args.members.len().max(1)
        * args.vus.len().max(1)
        * args.publish_modes.len().max(1);
    let distances = args
        .db_rtts
        .as_deref()
        .map_or(1, |l| l.split(',').filter(|d| !d.trim().is_empty()).count())
        .max(1);
    let fleets = args.variants.len().max(1) * args.pool_sizes.len().max(1) * distances;
    let rounds = args.rounds.max(1);
    let runs = if args.mix_strategies { 1 } else { strategies };
    let measured = args.duration * (points * runs * rounds * fleets) as u32;
    // A fleet starts once, or once a round when several alternate.
    let starts = if fleets > 1 { fleets * rounds } else { 1 };
    let setup = (args.warmup + Duration::from_secs(3)) * starts as u32;
    // pgbench beside each named strategy's cell, every round.
    let named = args
        .strategies
        .iter()
        .filter(|s| s.named().is_some())
        .count();
    let baseline = if args.baseline {
        args.duration * (named * points * rounds * fleets) as u32
    } else {
        Duration::ZERO
    };
    let total = measured + setup + baseline;
    format!(
        "{}: {} cell(s) × {} round(s){} × {} each, {starts} server start(s) with a {} warm-up{}: about {}",
        args.name,
        points * strategies * fleets,
        rounds,
        match args.until_within {
            Some(w) => format!(
                " (more, up to {} or {}, until every ratio is within ±{:.1}%)",
                args.max_rounds,
                humantime::format_duration(args.budget),
                100.0 * w
            ),
            None => String::new(),
        },
        humantime::format_duration(args.duration),
        humantime::format_duration(args.warmup),
        if args.baseline {
            ", each beside pgbench on its SQL"
        } else {
            ""
        },
        minutes(total)
    )
}

fn minutes(d: Duration) -> String {
    let secs = d.as_secs();
    if secs < 90 {
        format!("{secs} s")
    } else {
        format!("{:.1} min", secs as f64 / 60.0)
    }
}

/// What the OTLP sink received from each variant's servers.
fn sink_markdown(base_url: &str, variants: &[ServerVariant], counts: &[SinkCounts]) -> String {
    let mut out = format!(
        "OTLP sink at {base_url} (HTTP/protobuf), what each variant's servers exported to it:\n\n\
         | variant | export requests | spans | KiB | not OTLP protobuf |\n|---|---|---|---|---|\n"
    );
    for (v, c) in variants.iter().zip(counts) {
        out.push_str(&format!(
            "| {} | {} | {} | {:.0} | {} |\n",
            v.name,
            c.requests,
            c.spans,
            c.bytes as f64 / 1024.0,
            c.undecoded
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sink_table_has_a_row_per_variant_with_its_counts() {
        let variants = vec![
            "off".parse::<ServerVariant>().unwrap(),
            "all:OTEL_EXPORTER_OTLP_ENDPOINT=sink".parse().unwrap(),
        ];
        let counts = [
            SinkCounts::default(),
            SinkCounts {
                requests: 12,
                bytes: 10_240,
                spans: 3_456,
                undecoded: 1,
            },
        ];
        let md = sink_markdown("http://127.0.0.1:4318", &variants, &counts);
        assert!(md.contains("| off | 0 | 0 | 0 | 0 |"), "{md}");
        assert!(md.contains("| all | 12 | 3456 | 10 | 1 |"), "{md}");
    }
}
