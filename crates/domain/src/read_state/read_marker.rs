//! How a read marker's move reaches the database (`READ_MARKER_MODE`).

use std::fmt;
use std::str::FromStr;

/// How `POST /v1/chats/{id}/read` writes the reader's marker.
///
/// Every mode answers the caller with the marker it asked for and the
/// unread count that marker implies, and a marker never moves back in any.
/// They differ in which rows the moves write, how many database writes
/// they cost, and in what a crash loses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum ReadMarkerMode {
    /// One UPDATE of the member row per call (with the `inbox` fan-out,
    /// and the reader's read flags, in the same transaction). Nothing
    /// acknowledged is lost; the member row is a hot row.
    #[default]
    Direct,
    /// One INSERT into the append-only `read_marker_log` per call, folded
    /// into the member rows every `READ_MARKER_FLUSH_MS` by a background
    /// compaction (one statement that deletes the log rows it folds);
    /// reads take the newer of the member row's marker and the log's, so
    /// a move is seen at once by every instance. Nothing acknowledged is
    /// lost; the member row is written once per compaction, not per move,
    /// as Synapse's proposed append-only counts table would.
    Log,
    /// Held per instance and written every `READ_MARKER_FLUSH_MS` as one
    /// `UPDATE ... FROM unnest(...)` of every marker moved meanwhile (the
    /// newest per member), as Discord does for its read states. Reads see
    /// a move at most one window late; a crash loses at most one window.
    Coalesced,
}

impl ReadMarkerMode {
    /// Every mode, in a stable order.
    pub const ALL: [ReadMarkerMode; 3] = [Self::Direct, Self::Log, Self::Coalesced];

    /// The name used in env vars, metric labels and logs.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Direct => "direct",
            Self::Log => "log",
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
#[error("unknown read marker mode {0:?}: expected direct, log or coalesced")]
pub struct UnknownReadMarkerMode(pub String);

impl FromStr for ReadMarkerMode {
    type Err = UnknownReadMarkerMode;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "direct" => Ok(Self::Direct),
            "log" => Ok(Self::Log),
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
        assert!("logged".parse::<ReadMarkerMode>().is_err());
    }
}
