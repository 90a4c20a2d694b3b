//! The order of a grid's runs and when it has run enough.
//!
//! Within a round every strategy runs once, A B C in even rounds and C B A
//! in odd ones, and each cell's yardstick (pgbench on its SQL) runs right
//! beside it, after it in even rounds and before it in odd ones; with
//! several fleets (server variants × pool sizes) each round starts every
//! fleet again, in the same alternating order. So a machine that drifts (a
//! warming cache, a growing table, a neighbour's build) weighs on every
//! side of every comparison alike, and every round gives one paired ratio.
//!
//! How many rounds: `--rounds` of them, or with `--until-within` as many
//! more as it takes for every ratio the verdict uses to have a 95%
//! interval within that share of its estimate, until the time budget or
//! `--max-rounds` says stop; the run reports which.

use std::time::Duration;

/// Items of a round (its fleets, its strategies) in its order: as given
/// in even rounds, reversed in odd ones.
pub fn in_round_order<T: Clone>(items: &[T], round: usize) -> Vec<T> {
    let mut order = items.to_vec();
    if !round.is_multiple_of(2) {
        order.reverse();
    }
    order
}

/// Whether a cell's yardstick runs before it in `round` (odd rounds).
pub fn yardstick_first(round: usize) -> bool {
    !round.is_multiple_of(2)
}

/// How many rounds a grid runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rounds {
    /// At least this many.
    pub min: usize,
    /// At most this many, whatever the intervals say.
    pub max: usize,
    /// Keep adding rounds until every ratio's interval is within this
    /// share of its estimate (0.05: ±5%); `None`: exactly `min`.
    pub within: Option<f64>,
    /// No new round once the grid has run this long (with `within`).
    pub budget: Option<Duration>,
}

/// Why a grid (or one point of it) stopped adding rounds.
#[derive(Debug, Clone, PartialEq)]
pub enum Stopped {
    /// It ran the rounds it was asked for.
    Fixed {
        /// Rounds run.
        rounds: usize,
    },
    /// Every ratio came within the asked width.
    Settled {
        /// Rounds run.
        rounds: usize,
        /// The widest ratio and its half-width.
        widest: (String, f64),
    },
    /// The time budget ran out first.
    Budget {
        /// Rounds run.
        rounds: usize,
        /// The widest ratio then (`None`: none had an interval yet).
        widest: Option<(String, f64)>,
    },
    /// `--max-rounds` came first.
    MaxRounds {
        /// Rounds run.
        rounds: usize,
        /// The widest ratio then.
        widest: Option<(String, f64)>,
    },
}

impl Rounds {
    /// Whether another round should run after `done` rounds, given the
    /// widest ratio so far (`None`: some ratio has no interval yet), the
    /// time spent and how long the last round took. `Err` says why not.
    pub fn another(
        &self,
        done: usize,
        widest: Option<(String, f64)>,
        spent: Duration,
        last_round: Duration,
    ) -> Result<(), Stopped> {
        if done < self.min.max(1) {
            return Ok(());
        }
        let Some(within) = self.within else {
            return Err(Stopped::Fixed { rounds: done });
        };
        if let Some((name, w)) = &widest
            && *w <= within
        {
            return Err(Stopped::Settled {
                rounds: done,
                widest: (name.clone(), *w),
            });
        }
        if done >= self.max {
            return Err(Stopped::MaxRounds {
                rounds: done,
                widest,
            });
        }
        if self.budget.is_some_and(|b| spent + last_round > b) {
            return Err(Stopped::Budget {
                rounds: done,
                widest,
            });
        }
        Ok(())
    }
}

impl Stopped {
    /// One sentence for results.md.
    pub fn describe(&self, within: Option<f64>, budget: Option<Duration>) -> String {
        let widest = |w: &Option<(String, f64)>| match w {
            Some((name, w)) => format!("the widest interval, {name}, is ±{:.1}%", 100.0 * w),
            None => "some ratio has no interval yet".to_owned(),
        };
        let target = within.map_or_else(String::new, |w| format!("±{:.1}%", 100.0 * w));
        match self {
            Self::Fixed { rounds } => format!("{rounds} round(s), as asked."),
            Self::Settled { rounds, widest } => format!(
                "{rounds} rounds: every ratio the verdict uses came within {target} (the widest, {}, ±{:.1}%).",
                widest.0,
                100.0 * widest.1
            ),
            Self::Budget { rounds, widest: w } => format!(
                "{rounds} rounds: the time budget ({}) ran out before every ratio came within {target}; {}.",
                budget.map_or_else(
                    || "-".to_owned(),
                    |b| humantime::format_duration(b).to_string()
                ),
                widest(w)
            ),
            Self::MaxRounds { rounds, widest: w } => format!(
                "{rounds} rounds, the most allowed (--max-rounds), before every ratio came within {target}; {}.",
                widest(w)
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_alternate_their_order() {
        let fleets = [(0, 5), (1, 5), (2, 5)];
        assert_eq!(in_round_order(&fleets, 0), fleets.to_vec());
        assert_eq!(in_round_order(&fleets, 1), vec![(2, 5), (1, 5), (0, 5)]);
        assert_eq!(in_round_order(&["a", "b"], 3), vec!["b", "a"]);
        assert!(!yardstick_first(0) && yardstick_first(1));
    }

    fn adaptive(min: usize, max: usize, budget_s: u64) -> Rounds {
        Rounds {
            min,
            max,
            within: Some(0.05),
            budget: Some(Duration::from_secs(budget_s)),
        }
    }

    #[test]
    fn fixed_rounds_run_exactly() {
        let r = Rounds {
            min: 3,
            max: 50,
            within: None,
            budget: None,
        };
        let s = Duration::from_secs(1);
        assert!(r.another(2, None, s, s).is_ok());
        assert_eq!(r.another(3, None, s, s), Err(Stopped::Fixed { rounds: 3 }));
    }

    #[test]
    fn adaptive_rounds_stop_when_settled_out_of_time_or_at_the_cap() {
        let s = Duration::from_secs(10);
        let wide = Some(("a / b".to_owned(), 0.08));
        let narrow = Some(("a / b".to_owned(), 0.04));
        // Below the minimum: always another.
        assert!(
            adaptive(3, 20, 600)
                .another(2, narrow.clone(), s, s)
                .is_ok()
        );
        // Wide and time left: another.
        assert!(adaptive(3, 20, 600).another(3, wide.clone(), s, s).is_ok());
        assert!(adaptive(3, 20, 600).another(3, None, s, s).is_ok());
        // Narrow: settled.
        assert!(matches!(
            adaptive(3, 20, 600).another(4, narrow, s, s),
            Err(Stopped::Settled { rounds: 4, .. })
        ));
        // Wide, but the next round would pass the budget.
        let out = adaptive(3, 20, 600).another(5, wide.clone(), Duration::from_secs(595), s);
        assert!(
            matches!(out, Err(Stopped::Budget { rounds: 5, .. })),
            "{out:?}"
        );
        let text = out
            .unwrap_err()
            .describe(Some(0.05), Some(Duration::from_secs(600)));
        assert!(
            text.contains("budget (10m) ran out") && text.contains("a / b, is ±8.0%"),
            "{text}"
        );
        // Wide at the cap.
        assert!(matches!(
            adaptive(3, 6, 600).another(6, wide, s, s),
            Err(Stopped::MaxRounds { rounds: 6, .. })
        ));
    }
}
