//! What `delivery-busy` found, rendered from the numbers: a cell's phases,
//! the table of results.md, and each cell's gap and verdict.

use std::time::Duration;

use chatlab_domain::PublishMode;

use super::db_distance::DbDistance;
use super::probe::Deliveries;
use crate::load::creators::Created;
use crate::observe::prom::HistogramSnapshot;
use crate::servers::reach::show_ms;

/// The two phases of a cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    /// Only the probe.
    Quiet,
    /// The probe while chats are created flat out.
    Busy,
}

impl Phase {
    /// Its name in the table.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Quiet => "quiet",
            Self::Busy => "busy",
        }
    }
}

/// One phase of a cell.
#[derive(Debug)]
pub(crate) struct PhaseFigures {
    /// Which.
    pub(crate) phase: Phase,
    /// The probe's messages as the member's stream delivered them.
    pub(crate) deliveries: Deliveries,
    /// The chats created meanwhile.
    pub(crate) created: Created,
    /// The live instance's `chatlab_live_delay_seconds` over the phase
    /// (`None`: a scrape did not answer).
    pub(crate) server_delay: Option<HistogramSnapshot>,
    /// Times the member's stream was cut (`overflow`, `reset`, its end).
    pub(crate) cuts: u64,
}

impl PhaseFigures {
    /// The server's mean delay in ms, if it saw any event.
    fn server_mean_ms(&self) -> Option<f64> {
        self.server_delay
            .as_ref()
            .filter(|h| h.count > 0.0)
            .map(|h| h.mean() * 1e3)
    }

    /// The probes' p99 in ms, if any was received.
    fn p99_ms(&self) -> Option<f64> {
        (self.deliveries.received > 0).then(|| self.deliveries.latency.quantile_ms(0.99))
    }
}

/// One publish mode at one distance: its quiet and its busy phase.
#[derive(Debug)]
pub(crate) struct Cell {
    /// The live instance's KAFKA_PUBLISH_MODE (and the writer's).
    pub(crate) mode: PublishMode,
    /// Where the live instance's database was.
    pub(crate) distance: DbDistance,
    /// Without the creators.
    pub(crate) quiet: PhaseFigures,
    /// With them.
    pub(crate) busy: PhaseFigures,
}

impl Cell {
    /// busy p99 − quiet p99, ms (`None`: a phase received nothing).
    pub(crate) fn gap_ms(&self) -> Option<f64> {
        Some(self.busy.p99_ms()? - self.quiet.p99_ms()?)
    }

    /// Whether the busy p99 is within `max_gap` of the quiet one.
    pub(crate) fn within(&self, max_gap: Duration) -> bool {
        self.gap_ms()
            .is_some_and(|gap| gap <= max_gap.as_secs_f64() * 1e3)
    }

    /// Probes written but not delivered, both phases.
    pub(crate) fn missing(&self) -> u64 {
        self.quiet.deliveries.missing + self.busy.deliveries.missing
    }

    /// Probes delivered more than once, both phases.
    fn duplicated(&self) -> u64 {
        self.quiet.deliveries.duplicated + self.busy.deliveries.duplicated
    }

    /// Probes whose POST failed, both phases.
    fn failed(&self) -> u64 {
        self.quiet.deliveries.failed + self.busy.deliveries.failed
    }

    /// Nothing missing, repeated or unsent, and the gap within `max_gap`.
    pub(crate) fn is_clean(&self, max_gap: Duration) -> bool {
        self.missing() == 0 && self.duplicated() == 0 && self.failed() == 0 && self.within(max_gap)
    }

    /// The cell's line of results.md: its gap, the verdict, and what went
    /// missing.
    pub(crate) fn verdict(&self, max_gap: Duration) -> String {
        format!(
            "{} at {}: {}",
            self.mode,
            self.distance.label(),
            self.findings(max_gap)
        )
    }

    /// The cell's line on stdout: the p99s and the busy load, then the
    /// verdict.
    pub(crate) fn summary(&self, max_gap: Duration) -> String {
        let p99 = |p: Option<f64>| p.map_or_else(|| "–".to_owned(), |ms| format!("{ms:.1} ms"));
        format!(
            "{} at {}: quiet p99 {}, busy p99 {} with {:.0} chats/s; {}",
            self.mode,
            self.distance.label(),
            p99(self.quiet.p99_ms()),
            p99(self.busy.p99_ms()),
            self.busy.created.per_second(),
            self.findings(max_gap)
        )
    }

    /// The gap and its verdict, what went missing, and anything else amiss.
    fn findings(&self, max_gap: Duration) -> String {
        let limit = format!("{} ms", show_ms(max_gap.as_secs_f64() * 1e3));
        let verdict = if self.within(max_gap) {
            format!("within {limit} of quiet")
        } else {
            format!("NOT within {limit} of quiet")
        };
        let gap = match self.gap_ms() {
            Some(gap) => format!("busy p99 − quiet p99 = {gap:+.1} ms: {verdict}"),
            None => format!("no p99 to compare (a phase received nothing): {verdict}"),
        };
        let missing = match self.missing() {
            0 => "nothing missing".to_owned(),
            n => format!("{n} missing"),
        };
        let mut extra = String::new();
        if self.duplicated() > 0 {
            extra.push_str(&format!("; {} duplicated", self.duplicated()));
        }
        if self.failed() > 0 {
            extra.push_str(&format!("; {} probe posts failed", self.failed()));
        }
        let early = self.quiet.deliveries.early + self.busy.deliveries.early;
        if early > 0 {
            extra.push_str(&format!(
                "; {early} frames arrived before their POST's answer (counted as 0 ms)"
            ));
        }
        let cuts = self.quiet.cuts + self.busy.cuts;
        if cuts > 0 {
            extra.push_str(&format!("; the stream was cut {cuts} times"));
        }
        if let Some(failure) = &self.busy.created.first_failure {
            extra.push_str(&format!(
                "; {} createChats failed, the first: {failure}",
                self.busy.created.failed
            ));
        }
        format!("{gap}; {missing}{extra}")
    }
}

/// One markdown table, a row per cell and phase.
pub(crate) fn table(cells: &[Cell]) -> String {
    let mut out = String::from(
        "| mode | DB distance | phase | chats/s | sent | received | missing | dup | p50 ms | p99 ms | max ms | before the answer | p99 from the POST's start ms | server mean delay ms |\n\
         |---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for cell in cells {
        for phase in [&cell.quiet, &cell.busy] {
            let d = &phase.deliveries;
            let latency = |ms: f64| {
                if d.received > 0 {
                    format!("{ms:.1}")
                } else {
                    "–".to_owned()
                }
            };
            out.push_str(&format!(
                "| {} | {} | {} | {:.0} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
                cell.mode,
                cell.distance.label(),
                phase.phase.name(),
                phase.created.per_second(),
                d.sent,
                d.received,
                d.missing,
                d.duplicated,
                latency(d.latency.quantile_ms(0.5)),
                latency(d.latency.quantile_ms(0.99)),
                latency(d.latency.max_ms()),
                d.early,
                latency(d.from_start.quantile_ms(0.99)),
                phase
                    .server_mean_ms()
                    .map_or_else(|| "–".to_owned(), |ms| format!("{ms:.1}")),
            ));
        }
    }
    out
}

/// Every cell's verdict, one list item each.
pub(crate) fn verdicts(cells: &[Cell], max_gap: Duration) -> String {
    cells
        .iter()
        .map(|c| format!("- {}\n", c.verdict(max_gap)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn phase(phase: Phase, latencies_ms: &[u64], missing: u64) -> PhaseFigures {
        let mut deliveries = Deliveries {
            sent: latencies_ms.len() as u64 + missing,
            received: latencies_ms.len() as u64,
            missing,
            ..Deliveries::default()
        };
        for ms in latencies_ms {
            deliveries.latency.record_micros(ms * 1000);
        }
        PhaseFigures {
            phase,
            deliveries,
            created: Created::default(),
            server_delay: None,
            cuts: 0,
        }
    }

    fn cell(quiet: &[u64], busy: &[u64], missing: u64) -> Cell {
        Cell {
            mode: PublishMode::Outbox,
            distance: DbDistance::Blackholed,
            quiet: phase(Phase::Quiet, quiet, 0),
            busy: phase(Phase::Busy, busy, missing),
        }
    }

    #[test]
    fn the_verdict_is_rendered_from_the_p99s() {
        let limit = Duration::from_millis(100);
        let near = cell(&[10, 12], &[50, 60], 0);
        assert!(near.is_clean(limit));
        let line = near.verdict(limit);
        assert!(
            line.starts_with("outbox at blackholed: busy p99 − quiet p99 = +48.0 ms: within 100 ms of quiet; nothing missing"),
            "{line}"
        );

        let far = cell(&[10], &[900], 3);
        assert!(!far.is_clean(limit));
        let line = far.verdict(limit);
        assert!(
            line.contains("NOT within 100 ms of quiet; 3 missing"),
            "{line}"
        );

        let silent = cell(&[10], &[], 4);
        assert_eq!(silent.gap_ms(), None);
        assert!(silent.verdict(limit).contains("NOT within"));
    }

    #[test]
    fn the_table_has_a_row_per_phase() {
        let t = table(&[cell(&[10], &[], 2)]);
        assert_eq!(t.lines().count(), 4);
        assert!(
            t.contains(
                "| outbox | blackholed | quiet | 0 | 1 | 1 | 0 | 0 | 10.0 | 10.0 | 10.0 | 0 | 0.0 | – |"
            ),
            "{t}"
        );
        assert!(
            t.contains(
                "| outbox | blackholed | busy | 0 | 2 | 0 | 2 | 0 | – | – | – | 0 | – | – |"
            ),
            "{t}"
        );
    }
}
