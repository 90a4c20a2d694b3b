//! The short view of a strategy comparison, for a reader who wants the
//! answer before the 27 columns of `results.md`: one line per strategy
//! with what decides it, and each round's throughput, so the spread of a
//! shared machine shows beside the means.

use std::fmt::Write as _;

use crate::report::CellResult;
use crate::verdict;

/// Strategy, req/s, p95, connection held, round trips, server CPU per
/// request and the share of pgbench on the same SQL, fastest first.
/// Empty unless the cells differ by strategy alone.
pub fn summary_markdown(cells: &[CellResult]) -> String {
    if !verdict::compares_strategies(cells) {
        return String::new();
    }
    let baseline = cells.iter().all(|c| c.pgbench_tps > 0.0);
    let mut out = String::from(
        "| strategy | req/s | p95 ms | connection held ms | round trips | CPU µs/req |",
    );
    out.push_str(if baseline {
        " of pgbench |\n|---|---|---|---|---|---|---|\n"
    } else {
        "\n|---|---|---|---|---|---|\n"
    });
    let mut ranked: Vec<&CellResult> = cells.iter().collect();
    ranked.sort_by(|a, b| b.throughput_rps.total_cmp(&a.throughput_rps));
    for c in ranked {
        let trips = if c.round_trips > 0.0 {
            format!("{:.0}", c.round_trips)
        } else {
            "-".to_owned()
        };
        let _ = write!(
            out,
            "| {} | {:.0} | {:.1} | {:.2} | {} | {:.0} |",
            c.strategy, c.throughput_rps, c.p95_ms, c.use_time_mean_ms, trips, c.cpu_us_per_request
        );
        if baseline {
            let _ = write!(out, " {:.0}% |", 100.0 * c.pgbench_ratio);
        }
        out.push('\n');
    }
    out
}

/// Each round's throughput per cell, and, for a strategy comparison, the
/// ranking each round gave. Empty for a run of one round.
pub fn rounds_markdown(cells: &[CellResult]) -> String {
    let rounds = cells.iter().map(|c| c.round_rps.len()).max().unwrap_or(0);
    if rounds < 2 {
        return String::new();
    }
    let labels = labels(cells);
    let mut out = String::from("| cell |");
    for r in 1..=rounds {
        let _ = write!(out, " round {r} req/s |");
    }
    out.push_str("\n|---|");
    out.push_str(&"---|".repeat(rounds));
    out.push('\n');
    for (c, label) in cells.iter().zip(&labels) {
        let _ = write!(out, "| {label} |");
        for r in 0..rounds {
            match c.round_rps.get(r) {
                Some(rps) => {
                    let _ = write!(out, " {rps:.0} |");
                }
                None => out.push_str(" |"),
            }
        }
        out.push('\n');
    }
    if verdict::compares_strategies(cells) {
        out.push('\n');
        for r in 0..rounds {
            let ranked = verdict::ranking(cells, |c| c.round_rps.get(r).copied().unwrap_or(0.0));
            let _ = writeln!(out, "Round {}: {}.  ", r + 1, ranked.join(" > "));
        }
    }
    out
}

/// A name per cell from what varies between the cells (the strategy when
/// nothing does).
fn labels(cells: &[CellResult]) -> Vec<String> {
    type Part = fn(&CellResult) -> String;
    let parts: [(&str, Part); 7] = [
        ("", |c| c.server.clone()),
        ("pool ", |c| c.pool_size.to_string()),
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

    fn cell(strategy: &str, rps: &[f64], tps: f64) -> CellResult {
        CellResult {
            strategy: strategy.into(),
            members: 50,
            vus: 20,
            throughput_rps: rps.iter().sum::<f64>() / rps.len() as f64,
            p95_ms: 40.0,
            use_time_mean_ms: 7.4,
            round_trips: 1.0,
            cpu_us_per_request: 368.0,
            pgbench_tps: tps,
            pgbench_ratio: if tps > 0.0 { rps[0] / tps } else { 0.0 },
            round_rps: rps.to_vec(),
            ..CellResult::default()
        }
    }

    #[test]
    fn the_summary_is_fastest_first_with_the_share_of_pgbench() {
        let md = summary_markdown(&[
            cell("batch", &[500.0], 500.0),
            cell("single", &[668.0], 733.0),
        ]);
        assert_eq!(
            md,
            "| strategy | req/s | p95 ms | connection held ms | round trips | CPU µs/req | of pgbench |\n|---|---|---|---|---|---|---|\n| single | 668 | 40.0 | 7.40 | 1 | 368 | 91% |\n| batch | 500 | 40.0 | 7.40 | 1 | 368 | 100% |\n"
        );
        assert!(
            !summary_markdown(&[cell("batch", &[1.0], 0.0), cell("single", &[2.0], 0.0)])
                .contains("pgbench")
        );
        let mut other = cell("single", &[2.0], 0.0);
        other.members = 20;
        assert_eq!(summary_markdown(&[cell("batch", &[1.0], 0.0), other]), "");
    }

    #[test]
    fn rounds_show_each_run_and_the_ranking_it_gave() {
        let cells = [
            cell("batch", &[500.0, 520.0, 480.0], 0.0),
            cell("single", &[668.0, 500.0, 700.0], 0.0),
        ];
        let md = rounds_markdown(&cells);
        assert!(md.starts_with("| cell | round 1 req/s | round 2 req/s | round 3 req/s |\n|---|---|---|---|\n| batch | 500 | 520 | 480 |\n| single | 668 | 500 | 700 |\n"), "{md}");
        assert!(
            md.contains(
                "Round 1: single > batch.  \nRound 2: batch > single.  \nRound 3: single > batch."
            ),
            "{md}"
        );
        assert_eq!(rounds_markdown(&[cell("batch", &[500.0], 0.0)]), "");
    }

    #[test]
    fn round_labels_name_what_varies() {
        let mut a = cell("batch", &[1.0, 2.0], 0.0);
        let mut b = a.clone();
        a.vus = 10;
        b.vus = 50;
        let md = rounds_markdown(&[a, b]);
        assert!(
            md.contains("| VUs 10 | 1 | 2 |") && md.contains("| VUs 50 |"),
            "{md}"
        );
        assert!(!md.contains("Round 1"), "{md}");
    }
}
