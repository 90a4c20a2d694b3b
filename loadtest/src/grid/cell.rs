//! A cell's runs as they come in, each round kept apart, and the
//! [`CellResult`] they make.

use chatlab_domain::InsertStrategy;

use crate::load::choice::Choice;
use crate::load::runner::{RunOutcome, VariantOutcome};
use crate::observe::noise::Noise;
use crate::observe::prom::HistogramSnapshot;
use crate::observe::sampler::ServerStats;
use crate::report::results::CellResult;
use crate::servers::reach::Reach;
use crate::stats::rounds::RoundFigures;

/// What crossed a delay hop during one run: its counters' change and its
/// CPU (nothing without a hop).
#[derive(Debug, Clone, Copy, Default)]
pub struct Wire {
    /// The hop's counters (`None`: no hop).
    stats: Option<chatlab_delay::Stats>,
    /// The hop's CPU seconds.
    cpu_seconds: f64,
    /// Round trips per second the servers' background work (the outbox
    /// relay's polls, the marker flusher, the key sweeper) makes when no
    /// request runs, measured on the idle fleet: taken off a run's count.
    pub background_per_s: f64,
}

impl Wire {
    /// The hop's counters and CPU now.
    pub async fn read(reach: Option<&Reach>) -> Self {
        match reach {
            Some(r) => Self {
                stats: r.wire().await,
                cpu_seconds: r.hop_cpu_seconds(),
                background_per_s: 0.0,
            },
            None => Self::default(),
        }
    }

    /// What changed since `earlier`.
    pub fn since(&self, earlier: &Self) -> Self {
        Self {
            stats: match (self.stats, earlier.stats) {
                (Some(now), Some(then)) => Some(now.since(&then)),
                _ => None,
            },
            cpu_seconds: (self.cpu_seconds - earlier.cpu_seconds).max(0.0),
            background_per_s: self.background_per_s,
        }
    }
}

/// One round of a cell as the grid hands it over: the run it was part of
/// (several strategies share a run when they are mixed per request), which
/// of the run's strategies it is, and its yardstick.
pub struct Measured<'a> {
    /// The run and the servers' stats over it.
    pub run: &'a (RunOutcome, ServerStats),
    /// The strategy's index among the run's.
    pub index: usize,
    /// The strategy.
    pub strategy: Choice<InsertStrategy>,
    /// The round.
    pub round: usize,
    /// pgbench's tps on the strategy's SQL beside it (`None`: no yardstick).
    pub pgbench_tps: Option<f64>,
    /// Whether pgbench ran first.
    pub yardstick_first: bool,
    /// What else the machine did meanwhile.
    pub noise: Noise,
    /// What crossed the delay hop during the run.
    pub wire: Wire,
}

/// A cell's runs so far.
#[derive(Default)]
pub struct Accumulated {
    client: VariantOutcome,
    elapsed: f64,
    dropped: u64,
    stats: Vec<ServerStats>,
    hold: HistogramSnapshot,
    /// The servers' CPU seconds of this cell's requests: a run's CPU, split
    /// by the share of its requests that were this cell's (runs that mix
    /// strategies share one CPU figure).
    cpu_seconds: f64,
    /// Its share of the runs' context switches, split the same way.
    switches: crate::observe::procstat::Switches,
    /// Its share of the runs' imbalanced waits, split the same way.
    imbalanced_waits: f64,
    /// Its share of the WAL the runs wrote, split the same way.
    wal_bytes: f64,
    /// Its share of the round trips on the wire (the hop's flights).
    flights: f64,
    /// Its share of the hop's CPU seconds.
    hop_cpu_seconds: f64,
    /// The hop's deliveries and their lateness, µs, over the runs.
    hop_delivered: u64,
    hop_late_us: u64,
    /// Whether every run had a hop to count flights.
    wire_counted: bool,
    /// Each round's figures.
    pub rounds: Vec<RoundFigures>,
}

/// What a cell is, for its row.
pub struct Identity {
    /// Server variant's name.
    pub server: String,
    /// Strategy as sent.
    pub strategy: String,
    /// Publish mode as sent.
    pub publish_mode: String,
    /// Scenario's name.
    pub scenario: String,
    /// Members per chat.
    pub members: usize,
    /// VUs.
    pub vus: usize,
    /// Servers it ran on.
    pub servers: usize,
    /// Pool size asked for (0: the server's default).
    pub pool_size: u32,
    /// Rows one request carries, for import scenarios.
    pub rows_per_request: Option<usize>,
    /// The round-trip time a hop added (0: straight), ms.
    pub db_rtt_ms: f64,
    /// The round trip the calibrations at its distance measured, their
    /// mean, ms.
    pub db_round_trip_ms: f64,
}

impl Accumulated {
    /// Adds one round of the cell.
    pub fn add(&mut self, m: Measured<'_>) {
        let (outcome, stats) = m.run;
        let elapsed = outcome.elapsed.as_secs_f64().max(1e-9);
        let hold = stats.hold_by_strategy.get(&m.strategy.to_string());
        let mut round = RoundFigures {
            round: m.round,
            pgbench_tps: m.pgbench_tps.unwrap_or(0.0),
            yardstick_first: m.yardstick_first,
            noise: m.noise,
            hold_ms: hold.unwrap_or(&stats.use_time).mean() * 1000.0,
            ..RoundFigures::default()
        };
        if let Some(v) = outcome.variants.get(m.index) {
            self.client.merge(v);
            round.rps = v.requests() as f64 / elapsed;
            round.p95_ms = v.latencies.quantile_ms(0.95);
            let all = outcome.total().requests();
            if all > 0 {
                let share = v.requests() as f64 / all as f64;
                self.cpu_seconds += stats.cpu_seconds * share;
                self.switches += stats.switches.share(share);
                self.imbalanced_waits += stats.imbalanced_waits * share;
                self.wal_bytes += stats.wal_bytes * share;
                if let Some(w) = m.wire.stats {
                    let background = m.wire.background_per_s * elapsed;
                    self.flights += (w.flights as f64 - background).max(0.0) * share;
                    self.hop_delivered += w.delivered;
                    self.hop_late_us += w.late_us_total;
                }
                self.hop_cpu_seconds += m.wire.cpu_seconds * share;
                if v.requests() > 0 {
                    round.cpu_us = stats.cpu_seconds * share * 1e6 / v.requests() as f64;
                }
            }
        }
        self.wire_counted = m.wire.stats.is_some() && (self.rounds.is_empty() || self.wire_counted);
        self.rounds.push(round);
        self.elapsed += elapsed;
        self.dropped += outcome.dropped;
        if let Some(h) = hold {
            self.hold = self.hold.add(h);
        }
        self.stats.push(stats.clone());
    }

    /// The cell's figures.
    pub fn into_cell(self, id: Identity) -> CellResult {
        let mut cell = CellResult {
            server: id.server,
            strategy: id.strategy,
            publish_mode: id.publish_mode,
            scenario: id.scenario,
            members: id.members,
            vus: id.vus,
            servers: id.servers,
            pool_size: id.pool_size,
            concurrency_per_server: id.vus as f64 / id.servers.max(1) as f64,
            db_rtt_ms: id.db_rtt_ms,
            db_round_trip_ms: id.db_round_trip_ms,
            ..CellResult::default()
        };
        let runs = self.stats.len().max(1) as f64;
        let elapsed_per_run = self.elapsed / runs;
        // Throughput: requests of this strategy over the wall time of its
        // runs (in a mixed run each strategy had the whole run).
        cell.set_client(
            &self.client,
            self.elapsed.max(elapsed_per_run),
            self.dropped,
        );
        let mut stats = merge_stats(&self.stats);
        // This cell's share of the runs' CPU, switches and waits, not
        // every strategy's.
        stats.cpu_seconds = self.cpu_seconds;
        stats.switches = self.switches;
        stats.imbalanced_waits = self.imbalanced_waits;
        stats.wal_bytes = self.wal_bytes;
        let hold = (self.hold.count > 0.0).then_some(&self.hold);
        cell.set_server(&stats, hold);
        if let Some(rows) = id.rows_per_request {
            // Import jobs: the rows they carried, not createChat's counter.
            cell.rows_per_s = cell.throughput_rps * rows as f64;
        }
        let yardsticks: Vec<f64> = self
            .rounds
            .iter()
            .map(|r| r.pgbench_tps)
            .filter(|&t| t > 0.0)
            .collect();
        if !yardsticks.is_empty() {
            cell.pgbench_tps = yardsticks.iter().sum::<f64>() / yardsticks.len() as f64;
            cell.pgbench_ratio = cell.throughput_rps / cell.pgbench_tps;
        }
        if cell.requests > 0 {
            if self.wire_counted {
                cell.wire_round_trips = self.flights / cell.requests as f64;
            }
            cell.hop_cpu_us_per_request = self.hop_cpu_seconds * 1e6 / cell.requests as f64;
            if self.hop_delivered > 0 {
                cell.hop_late_us = self.hop_late_us as f64 / self.hop_delivered as f64;
            }
        }
        cell.rounds = self.rounds;
        cell.set_intervals();
        cell
    }
}

/// The seed's SQL (seed 001's three-INSERT transaction) is `batch`'s: each
/// cell's figure against it is its throughput over the tps pgbench got on
/// batch's SQL in the cell's group (same fleet and point), when batch ran.
pub fn set_seed_yardstick(cells: &mut [CellResult]) {
    let same_point = |a: &CellResult, b: &CellResult| {
        a.server == b.server
            && a.pool_size == b.pool_size
            && a.scenario == b.scenario
            && a.publish_mode == b.publish_mode
            && a.members == b.members
            && a.vus == b.vus
    };
    let seeds: Vec<Option<f64>> = cells
        .iter()
        .map(|c| {
            cells
                .iter()
                .find(|b| b.strategy == "batch" && b.pgbench_tps > 0.0 && same_point(b, c))
                .map(|b| b.pgbench_tps)
        })
        .collect();
    for (c, seed) in cells.iter_mut().zip(seeds) {
        if let (Some(tps), true) = (seed, c.pgbench_tps > 0.0) {
            c.pgbench_seed_tps = tps;
            c.pgbench_seed_ratio = c.throughput_rps / tps;
        }
    }
}

/// Merges the server stats of several runs: maxima of maxima, means of
/// rates, sums of histograms.
fn merge_stats(all: &[ServerStats]) -> ServerStats {
    let n = all.len().max(1) as f64;
    let mut out = ServerStats::default();
    for s in all {
        out.used_max = out.used_max.max(s.used_max);
        out.pending_max = out.pending_max.max(s.pending_max);
        out.rss_max_mib = out.rss_max_mib.max(s.rss_max_mib);
        out.used_mean += s.used_mean / n;
        out.rows_per_s += s.rows_per_s / n;
        out.inserts_per_s += s.inserts_per_s / n;
        out.cpu_percent += s.cpu_percent / n;
        out.timeouts += s.timeouts;
        out.imbalanced_waits += s.imbalanced_waits;
        out.switches += s.switches;
        out.use_time = out.use_time.add(&s.use_time);
        out.wait_time = out.wait_time.add(&s.wait_time);
        for (strategy, (trips, chats)) in &s.round_trips_by_strategy {
            let entry = out
                .round_trips_by_strategy
                .entry(strategy.clone())
                .or_default();
            entry.0 += trips;
            entry.1 += chats;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(strategy: &str, rps: f64, tps: f64) -> CellResult {
        CellResult {
            strategy: strategy.into(),
            members: 50,
            vus: 20,
            throughput_rps: rps,
            pgbench_tps: tps,
            ..CellResult::default()
        }
    }

    #[test]
    fn the_seed_s_sql_is_batch_s_yardstick_within_a_point() {
        let mut other_point = cell("single", 900.0, 1000.0);
        other_point.members = 20;
        let mut cells = [
            cell("batch", 800.0, 1000.0),
            cell("single", 1200.0, 1300.0),
            other_point,
            cell("per_row", 200.0, 0.0),
        ];
        set_seed_yardstick(&mut cells);
        assert_eq!(cells[0].pgbench_seed_tps, 1000.0);
        assert!((cells[1].pgbench_seed_ratio - 1.2).abs() < 1e-9);
        assert_eq!(cells[2].pgbench_seed_tps, 0.0, "no batch at 20 members");
        assert_eq!(cells[3].pgbench_seed_tps, 0.0, "no yardstick of its own");
    }
}
