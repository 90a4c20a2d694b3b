//! Reading the servers' `/metrics` (Prometheus / OpenMetrics text): samples
//! by name and labels, and histograms as bucket snapshots whose difference
//! over a run gives that run's quantiles.

use std::collections::BTreeMap;

/// One sample line: name, labels, value.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// Metric name as printed (`db_client_connection_count`).
    pub name: String,
    /// Labels, sorted by name.
    pub labels: BTreeMap<String, String>,
    /// The value.
    pub value: f64,
}

/// A parsed exposition.
#[derive(Debug, Clone, Default)]
pub struct Exposition {
    samples: Vec<Sample>,
}

impl Exposition {
    /// Parses the text; comment and malformed lines are skipped.
    pub fn parse(text: &str) -> Self {
        let samples = text.lines().filter_map(parse_line).collect();
        Self { samples }
    }

    /// Samples named `name` whose labels include every pair of `labels`.
    pub fn matching<'a>(
        &'a self,
        name: &'a str,
        labels: &'a [(&'a str, &'a str)],
    ) -> impl Iterator<Item = &'a Sample> + 'a {
        self.samples.iter().filter(move |s| {
            s.name == name
                && labels
                    .iter()
                    .all(|(k, v)| s.labels.get(*k).is_some_and(|x| x == v))
        })
    }

    /// The sum of the matching samples (0 when none match).
    pub fn sum(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.matching(name, labels).map(|s| s.value).sum()
    }

    /// The histogram `base` (`…_bucket`, `…_sum`, `…_count`), summed over
    /// every series matching `labels`.
    pub fn histogram(&self, base: &str, labels: &[(&str, &str)]) -> HistogramSnapshot {
        let bucket_name = format!("{base}_bucket");
        let mut buckets: BTreeMap<u64, (f64, f64)> = BTreeMap::new();
        for s in self.matching(&bucket_name, labels) {
            let Some(le) = s.labels.get("le") else {
                continue;
            };
            let bound = if le == "+Inf" {
                f64::INFINITY
            } else {
                le.parse().unwrap_or(f64::INFINITY)
            };
            let entry = buckets.entry(bound.to_bits()).or_insert((bound, 0.0));
            entry.1 += s.value;
        }
        let mut buckets: Vec<(f64, f64)> = buckets.into_values().collect();
        buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
        HistogramSnapshot {
            buckets,
            sum: self.sum(&format!("{base}_sum"), labels),
            count: self.sum(&format!("{base}_count"), labels),
        }
    }
}

fn parse_line(line: &str) -> Option<Sample> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return None;
    }
    // The first `}` closes the labels: an OpenMetrics exemplar after the
    // value (`# {trace_id="..."} 0.4`) has braces of its own.
    let (series, rest) = match line.find('{') {
        Some(open) => {
            let close = open + line[open..].find('}')?;
            (&line[..=close], line[close + 1..].trim())
        }
        None => line.split_once(' ').map(|(a, b)| (a, b.trim()))?,
    };
    let value: f64 = rest.split_whitespace().next()?.parse().ok()?;
    let (name, labels) = match series.find('{') {
        Some(open) => (
            &series[..open],
            parse_labels(&series[open + 1..series.len() - 1]),
        ),
        None => (series, BTreeMap::new()),
    };
    Some(Sample {
        name: name.to_owned(),
        labels,
        value,
    })
}

fn parse_labels(s: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut rest = s;
    while let Some(eq) = rest.find('=') {
        let key = rest[..eq].trim().trim_start_matches(',').trim().to_owned();
        let after = &rest[eq + 1..];
        let Some(after) = after.strip_prefix('"') else {
            break;
        };
        let mut value = String::new();
        let mut chars = after.char_indices();
        let mut end = after.len();
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => {
                    if let Some((_, n)) = chars.next() {
                        value.push(match n {
                            'n' => '\n',
                            other => other,
                        });
                    }
                }
                '"' => {
                    end = i + 1;
                    break;
                }
                other => value.push(other),
            }
        }
        out.insert(key, value);
        rest = &after[end.min(after.len())..];
    }
    out
}

/// Cumulative bucket counts of a histogram at one moment.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HistogramSnapshot {
    /// (upper bound, cumulative count), by bound.
    pub buckets: Vec<(f64, f64)>,
    /// Sum of observations.
    pub sum: f64,
    /// Number of observations.
    pub count: f64,
}

impl HistogramSnapshot {
    /// The cumulative count at `bound` (0 when the bucket is absent).
    fn count_at(&self, bound: f64) -> f64 {
        self.buckets
            .iter()
            .find(|(b, _)| b.to_bits() == bound.to_bits())
            .map_or(0.0, |(_, c)| *c)
    }

    /// What was observed between `earlier` and `self`.
    pub fn since(&self, earlier: &HistogramSnapshot) -> HistogramSnapshot {
        HistogramSnapshot {
            buckets: self
                .buckets
                .iter()
                .map(|(b, c)| (*b, (c - earlier.count_at(*b)).max(0.0)))
                .collect(),
            sum: (self.sum - earlier.sum).max(0.0),
            count: (self.count - earlier.count).max(0.0),
        }
    }

    /// Adds another histogram with the same bounds (another server's).
    pub fn add(&self, other: &HistogramSnapshot) -> HistogramSnapshot {
        if self.buckets.is_empty() {
            return other.clone();
        }
        HistogramSnapshot {
            buckets: self
                .buckets
                .iter()
                .map(|(b, c)| (*b, c + other.count_at(*b)))
                .collect(),
            sum: self.sum + other.sum,
            count: self.count + other.count,
        }
    }

    /// Mean observation, or 0 with none.
    pub fn mean(&self) -> f64 {
        if self.count > 0.0 {
            self.sum / self.count
        } else {
            0.0
        }
    }

    /// The q-quantile, interpolated linearly inside its bucket (as
    /// Prometheus' `histogram_quantile` does); 0 with no observations. A
    /// quantile in the `+Inf` bucket answers the largest finite bound.
    pub fn quantile(&self, q: f64) -> f64 {
        let total = self.buckets.last().map_or(0.0, |(_, c)| *c);
        if total <= 0.0 {
            return 0.0;
        }
        let rank = q.clamp(0.0, 1.0) * total;
        let mut lower_bound = 0.0;
        let mut lower_count = 0.0;
        for &(bound, cumulative) in &self.buckets {
            if cumulative >= rank {
                if bound.is_infinite() {
                    return lower_bound;
                }
                let in_bucket = cumulative - lower_count;
                if in_bucket <= 0.0 {
                    return bound;
                }
                return lower_bound + (bound - lower_bound) * (rank - lower_count) / in_bucket;
            }
            lower_bound = bound;
            lower_count = cumulative;
        }
        lower_bound
    }

    /// Upper bound of the highest bucket that received an observation: the
    /// maximum, to bucket resolution.
    pub fn max_bound(&self) -> f64 {
        let mut previous = 0.0;
        let mut max = 0.0;
        let mut finite_max = 0.0;
        for &(bound, cumulative) in &self.buckets {
            if cumulative > previous {
                max = bound;
            }
            if bound.is_finite() {
                finite_max = bound;
            }
            previous = cumulative;
        }
        if max.is_infinite() { finite_max } else { max }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = r#"# HELP db_client_connection_count Connections.
# TYPE db_client_connection_count gauge
db_client_connection_count{db_client_connection_state="idle"} 3
e_seconds_bucket{le="0.5"} 4 # {trace_id="4bf92f3577b34da6a3ce929d0e0e4736"} 0.41 1764547200.0
db_client_connection_count{db_client_connection_state="used"} 2
db_client_connection_pending_requests 0
h_seconds_sum 0.6
h_seconds_count 4
h_seconds_bucket{le="0.1"} 1
h_seconds_bucket{le="0.2"} 3
h_seconds_bucket{le="+Inf"} 4
x_total{strategy="batch",publish_mode="off"} 7
x_total{strategy="per_row",publish_mode="off"} 5
odd{path="a \"quoted\", b"} 1
# EOF
"#;

    #[test]
    fn parses_samples_and_labels() {
        let e = Exposition::parse(TEXT);
        assert_eq!(
            e.sum(
                "db_client_connection_count",
                &[("db_client_connection_state", "used")]
            ),
            2.0
        );
        assert_eq!(e.sum("db_client_connection_count", &[]), 5.0);
        assert_eq!(e.sum("x_total", &[("strategy", "batch")]), 7.0);
        assert_eq!(e.sum("x_total", &[("publish_mode", "off")]), 12.0);
        assert_eq!(e.sum("missing", &[]), 0.0);
        // An exemplar after the value is not part of the sample.
        assert_eq!(e.sum("e_seconds_bucket", &[("le", "0.5")]), 4.0);
        let odd = e.matching("odd", &[]).next().unwrap();
        assert_eq!(odd.labels["path"], "a \"quoted\", b");
    }

    #[test]
    fn histogram_quantiles_interpolate_within_buckets() {
        let h = Exposition::parse(TEXT).histogram("h_seconds", &[]);
        assert_eq!(h.count, 4.0);
        assert!((h.mean() - 0.15).abs() < 1e-9);
        // rank 2 of 4 lies halfway through the (0.1, 0.2] bucket.
        assert!((h.quantile(0.5) - 0.15).abs() < 1e-9);
        assert!((h.quantile(0.25) - 0.1).abs() < 1e-9);
        // In the +Inf bucket: the largest finite bound.
        assert_eq!(h.quantile(0.99), 0.2);
        assert_eq!(h.max_bound(), 0.2);
    }

    #[test]
    fn deltas_isolate_one_run() {
        let before = Exposition::parse(TEXT).histogram("h_seconds", &[]);
        let after_text = TEXT
            .replace(
                "h_seconds_bucket{le=\"0.1\"} 1",
                "h_seconds_bucket{le=\"0.1\"} 11",
            )
            .replace(
                "h_seconds_bucket{le=\"0.2\"} 3",
                "h_seconds_bucket{le=\"0.2\"} 13",
            )
            .replace(
                "h_seconds_bucket{le=\"+Inf\"} 4",
                "h_seconds_bucket{le=\"+Inf\"} 14",
            )
            .replace("h_seconds_count 4", "h_seconds_count 14")
            .replace("h_seconds_sum 0.6", "h_seconds_sum 1.6");
        let delta = Exposition::parse(&after_text)
            .histogram("h_seconds", &[])
            .since(&before);
        assert_eq!(delta.count, 10.0);
        assert!((delta.mean() - 0.1).abs() < 1e-9);
        assert!(delta.quantile(0.95) <= 0.1 + 1e-9);
        assert_eq!(delta.max_bound(), 0.1);
    }

    #[test]
    fn empty_histograms_answer_zero() {
        let h = HistogramSnapshot::default();
        assert_eq!(h.quantile(0.95), 0.0);
        assert_eq!(h.mean(), 0.0);
        assert_eq!(h.max_bound(), 0.0);
    }
}
