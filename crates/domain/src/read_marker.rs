//! How a read marker's move reaches the database (`READ_MARKER_MODE`).

use std::fmt;
use std::str::FromStr;

/// How `POST /v1/chats/{id}/read` writes the reader's marker.
///
/// Both modes answer the caller with the marker it asked for and the unread
/// count that marker implies, and a marker never moves back in either.
/// They differ in how many database writes the moves cost, and in what a
/// crash loses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum ReadMarkerMode {
    /// One UPDATE of the member row per call (with the `inbox` fan-out,
    /// and the reader's read flags, in the same transaction). Nothing
    /// acknowledged is lost; the member row is a hot row.
    #[default]
    Direct,
    /// Held per instance and written every `READ_MARKER_FLUSH_MS` as one
    /// `UPDATE ... FROM unnest(...)` of every marker moved meanwhile (the
    /// newest per member), as Discord does for its read states. Reads see
    /// a move at most one window late; a crash loses at most one window.
    Coalesced,
}

impl ReadMarkerMode {
    /// Every mode, in a stable order.
    pub const ALL: [ReadMarkerMode; 2] = [Self::Direct, Self::Coalesced];

    /// The name used in env vars, metric labels and logs.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Direct => "direct",
            Self::Coalesced => "coalesced",
        }
    }
}

impl fmt::Display for ReadMarkerMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A read marker mode name that is not one of [`ReadMarkerMode::ALL`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown read marker mode {0:?}: expected direct or coalesced")]
pub struct UnknownReadMarkerMode(pub String);

impl FromStr for ReadMarkerMode {
    type Err = UnknownReadMarkerMode;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "direct" => Ok(Self::Direct),
            "coalesced" => Ok(Self::Coalesced),
            _ => Err(UnknownReadMarkerMode(s.to_owned())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for m in ReadMarkerMode::ALL {
            assert_eq!(m.as_str().parse::<ReadMarkerMode>(), Ok(m));
        }
        assert_eq!(
            " Coalesced ".parse::<ReadMarkerMode>(),
            Ok(ReadMarkerMode::Coalesced)
        );
        assert!("log".parse::<ReadMarkerMode>().is_err());
    }
}
