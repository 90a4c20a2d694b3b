//! `chatlab-load intervals DIR...`: the 95% intervals a committed run's
//! rounds give, computed again from its `results.md` "Per round" table
//! (`| cell | round 1 req/s | round 2 req/s | ...`), for a run whose
//! results.md has its rounds but not their intervals. Writes `DIR/intervals.md`: each cell's
//! throughput with its interval, and every pair of cells whose names
//! differ in one part (`none, unnest, members 10` against `inbox, unnest,
//! members 10`) with the ratio of their throughput paired by round, `~`
//! where it holds 1. Nothing is measured again: the figures are the run's.

use std::fmt::Write as _;
use std::path::PathBuf;

use clap::Args;

use crate::error::LoadError;
use crate::figures::markdown_table::tables;
use crate::stats::rounds::the_only;
use crate::stats::uncertainty::Interval;

#[derive(Debug, Args)]
pub(crate) struct IntervalsArgs {
    /// Results folders (`results/<name>-<timestamp>`).
    #[arg(required = true)]
    dirs: Vec<PathBuf>,
}

/// A cell's name, in parts, and its throughput per round.
#[derive(Debug, Clone, PartialEq)]
struct Rounds {
    parts: Vec<String>,
    rps: Vec<f64>,
}

pub(crate) fn intervals(args: IntervalsArgs) -> Result<bool, LoadError> {
    for dir in &args.dirs {
        let path = dir.join("results.md");
        let text = std::fs::read_to_string(&path).map_err(|e| LoadError::file(&path, e))?;
        let cells = per_round(&text).ok_or_else(|| {
            LoadError::Usage(format!(
                "{}: no \"| cell | round 1 req/s | ...\" table",
                path.display()
            ))
        })?;
        let out = dir.join("intervals.md");
        let md = markdown(&dir.display().to_string(), &cells);
        std::fs::write(&out, &md).map_err(|e| LoadError::file(&out, e))?;
        println!("{md}\nwritten to {}", out.display());
    }
    Ok(true)
}

/// The cells of the run's per-round table.
fn per_round(text: &str) -> Option<Vec<Rounds>> {
    let table = tables(text).into_iter().find(|t| {
        t.header.first().is_some_and(|h| h == "cell")
            && t.header.get(1).is_some_and(|h| h == "round 1 req/s")
    })?;
    Some(
        table
            .rows
            .iter()
            .map(|row| Rounds {
                parts: row[0].split(", ").map(str::to_owned).collect(),
                rps: row[1..]
                    .iter()
                    .filter_map(|v| v.trim().parse::<f64>().ok())
                    .collect(),
            })
            .collect(),
    )
}

/// The part two names differ in, when they differ in exactly one.
fn differing_part(a: &Rounds, b: &Rounds) -> Option<usize> {
    if a.parts.len() != b.parts.len() {
        return None;
    }
    the_only((0..a.parts.len()).filter(|&i| a.parts[i] != b.parts[i]))
}

fn markdown(run: &str, cells: &[Rounds]) -> String {
    let rounds = cells.iter().map(|c| c.rps.len()).max().unwrap_or(0);
    let mut out = format!(
        "# Intervals of {run}\n\nFrom the run's own per-round throughputs ({rounds} rounds), computed again by `chatlab-load intervals`: each cell's mean req/s with its 95% interval (Student's t over the rounds), and every pair of cells whose names differ in one part, the faster first, their ratio paired by round (the geometric mean of the rounds' ratios, t on the log scale); `~` marks a tie, an interval that holds 1. With two rounds, t has one degree of freedom (12.7): only large differences come out clear.\n\n| cell | rounds | req/s |\n|---|---|---|\n"
    );
    for c in cells {
        let shown = match Interval::of_mean(&c.rps) {
            Some(i) => i.show(0),
            None => c
                .rps
                .first()
                .map_or_else(|| "-".to_owned(), |v| format!("{v:.0}")),
        };
        let _ = writeln!(
            out,
            "| {} | {} | {shown} |",
            c.parts.join(", "),
            c.rps.len()
        );
    }
    out.push_str("\n| faster | slower | req/s, faster / slower |\n|---|---|---|\n");
    for (i, a) in cells.iter().enumerate() {
        for b in &cells[i + 1..] {
            if differing_part(a, b).is_none() {
                continue;
            }
            let mean = |c: &Rounds| c.rps.iter().sum::<f64>() / c.rps.len().max(1) as f64;
            let (x, y) = if mean(a) >= mean(b) { (a, b) } else { (b, a) };
            let pairs: Vec<(f64, f64)> = x.rps.iter().copied().zip(y.rps.iter().copied()).collect();
            let ratio =
                Interval::of_ratio(&pairs).map_or_else(|| "-".to_owned(), |r| r.show_called());
            let _ = writeln!(
                out,
                "| {} | {} | {ratio} |",
                x.parts.join(", "),
                y.parts.join(", ")
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const RUN: &str = "# fanout\n\n## Per round\n\n| cell | round 1 req/s | round 2 req/s | round 3 req/s |\n|---|---|---|---|\n| none, unnest, members 10 | 2000 | 3000 | 2500 |\n| inbox, unnest, members 10 | 1000 | 1500 | 1260 |\n| none, single, members 10 | 2010 | 2950 | 2550 |\n| inbox, single, members 50 | 1 | 2 | 3 |\n";

    #[test]
    fn reads_the_rounds_and_pairs_cells_that_differ_in_one_part() {
        let cells = per_round(RUN).unwrap();
        assert_eq!(cells.len(), 4);
        assert_eq!(cells[0].parts, ["none", "unnest", "members 10"]);
        assert_eq!(cells[0].rps, [2000.0, 3000.0, 2500.0]);
        let md = markdown("results/fanout-x", &cells);
        // Round by round none is twice inbox, whatever the drift: a clear 2x.
        assert!(
            md.contains(
                "| none, unnest, members 10 | inbox, unnest, members 10 | 1.99× [1.97, 2.02] |"
            ),
            "{md}"
        );
        // unnest and single trade places round by round: a tie.
        assert!(
            md.contains("| none, single, members 10 | none, unnest, members 10 | ~ "),
            "{md}"
        );
        // Two parts differ: no comparison.
        assert!(
            !md.contains("| inbox, unnest, members 10 | inbox, single, members 50 |"),
            "{md}"
        );
        assert!(per_round("no table here").is_none());
    }
}
