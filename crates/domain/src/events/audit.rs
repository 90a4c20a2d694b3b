//! Reconciling the topic with the database: which committed writes have no
//! event (lost), which events have no committed write (phantom), and which
//! events arrived more than once (duplicated), per publish mode; and, from
//! the receipts the broker gave chatlab, whose loss a missing event is.
//!
//! A receipt is the partition and offset of a delivery report. With it the
//! audit can tell apart:
//! - a loss of chatlab's: a committed write whose event the broker never
//!   acknowledged (no receipt);
//! - a loss of the broker's: an acknowledged event that the topic does not
//!   hold at its receipt. Three shapes, counted per window in
//!   [`BrokerFindings`]: an offset acknowledged at or past the partition's
//!   high watermark (acknowledged, not served), one offset acknowledged for
//!   two events, and an offset inside the watermarks that the reader did
//!   not get (a gap the broker serves, or a reader bug).
//!
//! Pure logic: the caller reads the rows, the receipts and the topic for
//! one time window.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write as _;

use uuid::Uuid;

use crate::events::publish_mode::PublishMode;
use crate::events::{AckedEvent, Receipt};

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
    /// Where the reader found it.
    pub at: Receipt,
}

/// A partition's offsets as the reader last saw them: records live in
/// `[low, high)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartitionEnds {
    /// The partition.
    pub partition: i32,
    /// Low watermark: the first offset still kept.
    pub low: i64,
    /// High watermark: one past the last offset served.
    pub high: i64,
}

/// What was read for one window.
#[derive(Debug, Clone, Copy, Default)]
pub struct AuditInput<'a> {
    /// Committed writes of the window.
    pub writes: &'a [CommittedWrite],
    /// Events of the window read from the topic.
    pub events: &'a [SeenEvent],
    /// Every position the reader read, whatever its record (events of
    /// other windows, unreadable records): the receipts are checked
    /// against it.
    pub read_positions: &'a [Receipt],
    /// The receipts of the window's events.
    pub receipts: &'a [AckedEvent],
    /// Each partition's watermarks when the reader finished.
    pub ends: &'a [PartitionEnds],
    /// Records on the topic that were not chatlab events.
    pub unreadable: usize,
}

/// The reconciliation of one mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModeAudit {
    /// The mode.
    pub mode: PublishMode,
    /// Committed writes made with it.
    pub committed: usize,
    /// Distinct events (by id) of it on the topic.
    pub events: usize,
    /// Distinct events (by id) of it the broker acknowledged.
    pub acked: usize,
    /// Committed writes with no event on the topic (never counted for `off`).
    pub lost: usize,
    /// Of `lost`, the writes whose event the broker had acknowledged: the
    /// broker's loss, not chatlab's.
    pub lost_after_ack: usize,
    /// Events whose write is not committed.
    pub phantom: usize,
    /// Extra copies of events already seen.
    pub duplicated: usize,
}

impl ModeAudit {
    /// Lost events the broker never acknowledged: chatlab's losses.
    pub fn lost_unacked(&self) -> usize {
        self.lost - self.lost_after_ack
    }

    /// Whether the mode broke chatlab's promise: a no-loss mode with an
    /// event that chatlab never got acknowledged. A broker that loses what
    /// it acknowledged is reported apart ([`AuditReport::broker_failed`]).
    pub fn failed(&self) -> bool {
        self.mode.promises_no_loss() && self.lost_unacked() > 0
    }
}

/// What the receipts say about the broker, over the window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BrokerFindings {
    /// Receipts checked.
    pub receipts: usize,
    /// Acknowledged at or past the partition's high watermark: the broker
    /// acknowledged a record it does not serve.
    pub acked_past_end: usize,
    /// Offsets acknowledged for more than one event: the broker gave one
    /// offset twice.
    pub offsets_acked_twice: usize,
    /// Acknowledged offsets inside the watermarks that the reader did not
    /// get: a gap in what the broker serves, or a reader bug.
    pub acked_unread: usize,
    /// Acknowledged without an offset (the broker did not say where).
    pub acked_without_offset: usize,
    /// Acknowledged below the low watermark: removed by retention since.
    pub expired: usize,
}

impl BrokerFindings {
    /// Whether the broker failed to keep or serve what it acknowledged.
    pub fn any(&self) -> bool {
        self.acked_past_end + self.offsets_acked_twice + self.acked_unread > 0
    }
}

/// The verdict on one subject (a chat or a message) of the window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Verdict {
    /// Committed, published once.
    Ok,
    /// Committed, published more than once (at least once delivery).
    Duplicated,
    /// Published, never committed.
    Phantom,
    /// Committed, never acknowledged by the broker, not on the topic.
    Lost,
    /// Acknowledged by the broker, not on the topic at its receipt.
    NotServedAfterAck,
}

impl Verdict {
    /// The word the tables use.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::Duplicated => "duplicated",
            Self::Phantom => "phantom",
            Self::Lost => "lost (never acknowledged)",
            Self::NotServedAfterAck => "acknowledged, not on the topic",
        }
    }
}

/// One subject of the window: its write, its receipts, where it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventLine {
    /// The chat or message.
    pub subject_id: Uuid,
    /// Its mode.
    pub mode: PublishMode,
    /// Whether its write is committed.
    pub committed: bool,
    /// The event ids seen for it, on the topic or in receipts.
    pub event_ids: Vec<Uuid>,
    /// Where the broker said it stored them (one per acknowledgement).
    pub acked_at: Vec<Receipt>,
    /// Where the reader found them.
    pub seen_at: Vec<Receipt>,
    /// The verdict.
    pub verdict: Verdict,
}

/// The reconciliation of every mode that appears in the window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditReport {
    /// One entry per mode, in [`PublishMode::ALL`] order.
    pub modes: Vec<ModeAudit>,
    /// Records on the topic that were not chatlab events.
    pub unreadable: usize,
    /// What the receipts say about the broker.
    pub broker: BrokerFindings,
    /// One line per subject of a publishing mode, findings first.
    pub lines: Vec<EventLine>,
}

/// How many lines with a finding [`AuditReport::to_table`] prints.
const TABLE_LINES: usize = 50;

impl AuditReport {
    /// The entry of one mode, if it appeared.
    pub fn mode(&self, mode: PublishMode) -> Option<&ModeAudit> {
        self.modes.iter().find(|m| m.mode == mode)
    }

    /// Whether any no-loss mode lost an event chatlab never got
    /// acknowledged.
    pub fn failed(&self) -> bool {
        self.modes.iter().any(ModeAudit::failed)
    }

    /// Whether the broker lost or misplaced what it acknowledged.
    pub fn broker_failed(&self) -> bool {
        self.broker.any() || self.modes.iter().any(|m| m.lost_after_ack > 0)
    }

    /// The lines with a finding (anything but `ok`).
    pub fn findings(&self) -> impl Iterator<Item = &EventLine> {
        self.lines.iter().filter(|l| l.verdict != Verdict::Ok)
    }

    /// The report as Markdown: the table per mode, the broker's findings,
    /// and the first lines with a finding.
    pub fn to_table(&self) -> String {
        let mut out = String::from(
            "| mode | committed | events | acked | lost | of them acked | phantom | duplicated | verdict |\n\
             |---|---|---|---|---|---|---|---|---|\n",
        );
        for m in &self.modes {
            let verdict = if m.failed() {
                "FAIL: promised no loss"
            } else if m.lost_after_ack > 0 {
                "BROKER lost acknowledged events"
            } else if !m.mode.publishes() {
                "no events expected"
            } else {
                "ok"
            };
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                m.mode,
                m.committed,
                m.events,
                m.acked,
                m.lost,
                m.lost_after_ack,
                m.phantom,
                m.duplicated,
                verdict
            );
        }
        let b = &self.broker;
        let _ = writeln!(
            out,
            "\nreceipts checked: {}; acknowledged past the high watermark: {}; offsets acknowledged \
             twice: {}; acknowledged but unread inside the watermarks: {}; acknowledged without \
             an offset: {}; expired: {}",
            b.receipts,
            b.acked_past_end,
            b.offsets_acked_twice,
            b.acked_unread,
            b.acked_without_offset,
            b.expired
        );
        if self.unreadable > 0 {
            let _ = writeln!(
                out,
                "\n{} records on the topic were not chatlab events",
                self.unreadable
            );
        }
        let findings: Vec<&EventLine> = self.findings().collect();
        if !findings.is_empty() {
            out.push('\n');
            out.push_str(&lines_table(findings.iter().take(TABLE_LINES).copied()));
            if findings.len() > TABLE_LINES {
                let _ = writeln!(out, "\n({} more)", findings.len() - TABLE_LINES);
            }
        }
        out
    }

    /// Every line, findings first, as Markdown.
    pub fn lines_table(&self) -> String {
        lines_table(self.lines.iter())
    }
}

fn positions(receipts: &[Receipt]) -> String {
    if receipts.is_empty() {
        return "-".to_owned();
    }
    receipts
        .iter()
        .map(Receipt::to_string)
        .collect::<Vec<_>>()
        .join(" ")
}

fn lines_table<'a>(lines: impl Iterator<Item = &'a EventLine>) -> String {
    let mut out = String::from(
        "| subject | mode | committed | acked at | on the topic at | verdict |\n\
         |---|---|---|---|---|---|\n",
    );
    for l in lines {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} |",
            l.subject_id,
            l.mode,
            if l.committed { "yes" } else { "no" },
            positions(&l.acked_at),
            positions(&l.seen_at),
            l.verdict.as_str()
        );
    }
    out
}

/// What the receipts say about the broker.
fn broker_findings(input: &AuditInput<'_>) -> BrokerFindings {
    let read: HashSet<Receipt> = input.read_positions.iter().copied().collect();
    let ends: HashMap<i32, PartitionEnds> = input.ends.iter().map(|e| (e.partition, *e)).collect();
    let mut findings = BrokerFindings {
        receipts: input.receipts.len(),
        ..BrokerFindings::default()
    };
    let mut events_at: HashMap<Receipt, HashSet<Uuid>> = HashMap::new();
    for acked in input.receipts {
        let r = acked.receipt;
        if !r.has_offset() {
            findings.acked_without_offset += 1;
            continue;
        }
        events_at.entry(r).or_default().insert(acked.event_id);
        let Some(end) = ends.get(&r.partition) else {
            findings.acked_past_end += 1;
            continue;
        };
        if r.offset >= end.high {
            findings.acked_past_end += 1;
        } else if r.offset < end.low {
            findings.expired += 1;
        } else if !read.contains(&r) {
            findings.acked_unread += 1;
        }
    }
    findings.offsets_acked_twice = events_at.values().filter(|ids| ids.len() > 1).count();
    findings
}

/// What the window holds of one subject (a chat or a message): its write,
/// the copies of its events on the topic, and its receipts.
#[derive(Default)]
struct Subject {
    mode: Option<PublishMode>,
    committed: bool,
    event_ids: Vec<Uuid>,
    acked_at: Vec<Receipt>,
    seen_at: Vec<Receipt>,
    copies: HashMap<Uuid, usize>,
    acked_ids: HashSet<Uuid>,
}

/// Every subject of the window, in id (time) order, gathered from the
/// committed writes, the events read back and the broker's receipts.
fn subjects(input: &AuditInput<'_>) -> BTreeMap<Uuid, Subject> {
    let mut subjects: BTreeMap<Uuid, Subject> = BTreeMap::new();
    for w in input.writes {
        let s = subjects.entry(w.subject_id).or_default();
        s.mode = Some(w.mode);
        s.committed = true;
    }
    for e in input.events {
        let s = subjects.entry(e.subject_id).or_default();
        s.mode.get_or_insert(e.mode);
        s.seen_at.push(e.at);
        *s.copies.entry(e.event_id).or_default() += 1;
        if !s.event_ids.contains(&e.event_id) {
            s.event_ids.push(e.event_id);
        }
    }
    for a in input.receipts {
        let s = subjects.entry(a.subject_id).or_default();
        s.mode.get_or_insert(a.mode);
        s.acked_at.push(a.receipt);
        s.acked_ids.insert(a.event_id);
        if !s.event_ids.contains(&a.event_id) {
            s.event_ids.push(a.event_id);
        }
    }
    subjects
}

impl Subject {
    /// Whether a copy of its event is on the topic.
    fn on_topic(&self) -> bool {
        !self.seen_at.is_empty()
    }

    /// Whether the broker acknowledged an event of it.
    fn acked(&self) -> bool {
        !self.acked_at.is_empty()
    }

    /// Committed in a mode that publishes, and not on the topic.
    fn lost(&self, mode: PublishMode) -> bool {
        self.committed && mode.publishes() && !self.on_topic()
    }

    /// On the topic, and never committed.
    fn phantom(&self) -> bool {
        !self.committed && self.on_topic()
    }

    /// Adds this subject to its mode's counts.
    fn count_into(&self, m: &mut ModeAudit, mode: PublishMode) {
        m.committed += usize::from(self.committed);
        m.events += self.copies.len();
        m.acked += self.acked_ids.len();
        m.duplicated += self.copies.values().map(|n| n - 1).sum::<usize>();
        if self.lost(mode) {
            m.lost += 1;
            if self.acked() {
                m.lost_after_ack += 1;
            }
        }
        m.phantom += usize::from(self.phantom());
    }

    /// The worst that happened to it: an acknowledged event the topic does
    /// not serve, a loss, a phantom, a duplicate, or nothing.
    fn verdict(&self, mode: PublishMode) -> Verdict {
        let lost = self.lost(mode);
        let seen: HashSet<Receipt> = self.seen_at.iter().copied().collect();
        let not_served = self
            .acked_at
            .iter()
            .any(|r| r.has_offset() && !seen.contains(r));
        if not_served || (lost && self.acked()) {
            Verdict::NotServedAfterAck
        } else if lost {
            Verdict::Lost
        } else if self.phantom() {
            Verdict::Phantom
        } else if self.copies.values().any(|n| *n > 1) {
            Verdict::Duplicated
        } else {
            Verdict::Ok
        }
    }

    /// Its line of the report, receipts and sightings in offset order.
    fn into_line(mut self, subject_id: Uuid, mode: PublishMode) -> EventLine {
        let verdict = self.verdict(mode);
        self.acked_at.sort_unstable();
        self.seen_at.sort_unstable();
        EventLine {
            subject_id,
            mode,
            committed: self.committed,
            event_ids: self.event_ids,
            acked_at: self.acked_at,
            seen_at: self.seen_at,
            verdict,
        }
    }
}

impl ModeAudit {
    /// A mode's entry before any subject is counted.
    fn empty(mode: PublishMode) -> Self {
        Self {
            mode,
            committed: 0,
            events: 0,
            acked: 0,
            lost: 0,
            lost_after_ack: 0,
            phantom: 0,
            duplicated: 0,
        }
    }
}

/// Reconciles writes, receipts and events.
pub fn reconcile(input: &AuditInput<'_>) -> AuditReport {
    let mut per_mode: BTreeMap<usize, ModeAudit> = BTreeMap::new();
    let mut lines = Vec::new();
    for (subject_id, s) in subjects(input) {
        let Some(mode) = s.mode else { continue };
        let index = PublishMode::ALL
            .iter()
            .position(|m| *m == mode)
            .unwrap_or(0);
        s.count_into(
            per_mode
                .entry(index)
                .or_insert_with(|| ModeAudit::empty(mode)),
            mode,
        );
        if mode.publishes() || s.on_topic() || s.acked() {
            lines.push(s.into_line(subject_id, mode));
        }
    }
    // Findings first, the worst first; subjects in id (time) order within.
    lines.sort_by(|a, b| {
        b.verdict
            .cmp(&a.verdict)
            .then(a.subject_id.cmp(&b.subject_id))
    });
    AuditReport {
        modes: per_mode.into_values().collect(),
        unreadable: input.unreadable,
        broker: broker_findings(input),
        lines,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(n: u128) -> Uuid {
        Uuid::from_u128(n)
    }

    fn at(partition: i32, offset: i64) -> Receipt {
        Receipt { partition, offset }
    }

    fn write(n: u128, mode: PublishMode) -> CommittedWrite {
        CommittedWrite {
            subject_id: id(n),
            mode,
        }
    }

    fn event(e: u128, n: u128, mode: PublishMode, offset: i64) -> SeenEvent {
        SeenEvent {
            event_id: id(1000 + e),
            subject_id: id(n),
            mode,
            at: at(0, offset),
        }
    }

    fn acked(e: u128, n: u128, mode: PublishMode, receipt: Receipt) -> AckedEvent {
        AckedEvent {
            event_id: id(1000 + e),
            subject_id: id(n),
            mode,
            occurred_at: chrono::DateTime::<chrono::Utc>::UNIX_EPOCH,
            receipt,
        }
    }

    fn report(
        writes: &[CommittedWrite],
        events: &[SeenEvent],
        receipts: &[AckedEvent],
        high: i64,
        unreadable: usize,
    ) -> AuditReport {
        let read: Vec<Receipt> = events.iter().map(|e| e.at).collect();
        reconcile(&AuditInput {
            writes,
            events,
            read_positions: &read,
            receipts,
            ends: &[PartitionEnds {
                partition: 0,
                low: 0,
                high,
            }],
            unreadable,
        })
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
            event(1, 1, Outbox, 0),
            event(1, 1, Outbox, 1), // the relay retried: a duplicate
            event(2, 2, Outbox, 2),
            event(3, 3, AfterCommit, 3), // 4 was lost
            event(9, 9, InTxEnqueue, 4), // rolled back: a phantom
        ];
        let report = report(&writes, &events, &[], 5, 2);
        let outbox = report.mode(Outbox).unwrap();
        assert_eq!((outbox.committed, outbox.events, outbox.lost), (2, 2, 0));
        assert_eq!((outbox.phantom, outbox.duplicated), (0, 1));
        let after = report.mode(AfterCommit).unwrap();
        assert_eq!((after.lost, after.lost_after_ack), (1, 0));
        assert!(!after.failed(), "after_commit does not promise no loss");
        let enqueue = report.mode(InTxEnqueue).unwrap();
        assert_eq!((enqueue.committed, enqueue.phantom), (0, 1));
        let off = report.mode(Off).unwrap();
        assert_eq!(off.lost, 0);
        assert!(report.mode(InTxAwait).is_none());
        assert!(!report.failed());
        assert!(!report.broker_failed());
        let table = report.to_table();
        assert!(
            table.contains("| outbox | 2 | 2 | 0 | 0 | 0 | 0 | 1 | ok |"),
            "{table}"
        );
        assert!(table.contains("2 records on the topic"));
        let verdicts: Vec<(Uuid, Verdict)> = report
            .findings()
            .map(|l| (l.subject_id, l.verdict))
            .collect();
        assert_eq!(
            verdicts,
            vec![
                (id(4), Verdict::Lost),
                (id(9), Verdict::Phantom),
                (id(1), Verdict::Duplicated),
            ]
        );
        assert!(
            report.lines.iter().all(|l| l.subject_id != id(5)),
            "off writes have no line"
        );
    }

    #[test]
    fn a_no_loss_mode_that_lost_an_unacknowledged_event_fails_the_report() {
        let report = report(&[write(1, PublishMode::InTxAwait)], &[], &[], 0, 0);
        assert!(report.failed());
        assert!(!report.broker_failed());
        assert!(report.to_table().contains("FAIL"));
    }

    #[test]
    fn an_acknowledged_event_missing_from_the_topic_is_the_brokers_loss() {
        use PublishMode::*;
        let writes = [write(1, Outbox), write(2, Outbox), write(3, Outbox)];
        let events = [event(1, 1, Outbox, 0)];
        let receipts = [
            acked(1, 1, Outbox, at(0, 0)),
            // The broker acknowledged offset 1 but its high watermark is 1.
            acked(2, 2, Outbox, at(0, 1)),
            // And offset 0 a second time, for another event.
            acked(3, 3, Outbox, at(0, 0)),
        ];
        let report = report(&writes, &events, &receipts, 1, 0);
        let outbox = report.mode(Outbox).unwrap();
        assert_eq!(
            (outbox.acked, outbox.lost, outbox.lost_after_ack),
            (3, 2, 2)
        );
        assert!(!report.failed(), "chatlab got every event acknowledged");
        assert!(report.broker_failed());
        assert_eq!(report.broker.acked_past_end, 1);
        assert_eq!(report.broker.offsets_acked_twice, 1);
        assert_eq!(report.broker.acked_unread, 0);
        let lost: Vec<Uuid> = report
            .findings()
            .filter(|l| l.verdict == Verdict::NotServedAfterAck)
            .map(|l| l.subject_id)
            .collect();
        assert_eq!(lost, vec![id(2), id(3)]);
        assert!(
            report
                .to_table()
                .contains("| 0@1 | - | acknowledged, not on the topic |")
        );
    }

    #[test]
    fn an_acknowledged_offset_inside_the_watermarks_that_was_not_read_is_counted() {
        use PublishMode::*;
        let writes = [write(1, AfterCommit), write(2, AfterCommit)];
        // Offset 1 was acknowledged, the high watermark is 3, the reader
        // got offsets 0 and 2 only.
        let events = [event(1, 1, AfterCommit, 0), event(3, 3, AfterCommit, 2)];
        let receipts = [
            acked(1, 1, AfterCommit, at(0, 0)),
            acked(2, 2, AfterCommit, at(0, 1)),
            acked(4, 4, AfterCommit, at(0, -1)),
        ];
        let report = report(&writes, &events, &receipts, 3, 0);
        assert_eq!(report.broker.acked_unread, 1);
        assert_eq!(report.broker.acked_without_offset, 1);
        assert_eq!(report.broker.acked_past_end, 0);
        assert_eq!(report.mode(AfterCommit).unwrap().lost_after_ack, 1);
    }
}
