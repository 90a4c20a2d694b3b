//! One row per experiment cell, and the files a run leaves behind:
//! `results.csv`, `results.md`, and the charts.

use std::fmt::Write as _;
use std::path::Path;

use crate::error::LoadError;
use crate::load::runner::VariantOutcome;
use crate::load::traces::{SlowestTraces, trace_id_hex};
use crate::observe::sampler::ServerStats;
use crate::stats::thresholds::Figures;

/// One cell of an experiment: what was asked and what it got. Its fields
/// are the columns of `results.csv`, which [`read_csv`] reads back.
#[derive(Debug, Clone, Default, serde::Deserialize)]
#[serde(default)]
pub struct CellResult {
    /// Server variant (`-`: the servers as they are).
    pub server: String,
    /// Insert strategy (`-` when the server's default was used).
    pub strategy: String,
    /// Publish mode (`-` when the server's default was used).
    pub publish_mode: String,
    /// Scenario name.
    pub scenario: String,
    /// Members per created chat.
    pub members: usize,
    /// Virtual users (or the open model's in-flight cap).
    pub vus: usize,
    /// Servers the load was spread over.
    pub servers: usize,
    /// Pool size of each server (0: unknown, external servers).
    pub pool_size: u32,
    /// Concurrent requests per server (VUs / servers).
    pub concurrency_per_server: f64,
    /// Completed requests per second.
    pub throughput_rps: f64,
    /// Median latency, ms.
    pub p50_ms: f64,
    /// p95 latency, ms.
    pub p95_ms: f64,
    /// p99 latency, ms.
    pub p99_ms: f64,
    /// Slowest request, ms.
    pub max_ms: f64,
    /// Requests completed.
    pub requests: u64,
    /// Failed requests.
    pub errors: u64,
    /// Failed requests by status, e.g. `503:12 0:1`.
    pub errors_by_status: String,
    /// Open-model arrivals dropped at the in-flight cap.
    pub dropped: u64,
    /// Peak used connections on one server.
    pub used_max: f64,
    /// Mean used connections per server.
    pub used_mean: f64,
    /// Peak pending requests on one server.
    pub pending_max: f64,
    /// Connection use time: mean, p95 and max (bucket bound), ms.
    pub use_time_mean_ms: f64,
    /// p95 connection use time, ms.
    pub use_time_p95_ms: f64,
    /// Max connection use time (bucket bound), ms.
    pub use_time_max_ms: f64,
    /// p95 wait for a connection, ms.
    pub wait_time_p95_ms: f64,
    /// Checkouts that timed out.
    pub pool_timeouts: f64,
    /// Rows inserted per second: createChat's, and sends' inbox rows.
    pub rows_per_s: f64,
    /// INSERT statements of createChat per second.
    pub inserts_per_s: f64,
    /// Highest server RSS, MiB.
    pub rss_max_mb: f64,
    /// Server CPU, percent of one core (all servers).
    pub cpu_percent: f64,
    /// pgbench's transactions per second for the same SQL (0: not run).
    pub pgbench_tps: f64,
    /// throughput_rps / pgbench_tps.
    pub pgbench_ratio: f64,
    /// pgbench's tps on the seed's SQL (batch's three-INSERT transaction)
    /// at the cell's database concurrency.
    pub pgbench_seed_tps: f64,
    /// throughput_rps / pgbench_seed_tps.
    pub pgbench_seed_ratio: f64,
    /// Round trips to PostgreSQL of one committed createChat (0: none in
    /// the cell).
    pub round_trips: f64,
    /// The servers' CPU time per answered request, microseconds.
    pub cpu_us_per_request: f64,
    /// The servers' threads' context switches (voluntary and involuntary)
    /// per answered request.
    pub switches_per_request: f64,
    /// Of those, the voluntary ones (a thread that waits: a futex, a
    /// socket, a timer) per answered request.
    pub voluntary_switches_per_request: f64,
    /// Checkouts that waited in their worker's slice while another slice
    /// had a free connection, per answered request (`per_worker` layout).
    pub imbalanced_wait_share: f64,
    /// WAL bytes the cluster wrote per answered request (0: not measured).
    pub wal_bytes_per_request: f64,
    /// The slowest requests sent with a `traceparent` (`results.md` only).
    #[serde(skip)]
    pub slowest_traces: SlowestTraces,
    /// The round-trip time a delay hop added between the servers (and
    /// pgbench) and PostgreSQL, ms (0: straight, over loopback).
    pub db_rtt_ms: f64,
    /// The round trip to PostgreSQL the run measured (pgbench `SELECT 1`,
    /// one client, through the hop when there was one; in a grid, the mean
    /// of the calibrations of every fleet at that distance), ms.
    pub db_round_trip_ms: f64,
    /// Round trips on the wire per answered request, counted by the hop (a
    /// client chunk after a server chunk); 0: no hop to count them.
    pub wire_round_trips: f64,
    /// The hop's CPU per answered request, µs.
    pub hop_cpu_us_per_request: f64,
    /// How late the hop delivered a chunk past its deadline, on the mean,
    /// µs: its own precision under the cell's load.
    pub hop_late_us: f64,
    /// Rounds the cell ran.
    #[serde(rename = "rounds")]
    pub rounds_run: usize,
    /// The 95% interval of the throughput over the rounds (0 and 0: fewer
    /// than two rounds).
    pub throughput_lo: f64,
    /// Its upper end.
    pub throughput_hi: f64,
    /// The 95% interval of the share of pgbench, paired round by round.
    pub pgbench_ratio_lo: f64,
    /// Its upper end.
    pub pgbench_ratio_hi: f64,
    /// Each round's figures beside its yardstick's, in the order they ran
    /// (`results.md` and `rounds.csv`).
    #[serde(skip)]
    pub rounds: Vec<crate::stats::rounds::RoundFigures>,
    /// Each operation's figures, in a cell whose scenario mixes them
    /// (`results.md` only).
    #[serde(skip)]
    pub by_op: Vec<OpFigures>,
}

/// One operation's client-side figures within a cell that mixes them.
#[derive(Debug, Clone, Default)]
pub struct OpFigures {
    /// The operation (`send`, `my-chats`, ...).
    pub op: &'static str,
    /// Requests completed.
    pub requests: u64,
    /// Completed requests per second.
    pub throughput_rps: f64,
    /// Median latency, ms.
    pub p50_ms: f64,
    /// p95 latency, ms.
    pub p95_ms: f64,
    /// p99 latency, ms.
    pub p99_ms: f64,
}

impl CellResult {
    /// Fills the client-side figures from a run's outcome.
    pub fn set_client(&mut self, v: &VariantOutcome, elapsed_secs: f64, dropped: u64) {
        self.requests = v.requests();
        self.errors = v.error_count();
        self.errors_by_status = v
            .errors
            .iter()
            .map(|(s, n)| format!("{s}:{n}"))
            .collect::<Vec<_>>()
            .join(" ");
        self.throughput_rps = v.requests() as f64 / elapsed_secs.max(1e-9);
        self.p50_ms = v.latencies.quantile_ms(0.5);
        self.p95_ms = v.latencies.quantile_ms(0.95);
        self.p99_ms = v.latencies.quantile_ms(0.99);
        self.max_ms = v.latencies.max_ms();
        self.dropped = dropped;
        self.slowest_traces = v.slowest.clone();
        self.by_op = if v.by_op.len() > 1 {
            v.by_op
                .iter()
                .map(|(&op, l)| OpFigures {
                    op,
                    requests: l.count(),
                    throughput_rps: l.count() as f64 / elapsed_secs.max(1e-9),
                    p50_ms: l.quantile_ms(0.5),
                    p95_ms: l.quantile_ms(0.95),
                    p99_ms: l.quantile_ms(0.99),
                })
                .collect()
        } else {
            Vec::new()
        };
    }

    /// Fills the server-side figures.
    pub fn set_server(
        &mut self,
        s: &ServerStats,
        strategy_hold: Option<&crate::observe::prom::HistogramSnapshot>,
    ) {
        // createChat's round trips, of this cell's strategy where the run
        // mixed them, else of all of them.
        let (trips, chats) = match s.round_trips_by_strategy.get(&self.strategy) {
            Some(&pair) => pair,
            None => s
                .round_trips_by_strategy
                .values()
                .fold((0.0, 0.0), |a, b| (a.0 + b.0, a.1 + b.1)),
        };
        self.round_trips = if chats > 0.0 { trips / chats } else { 0.0 };
        // The servers' CPU over the requests answered: in a run that mixed
        // strategies, shared by all of them.
        let per_request = |x: f64| {
            if self.requests > 0 {
                x / self.requests as f64
            } else {
                0.0
            }
        };
        self.cpu_us_per_request = per_request(s.cpu_seconds * 1e6);
        self.wal_bytes_per_request = per_request(s.wal_bytes);
        self.switches_per_request = per_request(s.switches.total() as f64);
        self.voluntary_switches_per_request = per_request(s.switches.voluntary as f64);
        self.imbalanced_wait_share = per_request(s.imbalanced_waits);
        self.used_max = s.used_max;
        self.used_mean = s.used_mean;
        self.pending_max = s.pending_max;
        let use_time = strategy_hold.unwrap_or(&s.use_time);
        self.use_time_mean_ms = use_time.mean() * 1000.0;
        self.use_time_p95_ms = use_time.quantile(0.95) * 1000.0;
        self.use_time_max_ms = use_time.max_bound() * 1000.0;
        self.wait_time_p95_ms = s.wait_time.quantile(0.95) * 1000.0;
        self.pool_timeouts = s.timeouts;
        self.rows_per_s = s.rows_per_s;
        self.inserts_per_s = s.inserts_per_s;
        self.rss_max_mb = s.rss_max_mib;
        self.cpu_percent = s.cpu_percent;
    }

    /// The interval columns, from the rounds: throughput, and the share of
    /// pgbench (whose figure becomes the geometric mean of the rounds'
    /// paired shares).
    pub fn set_intervals(&mut self) {
        use crate::stats::rounds::Figure;
        self.rounds_run = self.rounds.len();
        if let Some(i) = self.interval(Figure::Throughput) {
            (self.throughput_lo, self.throughput_hi) = (i.lo, i.hi);
        }
        if let Some(i) = self.of_pgbench() {
            self.pgbench_ratio = i.estimate;
            (self.pgbench_ratio_lo, self.pgbench_ratio_hi) = (i.lo, i.hi);
        }
    }

    /// The figures thresholds check.
    pub fn figures(&self) -> Figures {
        Figures {
            p50_ms: self.p50_ms,
            p95_ms: self.p95_ms,
            p99_ms: self.p99_ms,
            max_ms: self.max_ms,
            error_rate: if self.requests > 0 {
                self.errors as f64 / self.requests as f64
            } else {
                0.0
            },
            rps: self.throughput_rps,
        }
    }
}

/// The cells of a `results.csv` written by [`write`] (columns it lacks,
/// from an older run, are left at zero).
pub fn read_csv(path: &Path) -> Result<Vec<CellResult>, LoadError> {
    let mut reader = csv::Reader::from_path(path)
        .map_err(|e| LoadError::Usage(format!("{}: {e}", path.display())))?;
    reader
        .deserialize()
        .collect::<Result<Vec<CellResult>, _>>()
        .map_err(|e| LoadError::Usage(format!("{}: {e}", path.display())))
}

/// The columns of `results.csv`, in order.
const CSV_HEADER: [&str; 50] = [
    "server",
    "strategy",
    "publish_mode",
    "scenario",
    "members",
    "vus",
    "servers",
    "pool_size",
    "concurrency_per_server",
    "throughput_rps",
    "p50_ms",
    "p95_ms",
    "p99_ms",
    "max_ms",
    "requests",
    "errors",
    "errors_by_status",
    "dropped",
    "used_max",
    "used_mean",
    "pending_max",
    "use_time_mean_ms",
    "use_time_p95_ms",
    "use_time_max_ms",
    "wait_time_p95_ms",
    "pool_timeouts",
    "rows_per_s",
    "inserts_per_s",
    "rss_max_mb",
    "cpu_percent",
    "pgbench_tps",
    "pgbench_ratio",
    "round_trips",
    "cpu_us_per_request",
    "pgbench_seed_tps",
    "pgbench_seed_ratio",
    "switches_per_request",
    "voluntary_switches_per_request",
    "imbalanced_wait_share",
    "wal_bytes_per_request",
    "rounds",
    "throughput_lo",
    "throughput_hi",
    "pgbench_ratio_lo",
    "pgbench_ratio_hi",
    "db_rtt_ms",
    "db_round_trip_ms",
    "wire_round_trips",
    "hop_cpu_us_per_request",
    "hop_late_us",
];

/// The CSV file: a header and one row per cell.
pub fn to_csv(cells: &[CellResult]) -> String {
    let mut out = CSV_HEADER.join(",");
    out.push('\n');
    for c in cells {
        out.push_str(&csv_row(c));
    }
    out
}

/// One cell's line of `results.csv`, in [`CSV_HEADER`]'s order.
fn csv_row(c: &CellResult) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{},{},{},{},{},{},{},{},{:.2},{:.1},{:.2},{:.2},{:.2},{:.2},{},{},{},{},{},{:.2},{},{:.3},{:.3},{:.3},{:.3},{},{:.1},{:.1},{:.1},{:.1},{:.1},{:.3},{:.1},{:.0},{:.1},{:.3},{:.2},{:.2},{:.4},{:.0},{},{:.1},{:.1},{:.3},{:.3},{:.3},{:.3},{:.2},{:.1},{:.1}",
        c.server,
        c.strategy,
        c.publish_mode,
        c.scenario,
        c.members,
        c.vus,
        c.servers,
        c.pool_size,
        c.concurrency_per_server,
        c.throughput_rps,
        c.p50_ms,
        c.p95_ms,
        c.p99_ms,
        c.max_ms,
        c.requests,
        c.errors,
        c.errors_by_status,
        c.dropped,
        c.used_max,
        c.used_mean,
        c.pending_max,
        c.use_time_mean_ms,
        c.use_time_p95_ms,
        c.use_time_max_ms,
        c.wait_time_p95_ms,
        c.pool_timeouts,
        c.rows_per_s,
        c.inserts_per_s,
        c.rss_max_mb,
        c.cpu_percent,
        c.pgbench_tps,
        c.pgbench_ratio,
        c.round_trips,
        c.cpu_us_per_request,
        c.pgbench_seed_tps,
        c.pgbench_seed_ratio,
        c.switches_per_request,
        c.voluntary_switches_per_request,
        c.imbalanced_wait_share,
        c.wal_bytes_per_request,
        c.rounds_run,
        c.throughput_lo,
        c.throughput_hi,
        c.pgbench_ratio_lo,
        c.pgbench_ratio_hi,
        c.db_rtt_ms,
        c.db_round_trip_ms,
        c.wire_round_trips,
        c.hop_cpu_us_per_request,
        c.hop_late_us
    );
    out
}

/// The optional column groups of the Markdown table: each shown when some
/// cell has figures for it.
#[derive(Debug, Clone, Copy)]
struct Optional {
    /// pgbench's tps and the ratios to it.
    baseline: bool,
    /// WAL bytes per request.
    wal: bool,
    /// The delay hop's figures.
    hop: bool,
}

/// The Markdown table, with the seed 001 write-up's columns first.
pub fn to_markdown(cells: &[CellResult]) -> String {
    let with = Optional {
        baseline: cells.iter().any(|c| c.pgbench_tps > 0.0),
        wal: cells.iter().any(|c| c.wal_bytes_per_request > 0.0),
        hop: cells.iter().any(|c| c.db_rtt_ms > 0.0),
    };
    let mut out = markdown_header(with);
    for c in cells {
        markdown_row(&mut out, c, with);
        out.push('\n');
    }
    out
}

/// The Markdown table's header and its separator line.
fn markdown_header(with: Optional) -> String {
    let mut out = String::from(
        "| server | pool | scenario | strategy | mode | members | VUs | req/server | active (max) | pending (max) | throughput (req/s) | p95 ms | median ms | p99 ms | use time mean / p95 ms | round trips | INSERTs/s | rows/s | errors | RSS MiB | CPU % | CPU µs/req | switches/req | imbalanced waits % |",
    );
    if with.baseline {
        out.push_str(" pgbench tps | ratio | pgbench tps, seed's SQL | ratio to it |");
    }
    if with.wal {
        out.push_str(" WAL B/req |");
    }
    if with.hop {
        out.push_str(
            " DB RTT ms | DB round trip ms | wire round trips | hop CPU µs/req | hop late µs |",
        );
    }
    out.push('\n');
    out.push_str(
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    );
    if with.baseline {
        out.push_str("---|---|---|---|");
    }
    if with.wal {
        out.push_str("---|");
    }
    if with.hop {
        out.push_str("---|---|---|---|---|");
    }
    out.push('\n');
    out
}

/// A count of round trips to one decimal, or `-` where none was counted.
fn one_decimal_or_dash(x: f64) -> String {
    if x > 0.0 {
        format!("{x:.1}")
    } else {
        "-".to_owned()
    }
}

/// One cell's line of the Markdown table, without its newline.
fn markdown_row(out: &mut String, c: &CellResult, with: Optional) {
    let _ = write!(
        out,
        "| {} | {} | {} | {} | {} | {} | {} | {:.0} | {:.0} | {:.0} | {:.0} | {:.1} | {:.1} | {:.1} | {:.2} / {:.2} | {} | {:.0} | {:.0} | {} | {:.1} | {:.0} | {:.0} | {:.1} | {:.1} |",
        c.server,
        if c.pool_size > 0 {
            c.pool_size.to_string()
        } else {
            "-".to_owned()
        },
        c.scenario,
        c.strategy,
        c.publish_mode,
        c.members,
        c.vus,
        c.concurrency_per_server,
        c.used_max,
        c.pending_max,
        c.throughput_rps,
        c.p95_ms,
        c.p50_ms,
        c.p99_ms,
        c.use_time_mean_ms,
        c.use_time_p95_ms,
        one_decimal_or_dash(c.round_trips),
        c.inserts_per_s,
        c.rows_per_s,
        c.errors,
        c.rss_max_mb,
        c.cpu_percent,
        c.cpu_us_per_request,
        c.switches_per_request,
        100.0 * c.imbalanced_wait_share
    );
    if with.baseline {
        if c.pgbench_tps > 0.0 {
            let _ = write!(
                out,
                " {:.0} | {:.0}% | {:.0} | {:.0}% |",
                c.pgbench_tps,
                100.0 * c.pgbench_ratio,
                c.pgbench_seed_tps,
                100.0 * c.pgbench_seed_ratio
            );
        } else {
            out.push_str(" | | | |");
        }
    }
    if with.wal {
        let _ = write!(out, " {:.0} |", c.wal_bytes_per_request);
    }
    if with.hop {
        let _ = write!(
            out,
            " {} | {:.3} | {} | {:.0} | {:.0} |",
            crate::servers::reach::show_ms(c.db_rtt_ms),
            c.db_round_trip_ms,
            one_decimal_or_dash(c.wire_round_trips),
            c.hop_cpu_us_per_request,
            c.hop_late_us
        );
    }
}

/// Per cell, the slowest requests sent with a `traceparent`: latency,
/// operation, status and the trace id to look up. Empty when no request
/// was traced.
pub fn traces_markdown(cells: &[CellResult]) -> String {
    if cells.iter().all(|c| c.slowest_traces.traced() == 0) {
        return String::new();
    }
    let mut out = String::from(
        "## Slowest traced requests\n\nPer cell, the slowest of the requests sent with a sampled `traceparent` (`--trace-fraction`): search the trace backend for these ids.\n",
    );
    for c in cells.iter().filter(|c| c.slowest_traces.traced() > 0) {
        let _ = write!(
            out,
            "\n**{}{}, strategy {}, mode {}, {} members, {} VUs**: {} of {} requests traced (p99 {:.1} ms)\n\n| latency ms | operation | status | trace id |\n|---|---|---|---|\n",
            // `run` has no server variant.
            if c.server.is_empty() {
                String::new()
            } else {
                format!("server {}, ", c.server)
            },
            c.scenario,
            c.strategy,
            c.publish_mode,
            c.members,
            c.vus,
            c.slowest_traces.traced(),
            c.requests,
            c.p99_ms
        );
        for r in c.slowest_traces.slowest() {
            let _ = writeln!(
                out,
                "| {:.1} | {} | {} | `{}` |",
                r.micros as f64 / 1000.0,
                r.op,
                r.status,
                trace_id_hex(r.trace_id)
            );
        }
    }
    out
}

/// Per cell that mixes operations, each operation's requests, rate and
/// latencies. Empty when no cell mixes them.
pub fn ops_markdown(cells: &[CellResult]) -> String {
    if cells.iter().all(|c| c.by_op.is_empty()) {
        return String::new();
    }
    let mut out = String::from(
        "## By operation\n\nEach operation of a cell that mixes them, on its own (latency from its intended send time, as for the cell).\n\n\
         | server | strategy | scenario | members | operation | requests | req/s | median ms | p95 ms | p99 ms |\n\
         |---|---|---|---|---|---|---|---|---|---|\n",
    );
    for c in cells {
        for o in &c.by_op {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} | {:.0} | {:.1} | {:.1} | {:.1} |",
                if c.server.is_empty() { "-" } else { &c.server },
                c.strategy,
                c.scenario,
                c.members,
                o.op,
                o.requests,
                o.throughput_rps,
                o.p50_ms,
                o.p95_ms,
                o.p99_ms
            );
        }
    }
    out
}

/// Every round of every cell, one row each: what `rounds_markdown` shows,
/// for a reader who wants to compute something else from the rounds.
pub fn rounds_csv(cells: &[CellResult], labels: &[String]) -> String {
    let mut out = String::from(
        "cell,round,rps,p95_ms,hold_ms,cpu_us,pgbench_tps,yardstick_first,load_before,load_after,steal_percent,busy_percent,other_cpu_percent\n",
    );
    for (c, label) in cells.iter().zip(labels) {
        for r in &c.rounds {
            let _ = writeln!(
                out,
                "\"{}\",{},{:.2},{:.3},{:.3},{:.1},{:.2},{},{:.2},{:.2},{:.2},{:.1},{:.1}",
                label.replace('"', "'"),
                r.round + 1,
                r.rps,
                r.p95_ms,
                r.hold_ms,
                r.cpu_us,
                r.pgbench_tps,
                r.yardstick_first,
                r.noise.load_before,
                r.noise.load_after,
                r.noise.steal_percent,
                r.noise.busy_percent,
                r.noise.other_cpu_percent
            );
        }
    }
    out
}

/// Writes `results.csv` and `results.md` (with `notes` above the table, and
/// below it each operation of a mixed cell, the rounds and the slowest
/// traced requests).
pub fn write(dir: &Path, cells: &[CellResult], notes: &str) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    std::fs::write(dir.join("results.csv"), to_csv(cells))?;
    let traces = traces_markdown(cells);
    let traces = if traces.is_empty() {
        traces
    } else {
        format!("\n{traces}")
    };
    let labels = crate::stats::summary::labels(cells);
    let rounds = crate::stats::rounds::rounds_markdown(cells, &labels);
    let rounds = if rounds.is_empty() {
        rounds
    } else {
        std::fs::write(dir.join("rounds.csv"), rounds_csv(cells, &labels))?;
        format!(
            "\n## Per round\n\nEach round's run of each cell beside its yardstick (pgbench on the same SQL, right before or after it), and what else the machine did meanwhile (other CPU: processes that are not the experiment's, in percent of one core), in the order the rounds ran; also in `rounds.csv`.\n\n{rounds}"
        )
    };
    let ops = ops_markdown(cells);
    let ops = if ops.is_empty() {
        ops
    } else {
        format!("\n{ops}")
    };
    std::fs::write(
        dir.join("results.md"),
        format!("{notes}\n{}{ops}{rounds}{traces}", to_markdown(cells)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::traces::TracedRequest;

    #[test]
    fn results_csv_reads_back_as_the_cells_it_was_written_from() {
        let mut a = cell("batch", 843.0);
        a.members = 50;
        a.vus = 30;
        a.errors = 3;
        a.errors_by_status = "503:3".into();
        a.scenario = "import:1000:1000:4".into();
        let path = std::env::temp_dir().join(format!("chatlab-csv-{}.csv", std::process::id()));
        std::fs::write(&path, to_csv(&[a.clone(), cell("per_row", 172.0)])).unwrap();
        let back = read_csv(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        assert_eq!(back.len(), 2);
        assert_eq!(back[0].strategy, "batch");
        assert_eq!(back[0].throughput_rps, 843.0);
        assert_eq!((back[0].members, back[0].vus, back[0].errors), (50, 30, 3));
        assert_eq!(back[0].errors_by_status, "503:3");
        assert_eq!(back[0].scenario, "import:1000:1000:4");
        assert_eq!(back[1].strategy, "per_row");
    }

    fn cell(strategy: &str, rps: f64) -> CellResult {
        CellResult {
            strategy: strategy.into(),
            members: 50,
            vus: 30,
            throughput_rps: rps,
            ..CellResult::default()
        }
    }

    #[test]
    fn a_mixed_cell_lists_each_operation_and_a_plain_one_nothing() {
        use crate::load::runner::VariantOutcome;
        let mut mixed = VariantOutcome::default();
        for (op, micros) in [("send", 2_000), ("send", 4_000), ("my-chats", 9_000)] {
            mixed.latencies.record_micros(micros);
            mixed.by_op.entry(op).or_default().record_micros(micros);
        }
        let mut plain = VariantOutcome::default();
        plain.latencies.record_micros(1_000);
        plain.by_op.entry("send").or_default().record_micros(1_000);

        let mut a = cell("unnest", 0.0);
        a.scenario = "mix:0:1:0:1".into();
        a.set_client(&mixed, 2.0, 0);
        let mut b = cell("unnest", 0.0);
        b.set_client(&plain, 2.0, 0);
        assert!(b.by_op.is_empty());
        assert_eq!(ops_markdown(std::slice::from_ref(&b)), "");

        let md = ops_markdown(&[a, b]);
        let rows: Vec<&str> = md.lines().filter(|l| l.starts_with("| - |")).collect();
        assert_eq!(rows.len(), 2, "{md}");
        assert!(rows[0].contains("| my-chats | 1 | 0 | 9.0 |"), "{md}");
        assert!(rows[1].contains("| send | 2 | 1 | 2.0 |"), "{md}");
    }

    #[test]
    fn csv_has_the_promised_columns_and_one_row_per_cell() {
        let csv = to_csv(&[cell("batch", 100.0), cell("per_row", 40.0)]);
        let mut lines = csv.lines();
        let header: Vec<&str> = lines.next().unwrap().split(',').collect();
        for col in [
            "strategy",
            "members",
            "vus",
            "throughput_rps",
            "p50_ms",
            "p95_ms",
            "p99_ms",
            "errors",
            "used_max",
            "pending_max",
            "use_time_p95_ms",
            "rows_per_s",
            "rss_max_mb",
        ] {
            assert!(header.contains(&col), "{col}");
        }
        let rows: Vec<&str> = lines.collect();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].split(',').count(), header.len());
        assert!(rows[1].starts_with(",per_row,"));
    }

    #[test]
    fn traced_cells_list_their_slowest_trace_ids_slowest_first() {
        assert_eq!(traces_markdown(&[cell("batch", 1.0)]), "");
        let mut traced = cell("batch", 900.0);
        traced.server = "otel-100pct".into();
        traced.scenario = "create-chat".into();
        for (micros, id) in [(12_500, 0xabc_u128), (140_000, 0xdef)] {
            traced.slowest_traces.offer(TracedRequest {
                micros,
                trace_id: id,
                op: "create",
                status: 201,
            });
        }
        let mut unnamed = traced.clone();
        unnamed.server = String::new();
        assert!(traces_markdown(&[unnamed]).contains("\n**create-chat, strategy batch"));
        let md = traces_markdown(&[cell("per_row", 1.0), traced]);
        assert!(
            md.contains("**server otel-100pct, create-chat, strategy batch"),
            "{md}"
        );
        assert!(md.contains("2 of 0 requests traced"), "{md}");
        assert!(!md.contains("per_row"), "{md}");
        let slow = md
            .find("| 140.0 | create | 201 | `00000000000000000000000000000def` |")
            .unwrap();
        let fast = md
            .find("| 12.5 | create | 201 | `00000000000000000000000000000abc` |")
            .unwrap();
        assert!(slow < fast);
    }

    #[test]
    fn markdown_adds_baseline_columns_only_when_measured() {
        assert!(!to_markdown(&[cell("batch", 1.0)]).contains("pgbench"));
        let mut c = cell("batch", 900.0);
        c.pgbench_tps = 1000.0;
        c.pgbench_ratio = 0.9;
        let md = to_markdown(&[c]);
        assert!(md.contains("pgbench") && md.contains("| 1000 | 90% |"));
    }
}
