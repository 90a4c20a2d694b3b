//! What a run's rounds say about its figures: a 95% interval on every
//! figure and on every ratio between two cells, and whether a difference
//! is one at all.
//!
//! The method (docs/experiments.md, "How sure a verdict is"): Student's t
//! over the rounds.
//! - A figure's interval is its mean over n rounds ± t(0.975, n − 1) · s / √n.
//! - A ratio between two cells is taken round by round, since the cells of
//!   one round ran side by side (and a cell's yardstick ran right beside
//!   it): its estimate is the geometric mean of the rounds' ratios, and its
//!   interval the t interval of their logarithms, turned back. The
//!   logarithm makes `a / b` and `b / a` one interval seen from both ends.
//! - A ratio whose interval holds 1.0 is a tie (benchstat's `~`): the run
//!   cannot tell the two apart, whatever their means say.
//!
//! t rather than the bootstrap: with the three to ten rounds a run has, a
//! bootstrap interval is no wider than the rounds' own range and calls
//! too many winners; t is the textbook interval for a few roughly normal
//! rounds, and an outlying round is flagged ([`outliers`]) rather than
//! trusted to be normal.

use std::fmt;

use statrs::distribution::{ContinuousCDF, StudentsT};

/// Confidence of every interval the load tool prints.
pub const CONFIDENCE: f64 = 0.95;

/// An estimate from rounds and its 95% interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Interval {
    /// The mean of the rounds (a ratio: the geometric mean of theirs).
    pub estimate: f64,
    /// Lower end.
    pub lo: f64,
    /// Upper end.
    pub hi: f64,
    /// Rounds it comes from.
    pub rounds: usize,
}

/// What a ratio's interval says of its two sides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Call {
    /// The first is ahead: the whole interval is above 1.
    Ahead,
    /// The first is behind: the whole interval is below 1.
    Behind,
    /// The interval holds 1: no difference this run can tell.
    Tie,
}

/// t's two-sided 95% quantile at `df` degrees of freedom.
fn t_quantile(df: usize) -> Option<f64> {
    let t = StudentsT::new(0.0, 1.0, df as f64).ok()?;
    Some(t.inverse_cdf(0.5 + CONFIDENCE / 2.0))
}

/// The mean of `values` and its standard error's half-width at 95%.
fn mean_and_half_width(values: &[f64]) -> Option<(f64, f64)> {
    let n = values.len();
    if n < 2 || values.iter().any(|v| !v.is_finite()) {
        return None;
    }
    let mean = values.iter().sum::<f64>() / n as f64;
    let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
    Some((mean, t_quantile(n - 1)? * (var / n as f64).sqrt()))
}

impl Interval {
    /// The mean of `values` (one per round) and its t interval; `None`
    /// with fewer than two rounds or a value that is not a number.
    pub fn of_mean(values: &[f64]) -> Option<Self> {
        let (mean, half) = mean_and_half_width(values)?;
        Some(Self {
            estimate: mean,
            lo: mean - half,
            hi: mean + half,
            rounds: values.len(),
        })
    }

    /// The ratio `a / b` from paired rounds (`(a, b)` of one round each):
    /// the geometric mean of the rounds' ratios and its t interval on the
    /// log scale; `None` with fewer than two pairs or a side that is not
    /// positive.
    pub fn of_ratio(pairs: &[(f64, f64)]) -> Option<Self> {
        if pairs.iter().any(|&(a, b)| !(a > 0.0 && b > 0.0)) {
            return None;
        }
        let logs: Vec<f64> = pairs.iter().map(|&(a, b)| (a / b).ln()).collect();
        let (mean, half) = mean_and_half_width(&logs)?;
        Some(Self {
            estimate: mean.exp(),
            lo: (mean - half).exp(),
            hi: (mean + half).exp(),
            rounds: pairs.len(),
        })
    }

    /// A ratio's call: ahead, behind, or a tie when the interval holds 1.
    pub fn call(&self) -> Call {
        if self.lo > 1.0 {
            Call::Ahead
        } else if self.hi < 1.0 {
            Call::Behind
        } else {
            Call::Tie
        }
    }

    /// How far the interval reaches from its estimate, as a share of it
    /// (0.05: ±5%); the larger side for a ratio's uneven interval.
    pub fn relative_half_width(&self) -> f64 {
        if self.estimate == 0.0 {
            return f64::INFINITY;
        }
        ((self.hi - self.estimate) / self.estimate)
            .abs()
            .max(((self.estimate - self.lo) / self.estimate).abs())
    }

    /// Every end multiplied by `k` (a share shown as a percentage).
    pub fn scaled(&self, k: f64) -> Self {
        Self {
            estimate: self.estimate * k,
            lo: self.lo * k,
            hi: self.hi * k,
            rounds: self.rounds,
        }
    }

    /// `1210 [1150, 1270]` at `decimals`.
    pub fn show(&self, decimals: usize) -> String {
        format!(
            "{:.d$} [{:.d$}, {:.d$}]",
            self.estimate,
            self.lo,
            self.hi,
            d = decimals
        )
    }

    /// With a unit after the estimate: `1210 req/s [1150, 1270]`.
    pub fn show_unit(&self, decimals: usize, unit: &str) -> String {
        format!(
            "{:.d$} {unit} [{:.d$}, {:.d$}]",
            self.estimate,
            self.lo,
            self.hi,
            d = decimals
        )
    }

    /// A ratio: `1.20× [1.12, 1.27]`.
    pub fn show_ratio(&self) -> String {
        format!("{:.2}× [{:.2}, {:.2}]", self.estimate, self.lo, self.hi)
    }

    /// A ratio marked `~` when it is a tie: `~ 1.02× [0.97, 1.07]`.
    pub fn show_called(&self) -> String {
        match self.call() {
            Call::Tie => format!("~ {}", self.show_ratio()),
            Call::Ahead | Call::Behind => self.show_ratio(),
        }
    }

    /// A share as a percentage: `109% [101, 117]`.
    pub fn show_percent(&self) -> String {
        let p = self.scaled(100.0);
        format!("{:.0}% [{:.0}, {:.0}]", p.estimate, p.lo, p.hi)
    }
}

impl fmt::Display for Interval {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.show(2))
    }
}

/// Rounds that stand out from the others: more than 3.5 robust standard
/// deviations (1.4826 × the median absolute deviation) from the median
/// (Iglewicz and Hoaglin's modified z-score). Indices into `values`;
/// none with fewer than three rounds.
pub fn outliers(values: &[f64]) -> Vec<usize> {
    if values.len() < 3 {
        return Vec::new();
    }
    let m = median(values);
    let deviations: Vec<f64> = values.iter().map(|v| (v - m).abs()).collect();
    let mad = median(&deviations);
    // All but one round equal: the median deviation is 0, and any round
    // apart from them stands out by any measure.
    let scale = if mad > 0.0 {
        1.4826 * mad
    } else {
        let mean_dev = deviations.iter().sum::<f64>() / values.len() as f64;
        if mean_dev == 0.0 {
            return Vec::new();
        }
        1.2533 * mean_dev
    };
    deviations
        .iter()
        .enumerate()
        .filter(|(_, d)| **d / scale > 3.5)
        .map(|(i, _)| i)
        .collect()
}

/// The median of `values` (0 for none).
pub fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    match sorted.len() {
        0 => 0.0,
        n if n % 2 == 1 => sorted[n / 2],
        n => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn t_quantiles_are_the_textbook_ones() {
        for (df, t) in [(1, 12.706), (2, 4.303), (4, 2.776), (9, 2.262), (30, 2.042)] {
            let q = t_quantile(df).unwrap();
            assert!((q - t).abs() < 0.001, "df {df}: {q}");
        }
    }

    #[test]
    fn a_mean_s_interval_is_t_times_its_standard_error() {
        // Mean 10, s = 1, n = 4: 10 ± 3.182 · 1/2.
        let i = Interval::of_mean(&[9.0, 11.0, 9.0, 11.0]).unwrap();
        let s = (4.0f64 / 3.0).sqrt();
        assert!((i.estimate - 10.0).abs() < 1e-9);
        assert!((i.hi - (10.0 + 3.182 * s / 2.0)).abs() < 0.01, "{i:?}");
        assert!((i.lo - (10.0 - 3.182 * s / 2.0)).abs() < 0.01, "{i:?}");
        assert!(Interval::of_mean(&[1.0]).is_none());
        assert!(Interval::of_mean(&[1.0, f64::NAN]).is_none());
    }

    #[test]
    fn a_ratio_is_the_geometric_mean_of_the_rounds_and_reads_both_ways() {
        let pairs = [(120.0, 100.0), (110.0, 100.0), (130.0, 100.0)];
        let i = Interval::of_ratio(&pairs).unwrap();
        let g = (1.2f64 * 1.1 * 1.3).powf(1.0 / 3.0);
        assert!((i.estimate - g).abs() < 1e-9, "{i:?}");
        assert!(i.lo < g && g < i.hi);
        let swapped: Vec<(f64, f64)> = pairs.iter().map(|&(a, b)| (b, a)).collect();
        let back = Interval::of_ratio(&swapped).unwrap();
        assert!((back.lo - 1.0 / i.hi).abs() < 1e-9 && (back.hi - 1.0 / i.lo).abs() < 1e-9);
        assert!(Interval::of_ratio(&[(1.0, 0.0), (1.0, 1.0)]).is_none());
    }

    #[test]
    fn overlapping_rounds_are_a_tie_and_separate_ones_a_winner() {
        // Each round's ratio on both sides of 1: a tie.
        let close = [
            (1000.0, 980.0),
            (970.0, 1010.0),
            (1020.0, 990.0),
            (990.0, 1000.0),
        ];
        assert_eq!(Interval::of_ratio(&close).unwrap().call(), Call::Tie);
        // Every round 20% ahead, give or take 2%: a winner.
        let apart = [
            (1200.0, 1000.0),
            (1180.0, 990.0),
            (1230.0, 1010.0),
            (1190.0, 1000.0),
        ];
        let i = Interval::of_ratio(&apart).unwrap();
        assert_eq!(i.call(), Call::Ahead);
        let behind: Vec<(f64, f64)> = apart.iter().map(|&(a, b)| (b, a)).collect();
        assert_eq!(Interval::of_ratio(&behind).unwrap().call(), Call::Behind);
    }

    #[test]
    fn widths_and_shapes_as_printed() {
        let i = Interval {
            estimate: 1.2,
            lo: 1.12,
            hi: 1.27,
            rounds: 5,
        };
        assert_eq!(i.show_ratio(), "1.20× [1.12, 1.27]");
        assert!((i.relative_half_width() - 0.08 / 1.2).abs() < 1e-9);
        assert_eq!(i.scaled(0.9).show_percent(), "108% [101, 114]");
        let pair = Interval::of_mean(&[1200.0, 1220.0]).unwrap();
        assert!(pair.show(0).starts_with("1210 ["), "{}", pair.show(0));
    }

    #[test]
    fn an_outlying_round_is_flagged_and_a_steady_run_is_not() {
        assert_eq!(outliers(&[1000.0, 1010.0, 990.0, 1005.0, 1500.0]), vec![4]);
        assert!(outliers(&[1000.0, 1010.0, 990.0, 1005.0, 1020.0]).is_empty());
        assert!(outliers(&[1000.0, 2000.0]).is_empty());
        assert_eq!(outliers(&[5.0, 5.0, 5.0, 5.0, 5.0, 9.0]), vec![5]);
        assert!(outliers(&[5.0, 5.0, 5.0]).is_empty());
    }
}
