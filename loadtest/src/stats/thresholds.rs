//! Pass/fail thresholds, k6-style: `p95<150`, `p99<400`, `errors<0.01`,
//! `rps>100`, `max<2000`. A broken threshold makes the run exit non-zero.

use std::fmt;

/// What a threshold measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Measure {
    /// Median latency, ms.
    P50,
    /// 95th percentile latency, ms.
    P95,
    /// 99th percentile latency, ms.
    P99,
    /// Slowest request, ms.
    Max,
    /// Failed requests / all requests.
    ErrorRate,
    /// Completed requests per second.
    Rps,
}

/// `<` or `>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Comparison {
    /// Must stay below.
    Below,
    /// Must stay above.
    Above,
}

/// One threshold.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Threshold {
    /// What.
    pub measure: Measure,
    /// Which way.
    pub comparison: Comparison,
    /// The bound.
    pub bound: f64,
}

impl fmt::Display for Threshold {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self.measure {
            Measure::P50 => "p50",
            Measure::P95 => "p95",
            Measure::P99 => "p99",
            Measure::Max => "max",
            Measure::ErrorRate => "errors",
            Measure::Rps => "rps",
        };
        let op = match self.comparison {
            Comparison::Below => '<',
            Comparison::Above => '>',
        };
        write!(f, "{name}{op}{}", self.bound)
    }
}

impl std::str::FromStr for Threshold {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        let (i, comparison) = s
            .char_indices()
            .find_map(|(i, c)| match c {
                '<' => Some((i, Comparison::Below)),
                '>' => Some((i, Comparison::Above)),
                _ => None,
            })
            .ok_or_else(|| format!("threshold {s:?} has no < or >"))?;
        let measure = match s[..i].trim() {
            "p50" => Measure::P50,
            "p95" => Measure::P95,
            "p99" => Measure::P99,
            "max" => Measure::Max,
            "errors" | "error_rate" => Measure::ErrorRate,
            "rps" => Measure::Rps,
            other => return Err(format!("unknown threshold measure {other:?}")),
        };
        let bound: f64 = s[i + 1..]
            .trim()
            .parse()
            .map_err(|_| format!("threshold {s:?}: bound is not a number"))?;
        Ok(Self {
            measure,
            comparison,
            bound,
        })
    }
}

/// The figures thresholds are checked against.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Figures {
    /// p50, ms.
    pub p50_ms: f64,
    /// p95, ms.
    pub p95_ms: f64,
    /// p99, ms.
    pub p99_ms: f64,
    /// max, ms.
    pub max_ms: f64,
    /// errors / requests.
    pub error_rate: f64,
    /// requests per second.
    pub rps: f64,
}

impl Threshold {
    /// The measured value and whether it keeps the threshold.
    pub fn check(&self, f: &Figures) -> (f64, bool) {
        let value = match self.measure {
            Measure::P50 => f.p50_ms,
            Measure::P95 => f.p95_ms,
            Measure::P99 => f.p99_ms,
            Measure::Max => f.max_ms,
            Measure::ErrorRate => f.error_rate,
            Measure::Rps => f.rps,
        };
        let kept = match self.comparison {
            Comparison::Below => value < self.bound,
            Comparison::Above => value > self.bound,
        };
        (value, kept)
    }
}

/// The broken thresholds, described.
pub fn breaches(thresholds: &[Threshold], figures: &Figures) -> Vec<String> {
    thresholds
        .iter()
        .filter_map(|t| {
            let (value, kept) = t.check(figures);
            (!kept).then(|| format!("threshold {t} broken: measured {value:.3}"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_checks() {
        let t: Threshold = "p95<150".parse().unwrap();
        assert_eq!(t.measure, Measure::P95);
        let figures = Figures {
            p95_ms: 149.0,
            rps: 90.0,
            error_rate: 0.02,
            ..Figures::default()
        };
        assert!(t.check(&figures).1);
        let all: Vec<Threshold> = ["p95<150", "rps>100", "errors<0.01"]
            .iter()
            .map(|s| s.parse().unwrap())
            .collect();
        let broken = breaches(&all, &figures);
        assert_eq!(broken.len(), 2);
        assert!(broken[0].contains("rps>100"));
        assert!("p95=3".parse::<Threshold>().is_err());
        assert!("p90<3".parse::<Threshold>().is_err());
        assert!("p95<x".parse::<Threshold>().is_err());
    }
}
