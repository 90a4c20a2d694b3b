//! How far the live instance's PostgreSQL is in one cell of
//! `delivery-busy`: a distance (straight, or through a delay hop), or
//! blackholed for the busy phase.

use std::time::Duration;

use chatlab_delay::Distance;

use crate::servers::reach::{parse_distances, show_ms};

/// One entry of `--db-rtts`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum DbDistance {
    /// PostgreSQL this far from every instance (`None`: straight).
    Away(Option<Distance>),
    /// The live instance reaches PostgreSQL through a hop that adds
    /// nothing, and the hop stops forwarding for the busy phase; the
    /// writes go to a second instance that reaches it straight.
    Blackholed,
}

impl DbDistance {
    /// The hop the live instance's database needs (`None`: straight).
    /// A blackhole needs a hop to stop: one that adds a microsecond, as the
    /// `db-blackhole` fault's does.
    pub(crate) fn hop(self) -> Option<Distance> {
        match self {
            Self::Away(distance) => distance,
            Self::Blackholed => Some(Distance {
                rtt: Duration::from_micros(1),
                jitter: Duration::ZERO,
            }),
        }
    }

    /// Whether the live instance's database goes dark in the busy phase.
    pub(crate) fn is_blackholed(self) -> bool {
        matches!(self, Self::Blackholed)
    }

    /// As the table shows it: `0 ms`, `5 ms`, `blackholed`.
    pub(crate) fn label(self) -> String {
        match self {
            Self::Away(distance) => format!(
                "{} ms",
                show_ms(distance.map_or(0.0, |d| d.rtt.as_secs_f64() * 1e3))
            ),
            Self::Blackholed => "blackholed".to_owned(),
        }
    }

    /// As a folder name: `0ms`, `5ms`, `blackhole`.
    pub(crate) fn slug(self) -> String {
        match self {
            Self::Away(_) => self.label().replace(' ', ""),
            Self::Blackholed => "blackhole".to_owned(),
        }
    }
}

/// One `--db-rtts` entry: a round-trip time (`0`, `5ms`, `200us`) or
/// `blackhole`.
pub(crate) fn parse_db_distance(entry: &str) -> Result<DbDistance, String> {
    if entry.trim().eq_ignore_ascii_case("blackhole") {
        return Ok(DbDistance::Blackholed);
    }
    let mut parsed = parse_distances(entry, "")?;
    match (parsed.pop(), parsed.is_empty()) {
        (Some(distance), true) => Ok(DbDistance::Away(distance)),
        _ => Err(format!(
            "{entry:?}: expected one round-trip time (0, 5ms, 200us) or blackhole"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_distances_or_the_blackhole() {
        assert_eq!(parse_db_distance("0"), Ok(DbDistance::Away(None)));
        let five = parse_db_distance("5ms").unwrap();
        assert_eq!(five.label(), "5 ms");
        assert_eq!(five.slug(), "5ms");
        assert_eq!(five.hop().map(|d| d.rtt), Some(Duration::from_millis(5)));
        let hole = parse_db_distance(" blackhole").unwrap();
        assert!(hole.is_blackholed());
        assert_eq!(hole.label(), "blackholed");
        assert!(hole.hop().is_some(), "a blackhole needs a hop");
        assert_eq!(DbDistance::Away(None).label(), "0 ms");
        assert_eq!(DbDistance::Away(None).hop(), None);
        assert!(parse_db_distance("-5ms").is_err());
        assert!(parse_db_distance("").is_err());
        assert!(parse_db_distance("far").is_err());
    }
}
