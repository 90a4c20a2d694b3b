//! Reconciling the topic with the database: which committed writes have no
//! event (lost), which events have no committed write (phantom), and which
//! events arrived more than once (duplicated), per publish mode.
//!
//! Pure logic: the caller reads the rows and the topic for one time window.

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;

use uuid::Uuid;

use crate::publish_mode::PublishMode;

/// A committed write that should have an event: a chat or a talk message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommittedWrite {
    /// The chat id or message id.
    pub subject_id: Uuid,
    /// The mode it was written with.
    pub mode: PublishMode,
}

/// An event read from the topic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SeenEvent {
    /// Its id; the same id twice is a duplicate.
    pub event_id: Uuid,
    /// The chat id or message id it announces.
    pub subject_id: Uuid,
    /// The mode that produced it.
    pub mode: PublishMode,
}

/// The reconciliation of one mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModeAudit {
    /// The mode.
    pub mode: PublishMode,
    /// Committed writes made with it.
    pub committed: usize,
    /// Distinct events (by id) it produced.
    pub events: usize,
    /// Committed writes with no event (never counted for `off`).
    pub lost: usize,
    /// Events whose write is not committed.
    pub phantom: usize,
    /// Extra copies of events already seen.
    pub duplicated: usize,
}

impl ModeAudit {
    /// Whether the mode broke its promise: a no-loss mode that lost events.
    pub fn failed(&self) -> bool {
        self.mode.promises_no_loss() && self.lost > 0
    }
}

/// The reconciliation of every mode that appears in the window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditReport {
    /// One entry per mode, in [`PublishMode::ALL`] order.
    pub modes: Vec<ModeAudit>,
    /// Records on the topic that were not chatlab events.
    pub unreadable: usize,
}

impl AuditReport {
    /// The entry of one mode, if it appeared.
    pub fn mode(&self, mode: PublishMode) -> Option<&ModeAudit> {
        self.modes.iter().find(|m| m.mode == mode)
    }

    /// Whether any no-loss mode lost an event.
    pub fn failed(&self) -> bool {
        self.modes.iter().any(ModeAudit::failed)
    }

    /// The report as a Markdown table.
    pub fn to_table(&self) -> String {
        let mut out = String::from(
            "| mode | committed | events | lost | phantom | duplicated | verdict |\n\
             |---|---|---|---|---|---|---|\n",
        );
        for m in &self.modes {
            let verdict = if m.failed() {
                "FAIL: promised no loss"
            } else if !m.mode.publishes() {
                "no events expected"
            } else {
                "ok"
            };
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} | {} |",
                m.mode, m.committed, m.events, m.lost, m.phantom, m.duplicated, verdict
            );
        }
        if self.unreadable > 0 {
            let _ = writeln!(
                out,
                "\n{} records on the topic were not chatlab events",
                self.unreadable
            );
        }
        out
    }
}

/// Reconciles writes with events.
pub fn reconcile(
    writes: &[CommittedWrite],
    events: &[SeenEvent],
    unreadable: usize,
) -> AuditReport {
    let committed: HashSet<Uuid> = writes.iter().map(|w| w.subject_id).collect();
    let announced: HashSet<Uuid> = events.iter().map(|e| e.subject_id).collect();
    let mut modes = Vec::new();
    for mode in PublishMode::ALL {
        let mode_writes: Vec<&CommittedWrite> = writes.iter().filter(|w| w.mode == mode).collect();
        let mode_events: Vec<&SeenEvent> = events.iter().filter(|e| e.mode == mode).collect();
        if mode_writes.is_empty() && mode_events.is_empty() {
            continue;
        }
        let mut copies: HashMap<Uuid, usize> = HashMap::new();
        for e in &mode_events {
            *copies.entry(e.event_id).or_default() += 1;
        }
        let phantom_subjects: HashSet<Uuid> = mode_events
            .iter()
            .map(|e| e.subject_id)
            .filter(|s| !committed.contains(s))
            .collect();
        modes.push(ModeAudit {
            mode,
            committed: mode_writes.len(),
            events: copies.len(),
            lost: if mode.publishes() {
                mode_writes
                    .iter()
                    .filter(|w| !announced.contains(&w.subject_id))
                    .count()
            } else {
                0
            },
            phantom: phantom_subjects.len(),
            duplicated: copies.values().map(|n| n - 1).sum(),
        });
    }
    AuditReport { modes, unreadable }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(n: u128) -> Uuid {
        Uuid::from_u128(n)
    }

    fn write(n: u128, mode: PublishMode) -> CommittedWrite {
        CommittedWrite {
            subject_id: id(n),
            mode,
        }
    }

    fn event(e: u128, n: u128, mode: PublishMode) -> SeenEvent {
        SeenEvent {
            event_id: id(1000 + e),
            subject_id: id(n),
            mode,
        }
    }

    #[test]
    fn counts_lost_phantom_and_duplicated_per_mode() {
        use PublishMode::*;
        let writes = [
            write(1, Outbox),
            write(2, Outbox),
            write(3, AfterCommit),
            write(4, AfterCommit),
            write(5, Off),
        ];
        let events = [
            event(1, 1, Outbox),
            event(1, 1, Outbox), // the relay retried: a duplicate
            event(2, 2, Outbox),
            event(3, 3, AfterCommit), // 4 was lost
            event(9, 9, InTxEnqueue), // rolled back: a phantom
        ];
        let report = reconcile(&writes, &events, 2);
        let outbox = report.mode(Outbox).unwrap();
        assert_eq!((outbox.committed, outbox.events, outbox.lost), (2, 2, 0));
        assert_eq!((outbox.phantom, outbox.duplicated), (0, 1));
        let after = report.mode(AfterCommit).unwrap();
        assert_eq!(after.lost, 1);
        assert!(!after.failed(), "after_commit does not promise no loss");
        let enqueue = report.mode(InTxEnqueue).unwrap();
        assert_eq!((enqueue.committed, enqueue.phantom), (0, 1));
        let off = report.mode(Off).unwrap();
        assert_eq!(off.lost, 0);
        assert!(report.mode(InTxAwait).is_none());
        assert!(!report.failed());
        assert!(
            report
                .to_table()
                .contains("| outbox | 2 | 2 | 0 | 0 | 1 | ok |")
        );
        assert!(report.to_table().contains("2 records on the topic"));
    }

    #[test]
    fn a_no_loss_mode_that_lost_an_event_fails_the_report() {
        let report = reconcile(&[write(1, PublishMode::InTxAwait)], &[], 0);
        assert!(report.failed());
        assert!(report.to_table().contains("FAIL"));
    }
}
