//! The verdict of a run that compares strategies on otherwise equal cells:
//! two lines a newcomer can read without the table.

use crate::report::CellResult;

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
        )
    };
    let mut strategies: Vec<&str> = cells.iter().map(|c| c.strategy.as_str()).collect();
    strategies.sort_unstable();
    strategies.dedup();
    cells.len() >= 2
        && strategies.len() == cells.len()
        && cells.iter().all(|c| key(c) == key(first))
}

/// The strategies from fastest to slowest by `figure`.
pub fn ranking(cells: &[CellResult], figure: impl Fn(&CellResult) -> f64) -> Vec<&str> {
    let mut ranked: Vec<&CellResult> = cells.iter().collect();
    ranked.sort_by(|a, b| figure(b).total_cmp(&figure(a)));
    ranked.into_iter().map(|c| c.strategy.as_str()).collect()
}

/// Two lines: which strategy won and by how much, and what each held of
/// its connection and how many round trips it took. `None` unless the
/// cells differ by strategy alone (one cell per strategy, at least two).
pub fn verdict(cells: &[CellResult]) -> Option<String> {
    if !compares_strategies(cells) {
        return None;
    }
    let first = cells.first()?;
    let mut ranked: Vec<&CellResult> = cells.iter().collect();
    ranked.sort_by(|a, b| b.throughput_rps.total_cmp(&a.throughput_rps));
    let best = ranked[0];
    let others: Vec<String> = ranked[1..]
        .iter()
        .map(|c| {
            format!(
                "{:.2}× {} ({:.0})",
                best.throughput_rps / c.throughput_rps.max(1e-9),
                c.strategy,
                c.throughput_rps
            )
        })
        .collect();
    let held: Vec<String> = ranked
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
            format!("{} {:.2} ms{trips}", c.strategy, c.use_time_mean_ms)
        })
        .collect();
    let mut out = format!(
        "Verdict: {} won at {:.0} req/s: {} ({} members, {} VUs).\n\
         Connection held per request, mean: {}.",
        best.strategy,
        best.throughput_rps,
        others.join(", "),
        first.members,
        first.vus,
        held.join("; ")
    );
    if cells.iter().all(|c| c.pgbench_tps > 0.0) {
        let ours = ranking(cells, |c| c.throughput_rps);
        let theirs = ranking(cells, |c| c.pgbench_tps);
        out.push_str(&format!(
            "\nRanking: chatlab {}; pgbench on the same SQL {} ({}).",
            ours.join(" > "),
            theirs.join(" > "),
            if ours == theirs {
                "the same"
            } else {
                "they differ"
            }
        ));
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(strategy: &str, rps: f64, held: f64, trips: f64) -> CellResult {
        CellResult {
            strategy: strategy.into(),
            members: 50,
            vus: 20,
            throughput_rps: rps,
            use_time_mean_ms: held,
            round_trips: trips,
            ..CellResult::default()
        }
    }

    #[test]
    fn names_the_winner_its_margins_and_what_each_held() {
        let cells = [
            cell("per_row", 180.0, 25.0, 54.0),
            cell("batch", 800.0, 5.5, 5.0),
            cell("single", 1000.0, 3.0, 1.0),
        ];
        let v = verdict(&cells).unwrap();
        assert!(
            v.starts_with(
                "Verdict: single won at 1000 req/s: 1.25× batch (800), 5.56× per_row (180)"
            ),
            "{v}"
        );
        assert!(
            v.contains("single 3.00 ms, 1 round trip; batch 5.50 ms, 5 round trips"),
            "{v}"
        );
    }

    #[test]
    fn sets_its_ranking_beside_pgbench_s() {
        let mut cells = [
            cell("per_row", 180.0, 25.0, 54.0),
            cell("batch", 800.0, 5.5, 5.0),
            cell("single", 1000.0, 3.0, 1.0),
        ];
        for (c, tps) in cells.iter_mut().zip([200.0, 1100.0, 1000.0]) {
            c.pgbench_tps = tps;
        }
        let v = verdict(&cells).unwrap();
        assert!(
            v.ends_with(
                "Ranking: chatlab single > batch > per_row; pgbench on the same SQL batch > single > per_row (they differ)."
            ),
            "{v}"
        );
        cells[1].pgbench_tps = 900.0;
        assert!(verdict(&cells).unwrap().ends_with("(the same)."));
    }

    #[test]
    fn says_nothing_when_more_than_the_strategy_varies() {
        let mut other = cell("batch", 800.0, 5.5, 5.0);
        other.members = 20;
        assert!(verdict(&[cell("per_row", 180.0, 25.0, 54.0), other]).is_none());
        assert!(verdict(&[cell("batch", 800.0, 5.5, 5.0)]).is_none());
        let twice = [
            cell("batch", 800.0, 5.5, 5.0),
            cell("batch", 700.0, 5.5, 5.0),
        ];
        assert!(verdict(&twice).is_none());
    }
}
