//! From the requests of a fault run to its figures: failures by status,
//! the longest wait, how soon service came back, failures after it came
//! back, and the slopes of a soak; and the invariants a run must keep.

use std::collections::BTreeMap;
use std::time::Duration;

use super::checks::{ModeEvents, RowChecks, Sample};
use super::inject::{Fault, Timeline};
use super::load::{Outcome, Request};
use chatlab_domain::PublishMode;

/// Everything measured in one cell.
#[derive(Debug, Clone, Default)]
pub struct CellFigures {
    /// Server variant (driver, pooling).
    pub variant: String,
    /// The fault.
    pub fault: String,
    /// Requests sent.
    pub requests: u64,
    /// Requests answered 2xx.
    pub succeeded: u64,
    /// Writes answered 201.
    pub acknowledged: u64,
    /// The others, by how they ended (`503`, `refused`, `cut`, ...).
    pub failed: BTreeMap<String, u64>,
    /// Per publish mode sent: requests, and those that failed.
    pub by_mode: BTreeMap<String, (u64, u64)>,
    /// Of the 503s, those without `Retry-After`.
    pub unavailable_without_retry_after: u64,
    /// The longest a request waited for its answer (those the client
    /// abandoned left out).
    pub max_latency: Duration,
    /// The fault's timeline.
    pub timeline: Timeline,
    /// From the fault's end to the first success.
    pub first_success_after: Option<Duration>,
    /// From the fault's end to the first second at 90% of the successes per
    /// second before the fault.
    pub full_rate_after: Option<Duration>,
    /// Failures of requests sent after the first success that followed the
    /// fault (broken connections handed out, stale state).
    pub failed_after_recovery: u64,
    /// The rows.
    pub rows: RowChecks,
    /// The audit, per mode.
    pub events: Vec<ModeEvents>,
    /// Why the audit could not run, if it could not.
    pub audit_error: Option<String>,
    /// Most outbox rows pending at once.
    pub outbox_peak: u64,
    /// From the fault's end until the outbox backlog was back to its
    /// level before the fault.
    pub outbox_recovered_after: Option<Duration>,
    /// From the load's end until the outbox was empty (`None`: it was not,
    /// within the run's limit).
    pub outbox_drained_after: Option<Duration>,
    /// Sessions left idle in a transaction after the load.
    pub idle_in_transaction: u64,
    /// Connections still checked out after the load.
    pub connections_in_use: f64,
    /// Slopes over the run, per minute: RSS (MiB), open connections,
    /// waiters, outbox rows.
    pub slopes: Slopes,
    /// RSS at the start and the end, MiB.
    pub rss: (f64, f64),
    /// Retries sent (every request's retries, summed).
    pub retries: u64,
    /// Requests answered from a stored Idempotency-Key: an earlier attempt
    /// had written them.
    pub replayed: u64,
    /// Whether the requests carried an `Idempotency-Key`.
    pub keyed: bool,
    /// The servers' `HTTP_SHUTDOWN_TIMEOUT_SECS`: a SIGTERM must end the
    /// process within it.
    pub shutdown_timeout: Option<Duration>,
}

/// Least-squares slopes per minute of what the watcher sampled.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Slopes {
    /// Resident memory, MiB per minute.
    pub rss_mib: f64,
    /// Open connections per minute.
    pub connections: f64,
    /// Waiters per minute.
    pub pending: f64,
    /// Outbox rows per minute.
    pub outbox: f64,
}

/// The outcome's name in the tables.
pub fn outcome_name(o: Outcome) -> String {
    match o {
        Outcome::Status(s) => s.to_string(),
        Outcome::Refused => "refused".into(),
        Outcome::Unanswered => "unanswered".into(),
        Outcome::Cut => "cut".into(),
        Outcome::Abandoned => "abandoned".into(),
    }
}

fn success(o: Outcome) -> bool {
    matches!(o, Outcome::Status(200..=299))
}

/// Fills the request-side figures of `cell`.
pub fn from_requests(
    cell: &mut CellFigures,
    requests: &[Request],
    modes: &[Option<PublishMode>],
    timeline: &Timeline,
) {
    cell.timeline = *timeline;
    for r in requests {
        let name = modes
            .get(r.mode)
            .copied()
            .flatten()
            .map_or_else(|| "server's".to_owned(), |m| m.to_string());
        let entry = cell.by_mode.entry(name).or_default();
        entry.0 += 1;
        if !success(r.outcome) {
            entry.1 += 1;
        }
    }
    cell.requests = requests.len() as u64;
    cell.retries = requests.iter().map(|r| u64::from(r.retries)).sum();
    cell.replayed = requests.iter().filter(|r| r.replayed).count() as u64;
    cell.succeeded = requests.iter().filter(|r| success(r.outcome)).count() as u64;
    cell.acknowledged = requests.iter().filter(|r| r.acknowledged()).count() as u64;
    for r in requests.iter().filter(|r| !success(r.outcome)) {
        *cell.failed.entry(outcome_name(r.outcome)).or_default() += 1;
        if r.outcome == Outcome::Status(503) && !r.retry_after {
            cell.unavailable_without_retry_after += 1;
        }
    }
    cell.max_latency = requests
        .iter()
        .filter(|r| r.outcome != Outcome::Abandoned)
        .map(|r| r.latency)
        .max()
        .unwrap_or_default();
    let (Some(down), Some(back)) = (timeline.down_at, timeline.back_at) else {
        return;
    };
    // Answers, by when they arrived.
    let answered_at = |r: &Request| r.due + r.latency;
    let first = requests
        .iter()
        .filter(|r| success(r.outcome) && answered_at(r) >= back)
        .map(answered_at)
        .min();
    cell.first_success_after = first.map(|t| t - back);
    if let Some(first) = first {
        cell.failed_after_recovery = requests
            .iter()
            .filter(|r| r.due > first && !success(r.outcome))
            .count() as u64;
    }
    // Successes per second before the fault (by when they were answered,
    // leaving out the first second's warm-up), then the first second after
    // it that reached 90% of that.
    let warm = Duration::from_secs(1);
    if down > warm {
        let answered: Vec<Duration> = requests
            .iter()
            .filter(|r| success(r.outcome))
            .map(answered_at)
            .collect();
        let before = answered
            .iter()
            .filter(|t| **t >= warm && **t < down)
            .count() as f64
            / (down - warm).as_secs_f64();
        let last = answered.iter().max().copied().unwrap_or_default();
        let mut t = back;
        while t + Duration::from_secs(1) <= last {
            let end = t + Duration::from_secs(1);
            let in_second = answered.iter().filter(|a| **a >= t && **a < end).count() as f64;
            if in_second >= 0.9 * before {
                cell.full_rate_after = Some(t - back);
                break;
            }
            t += Duration::from_millis(100);
        }
    }
}

/// Fills the watched figures: the outbox peak, RSS and the slopes.
pub fn from_samples(cell: &mut CellFigures, samples: &[Sample]) {
    cell.outbox_peak = samples
        .iter()
        .filter_map(|s| s.outbox_pending)
        .max()
        .unwrap_or(0);
    if let (Some(down), Some(back)) = (cell.timeline.down_at, cell.timeline.back_at) {
        let before = samples
            .iter()
            .filter(|s| s.at < down)
            .filter_map(|s| s.outbox_pending)
            .max()
            .unwrap_or(0);
        cell.outbox_recovered_after = samples
            .iter()
            .filter(|s| s.at >= back && s.outbox_pending.is_some_and(|n| n <= before))
            .map(|s| s.at - back)
            .next();
    }
    let rss: Vec<f64> = samples.iter().filter_map(|s| s.rss_mib).collect();
    cell.rss = (
        rss.first().copied().unwrap_or(0.0),
        rss.last().copied().unwrap_or(0.0),
    );
    let series = |f: &dyn Fn(&Sample) -> Option<f64>| -> Vec<(f64, f64)> {
        samples
            .iter()
            .filter_map(|s| Some((s.at.as_secs_f64() / 60.0, f(s)?)))
            .collect()
    };
    cell.slopes = Slopes {
        rss_mib: slope(&series(&|s| s.rss_mib)),
        connections: slope(&series(&|s| s.connections)),
        pending: slope(&series(&|s| s.pending)),
        outbox: slope(&series(&|s| s.outbox_pending.map(|n| n as f64))),
    };
}

/// The least-squares slope of `points` (0 with fewer than two).
pub fn slope(points: &[(f64, f64)]) -> f64 {
    let n = points.len() as f64;
    if points.len() < 2 {
        return 0.0;
    }
    let mx = points.iter().map(|p| p.0).sum::<f64>() / n;
    let my = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    if sxx == 0.0 { 0.0 } else { sxy / sxx }
}

/// What a run must keep, given the fault; every broken invariant, named.
pub fn broken_invariants(cell: &CellFigures, fault: Fault, latency_bound: Duration) -> Vec<String> {
    let mut broken = Vec::new();
    let rows = &cell.rows;
    let counted = [
        (rows.chats_missing, "acknowledged chats missing"),
        (rows.chats_partial, "chats written in part"),
        (rows.messages_missing, "acknowledged messages missing"),
        (
            rows.messages_inbox_partial,
            "messages with part of their inbox rows",
        ),
        (
            rows.marks_lost,
            "acknowledged read-marker moves lost or moved back",
        ),
        (rows.acked_without_id, "201 answers without an id"),
        (cell.failed.get("500").copied().unwrap_or(0), "answers 500"),
        (
            cell.unavailable_without_retry_after,
            "answers 503 without Retry-After",
        ),
        (
            cell.idle_in_transaction,
            "sessions left idle in transaction",
        ),
        (
            if cell.keyed { rows.chats_duplicated } else { 0 },
            "chats written twice under one Idempotency-Key",
        ),
    ];
    for (n, what) in counted {
        if n > 0 {
            broken.push(format!("{n} {what}"));
        }
    }
    if let Some(e) = &cell.audit_error {
        broken.push(format!("no audit ({e})"));
    }
    // chatlab's losses: events the broker never acknowledged. Those it
    // acknowledged and does not serve are the broker's, reported apart.
    for mode in &cell.events {
        let no_loss = matches!(mode.mode.as_str(), "outbox" | "in_tx_await");
        let unacked = mode.lost.saturating_sub(mode.lost_after_ack);
        if no_loss && unacked > 0 {
            broken.push(format!("{unacked} events lost in {}", mode.mode));
        }
    }
    if cell.outbox_drained_after.is_none() {
        broken.push("the outbox never drained".into());
    }
    if cell.connections_in_use > 0.0 {
        broken.push(format!(
            "{} connections left checked out",
            cell.connections_in_use
        ));
    }
    if fault != Fault::Cancel && cell.max_latency > latency_bound {
        broken.push(format!(
            "a request waited {} ms, past the bound of {} ms",
            cell.max_latency.as_millis(),
            latency_bound.as_millis()
        ));
    }
    if cell.timeline.back_at.is_some() && cell.first_success_after.is_none() {
        broken.push("no request succeeded after the fault".into());
    }
    fault_broken(cell, fault, &mut broken);
    broken
}

/// The invariants of `fault` itself: what may fail while it lasts and what
/// must not after it.
fn fault_broken(cell: &CellFigures, fault: Fault, broken: &mut Vec<String>) {
    match fault {
        // A broker that comes back answers the deliveries queued while it
        // was away first: requests may still time out for a moment, so
        // failures after recovery are reported there, not held against it.
        Fault::BrokerKill | Fault::BrokerFreeze => {
            for kind in ["refused", "unanswered", "cut"] {
                if let Some(n) = cell.failed.get(kind) {
                    broken.push(format!("{n} requests {kind}"));
                }
            }
        }
        Fault::DbRestart | Fault::DbStop | Fault::DbTerminate | Fault::DbBlackhole => {
            if cell.failed_after_recovery > 0 {
                broken.push(format!(
                    "{} requests failed after service came back",
                    cell.failed_after_recovery
                ));
            }
            for kind in ["refused", "cut"] {
                if let Some(n) = cell.failed.get(kind) {
                    broken.push(format!("{n} requests {kind}"));
                }
            }
        }
        Fault::ServerTerm => shutdown_broken(cell, broken),
        Fault::None => {
            if cell.requests > cell.succeeded {
                broken.push(format!(
                    "{} requests failed",
                    cell.requests - cell.succeeded
                ));
            }
        }
        Fault::ServerKill | Fault::Cancel => {}
    }
}

/// A graceful shutdown's invariants: a clean exit within its timeout, no
/// answer cut, no write committed whose answer never arrived.
fn shutdown_broken(cell: &CellFigures, broken: &mut Vec<String>) {
    match cell.timeline.exit {
        Some((_, Some(0))) => {}
        Some((_, code)) => broken.push(format!("the server exited with {code:?}")),
        None => broken.push("the server did not exit".into()),
    }
    if let (Some((took, _)), Some(limit)) = (cell.timeline.exit, cell.shutdown_timeout) {
        // The in-flight requests get the timeout; the relay's batch
        // and the producer's flush (5 s at most) come after it.
        let limit = limit + Duration::from_secs(6);
        if took > limit {
            broken.push(format!(
                "the server took {} ms to exit, past {} ms",
                took.as_millis(),
                limit.as_millis()
            ));
        }
    }
    if let Some(n) = cell.failed.get("cut") {
        broken.push(format!("{n} answers cut by the shutdown"));
    }
    // A request left in the accept queue when the listener closed
    // goes unanswered, and wrote nothing; one that wrote and lost
    // its answer would show as a write nobody was told about.
    let unannounced = (cell.rows.chats_committed + cell.rows.messages_committed)
        .saturating_sub(cell.acknowledged);
    if unannounced > 0 {
        broken.push(format!(
            "{unannounced} writes committed whose answer never arrived"
        ));
    }
}

/// The Markdown table of the cells.
pub fn to_markdown(cells: &[(CellFigures, Vec<String>)]) -> String {
    let mut s = String::from(
        "| variant | fault | requests | ok | failed (by status) | max wait ms | down → back s | \
         first ok after s | full rate after s | failed after recovery | acked missing | partial | \
         failed per mode | events lost / phantom / dup (per mode) | outbox peak | outbox back to normal after s | \
         retries (answered from the key) | chats written twice | invariants |\n\
         |---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for (c, broken) in cells {
        let failed = if c.failed.is_empty() {
            "0".to_owned()
        } else {
            c.failed
                .iter()
                .map(|(k, v)| format!("{k}×{v}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let window = match (c.timeline.down_at, c.timeline.back_at) {
            (Some(d), Some(b)) => format!("{:.1} → {:.1}", d.as_secs_f64(), b.as_secs_f64()),
            _ => "-".into(),
        };
        let secs =
            |d: Option<Duration>| d.map_or("-".into(), |d| format!("{:.2}", d.as_secs_f64()));
        let events = c
            .events
            .iter()
            .filter(|m| m.committed > 0)
            .map(|m| {
                format!(
                    "{} {}/{}/{}{}",
                    m.mode,
                    m.lost,
                    m.phantom,
                    m.duplicated,
                    if m.lost_after_ack > 0 {
                        format!(" ({} after ack)", m.lost_after_ack)
                    } else {
                        String::new()
                    }
                )
            })
            .collect::<Vec<_>>()
            .join("; ");
        let per_mode = c
            .by_mode
            .iter()
            .map(|(m, (n, f))| format!("{m} {f}/{n}"))
            .collect::<Vec<_>>()
            .join("; ");
        let retried = format!("{} ({})", c.retries, c.replayed);
        let duplicated = format!(
            "{}{}",
            c.rows.chats_duplicated,
            if c.keyed { " (keyed)" } else { "" }
        );
        let verdict = if broken.is_empty() {
            "held".to_owned()
        } else {
            format!("**broken**: {}", broken.join("; "))
        };
        s.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} / {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            c.variant,
            c.fault,
            c.requests,
            c.succeeded,
            failed,
            c.max_latency.as_millis(),
            window,
            secs(c.first_success_after),
            secs(c.full_rate_after),
            c.failed_after_recovery,
            c.rows.chats_missing,
            c.rows.messages_missing,
            c.rows.chats_partial,
            per_mode,
            if events.is_empty() { "-".into() } else { events },
            c.outbox_peak,
            secs(c.outbox_recovered_after),
            retried,
            duplicated,
            verdict,
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commands::fault::load::Op;

    fn req(due_ms: u64, latency_ms: u64, outcome: Outcome) -> Request {
        Request {
            op: Op::Create,
            mode: 0,
            due: Duration::from_millis(due_ms),
            latency: Duration::from_millis(latency_ms),
            outcome,
            retry_after: outcome == Outcome::Status(503),
            retries: 0,
            replayed: false,
            id: None,
            mark: None,
        }
    }

    #[test]
    fn recovery_is_measured_from_the_fault_end() {
        // 10 ok per second before a fault at 2 s, back at 4 s; failures
        // while down, first success at 4.2 s, full rate from 4.2 s.
        let mut requests = Vec::new();
        for i in 0..60 {
            let due = i * 100;
            let outcome = if (2_000..4_200).contains(&due) {
                Outcome::Status(503)
            } else {
                Outcome::Status(201)
            };
            requests.push(req(due, 5, outcome));
        }
        let timeline = Timeline {
            down_at: Some(Duration::from_secs(2)),
            back_at: Some(Duration::from_secs(4)),
            exit: None,
        };
        let mut cell = CellFigures::default();
        from_requests(&mut cell, &requests, &[], &timeline);
        assert_eq!(cell.requests, 60);
        assert_eq!(cell.failed.get("503"), Some(&22));
        assert_eq!(cell.first_success_after, Some(Duration::from_millis(205)));
        assert_eq!(cell.full_rate_after, Some(Duration::from_millis(100)));
        assert_eq!(cell.failed_after_recovery, 0);
        assert_eq!(cell.unavailable_without_retry_after, 0);
    }

    #[test]
    fn a_failure_after_recovery_breaks_the_run() {
        let mut requests = vec![
            req(0, 1, Outcome::Status(201)),
            req(1_500, 1, Outcome::Status(201)),
            req(2_500, 1, Outcome::Status(201)),
            req(2_600, 1, Outcome::Status(500)),
        ];
        requests.push(req(2_700, 9_000, Outcome::Status(201)));
        let timeline = Timeline {
            down_at: Some(Duration::from_secs(2)),
            back_at: Some(Duration::from_millis(2_400)),
            exit: None,
        };
        let mut cell = CellFigures {
            outbox_drained_after: Some(Duration::ZERO),
            ..CellFigures::default()
        };
        from_requests(&mut cell, &requests, &[], &timeline);
        assert_eq!(cell.failed_after_recovery, 1);
        let broken = broken_invariants(&cell, Fault::DbStop, Duration::from_secs(7));
        assert!(broken.iter().any(|b| b.contains("500")), "{broken:?}");
        assert!(
            broken.iter().any(|b| b.contains("after service came back")),
            "{broken:?}"
        );
        assert!(
            broken.iter().any(|b| b.contains("past the bound")),
            "{broken:?}"
        );
    }

    #[test]
    fn a_clean_run_holds() {
        let requests: Vec<Request> = (0..20)
            .map(|i| req(i * 100, 3, Outcome::Status(201)))
            .collect();
        let mut cell = CellFigures {
            outbox_drained_after: Some(Duration::ZERO),
            ..CellFigures::default()
        };
        from_requests(&mut cell, &requests, &[], &Timeline::default());
        assert!(broken_invariants(&cell, Fault::None, Duration::from_secs(1)).is_empty());
        cell.events.push(ModeEvents {
            mode: "outbox".into(),
            committed: 20,
            lost: 1,
            ..ModeEvents::default()
        });
        assert_eq!(
            broken_invariants(&cell, Fault::None, Duration::from_secs(1)),
            vec!["1 events lost in outbox".to_owned()]
        );
    }

    #[test]
    fn a_lost_marker_move_breaks_the_run() {
        let mut cell = CellFigures {
            outbox_drained_after: Some(Duration::ZERO),
            ..CellFigures::default()
        };
        cell.rows.marks_acked = 40;
        assert!(broken_invariants(&cell, Fault::DbStop, Duration::from_secs(7)).is_empty());
        cell.rows.marks_lost = 2;
        assert_eq!(
            broken_invariants(&cell, Fault::DbStop, Duration::from_secs(7)),
            vec!["2 acknowledged read-marker moves lost or moved back".to_owned()]
        );
    }

    #[test]
    fn slopes_follow_a_line() {
        let points: Vec<(f64, f64)> = (0..10)
            .map(|i| (f64::from(i), 3.0 * f64::from(i) + 1.0))
            .collect();
        assert!((slope(&points) - 3.0).abs() < 1e-9);
        assert_eq!(slope(&[(1.0, 2.0)]), 0.0);
    }
}
