//! A cell's rounds: each round's own figures beside its yardstick's (pgbench
//! on the same SQL, run right beside it), what disturbed the machine, and
//! the intervals the rounds give the cell's figures and its ratios.

use std::fmt::Write as _;

use crate::observe::noise::Noise;
use crate::report::results::CellResult;
use crate::stats::uncertainty::{self, Interval};

/// One round of one cell.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RoundFigures {
    /// Which round (0-based): the same number for every cell that ran in it.
    pub round: usize,
    /// Requests answered per second.
    pub rps: f64,
    /// p95 latency, ms.
    pub p95_ms: f64,
    /// Mean connection hold of the round's requests, ms (0: not measured).
    pub hold_ms: f64,
    /// The servers' CPU per answered request, µs.
    pub cpu_us: f64,
    /// pgbench's tps on the cell's SQL, run beside it in this round (0: no
    /// yardstick).
    pub pgbench_tps: f64,
    /// Whether pgbench ran before the cell this round (the order alternates).
    pub yardstick_first: bool,
    /// What else the machine did meanwhile.
    pub noise: Noise,
}

/// A figure a round has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Figure {
    /// Requests per second.
    Throughput,
    /// p95 latency.
    P95,
    /// Mean connection hold.
    Hold,
    /// Server CPU per request.
    Cpu,
    /// pgbench's tps on the same SQL.
    Pgbench,
}

impl Figure {
    /// Its value in `round`.
    pub fn of(self, round: &RoundFigures) -> f64 {
        match self {
            Self::Throughput => round.rps,
            Self::P95 => round.p95_ms,
            Self::Hold => round.hold_ms,
            Self::Cpu => round.cpu_us,
            Self::Pgbench => round.pgbench_tps,
        }
    }
}

impl CellResult {
    /// `figure` in each of the cell's rounds, in the order they ran.
    pub fn series(&self, figure: Figure) -> Vec<f64> {
        self.rounds.iter().map(|r| figure.of(r)).collect()
    }

    /// `figure`'s mean over the rounds and its 95% interval (`None` with
    /// one round, or where the figure was not measured).
    pub fn interval(&self, figure: Figure) -> Option<Interval> {
        let values = self.series(figure);
        if values.iter().all(|&v| v == 0.0) {
            return None;
        }
        Interval::of_mean(&values)
    }

    /// The share of pgbench: each round's throughput over the tps pgbench
    /// got on the same SQL right beside it, the geometric mean of those
    /// ratios and its interval.
    pub fn of_pgbench(&self) -> Option<Interval> {
        let pairs: Vec<(f64, f64)> = self
            .rounds
            .iter()
            .filter(|r| r.pgbench_tps > 0.0)
            .map(|r| (r.rps, r.pgbench_tps))
            .collect();
        Interval::of_ratio(&pairs)
    }
}

/// `a`'s `figure` over `b`'s, round by round where both ran (the cells of
/// one round ran side by side), with its interval.
pub fn ratio(a: &CellResult, b: &CellResult, figure: Figure) -> Option<Interval> {
    Interval::of_ratio(&paired(a, b, figure))
}

/// The rounds of `a` and `b` paired by round: `(a's, b's)` of `figure`.
pub fn paired(a: &CellResult, b: &CellResult, figure: Figure) -> Vec<(f64, f64)> {
    a.rounds
        .iter()
        .filter_map(|ra| {
            let rb = b.rounds.iter().find(|rb| rb.round == ra.round)?;
            Some((figure.of(ra), figure.of(rb)))
        })
        .collect()
}

/// The one setting two cells differ in, when their ratio is a comparison:
/// the server variant, the pool size, the database's distance, the
/// strategy or the publish mode,
/// everything else (scenario, members, VUs) equal. `None` otherwise.
pub fn comparable(a: &CellResult, b: &CellResult) -> Option<&'static str> {
    let same_rest = a.scenario == b.scenario && a.members == b.members && a.vus == b.vus;
    if !same_rest {
        return None;
    }
    let diffs = [
        ("server", a.server != b.server),
        ("pool", a.pool_size != b.pool_size),
        ("db RTT", a.db_rtt_ms != b.db_rtt_ms),
        ("strategy", a.strategy != b.strategy),
        ("mode", a.publish_mode != b.publish_mode),
    ];
    the_only(diffs.iter().filter(|(_, d)| *d).map(|(name, _)| *name))
}

/// The one item `items` yields, when it yields exactly one.
pub fn the_only<T>(mut items: impl Iterator<Item = T>) -> Option<T> {
    match (items.next(), items.next()) {
        (Some(item), None) => Some(item),
        _ => None,
    }
}

/// Each round of each cell with its yardstick beside it: throughput,
/// pgbench's tps and the ratio of the two, p95, hold, CPU, and what the
/// machine did meanwhile; then the rounds that stand out. Empty for a
/// run of one round.
pub fn rounds_markdown(cells: &[CellResult], labels: &[String]) -> String {
    let rounds = cells.iter().map(|c| c.rounds.len()).max().unwrap_or(0);
    if rounds < 2 {
        return String::new();
    }
    let yardstick = cells
        .iter()
        .any(|c| c.rounds.iter().any(|r| r.pgbench_tps > 0.0));
    let mut out = String::from("| round | cell | req/s |");
    if yardstick {
        out.push_str(" pgbench tps | of pgbench | order |");
    }
    out.push_str(" p95 ms | connection held ms | CPU µs/req | load before → after | steal % | other CPU % of a core |\n|---|---|---|");
    if yardstick {
        out.push_str("---|---|---|");
    }
    out.push_str("---|---|---|---|---|---|\n");
    let mut order: Vec<(usize, usize, &RoundFigures)> = cells
        .iter()
        .enumerate()
        .flat_map(|(i, c)| c.rounds.iter().map(move |r| (r.round, i, r)))
        .collect();
    order.sort_by_key(|&(round, i, _)| (round, i));
    for (round, i, r) in order {
        let _ = write!(out, "| {} | {} | {:.0} |", round + 1, labels[i], r.rps);
        if yardstick {
            if r.pgbench_tps > 0.0 {
                let _ = write!(
                    out,
                    " {:.0} | {:.0}% | {} |",
                    r.pgbench_tps,
                    100.0 * r.rps / r.pgbench_tps,
                    if r.yardstick_first {
                        "pgbench first"
                    } else {
                        "chatlab first"
                    }
                );
            } else {
                out.push_str(" | | |");
            }
        }
        let _ = writeln!(
            out,
            " {:.1} | {:.2} | {:.0} | {:.2} → {:.2} | {:.1} | {:.0} |",
            r.p95_ms,
            r.hold_ms,
            r.cpu_us,
            r.noise.load_before,
            r.noise.load_after,
            r.noise.steal_percent,
            r.noise.other_cpu_percent
        );
    }
    let warnings = warnings(cells, labels);
    if !warnings.is_empty() {
        out.push('\n');
        for w in warnings {
            let _ = writeln!(out, "- **Warning**: {w}");
        }
    }
    out
}

/// The rounds a reader should doubt: a round whose throughput (or share of
/// pgbench) stands out from the cell's other rounds, and a round that ran
/// beside other work or lost time to steal.
pub fn warnings(cells: &[CellResult], labels: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    for (c, label) in cells.iter().zip(labels) {
        let rps = c.series(Figure::Throughput);
        for i in uncertainty::outliers(&rps) {
            out.push(format!(
                "{label}, round {}: {:.0} req/s against a median of {:.0} over its {} rounds, an outlier ({}).",
                c.rounds[i].round + 1,
                rps[i],
                uncertainty::median(&rps),
                rps.len(),
                c.rounds[i].noise.describe()
            ));
        }
        let shares: Vec<f64> = c
            .rounds
            .iter()
            .filter(|r| r.pgbench_tps > 0.0)
            .map(|r| r.rps / r.pgbench_tps)
            .collect();
        if shares.len() == c.rounds.len() {
            for i in uncertainty::outliers(&shares) {
                out.push(format!(
                    "{label}, round {}: {:.0}% of pgbench against a median of {:.0}%, an outlier ({}).",
                    c.rounds[i].round + 1,
                    100.0 * shares[i],
                    100.0 * uncertainty::median(&shares),
                    c.rounds[i].noise.describe()
                ));
            }
        }
        for r in c.rounds.iter().filter(|r| r.noise.disturbed()) {
            out.push(format!(
                "{label}, round {} ran beside other work: {}.",
                r.round + 1,
                r.noise.describe()
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn cell(strategy: &str, rps: &[f64], tps: &[f64]) -> CellResult {
        CellResult {
            strategy: strategy.into(),
            members: 50,
            vus: 20,
            throughput_rps: rps.iter().sum::<f64>() / rps.len() as f64,
            rounds: rps
                .iter()
                .enumerate()
                .map(|(round, &rps)| RoundFigures {
                    round,
                    rps,
                    p95_ms: 10.0 + round as f64,
                    hold_ms: 2.0,
                    cpu_us: 200.0,
                    pgbench_tps: tps.get(round).copied().unwrap_or(0.0),
                    yardstick_first: round % 2 == 1,
                    noise: Noise::default(),
                })
                .collect(),
            ..CellResult::default()
        }
    }

    #[test]
    fn the_share_of_pgbench_pairs_each_round_with_its_own_yardstick() {
        // pgbench drifts by half between rounds; each round's share is 90%.
        let c = cell("single", &[900.0, 450.0, 720.0], &[1000.0, 500.0, 800.0]);
        let share = c.of_pgbench().unwrap();
        assert!((share.estimate - 0.9).abs() < 1e-9, "{share:?}");
        assert!((share.hi - share.lo).abs() < 1e-9, "{share:?}");
        assert!(cell("single", &[900.0, 450.0], &[]).of_pgbench().is_none());
    }

    #[test]
    fn ratios_pair_cells_by_round() {
        let a = cell("single", &[1200.0, 600.0, 960.0], &[]);
        let b = cell("batch", &[1000.0, 500.0, 800.0], &[]);
        let r = ratio(&a, &b, Figure::Throughput).unwrap();
        assert!((r.estimate - 1.2).abs() < 1e-9 && (r.lo - 1.2).abs() < 1e-9);
        let p95 = a.interval(Figure::P95).unwrap();
        assert!((p95.estimate - 11.0).abs() < 1e-9);
        assert!(a.interval(Figure::Pgbench).is_none());
    }

    #[test]
    fn the_rounds_table_has_every_pair_and_warns_of_an_outlier() {
        let cells = [
            cell(
                "single",
                &[1000.0, 1010.0, 990.0, 1005.0, 1600.0],
                &[1100.0; 5],
            ),
            cell("batch", &[800.0; 5], &[900.0; 5]),
        ];
        let labels = vec!["single".to_owned(), "batch".to_owned()];
        let md = rounds_markdown(&cells, &labels);
        assert!(
            md.contains("| 1 | single | 1000 | 1100 | 91% | chatlab first |"),
            "{md}"
        );
        assert!(md.contains("| 2 | batch | 800 | 900 | 89% | pgbench first |"));
        assert!(
            md.contains("single, round 5: 1600 req/s against a median of 1005"),
            "{md}"
        );
        assert!(!md.contains("batch, round"), "{md}");
        assert_eq!(rounds_markdown(&[cell("x", &[1.0], &[])], &labels[..1]), "");
    }
}
