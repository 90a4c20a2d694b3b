//! What the fleet's streams delivered, from the client processes' records:
//! each delivery owed (every member of a written message's chat), when it
//! arrived, what was missed or repeated, and, after an instance kill, the
//! streams it cut and how long until all were back.

use std::collections::HashMap;

use uuid::Uuid;

use crate::commands::live_clients::{Kind, Record};
use crate::load::latency::Latencies;

/// One message write: its chat, when it started, its id if it was written.
#[derive(Debug, Clone)]
pub(super) struct Write {
    pub(super) chat: usize,
    pub(super) start_ns: u64,
    pub(super) id: Option<Uuid>,
}

/// What a run delivered.
#[derive(Debug, Default)]
pub(super) struct Figures {
    pub(super) written: u64,
    pub(super) failed: u64,
    pub(super) expected: u64,
    pub(super) delivered: u64,
    pub(super) repeated: u64,
    /// Deliveries of the writes started before the kill (all of them
    /// without one): the fleet's steady delivery.
    pub(super) delivery: Latencies,
    /// Deliveries of the writes started after the kill to the streams it
    /// did not cut: the survivors' delivery while they take the cut ones.
    pub(super) after_kill_uncut: Latencies,
    /// Deliveries of the writes started after the kill to the streams it
    /// cut: their return and catch-up included.
    pub(super) after_kill_cut: Latencies,
    /// Streams that ended after the kill (none without one).
    pub(super) cut: u64,
    /// Of them, streams that were not back by the end of the run (gave
    /// up, or still retrying when the clients stopped).
    pub(super) gave_up: u64,
    /// From the kill to the last cut stream's return, ms.
    pub(super) all_back_ms: Option<f64>,
    /// Streams that ended while no instance had been killed.
    pub(super) cut_unprovoked: u64,
}

impl Figures {
    /// Deliveries owed and not made.
    pub(super) fn missing(&self) -> u64 {
        self.expected.saturating_sub(self.delivered)
    }
}

/// Sets `records` against `writes` to `chats` (each chat's members as
/// stream indexes); `killed_at` is when an instance was killed, if one was.
pub(super) fn tally(
    writes: &[Write],
    chats: &[(Uuid, Vec<usize>)],
    records: &[Record],
    killed_at: Option<u64>,
) -> Figures {
    let mut out = Figures::default();
    // Which chat each message is in, and when its write started.
    let mut messages: HashMap<Uuid, (usize, u64)> = HashMap::with_capacity(writes.len());
    for w in writes {
        match w.id {
            Some(id) => {
                out.written += 1;
                out.expected += chats[w.chat].1.len() as u64;
                messages.insert(id, (w.chat, w.start_ns));
            }
            None => out.failed += 1,
        }
    }
    // The streams the kill cut, whatever order the processes' records
    // come in.
    let cut_by_kill: std::collections::HashSet<u32> = records
        .iter()
        .filter(|r| matches!(r.kind, Kind::Cut) && killed_at.is_some_and(|k| r.at_ns >= k))
        .map(|r| r.stream)
        .collect();
    let mut seen: HashMap<(u32, Uuid), u32> = HashMap::with_capacity(out.expected as usize);
    let mut cut_at: HashMap<u32, u64> = HashMap::new();
    // Streams whose last word was a cut: out at the end.
    let mut out_now: std::collections::HashSet<u32> = std::collections::HashSet::new();
    let mut last_back: Option<u64> = None;
    for r in records {
        match r.kind {
            Kind::Frame => {
                let Some(&(chat, start)) = messages.get(&r.message) else {
                    continue;
                };
                if !chats[chat].1.contains(&(r.stream as usize)) {
                    continue;
                }
                let times = seen.entry((r.stream, r.message)).or_default();
                *times += 1;
                if *times == 1 {
                    out.delivered += 1;
                    let micros = r.at_ns.saturating_sub(start) / 1_000;
                    let share = match killed_at {
                        Some(kill) if start >= kill => {
                            if cut_by_kill.contains(&r.stream) {
                                &mut out.after_kill_cut
                            } else {
                                &mut out.after_kill_uncut
                            }
                        }
                        _ => &mut out.delivery,
                    };
                    share.record_micros(micros);
                } else {
                    out.repeated += 1;
                }
            }
            Kind::Cut => {
                out_now.insert(r.stream);
                match killed_at {
                    Some(kill) if r.at_ns >= kill => {
                        out.cut += 1;
                        cut_at.insert(r.stream, r.at_ns);
                    }
                    _ => out.cut_unprovoked += 1,
                }
            }
            Kind::Back => {
                out_now.remove(&r.stream);
                if cut_at.contains_key(&r.stream) {
                    last_back = Some(last_back.map_or(r.at_ns, |t| t.max(r.at_ns)));
                }
            }
            Kind::GaveUp => {
                out_now.insert(r.stream);
            }
        }
    }
    out.gave_up = out_now.len() as u64;
    // "All back" only when none is still out.
    if let (Some(kill), Some(back), 0) = (killed_at, last_back, out.gave_up) {
        out.all_back_ms = Some(back.saturating_sub(kill) as f64 / 1e6);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(stream: u32, message: Uuid, at_ns: u64) -> Record {
        Record {
            kind: Kind::Frame,
            stream,
            message,
            at_ns,
        }
    }

    fn mark(kind: Kind, stream: u32, at_ns: u64) -> Record {
        Record {
            kind,
            stream,
            message: Uuid::nil(),
            at_ns,
        }
    }

    #[test]
    fn deliveries_are_counted_once_per_member_and_the_kill_by_its_streams() {
        let chats = vec![(Uuid::now_v7(), vec![0, 1]), (Uuid::now_v7(), vec![2])];
        let (a, b) = (Uuid::now_v7(), Uuid::now_v7());
        let writes = vec![
            Write {
                chat: 0,
                start_ns: 1_000_000,
                id: Some(a),
            },
            Write {
                chat: 1,
                start_ns: 2_000_000,
                id: Some(b),
            },
            Write {
                chat: 1,
                start_ns: 3_000_000,
                id: None,
            },
        ];
        let records = vec![
            frame(0, a, 11_000_000),
            frame(1, a, 21_000_000),
            frame(1, a, 22_000_000), // again
            frame(2, a, 23_000_000), // not its chat
            mark(Kind::Cut, 2, 50_000_000),
            mark(Kind::Back, 2, 80_000_000),
            mark(Kind::Cut, 1, 5_000_000), // before the kill
            mark(Kind::Back, 1, 6_000_000),
        ];
        let f = tally(&writes, &chats, &records, Some(40_000_000));
        assert_eq!((f.written, f.failed, f.expected), (2, 1, 3));
        assert_eq!((f.delivered, f.repeated, f.missing()), (2, 1, 1));
        assert!((f.delivery.max_ms() - 20.0).abs() < 0.1);
        assert_eq!(f.after_kill_uncut.count() + f.after_kill_cut.count(), 0);
        assert_eq!((f.cut, f.cut_unprovoked, f.gave_up), (1, 1, 0));
        assert_eq!(f.all_back_ms, Some(40.0));

        // A stream still out at the end (cut, never back) counts as not
        // back, and then nothing is "all back".
        let mut records = records;
        records.push(mark(Kind::Cut, 0, 60_000_000));
        let f = tally(&writes, &chats, &records, Some(40_000_000));
        assert_eq!((f.cut, f.gave_up), (2, 1));
        assert_eq!(f.all_back_ms, None);
    }

    #[test]
    fn writes_after_the_kill_are_timed_apart_for_the_streams_it_cut() {
        let chats = vec![(Uuid::now_v7(), vec![0, 1])];
        let (before, after) = (Uuid::now_v7(), Uuid::now_v7());
        let writes = vec![
            Write {
                chat: 0,
                start_ns: 10_000_000,
                id: Some(before),
            },
            Write {
                chat: 0,
                start_ns: 50_000_000,
                id: Some(after),
            },
        ];
        // Stream 1's records come first, as one process's file may, and
        // its cut is listed after its late frame.
        let records = vec![
            frame(1, after, 950_000_000),
            mark(Kind::Cut, 1, 45_000_000),
            mark(Kind::Back, 1, 900_000_000),
            frame(0, before, 15_000_000),
            frame(1, before, 16_000_000),
            frame(0, after, 55_000_000),
        ];
        let f = tally(&writes, &chats, &records, Some(40_000_000));
        assert_eq!((f.delivered, f.missing(), f.repeated), (4, 0, 0));
        assert_eq!(f.delivery.count(), 2);
        assert!((f.delivery.max_ms() - 6.0).abs() < 0.1);
        assert_eq!(f.after_kill_uncut.count(), 1);
        assert!((f.after_kill_uncut.max_ms() - 5.0).abs() < 0.1);
        assert_eq!(f.after_kill_cut.count(), 1);
        assert!((f.after_kill_cut.max_ms() - 900.0).abs() < 1.0);
        assert_eq!(f.all_back_ms, Some(860.0));
    }
}
