//! The short view of a run, for a reader who wants the answer before the
//! 27 columns of `results.md`: per cell the figures that decide it with
//! their 95% intervals, and every pair of cells that differ in one setting
//! with the ratio between them and whether the rounds tell them apart.

use std::fmt::Write as _;

use crate::report::results::CellResult;
use crate::stats::rounds::{Figure, comparable, ratio};
use crate::stats::uncertainty::Interval;
use crate::stats::verdict;

/// A figure's interval, or its one value: `1210 [1150, 1270]` or `1210`.
fn show(c: &CellResult, figure: Figure, fallback: f64, decimals: usize) -> String {
    match c.interval(figure) {
        Some(i) => i.show(decimals),
        None => format!("{fallback:.decimals$}"),
    }
}

/// The share of pgbench: paired by round with its interval, else the one
/// ratio the run has.
fn show_share(c: &CellResult) -> String {
    match c.of_pgbench() {
        Some(i) => i.show_percent(),
        None => format!("{:.0}%", 100.0 * c.pgbench_ratio),
    }
}

/// Group (the letters of [`verdict::Ranking`]: strategies that share one
/// are not told apart; `-` with one round), strategy, req/s, p95,
/// connection held, round trips, server CPU per request and the share of
/// pgbench on the same SQL, fastest first, each with its interval. Empty
/// unless the cells differ by strategy alone.
pub fn summary_markdown(cells: &[CellResult]) -> String {
    if !verdict::compares_strategies(cells) {
        return String::new();
    }
    let baseline = cells.iter().all(|c| c.pgbench_tps > 0.0);
    let mut out = String::from(
        "| group | strategy | req/s | p95 ms | connection held ms | round trips | CPU µs/req |",
    );
    out.push_str(if baseline {
        " of pgbench |\n|---|---|---|---|---|---|---|---|\n"
    } else {
        "\n|---|---|---|---|---|---|---|\n"
    });
    let groups = verdict::Ranking::of(cells, Figure::Throughput).groups();
    for (strategy, group) in &groups {
        let Some(c) = cells.iter().find(|c| &c.strategy == strategy) else {
            continue;
        };
        let trips = if c.round_trips > 0.0 {
            format!("{:.0}", c.round_trips)
        } else {
            "-".to_owned()
        };
        let _ = write!(
            out,
            "| {group} | {} | {} | {} | {} | {trips} | {} |",
            c.strategy,
            show(c, Figure::Throughput, c.throughput_rps, 0),
            show(c, Figure::P95, c.p95_ms, 1),
            show(c, Figure::Hold, c.use_time_mean_ms, 2),
            show(c, Figure::Cpu, c.cpu_us_per_request, 0),
        );
        if baseline {
            let _ = write!(out, " {} |", show_share(c));
        }
        out.push('\n');
    }
    out
}

/// Every cell's deciding figures with their intervals, for a run that is
/// not one strategy comparison (a grid of variants, sizes or VUs). Empty
/// for a run of one round.
pub fn intervals_markdown(cells: &[CellResult]) -> String {
    if cells.iter().all(|c| c.rounds.len() < 2) {
        return String::new();
    }
    let baseline = cells.iter().any(|c| c.pgbench_tps > 0.0);
    let labels = labels(cells);
    let mut out =
        String::from("| cell | rounds | req/s | p95 ms | connection held ms | CPU µs/req |");
    out.push_str(if baseline {
        " of pgbench |\n|---|---|---|---|---|---|---|\n"
    } else {
        "\n|---|---|---|---|---|---|\n"
    });
    for (c, label) in cells.iter().zip(&labels) {
        let _ = write!(
            out,
            "| {label} | {} | {} | {} | {} | {} |",
            c.rounds.len(),
            show(c, Figure::Throughput, c.throughput_rps, 0),
            show(c, Figure::P95, c.p95_ms, 1),
            show(c, Figure::Hold, c.use_time_mean_ms, 2),
            show(c, Figure::Cpu, c.cpu_us_per_request, 0),
        );
        if baseline {
            let share = if c.pgbench_tps > 0.0 {
                show_share(c)
            } else {
                String::new()
            };
            let _ = write!(out, " {share} |");
        }
        out.push('\n');
    }
    out
}

/// `1.20× [1.12, 1.27]`, `~ 1.02× [0.97, 1.07]` for a tie, or `-`.
fn show_call(i: Option<Interval>) -> String {
    i.map_or_else(|| "-".to_owned(), |i| i.show_called())
}

/// Every pair of cells that differ in one setting (server variant, pool
/// size, strategy or publish mode), the faster first: the ratio of their
/// throughput, CPU per request and p95, paired by round, `~` where the
/// interval holds 1. Empty for a run of one round.
pub fn comparisons_markdown(cells: &[CellResult]) -> String {
    if cells.iter().all(|c| c.rounds.len() < 2) {
        return String::new();
    }
    let labels = labels(cells);
    let mut rows = String::new();
    for (i, a) in cells.iter().enumerate() {
        for (j, b) in cells.iter().enumerate().skip(i + 1) {
            let Some(setting) = comparable(a, b) else {
                continue;
            };
            let (x, y, lx, ly) = if a.throughput_rps >= b.throughput_rps {
                (a, b, &labels[i], &labels[j])
            } else {
                (b, a, &labels[j], &labels[i])
            };
            let _ = writeln!(
                rows,
                "| {lx} | {ly} | {setting} | {} | {} | {} |",
                show_call(ratio(x, y, Figure::Throughput)),
                show_call(ratio(x, y, Figure::Cpu)),
                show_call(ratio(x, y, Figure::P95)),
            );
        }
    }
    if rows.is_empty() {
        return rows;
    }
    format!(
        "| faster | slower | differing in | req/s, faster / slower | CPU µs/req, faster / slower | p95, faster / slower |\n|---|---|---|---|---|---|\n{rows}"
    )
}

/// A name per cell from what varies between the cells (the strategy when
/// nothing does).
pub fn labels(cells: &[CellResult]) -> Vec<String> {
    type Part = fn(&CellResult) -> String;
    let parts: [(&str, Part); 8] = [
        ("", |c| c.server.clone()),
        ("pool ", |c| c.pool_size.to_string()),
        ("RTT ", |c| {
            format!("{} ms", crate::servers::reach::show_ms(c.db_rtt_ms))
        }),
        ("", |c| c.scenario.clone()),
        ("", |c| c.strategy.clone()),
        ("", |c| c.publish_mode.clone()),
        ("members ", |c| c.members.to_string()),
        ("VUs ", |c| c.vus.to_string()),
    ];
    let varying: Vec<&(&str, Part)> = parts
        .iter()
        .filter(|(_, f)| cells.iter().any(|c| f(c) != f(&cells[0])))
        .collect();
    cells
        .iter()
        .map(|c| {
            if varying.is_empty() {
                return c.strategy.clone();
            }
            varying
                .iter()
                .map(|(prefix, f)| format!("{prefix}{}", f(c)))
                .collect::<Vec<_>>()
                .join(", ")
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::rounds::RoundFigures;

    fn cell(strategy: &str, rps: &[f64], tps: &[f64]) -> CellResult {
        CellResult {
            strategy: strategy.into(),
            members: 50,
            vus: 20,
            throughput_rps: rps.iter().sum::<f64>() / rps.len() as f64,
            p95_ms: 40.0,
            use_time_mean_ms: 7.4,
            round_trips: 1.0,
            cpu_us_per_request: 368.0,
            pgbench_tps: tps.iter().sum::<f64>() / tps.len().max(1) as f64,
            pgbench_ratio: if tps.is_empty() { 0.0 } else { rps[0] / tps[0] },
            rounds: rps
                .iter()
                .enumerate()
                .map(|(round, &rps)| RoundFigures {
                    round,
                    rps,
                    p95_ms: 40.0,
                    hold_ms: 7.4,
                    cpu_us: 368.0,
                    pgbench_tps: tps.get(round).copied().unwrap_or(0.0),
                    ..RoundFigures::default()
                })
                .collect(),
            ..CellResult::default()
        }
    }

    #[test]
    fn the_summary_is_fastest_first_with_intervals_and_the_share_of_pgbench() {
        let md = summary_markdown(&[
            cell("batch", &[500.0], &[500.0]),
            cell("single", &[668.0], &[733.0]),
        ]);
        assert_eq!(
            md,
            "| group | strategy | req/s | p95 ms | connection held ms | round trips | CPU µs/req | of pgbench |\n|---|---|---|---|---|---|---|---|\n| - | single | 668 | 40.0 | 7.40 | 1 | 368 | 91% |\n| - | batch | 500 | 40.0 | 7.40 | 1 | 368 | 100% |\n"
        );
        let md = summary_markdown(&[
            cell("batch", &[500.0, 520.0, 510.0], &[600.0, 610.0, 590.0]),
            cell("single", &[668.0, 690.0, 700.0], &[733.0, 740.0, 720.0]),
        ]);
        assert!(
            md.contains("| a | single | 686 [645, 727] | 40.0 [40.0, 40.0] |"),
            "{md}"
        );
        assert!(md.contains("| b | batch | 510 [485, 535] |"), "{md}");
        assert!(md.contains("% ["), "{md}");
        assert!(
            !summary_markdown(&[cell("batch", &[1.0], &[]), cell("single", &[2.0], &[])])
                .contains("pgbench")
        );
        let mut other = cell("single", &[2.0], &[]);
        other.members = 20;
        assert_eq!(summary_markdown(&[cell("batch", &[1.0], &[]), other]), "");
    }

    #[test]
    fn level_strategies_share_a_letter() {
        let md = summary_markdown(&[
            cell("pipeline", &[1300.0, 1240.0, 1350.0, 1260.0], &[]),
            cell("unnest", &[1250.0, 1330.0, 1270.0, 1320.0], &[]),
            cell("batch", &[800.0, 810.0, 790.0, 805.0], &[]),
        ]);
        assert!(
            md.contains("| a | unnest |") && md.contains("| a | pipeline |"),
            "{md}"
        );
        assert!(md.contains("| b | batch |"), "{md}");
    }

    #[test]
    fn comparisons_pair_cells_that_differ_in_one_setting() {
        let mut shared = cell("single", &[1000.0, 1010.0, 990.0], &[]);
        shared.server = "shared".into();
        let mut per_worker = cell("single", &[1005.0, 1000.0, 1000.0], &[]);
        per_worker.server = "per_worker".into();
        let mut batch = cell("batch", &[800.0, 790.0, 805.0], &[]);
        batch.server = "shared".into();
        let md = comparisons_markdown(&[shared, per_worker, batch]);
        assert!(
            md.contains("| per_worker, single | shared, single | server | ~ 1.00× ["),
            "{md}"
        );
        assert!(
            md.contains("| shared, single | shared, batch | strategy | 1.2"),
            "{md}"
        );
        assert!(
            !md.contains("| per_worker, single | shared, batch |"),
            "{md}"
        );
        assert_eq!(comparisons_markdown(&[cell("x", &[1.0], &[])]), "");
    }

    #[test]
    fn labels_name_what_varies() {
        let mut a = cell("batch", &[1.0, 2.0], &[]);
        let mut b = a.clone();
        a.vus = 10;
        b.vus = 50;
        assert_eq!(
            labels(&[a, b]),
            vec!["VUs 10".to_owned(), "VUs 50".to_owned()]
        );
        assert_eq!(labels(&[cell("x", &[1.0], &[])]), vec!["x".to_owned()]);
    }
}
