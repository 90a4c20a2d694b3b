//! `live-fleet`'s results.md: the setting, the figures, and the verdicts
//! rendered from them.

use std::time::Duration;

use super::LiveFleetArgs;
use super::tally::Figures;
use crate::load::latency::Latencies;
use crate::servers::balancer::BalancerSpec;
use crate::servers::reach::show_ms;

/// One run's figures beside the tally.
#[derive(Debug)]
pub(super) struct Run {
    /// Streams opened.
    pub(super) streams: usize,
    /// From the first open to every client's `ready`, ms.
    pub(super) all_open_ms: f64,
    /// Each instance's open live connections before the writes.
    pub(super) spread: Vec<f64>,
    /// Each instance's open live connections at the end of the drain.
    pub(super) spread_after: Vec<f64>,
    /// Each instance's RSS before the writes and after, MiB (0: gone).
    pub(super) rss_before: Vec<f64>,
    pub(super) rss_after: Vec<f64>,
    /// The balancer's processes' RSS together at the end of the writes.
    pub(super) balancer_rss: f64,
    /// The broker's CPU over the writes, % of a core.
    pub(super) broker_cpu: Option<f64>,
    /// Where the machine's CPU went over the writes.
    pub(super) cpu: Cpu,
    pub(super) figures: Figures,
}

/// CPU over the writes, % of one core.
#[derive(Debug, Clone, Copy)]
pub(super) struct Cpu {
    /// The chatlab instances together (the killed one until its kill is
    /// not counted).
    pub(super) instances: f64,
    /// The HAProxy processes together.
    pub(super) balancer: f64,
    /// The client processes together.
    pub(super) clients: f64,
    /// The whole machine, busy (`/proc/stat`).
    pub(super) machine: Option<f64>,
}

impl Run {
    /// Nothing missing or repeated, every cut stream back, the steady p99
    /// within, and the survivors' too after a kill.
    pub(super) fn is_clean(&self, target: Duration) -> bool {
        let f = &self.figures;
        let survivors_within =
            f.after_kill_uncut.count() == 0 || within(&f.after_kill_uncut, target);
        f.missing() == 0
            && f.repeated == 0
            && f.gave_up == 0
            && within(&f.delivery, target)
            && survivors_within
    }

    /// The verdict lines.
    fn verdicts(&self, target: Duration, killed: bool) -> String {
        let f = &self.figures;
        let target_ms = show_ms(target.as_secs_f64() * 1e3);
        let verdict = |l: &Latencies| {
            if within(l, target) {
                "within"
            } else {
                "NOT within"
            }
        };
        let mut out = format!(
            "- delivery p99 {:.1} ms over {} deliveries{}: {} the {target_ms} ms target\n",
            f.delivery.quantile_ms(0.99),
            f.delivery.count(),
            if killed {
                " of the writes before the kill"
            } else {
                ""
            },
            verdict(&f.delivery),
        );
        if f.after_kill_uncut.count() > 0 {
            out.push_str(&format!(
                "- after the kill, delivery p99 {:.1} ms over {} deliveries to the streams it did not cut: {} the {target_ms} ms target\n",
                f.after_kill_uncut.quantile_ms(0.99),
                f.after_kill_uncut.count(),
                verdict(&f.after_kill_uncut),
            ));
        }
        if f.after_kill_cut.count() > 0 {
            out.push_str(&format!(
                "- the writes after the kill reached the streams it cut at p99 {:.1} ms, max {:.1} ms ({} deliveries, their return included)\n",
                f.after_kill_cut.quantile_ms(0.99),
                f.after_kill_cut.max_ms(),
                f.after_kill_cut.count(),
            ));
        }
        out.push_str(&format!(
            "- {} of {} deliveries missing, {} repeated\n",
            f.missing(),
            f.expected,
            f.repeated
        ));
        if let Some(ms) = f.all_back_ms {
            out.push_str(&format!(
                "- the kill cut {} streams; all were back {ms:.0} ms after the kill\n",
                f.cut
            ));
        } else if f.cut > 0 {
            out.push_str(&format!(
                "- the kill cut {} streams; {} were not back by the end of the run\n",
                f.cut, f.gave_up
            ));
        }
        out
    }
}

/// Whether `l` holds deliveries and its p99 is within `target`.
fn within(l: &Latencies, target: Duration) -> bool {
    l.count() > 0 && l.quantile_ms(0.99) <= target.as_secs_f64() * 1e3
}

/// The whole of results.md: what ran, the deliveries, where the CPU went,
/// each instance, and the verdicts.
pub(super) fn results_md(
    args: &LiveFleetArgs,
    balancer: &BalancerSpec,
    postgres: &str,
    run: &Run,
    machine: &str,
) -> String {
    format!(
        "# The live tier at fleet scale\n\n{machine}\n\n{postgres}\n\n{}\n\n{}\n\n{}\n\n{}\n{}",
        what_ran(args, balancer, run),
        deliveries_table(run),
        cpu_table(run),
        instances_table(run),
        run.verdicts(args.p99_target, args.kill_at.is_some()),
    )
}

/// The paragraph that says what ran: the tier, the streams, the writes,
/// what counts as a delivery, and the kill if there was one.
fn what_ran(args: &LiveFleetArgs, balancer: &BalancerSpec, run: &Run) -> String {
    format!(
        "{} chatlab instances (`after_commit`) on one tansu broker (SQLite) and the database, \
         behind {} HAProxy processes sharing one port (`leastconn`, `/readyz` checked every 500 ms, \
         down after 2 failures, {}). {} streams, one per user, from {} client processes, each on a \
         loopback address of its own; {} chats of {} members. {} messages a second for {} to the \
         first instance, round robin over the chats; a delivery runs from its write's start to its \
         frame's arrival (one monotonic clock for every process); a delivery not seen {} after the \
         last write is missing.{}{}",
        args.instances,
        balancer.processes,
        if balancer.no_delay {
            "`option http-no-delay`: each piece of a response sent as it comes"
        } else {
            "HAProxy's default for responses, without `option http-no-delay`"
        },
        run.streams,
        args.client_processes,
        args.chats,
        args.members,
        args.rate,
        humantime::format_duration(args.duration),
        humantime::format_duration(args.drain),
        if args.env.is_empty() {
            String::new()
        } else {
            format!(
                " Instances' settings beyond their defaults: {}.",
                args.env
                    .iter()
                    .map(|(k, v)| format!("`{k}={v}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        },
        args.kill_at.map_or_else(String::new, |at| format!(
            " {} into the writes the last instance was killed (SIGKILL); its clients \
             reconnected through the balancer with `Last-Event-ID`, every 250 ms until one \
             answered.",
            humantime::format_duration(at)
        )),
    )
}

/// The deliveries: owed, delivered, missing, repeated, their latencies
/// before and after a kill, the streams it cut and how they came back.
fn deliveries_table(run: &Run) -> String {
    let f = &run.figures;
    format!(
        "| streams | opened within ms | messages written | failed | deliveries owed | delivered | missing | repeated | p50 ms | p99 ms | max ms | p99 ms after the kill, streams not cut | p99 ms after the kill, streams cut | streams cut by the kill | not back at the end | all back after the kill ms | other cuts | balancer RSS MiB | broker CPU % of a core |\n\
         |---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n\
         | {} | {:.0} | {} | {} | {} | {} | {} | {} | {:.1} | {:.1} | {:.1} | {} | {} | {} | {} | {} | {} | {:.1} | {} |\n\n\
         p50, p99 and max are the deliveries of the writes started before the kill (of every write \
         when none was killed); the writes after it are timed apart, to the streams it did not cut \
         and to those it cut.",
        run.streams,
        run.all_open_ms,
        f.written,
        f.failed,
        f.expected,
        f.delivered,
        f.missing(),
        f.repeated,
        f.delivery.quantile_ms(0.5),
        f.delivery.quantile_ms(0.99),
        f.delivery.max_ms(),
        p99_or_dash(&f.after_kill_uncut),
        p99_or_dash(&f.after_kill_cut),
        f.cut,
        f.gave_up,
        f.all_back_ms
            .map_or_else(|| "–".to_owned(), |ms| format!("{ms:.0}")),
        f.cut_unprovoked,
        run.balancer_rss,
        run.broker_cpu
            .map_or_else(|| "–".to_owned(), |c| format!("{c:.1}")),
    )
}

/// Where the CPU went over the writes, per group of processes, and what
/// the rest of the machine took.
fn cpu_table(run: &Run) -> String {
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let dash_or = |v: Option<f64>| v.map_or_else(|| "–".to_owned(), |v| format!("{v:.1}"));
    let rest = run.cpu.machine.map(|m| {
        m - run.cpu.instances - run.cpu.balancer - run.cpu.clients - run.broker_cpu.unwrap_or(0.0)
    });
    format!(
        "CPU over the writes, % of one core (the machine has {cores}):\n\n\
         | chatlab instances | balancer | clients | broker | the rest (PostgreSQL, the writer, the kernel) | machine busy |\n\
         |---|---|---|---|---|---|\n\
         | {:.1} | {:.1} | {:.1} | {} | {} | {} |",
        run.cpu.instances,
        run.cpu.balancer,
        run.cpu.clients,
        dash_or(run.broker_cpu),
        dash_or(rest),
        dash_or(run.cpu.machine),
    )
}

/// Each instance's streams before the writes and at the end, and its
/// memory before and after.
fn instances_table(run: &Run) -> String {
    let rows: String = run
        .spread
        .iter()
        .zip(&run.spread_after)
        .zip(run.rss_before.iter().zip(&run.rss_after))
        .enumerate()
        .map(|(n, ((streams, streams_after), (before, after)))| {
            format!("| {n} | {streams:.0} | {streams_after:.0} | {before:.1} | {after:.1} |\n")
        })
        .collect();
    format!(
        "Per instance (the last is the one killed, when one was):\n\n\
         | instance | live streams before the writes | at the end | RSS MiB before | after |\n\
         |---|---|---|---|---|\n\
         {rows}"
    )
}

/// `l`'s p99 in ms, or a dash when it holds nothing.
fn p99_or_dash(l: &Latencies) -> String {
    if l.count() == 0 {
        "–".to_owned()
    } else {
        format!("{:.1}", l.quantile_ms(0.99))
    }
}
