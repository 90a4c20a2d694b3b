//! When and how a write's event reaches Kafka, relative to its transaction.

use std::fmt;
use std::str::FromStr;

/// The event publish mode (`KAFKA_PUBLISH_MODE`).
///
/// | mode | connection held for the broker? | can lose an event? | can invent one? |
/// |---|---|---|---|
/// | `off` | no | no event at all | no |
/// | `in_tx_await` | yes, one broker round trip | no: a failed send rolls back (503) | yes, if COMMIT fails after the ack |
/// | `in_tx_enqueue` | no | yes: a crash before delivery, a delivery failure | yes: a rollback after the enqueue |
/// | `after_commit` | no (released before the send) | yes: a failed send after COMMIT | no |
/// | `outbox` | no (one more INSERT) | no: the relay retries until acknowledged | no (duplicates possible: at least once) |
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum PublishMode {
    /// No events.
    Off,
    /// Produce and await the broker's acknowledgement before COMMIT.
    InTxAwait,
    /// Hand the record to the producer's queue inside the transaction and
    /// go on without waiting, as the seed write-ups' services publish: it
    /// looks transactional but is not, since the record leaves whether or
    /// not the transaction commits.
    InTxEnqueue,
    /// COMMIT, release the connection, then produce and await.
    AfterCommit,
    /// Write the event to the outbox table in the same transaction; a relay
    /// publishes it.
    #[default]
    Outbox,
}

impl PublishMode {
    /// Every mode, in a stable order.
    pub const ALL: [PublishMode; 5] = [
        Self::Off,
        Self::InTxAwait,
        Self::InTxEnqueue,
        Self::AfterCommit,
        Self::Outbox,
    ];

    /// The name used in env vars, headers, events, metrics and the audit.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Off => "off",
            Self::InTxAwait => "in_tx_await",
            Self::InTxEnqueue => "in_tx_enqueue",
            Self::AfterCommit => "after_commit",
            Self::Outbox => "outbox",
        }
    }

    /// Whether every committed write is guaranteed to get its event: the
    /// audit fails a run in which such a mode lost one.
    pub const fn promises_no_loss(self) -> bool {
        matches!(self, Self::InTxAwait | Self::Outbox)
    }

    /// Whether the mode produces events at all.
    pub const fn publishes(self) -> bool {
        !matches!(self, Self::Off)
    }
}

impl fmt::Display for PublishMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A mode name that is not one of the five.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown publish mode {0:?}: expected one of off, in_tx_await, in_tx_enqueue, after_commit, outbox"
)]
pub struct UnknownPublishMode(pub String);

impl FromStr for PublishMode {
    type Err = UnknownPublishMode;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let wanted = s.trim().to_ascii_lowercase().replace('-', "_");
        Self::ALL
            .into_iter()
            .find(|m| m.as_str() == wanted)
            .ok_or_else(|| UnknownPublishMode(s.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for m in PublishMode::ALL {
            assert_eq!(m.as_str().parse::<PublishMode>(), Ok(m));
        }
        assert_eq!(
            "In-Tx-Await".parse::<PublishMode>(),
            Ok(PublishMode::InTxAwait)
        );
        assert!("sometimes".parse::<PublishMode>().is_err());
        assert_eq!(PublishMode::default(), PublishMode::Outbox);
    }
}
