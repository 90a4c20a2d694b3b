//! Durations, ramp stages and the open model's send schedule.

use std::time::Duration;

/// Parses `500ms`, `30s`, `2m`, `1h` or a bare number of seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    // A bare number is seconds, as the Makefile's DURATION=30 has it.
    if let Ok(secs) = s.parse::<u64>() {
        return Ok(Duration::from_secs(secs));
    }
    humantime::parse_duration(s)
        .map_err(|e| format!("{s:?} is not a duration (e.g. 500ms, 30s, 2m, 1m30s): {e}"))
}

/// One stage of a closed-model ramp: this many VUs for this long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stage {
    /// Virtual users during the stage.
    pub vus: usize,
    /// How long the stage lasts.
    pub duration: Duration,
}

/// Parses `85:30s,200:30s,300:30s,400:30s`.
pub fn parse_stages(s: &str) -> Result<Vec<Stage>, String> {
    s.split(',')
        .filter(|p| !p.trim().is_empty())
        .map(|part| {
            let (vus, duration) = part
                .split_once(':')
                .ok_or_else(|| format!("stage {part:?} is not VUS:DURATION"))?;
            let vus: usize = vus
                .trim()
                .parse()
                .map_err(|_| format!("stage {part:?}: {vus:?} is not a VU count"))?;
            if vus == 0 {
                return Err(format!("stage {part:?} has no VUs"));
            }
            Ok(Stage {
                vus,
                duration: parse_duration(duration)?,
            })
        })
        .collect()
}

/// Total length of a ramp.
pub fn total_duration(stages: &[Stage]) -> Duration {
    stages.iter().map(|s| s.duration).sum()
}

/// How many VUs a ramp wants `elapsed` into it (0 once it is over).
pub fn vus_at(stages: &[Stage], elapsed: Duration) -> usize {
    let mut end = Duration::ZERO;
    for stage in stages {
        end += stage.duration;
        if elapsed < end {
            return stage.vus;
        }
    }
    0
}

/// The open model's intended send times: request `i` is due at `i / rate`
/// seconds. Latency counts from this instant, not from when a request
/// actually left, so a server that falls behind cannot hide its queue
/// (coordinated omission).
#[derive(Debug, Clone, Copy)]
pub struct ArrivalSchedule {
    interval: Duration,
    end: Duration,
}

impl ArrivalSchedule {
    /// `rate` requests per second for `duration`.
    pub fn new(rate: f64, duration: Duration) -> Result<Self, String> {
        if !(rate.is_finite() && rate > 0.0) {
            return Err(format!(
                "rate {rate} must be a positive number of requests per second"
            ));
        }
        Ok(Self {
            interval: Duration::from_secs_f64(1.0 / rate),
            end: duration,
        })
    }

    /// How long the arrivals last.
    pub fn duration(&self) -> Duration {
        self.end
    }

    /// When request `i` is due, or `None` past the end.
    pub fn due(&self, i: u64) -> Option<Duration> {
        let at = self.interval.checked_mul(u32::try_from(i).ok()?)?;
        (at < self.end).then_some(at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("7"), Ok(Duration::from_secs(7)));
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("3x").is_err());
        assert_eq!(parse_duration("1m30s"), Ok(Duration::from_secs(90)));
    }

    #[test]
    fn the_seed_000_ramp() {
        let stages = parse_stages("85:30s,200:30s,300:30s,400:30s").unwrap();
        assert_eq!(stages.len(), 4);
        assert_eq!(total_duration(&stages), Duration::from_secs(120));
        assert_eq!(vus_at(&stages, Duration::ZERO), 85);
        assert_eq!(vus_at(&stages, Duration::from_secs(30)), 200);
        assert_eq!(vus_at(&stages, Duration::from_secs(119)), 400);
        assert_eq!(vus_at(&stages, Duration::from_secs(120)), 0);
        assert!(parse_stages("0:10s").is_err());
        assert!(parse_stages("10").is_err());
    }

    #[test]
    fn arrivals_are_evenly_spaced_and_bounded() {
        let s = ArrivalSchedule::new(100.0, Duration::from_secs(2)).unwrap();
        assert_eq!(s.due(0), Some(Duration::ZERO));
        assert_eq!(s.due(50), Some(Duration::from_millis(500)));
        assert_eq!(s.due(199), Some(Duration::from_millis(1990)));
        assert_eq!(s.due(200), None);
        assert!(ArrivalSchedule::new(0.0, Duration::from_secs(1)).is_err());
    }
}
