//! How far the server is: a round-trip time and its jitter, as written in
//! a setting (`1ms`, `200us`, `0.5ms`, `0`), checked once.

use std::fmt;
use std::time::Duration;

/// A bad distance setting, naming the setting.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DistanceError {
    /// Not a duration this parser reads.
    #[error("{setting}={value:?}: not a duration; write it as 1ms, 200us, 0.5ms or 0")]
    Unparsable {
        /// The setting's name (`DB_RTT`, `--rtt`).
        setting: String,
        /// What it was given.
        value: String,
    },
    /// Below zero.
    #[error("{setting}={value:?}: a distance cannot be negative")]
    Negative {
        /// The setting's name.
        setting: String,
        /// What it was given.
        value: String,
    },
    /// Jitter larger than the round trip it varies.
    #[error(
        "{setting}={jitter:?} is above the round trip ({rtt:?}): a one-way delay would go below zero"
    )]
    JitterAboveRtt {
        /// The jitter setting's name.
        setting: String,
        /// The jitter given.
        jitter: String,
        /// The round trip it varies.
        rtt: String,
    },
}

/// A round-trip time and how much it varies: each one-way delay is
/// `rtt / 2` plus a uniform draw in `[-jitter / 2, +jitter / 2]`, so a round
/// trip varies by up to `jitter` either way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Distance {
    /// The round-trip time added.
    pub rtt: Duration,
    /// Its spread (at most `rtt`).
    pub jitter: Duration,
}

impl Distance {
    /// From two settings' text, checked: both durations, not negative, the
    /// jitter no larger than the round trip. The names go in the errors.
    pub fn parse(
        rtt_setting: &str,
        rtt: &str,
        jitter_setting: &str,
        jitter: &str,
    ) -> Result<Self, DistanceError> {
        let rtt_d = parse_duration(rtt_setting, rtt)?;
        let jitter_d = if jitter.trim().is_empty() {
            Duration::ZERO
        } else {
            parse_duration(jitter_setting, jitter)?
        };
        if jitter_d > rtt_d {
            return Err(DistanceError::JitterAboveRtt {
                setting: jitter_setting.to_owned(),
                jitter: jitter.to_owned(),
                rtt: rtt.to_owned(),
            });
        }
        Ok(Self {
            rtt: rtt_d,
            jitter: jitter_d,
        })
    }

    /// The mean one-way delay, half the round trip.
    pub fn one_way(&self) -> Duration {
        self.rtt / 2
    }

    /// One draw of a one-way delay.
    pub fn sample_one_way(&self, rng: &mut fastrand::Rng) -> Duration {
        if self.jitter.is_zero() {
            return self.one_way();
        }
        let spread = self.jitter.as_nanos() as f64;
        let offset = (rng.f64() - 0.5) * spread;
        let nanos = (self.one_way().as_nanos() as f64 + offset).max(0.0);
        Duration::from_nanos(nanos as u64)
    }
}

impl fmt::Display for Distance {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RTT {}", show(self.rtt))?;
        if !self.jitter.is_zero() {
            write!(f, " ± {}", show(self.jitter))?;
        }
        Ok(())
    }
}

/// `1 ms`, `0.2 ms`, `50 µs`.
pub fn show(d: Duration) -> String {
    let micros = d.as_secs_f64() * 1e6;
    if micros >= 1000.0 || micros == 0.0 {
        let ms = format!("{:.3}", micros / 1000.0);
        format!("{} ms", ms.trim_end_matches('0').trim_end_matches('.'))
    } else {
        format!("{micros:.0} µs")
    }
}

/// A duration as a distance setting writes it: a number (decimals allowed)
/// and a unit, `ns`, `us`/`µs`, `ms` or `s`; a bare `0` is zero.
pub fn parse_duration(setting: &str, value: &str) -> Result<Duration, DistanceError> {
    let text = value.trim();
    let unparsable = || DistanceError::Unparsable {
        setting: setting.to_owned(),
        value: value.to_owned(),
    };
    if text.starts_with('-') {
        return Err(DistanceError::Negative {
            setting: setting.to_owned(),
            value: value.to_owned(),
        });
    }
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let n: f64 = number.parse().map_err(|_| unparsable())?;
    let nanos_per = match unit.trim() {
        "" if n == 0.0 => 0.0,
        "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        _ => return Err(unparsable()),
    };
    let nanos = n * nanos_per;
    if !nanos.is_finite() || nanos > 3.6e12 {
        return Err(unparsable());
    }
    Ok(Duration::from_nanos(nanos.round() as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_units_a_person_writes() {
        let d = |s| parse_duration("DB_RTT", s).unwrap();
        assert_eq!(d("1ms"), Duration::from_millis(1));
        assert_eq!(d("0.5ms"), Duration::from_micros(500));
        assert_eq!(d("200us"), Duration::from_micros(200));
        assert_eq!(d("200µs"), Duration::from_micros(200));
        assert_eq!(d("2 ms"), Duration::from_millis(2));
        assert_eq!(d("0"), Duration::ZERO);
        assert_eq!(d("1s"), Duration::from_secs(1));
    }

    #[test]
    fn refuses_bad_settings_by_name() {
        let e = parse_duration("DB_RTT", "-1ms").unwrap_err();
        assert!(
            e.to_string()
                .starts_with("DB_RTT=\"-1ms\": a distance cannot be negative")
        );
        for bad in ["fast", "1", "1 parsec", "ms", "1e400ms", ""] {
            let e = parse_duration("DB_RTT", bad).unwrap_err();
            assert!(
                matches!(e, DistanceError::Unparsable { .. }),
                "{bad:?}: {e}"
            );
            assert!(e.to_string().contains("DB_RTT"), "{e}");
        }
        let e = Distance::parse("DB_RTT", "1ms", "DB_JITTER", "2ms").unwrap_err();
        assert!(
            e.to_string()
                .starts_with("DB_JITTER=\"2ms\" is above the round trip"),
            "{e}"
        );
        let ok = Distance::parse("DB_RTT", "1ms", "DB_JITTER", "").unwrap();
        assert_eq!(ok.jitter, Duration::ZERO);
    }

    #[test]
    fn one_way_delays_stay_within_half_the_jitter() {
        let d = Distance::parse("r", "1ms", "j", "400us").unwrap();
        let mut rng = fastrand::Rng::with_seed(7);
        let (mut lo, mut hi) = (Duration::MAX, Duration::ZERO);
        for _ in 0..10_000 {
            let s = d.sample_one_way(&mut rng);
            lo = lo.min(s);
            hi = hi.max(s);
        }
        assert!(
            lo >= Duration::from_micros(300) && lo < Duration::from_micros(310),
            "{lo:?}"
        );
        assert!(
            hi <= Duration::from_micros(700) && hi > Duration::from_micros(690),
            "{hi:?}"
        );
        assert_eq!(d.to_string(), "RTT 1 ms ± 400 µs");
        assert_eq!(show(Duration::from_micros(200)), "200 µs");
        assert_eq!(show(Duration::from_micros(2500)), "2.5 ms");
    }
}
