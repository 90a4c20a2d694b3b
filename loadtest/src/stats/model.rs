//! The round-trip model, checked: at a distance, a request should hold its
//! connection for what it held on loopback plus one added round trip per
//! round trip it makes,
//!
//! ```text
//! hold(RTT) = hold(0) + round trips × (round trip at RTT − round trip at 0)
//! ```
//!
//! with the round trips the server counts for it (its plan's), and the
//! round trip as pgbench `SELECT 1` measured it at each distance. Beside
//! the prediction stand the round trips the hop saw on the wire and the
//! ones the measured hold implies, so a round trip the plan does not count
//! shows as a difference between them.

use std::fmt::Write as _;

use crate::report::results::CellResult;
use crate::servers::reach::show_ms;

/// One cell at a distance against its loopback twin.
#[derive(Debug, Clone, PartialEq)]
pub struct Check {
    /// The hold the model predicts, ms.
    pub predicted_hold_ms: f64,
    /// The median latency it predicts (one client: no queue), ms.
    pub predicted_p50_ms: f64,
    /// (measured − predicted) / predicted, of the hold.
    pub hold_off: f64,
    /// The round trips the measured hold implies: its growth over the
    /// added round trip.
    pub implied_round_trips: f64,
}

/// The cell at RTT 0 that `c` is the twin of: everything equal but the
/// distance.
fn twin<'a>(cells: &'a [CellResult], c: &CellResult) -> Option<&'a CellResult> {
    cells.iter().find(|b| {
        b.db_rtt_ms == 0.0
            && b.server == c.server
            && b.pool_size == c.pool_size
            && b.scenario == c.scenario
            && b.publish_mode == c.publish_mode
            && b.strategy == c.strategy
            && b.members == c.members
            && b.vus == c.vus
    })
}

/// The model's check of `c` against `base`, its twin on loopback; `None`
/// when either lacks a round-trip count or the distance added nothing.
pub fn check(c: &CellResult, base: &CellResult) -> Option<Check> {
    let added = c.db_round_trip_ms - base.db_round_trip_ms;
    if c.round_trips <= 0.0 || added <= 0.0 || base.use_time_mean_ms <= 0.0 {
        return None;
    }
    let predicted_hold_ms = base.use_time_mean_ms + c.round_trips * added;
    Some(Check {
        predicted_hold_ms,
        predicted_p50_ms: base.p50_ms + c.round_trips * added,
        hold_off: (c.use_time_mean_ms - predicted_hold_ms) / predicted_hold_ms,
        implied_round_trips: (c.use_time_mean_ms - base.use_time_mean_ms) / added,
    })
}

/// The model beside the measurements, a row per cell at a distance with a
/// loopback twin. Empty when there is none.
pub fn model_markdown(cells: &[CellResult]) -> String {
    let mut rows = String::new();
    for c in cells.iter().filter(|c| c.db_rtt_ms > 0.0) {
        let Some(base) = twin(cells, c) else {
            continue;
        };
        let Some(m) = check(c, base) else {
            continue;
        };
        let wire = if c.wire_round_trips > 0.0 {
            format!("{:.1}", c.wire_round_trips)
        } else {
            "-".to_owned()
        };
        let _ = writeln!(
            rows,
            "| {} | {} | {} | {} | {:.3} | {:.1} | {wire} | {:.1} | {:.2} | {:.2} | {:.2} | {:+.1}% | {:.2} | {:.2} |",
            c.strategy,
            c.members,
            c.vus,
            show_ms(c.db_rtt_ms),
            c.db_round_trip_ms,
            c.round_trips,
            m.implied_round_trips,
            base.use_time_mean_ms,
            c.use_time_mean_ms,
            m.predicted_hold_ms,
            100.0 * m.hold_off,
            c.p50_ms,
            m.predicted_p50_ms,
        );
    }
    if rows.is_empty() {
        return rows;
    }
    format!(
        "| strategy | members | VUs | RTT set ms | round trip measured ms | round trips counted | on the wire | implied by the hold | held at 0 ms | held ms | held, predicted ms | off | p50 ms | p50, predicted ms |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n{rows}"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(strategy: &str, rtt: f64, measured_rtt: f64, trips: f64, held: f64) -> CellResult {
        CellResult {
            strategy: strategy.into(),
            members: 50,
            vus: 1,
            db_rtt_ms: rtt,
            db_round_trip_ms: measured_rtt,
            round_trips: trips,
            use_time_mean_ms: held,
            p50_ms: held + 0.3,
            ..CellResult::default()
        }
    }

    #[test]
    fn a_hold_that_grows_by_its_round_trips_fits_and_one_that_does_not_shows_its_extra_trips() {
        let cells = [
            cell("single", 0.0, 0.02, 1.0, 0.40),
            // One round trip counted, two made: the hold grew by two RTTs.
            cell("single", 1.0, 1.02, 1.0, 0.40 + 2.0),
            cell("unnest", 0.0, 0.02, 5.0, 0.60),
            cell("unnest", 1.0, 1.02, 5.0, 0.60 + 5.0),
        ];
        let single = check(&cells[1], &cells[0]).unwrap();
        assert!((single.predicted_hold_ms - 1.40).abs() < 1e-9);
        assert!((single.implied_round_trips - 2.0).abs() < 1e-9);
        assert!(single.hold_off > 0.7);
        let unnest = check(&cells[3], &cells[2]).unwrap();
        assert!(unnest.hold_off.abs() < 1e-9);
        let md = model_markdown(&cells);
        assert!(
            md.contains(
                "| single | 50 | 1 | 1 | 1.020 | 1.0 | - | 2.0 | 0.40 | 2.40 | 1.40 | +71.4% |"
            ),
            "{md}"
        );
        assert!(
            md.contains(
                "| unnest | 50 | 1 | 1 | 1.020 | 5.0 | - | 5.0 | 0.60 | 5.60 | 5.60 | +0.0% |"
            ),
            "{md}"
        );
        assert_eq!(model_markdown(&cells[..1]), "");
    }
}
