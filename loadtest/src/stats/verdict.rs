//! The verdict of a run that compares strategies on otherwise equal cells:
//! a few lines a newcomer can read without the table, each comparison with
//! its 95% interval, and which strategies the rounds tell apart as a
//! partial order ([`crate::stats::letters`]): every pair tested on its
//! own rounds, Holm's method over the pairs, never a chain of ties.

use std::fmt::Write as _;

use crate::report::results::CellResult;
use crate::stats::letters::{FAMILY_ALPHA, holm, letters, paired_p};
use crate::stats::rounds::{Figure, comparable, paired, ratio};
use crate::stats::uncertainty::{Call, Interval};

/// Whether the cells differ by strategy alone: one cell per strategy, at
/// least two, everything else equal.
pub fn compares_strategies(cells: &[CellResult]) -> bool {
    let Some(first) = cells.first() else {
        return false;
    };
    let key = |c: &CellResult| {
        (
            c.server.clone(),
            c.scenario.clone(),
            c.publish_mode.clone(),
            c.members,
            c.vus,
            c.pool_size,
            c.db_rtt_ms.to_bits(),
        )
    };
    let mut strategies: Vec<&str> = cells.iter().map(|c| c.strategy.as_str()).collect();
    strategies.sort_unstable();
    strategies.dedup();
    cells.len() >= 2
        && strategies.len() == cells.len()
        && cells.iter().all(|c| key(c) == key(first))
}

/// The mean of `figure` over a cell's rounds (the cell's own figure when
/// it has no rounds).
fn mean(c: &CellResult, figure: Figure) -> f64 {
    let values = c.series(figure);
    if values.is_empty() {
        match figure {
            Figure::Pgbench => c.pgbench_tps,
            _ => c.throughput_rps,
        }
    } else {
        values.iter().sum::<f64>() / values.len() as f64
    }
}

/// The cells best first by `figure` (throughput, or pgbench's tps on their
/// SQL), which pairs the rounds tell apart, and the letters that show it.
#[derive(Debug, Clone)]
pub struct Ranking<'a> {
    /// The cells, highest mean first.
    pub order: Vec<&'a CellResult>,
    /// Each cell's letters (in `order`); empty with one round.
    pub letters: Vec<String>,
    /// `apart[i][j]`: cells `i` and `j` (in `order`) told apart, Holm's
    /// method over every pair at a family-wise 5%. With one round no pair
    /// is tested and none is apart.
    apart: Vec<Vec<bool>>,
    /// Whether every pair had rounds to test.
    tested: bool,
}

impl<'a> Ranking<'a> {
    /// Ranks `cells` by `figure`.
    pub fn of(cells: &'a [CellResult], figure: Figure) -> Self {
        let mut order: Vec<&CellResult> = cells.iter().collect();
        order.sort_by(|a, b| mean(b, figure).total_cmp(&mean(a, figure)));
        let n = order.len();
        let mut index = Vec::new();
        let mut ps = Vec::new();
        for i in 0..n {
            for j in i + 1..n {
                index.push((i, j));
                ps.push(paired_p(&paired(order[i], order[j], figure)));
            }
        }
        let tested = ps.iter().all(Option::is_some);
        let mut apart = vec![vec![false; n]; n];
        if tested {
            let ps: Vec<f64> = ps.into_iter().flatten().collect();
            for (&(i, j), rejected) in index.iter().zip(holm(&ps, FAMILY_ALPHA)) {
                apart[i][j] = rejected;
                apart[j][i] = rejected;
            }
        }
        let letters = if tested {
            letters(n, |i, j| apart[i][j])
        } else {
            Vec::new()
        };
        Self {
            order,
            letters,
            apart,
            tested,
        }
    }

    /// The pairs compared.
    pub fn pair_count(&self) -> usize {
        self.order.len() * self.order.len().saturating_sub(1) / 2
    }

    /// Whether the cells at `i` and `j` (in `order`) are told apart.
    fn is_apart(&self, i: usize, j: usize) -> bool {
        self.apart[i][j]
    }

    /// The best cell and every cell not told apart from it (with one
    /// round, the best alone: its lead is a mean's, said so).
    fn leaders(&self) -> Vec<&'a CellResult> {
        self.order
            .iter()
            .enumerate()
            .filter(|&(k, _)| k == 0 || (self.tested && !self.is_apart(0, k)))
            .map(|(_, c)| *c)
            .collect()
    }

    /// `single a, pipeline ab, unnest b`; with one round the order of the
    /// means, `single > unnest`, which is all one round gives.
    pub fn show(&self) -> String {
        if self.tested {
            self.order
                .iter()
                .zip(&self.letters)
                .map(|(c, l)| format!("{} {l}", c.strategy))
                .collect::<Vec<_>>()
                .join(", ")
        } else {
            self.order
                .iter()
                .map(|c| c.strategy.as_str())
                .collect::<Vec<_>>()
                .join(" > ")
        }
    }

    /// Each strategy with its letters, best first (`-` with one round).
    pub fn groups(&self) -> Vec<(String, String)> {
        self.order
            .iter()
            .enumerate()
            .map(|(k, c)| {
                (
                    c.strategy.clone(),
                    self.letters
                        .get(k)
                        .cloned()
                        .unwrap_or_else(|| "-".to_owned()),
                )
            })
            .collect()
    }

    /// Whether `a` is told apart from `b`, and which way: `Ahead` when `a`
    /// is the higher; a tie when not apart or not tested.
    fn call(&self, a: &str, b: &str) -> Call {
        let at = |name: &str| self.order.iter().position(|c| c.strategy == name);
        match (at(a), at(b)) {
            (Some(i), Some(j)) if self.is_apart(i, j) => {
                if i < j {
                    Call::Ahead
                } else {
                    Call::Behind
                }
            }
            _ => Call::Tie,
        }
    }
}

/// How chatlab's order of two strategies compares with pgbench's on the
/// same SQL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Agreement {
    /// Pairs one puts ahead and the other behind, each clearly: a real
    /// disagreement. (chatlab's first, chatlab's second.)
    pub opposite: Vec<(String, String)>,
    /// Pairs one tells apart and the other calls level.
    pub tie_differs: Vec<(String, String)>,
}

/// Every pair of strategies, told apart or not by chatlab's rounds and by
/// pgbench's (each with Holm's method over its pairs).
pub fn agreement(cells: &[CellResult], chatlab: &Ranking<'_>, pgbench: &Ranking<'_>) -> Agreement {
    let mut out = Agreement {
        opposite: Vec::new(),
        tie_differs: Vec::new(),
    };
    for (i, a) in cells.iter().enumerate() {
        for b in &cells[i + 1..] {
            let ours = chatlab.call(&a.strategy, &b.strategy);
            let theirs = pgbench.call(&a.strategy, &b.strategy);
            let pair = if ours == Call::Behind || (ours == Call::Tie && theirs == Call::Behind) {
                (b.strategy.clone(), a.strategy.clone())
            } else {
                (a.strategy.clone(), b.strategy.clone())
            };
            match (ours, theirs) {
                (Call::Ahead, Call::Behind) | (Call::Behind, Call::Ahead) => {
                    out.opposite.push(pair);
                }
                (x, y) if x != y => out.tie_differs.push(pair),
                _ => {}
            }
        }
    }
    out
}

/// A paired ratio with its interval (`~` first when it is a tie), or the
/// bare ratio of means when the run has one round.
fn show_ratio(a: &CellResult, b: &CellResult, figure: Figure) -> String {
    match ratio(a, b, figure) {
        Some(r) => r.show_called(),
        None => format!("{:.2}×", mean(a, figure) / mean(b, figure).max(1e-9)),
    }
}

/// A figure and its unit, with its interval when the rounds give one.
fn show_mean(c: &CellResult, figure: Figure, decimals: usize, unit: &str) -> String {
    match c.interval(figure) {
        Some(i) => i.show_unit(decimals, unit),
        None => format!("{:.decimals$} {unit}", mean(c, figure)),
    }
}

/// The verdict: who won and by how much, with intervals; which strategies
/// the run cannot tell apart; what each held of its connection; and
/// whether pgbench on the same SQL orders them the same way. `None` unless
/// the cells differ by strategy alone.
pub fn verdict(cells: &[CellResult]) -> Option<String> {
    if !compares_strategies(cells) {
        return None;
    }
    let first = cells.first()?;
    let rounds = cells.iter().map(|c| c.rounds.len()).min().unwrap_or(0);
    let ranking = Ranking::of(cells, Figure::Throughput);
    let mut out = winner_line(&ranking, rounds, first.members, first.vus)?;
    if ranking.tested {
        let _ = write!(
            out,
            "\nGroups: {} (strategies that share a letter are not told apart).",
            ranking.show()
        );
        for (i, a) in ranking.order.iter().enumerate() {
            for (j, b) in ranking.order.iter().enumerate().skip(i + 1) {
                if ranking.is_apart(i, j) {
                    continue;
                }
                let own = ratio(a, b, Figure::Throughput).map(|r| r.call());
                let _ = write!(
                    out,
                    "\n{} and {} are not told apart in this run ({} {}{}).",
                    a.strategy,
                    b.strategy,
                    show_ratio(a, b, Figure::Throughput),
                    b.strategy,
                    if own.is_some_and(|c| c != Call::Tie) {
                        format!(
                            "; its own interval excludes 1, but not once the {} comparisons are held to 5% together",
                            ranking.pair_count()
                        )
                    } else {
                        String::new()
                    }
                );
            }
        }
    }
    out.push_str(&held_line(&ranking));
    if cells.iter().all(|c| mean(c, Figure::Pgbench) > 0.0) {
        let pgbench = Ranking::of(cells, Figure::Pgbench);
        let _ = write!(
            out,
            "\nRanking: chatlab {}; pgbench on the same SQL {} ({}).",
            ranking.show(),
            pgbench.show(),
            agreement_words(&agreement(cells, &ranking, &pgbench))
        );
    }
    Some(out)
}

/// The verdict's first line: the winner, or the cells not told apart from
/// the best, with the rest behind; how the `rounds` make the intervals and
/// the calls.
fn winner_line(ranking: &Ranking<'_>, rounds: usize, members: usize, vus: usize) -> Option<String> {
    let best = *ranking.order.first()?;
    let leaders = ranking.leaders();
    let mut out = String::new();
    let method = if ranking.tested {
        let calls = match ranking.pair_count() {
            1 => "its one pair called at 5%".to_owned(),
            n => format!("its {n} pairs called with Holm's method at a family-wise 5%"),
        };
        format!(
            "{rounds} rounds; 95% intervals, Student's t on the rounds, ratios paired by round; {calls}"
        )
    } else {
        "one round: one measurement, no interval, and no tie can be called".to_owned()
    };
    let behind: Vec<String> = ranking
        .order
        .iter()
        .filter(|c| !leaders.iter().any(|l| l.strategy == c.strategy))
        .map(|c| {
            format!(
                "{} {} ({:.0})",
                show_ratio(best, c, Figure::Throughput),
                c.strategy,
                mean(c, Figure::Throughput)
            )
        })
        .collect();
    let ahead_of = if behind.is_empty() {
        String::new()
    } else {
        format!(": {}", behind.join(", "))
    };
    if leaders.len() == 1 {
        let _ = write!(
            out,
            "Verdict ({method}): {} {} at {}{ahead_of} ({} members, {} VUs).",
            best.strategy,
            if ranking.tested { "won" } else { "was highest" },
            show_mean(best, Figure::Throughput, 0, "req/s"),
            members,
            vus
        );
    } else {
        let others: Vec<&str> = leaders[1..].iter().map(|c| c.strategy.as_str()).collect();
        let _ = write!(
            out,
            "Verdict ({method}): no single winner: {} at {} is not told apart from {} ({}){} ({} members, {} VUs).",
            best.strategy,
            show_mean(best, Figure::Throughput, 0, "req/s"),
            join_words(&others),
            leaders[1..]
                .iter()
                .map(|c| show_mean(c, Figure::Throughput, 0, "req/s"))
                .collect::<Vec<_>>()
                .join(" and "),
            if behind.is_empty() {
                String::new()
            } else {
                format!("; {} against the rest{ahead_of}", best.strategy)
            },
            members,
            vus
        );
    }
    Some(out)
}

/// What each strategy held of its connection per request, and its round
/// trips, best first.
fn held_line(ranking: &Ranking<'_>) -> String {
    let held: Vec<String> = ranking
        .order
        .iter()
        .map(|c| {
            let trips = if c.round_trips > 0.0 {
                let plural = if (c.round_trips - 1.0).abs() < 0.05 {
                    ""
                } else {
                    "s"
                };
                format!(", {:.0} round trip{plural}", c.round_trips)
            } else {
                String::new()
            };
            let hold = match c.interval(Figure::Hold) {
                Some(i) => i.show_unit(2, "ms"),
                None => format!("{:.2} ms", c.use_time_mean_ms),
            };
            format!("{} {hold}{trips}", c.strategy)
        })
        .collect();
    format!("\nConnection held per request, mean: {}.", held.join("; "))
}

/// The agreement in words.
fn agreement_words(a: &Agreement) -> String {
    let pairs = |v: &[(String, String)], sep: &str| {
        v.iter()
            .map(|(x, y)| format!("{x}{sep}{y}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    match (a.opposite.is_empty(), a.tie_differs.is_empty()) {
        (true, true) => "the same, ties included".to_owned(),
        (true, false) => format!(
            "no pair in opposite order; one of the two calls level what the other tells apart: {}",
            pairs(&a.tie_differs, " and ")
        ),
        (false, _) => format!(
            "they differ: chatlab puts {} where pgbench puts them the other way",
            pairs(&a.opposite, " ahead of ")
        ),
    }
}

/// `a`, `a and b`, `a, b and c`.
fn join_words(words: &[&str]) -> String {
    match words {
        [] => String::new(),
        [one] => (*one).to_owned(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

/// The widest interval among the ratios a verdict uses, as a share (0.05:
/// ±5%), and what it is: the throughput of every pair of cells that differ
/// in one setting (strategies, server variants, pool sizes, publish modes),
/// and each cell's share of pgbench. `None` when a ratio has no interval
/// yet.
pub fn widest_ratio(cells: &[CellResult]) -> Option<(String, f64)> {
    let mut widest: Option<(String, f64)> = None;
    let mut offer = |name: String, i: Option<Interval>| -> Option<()> {
        let w = i?.relative_half_width();
        if widest.as_ref().is_none_or(|(_, x)| w > *x) {
            widest = Some((name, w));
        }
        Some(())
    };
    for (i, a) in cells.iter().enumerate() {
        for b in &cells[i + 1..] {
            let Some(setting) = comparable(a, b) else {
                continue;
            };
            let side = |c: &CellResult| match setting {
                "server" => c.server.clone(),
                "pool" => format!("pool {}", c.pool_size),
                "db RTT" => format!("RTT {} ms", crate::servers::reach::show_ms(c.db_rtt_ms)),
                "mode" => c.publish_mode.clone(),
                _ => c.strategy.clone(),
            };
            offer(
                format!("{} / {}", side(a), side(b)),
                ratio(a, b, Figure::Throughput),
            )?;
        }
        if a.rounds.iter().any(|r| r.pgbench_tps > 0.0) {
            offer(format!("{} / pgbench", a.strategy), a.of_pgbench())?;
        }
    }
    widest
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::noise::Noise;
    use crate::stats::rounds::RoundFigures;

    fn cell(strategy: &str, rps: &[f64], tps: &[f64], held: f64, trips: f64) -> CellResult {
        CellResult {
            strategy: strategy.into(),
            members: 50,
            vus: 20,
            throughput_rps: rps.iter().sum::<f64>() / rps.len() as f64,
            use_time_mean_ms: held,
            round_trips: trips,
            rounds: rps
                .iter()
                .enumerate()
                .map(|(round, &rps)| RoundFigures {
                    round,
                    rps,
                    hold_ms: held,
                    pgbench_tps: tps.get(round).copied().unwrap_or(0.0),
                    noise: Noise::default(),
                    ..RoundFigures::default()
                })
                .collect(),
            ..CellResult::default()
        }
    }

    #[test]
    fn rounds_that_overlap_are_a_tie_and_rounds_that_do_not_a_winner() {
        // pipeline and unnest trade places round by round: a tie.
        let overlapping = [
            cell("pipeline", &[1300.0, 1240.0, 1350.0, 1260.0], &[], 5.0, 1.0),
            cell("unnest", &[1250.0, 1330.0, 1270.0, 1320.0], &[], 5.2, 5.0),
        ];
        let v = verdict(&overlapping).unwrap();
        assert!(v.contains("no single winner: "), "{v}");
        assert!(v.contains("are not told apart in this run (~ "), "{v}");
        assert!(v.contains("Groups: unnest a, pipeline a ("), "{v}");
        // single ahead in every round by about a fifth: a winner.
        let apart = [
            cell("single", &[1500.0, 1480.0, 1560.0, 1510.0], &[], 4.0, 1.0),
            cell("unnest", &[1250.0, 1230.0, 1270.0, 1260.0], &[], 5.2, 5.0),
        ];
        let v = verdict(&apart).unwrap();
        assert!(v.starts_with("Verdict (4 rounds; 95% intervals"), "{v}");
        assert!(v.contains("by round; its one pair called at 5%)"), "{v}");
        assert!(v.contains("): single won at 1512 req/s ["), "{v}");
        assert!(v.contains("unnest (1252)"), "{v}");
        assert!(!v.contains("not told apart in this run"), "{v}");
        assert_eq!(
            Ranking::of(&apart, Figure::Throughput).groups(),
            vec![
                ("single".to_owned(), "a".to_owned()),
                ("unnest".to_owned(), "b".to_owned())
            ]
        );
    }

    #[test]
    fn a_tie_on_each_side_does_not_make_the_ends_level() {
        // single ahead of unnest in every round by about a tenth; pipeline
        // between them, trading places with each: single a, pipeline ab,
        // unnest b — never "all three level".
        let cells = [
            cell(
                "single",
                &[1100.0, 1120.0, 1090.0, 1110.0, 1105.0, 1095.0],
                &[],
                4.0,
                1.0,
            ),
            cell(
                "pipeline",
                &[1080.0, 1010.0, 1110.0, 1000.0, 1090.0, 1010.0],
                &[],
                4.5,
                1.0,
            ),
            cell(
                "unnest",
                &[1000.0, 1010.0, 995.0, 1012.0, 1003.0, 998.0],
                &[],
                5.0,
                5.0,
            ),
        ];
        let r = Ranking::of(&cells, Figure::Throughput);
        assert_eq!(r.show(), "single a, pipeline ab, unnest b");
        let v = verdict(&cells).unwrap();
        assert!(
            v.contains("no single winner: single at 1103 req/s ["),
            "{v}"
        );
        assert!(v.contains("is not told apart from pipeline"), "{v}");
        assert!(v.contains("single against the rest: 1.10× ["), "{v}");
        assert!(v.contains("single and pipeline are not told apart"), "{v}");
        assert!(v.contains("pipeline and unnest are not told apart"), "{v}");
        assert!(!v.contains("single and unnest are not told apart"), "{v}");
    }

    #[test]
    fn names_the_winner_its_margins_and_what_each_held() {
        let cells = [
            cell("per_row", &[180.0, 182.0, 178.0], &[], 25.0, 54.0),
            cell("batch", &[800.0, 790.0, 810.0], &[], 5.5, 5.0),
            cell("single", &[1000.0, 1010.0, 990.0], &[], 3.0, 1.0),
        ];
        let v = verdict(&cells).unwrap();
        assert!(
            v.contains(
                "single won at 1000 req/s [975, 1025]: 1.25× [1.18, 1.32] batch (800), 5.56× ["
            ),
            "{v}"
        );
        assert!(v.contains("Groups: single a, batch b, per_row c"), "{v}");
        assert!(
            v.contains("single 3.00 ms [3.00, 3.00], 1 round trip; batch 5.50 ms [5.50, 5.50], 5 round trips"),
            "{v}"
        );
    }

    #[test]
    fn one_round_orders_by_the_means_and_says_it_cannot_call_ties() {
        let cells = [
            cell("batch", &[800.0], &[], 5.5, 5.0),
            cell("single", &[1000.0], &[], 3.0, 1.0),
        ];
        let v = verdict(&cells).unwrap();
        assert!(
            v.starts_with("Verdict (one round: one measurement, no interval, and no tie can be called): single was highest at 1000 req/s: 1.25× batch (800)"),
            "{v}"
        );
        assert!(!v.contains("won"), "{v}");
        assert!(!v.contains("Groups"), "{v}");
        assert_eq!(
            Ranking::of(&cells, Figure::Throughput).groups()[0],
            ("single".to_owned(), "-".to_owned())
        );
    }

    #[test]
    fn the_pgbench_ranking_is_compared_with_ties() {
        // chatlab: single ahead of both, unnest and pipeline level;
        // pgbench: every pair apart, unnest ahead of pipeline.
        let cells = [
            cell(
                "single",
                &[1500.0, 1520.0, 1480.0, 1510.0],
                &[1600.0, 1610.0, 1590.0, 1605.0],
                4.0,
                1.0,
            ),
            cell(
                "pipeline",
                &[1300.0, 1240.0, 1350.0, 1260.0],
                &[1300.0, 1290.0, 1310.0, 1295.0],
                5.0,
                1.0,
            ),
            cell(
                "unnest",
                &[1250.0, 1330.0, 1270.0, 1320.0],
                &[1400.0, 1395.0, 1410.0, 1402.0],
                5.0,
                5.0,
            ),
        ];
        let v = verdict(&cells).unwrap();
        assert!(
            v.contains("Ranking: chatlab single a, unnest b, pipeline b; pgbench on the same SQL single a, unnest b, pipeline c (no pair in opposite order; one of the two calls level what the other tells apart: unnest and pipeline)."),
            "{v}"
        );
        // Now chatlab clearly puts pipeline ahead where pgbench puts it behind.
        let mut flipped = cells.clone();
        flipped[1] = cell(
            "pipeline",
            &[1400.0, 1410.0, 1390.0, 1405.0],
            &[1300.0, 1290.0, 1310.0, 1295.0],
            5.0,
            1.0,
        );
        flipped[2] = cell(
            "unnest",
            &[1200.0, 1210.0, 1190.0, 1205.0],
            &[1400.0, 1395.0, 1410.0, 1402.0],
            5.0,
            5.0,
        );
        let a = agreement(
            &flipped,
            &Ranking::of(&flipped, Figure::Throughput),
            &Ranking::of(&flipped, Figure::Pgbench),
        );
        assert_eq!(
            a.opposite,
            vec![("pipeline".to_owned(), "unnest".to_owned())]
        );
        assert!(
            verdict(&flipped)
                .unwrap()
                .contains("they differ: chatlab puts pipeline ahead of unnest")
        );
        let same = [cells[0].clone(), flipped[1].clone()];
        assert!(
            verdict(&same)
                .unwrap()
                .ends_with("(the same, ties included).")
        );
    }

    #[test]
    fn says_nothing_when_more_than_the_strategy_varies() {
        let mut other = cell("batch", &[800.0], &[], 5.5, 5.0);
        other.members = 20;
        assert!(verdict(&[cell("per_row", &[180.0], &[], 25.0, 54.0), other]).is_none());
        assert!(verdict(&[cell("batch", &[800.0], &[], 5.5, 5.0)]).is_none());
        let twice = [
            cell("batch", &[800.0], &[], 5.5, 5.0),
            cell("batch", &[700.0], &[], 5.5, 5.0),
        ];
        assert!(verdict(&twice).is_none());
    }

    #[test]
    fn the_widest_ratio_names_itself_and_needs_two_rounds() {
        let cells = [
            cell(
                "single",
                &[1500.0, 1520.0, 1480.0],
                &[1600.0, 1610.0, 1590.0],
                4.0,
                1.0,
            ),
            cell(
                "unnest",
                &[1250.0, 1330.0, 1270.0],
                &[1400.0, 1395.0, 1410.0],
                5.0,
                5.0,
            ),
        ];
        let (name, w) = widest_ratio(&cells).unwrap();
        assert!(
            name == "single / unnest" || name == "unnest / pgbench",
            "{name}"
        );
        assert!(w > 0.01 && w < 0.5, "{w}");
        let one = [
            cell("single", &[1500.0], &[], 4.0, 1.0),
            cell("unnest", &[1250.0], &[], 5.0, 5.0),
        ];
        assert!(widest_ratio(&one).is_none());
    }
}
