//! The load engines: a closed model (a fixed number of virtual users, each
//! waiting for its answer, optionally thinking between requests, with
//! staged ramps) and an open model (a constant arrival rate with a cap on
//! requests in flight, latency counted from the intended send time).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};
use tokio::sync::mpsc;

use crate::load::latency::Latencies;
use crate::load::scenario::{Op, Overrides, Rng, Workload, send};
use crate::load::schedule::{ArrivalSchedule, Stage, total_duration, vus_at};
use crate::load::traces::{SlowestTraces, TraceParent, TracedRequest};

/// Which load model.
#[derive(Debug, Clone)]
pub enum Model {
    /// Constant VUs per stage (one stage = k6 `constant-vus`).
    Closed {
        /// The stages.
        stages: Vec<Stage>,
        /// Pause between a VU's requests.
        think_time: Duration,
    },
    /// Constant arrival rate (k6 `constant-arrival-rate`).
    Open {
        /// When each request is due: a rate checked when it was built.
        schedule: ArrivalSchedule,
        /// Most requests in flight; arrivals beyond it are dropped and counted.
        max_in_flight: usize,
    },
}

impl Model {
    /// How long the run lasts.
    pub fn duration(&self) -> Duration {
        match self {
            Self::Closed { stages, .. } => total_duration(stages),
            Self::Open { schedule, .. } => schedule.duration(),
        }
    }

    /// Peak concurrency: the most VUs, or the in-flight cap.
    pub fn peak_concurrency(&self) -> usize {
        match self {
            Self::Closed { stages, .. } => stages.iter().map(|s| s.vus).max().unwrap_or(0),
            Self::Open { max_in_flight, .. } => *max_in_flight,
        }
    }
}

/// What one variant (a strategy or mode sent in the override headers) got.
#[derive(Debug, Clone, Default)]
pub struct VariantOutcome {
    /// Client-side latencies of completed requests (errors included).
    pub latencies: Latencies,
    /// Requests that failed, by status (0: transport error or timeout).
    pub errors: BTreeMap<u16, u64>,
    /// The slowest of the requests sent with a `traceparent`.
    pub slowest: SlowestTraces,
    /// Latencies per operation (by [`Op::name`]), for a scenario that
    /// mixes them.
    pub by_op: BTreeMap<&'static str, Latencies>,
}

impl VariantOutcome {
    /// Adds `other`'s requests to these.
    pub fn merge(&mut self, other: &VariantOutcome) {
        self.latencies.merge(&other.latencies);
        for (status, n) in &other.errors {
            *self.errors.entry(*status).or_default() += n;
        }
        self.slowest.merge(&other.slowest);
        for (op, latencies) in &other.by_op {
            self.by_op.entry(op).or_default().merge(latencies);
        }
    }

    /// Requests completed.
    pub fn requests(&self) -> u64 {
        self.latencies.count()
    }

    /// Failed requests.
    pub fn error_count(&self) -> u64 {
        self.errors.values().sum()
    }
}

/// What a run got.
#[derive(Debug, Clone)]
pub struct RunOutcome {
    /// One entry per variant, in the order given.
    pub variants: Vec<VariantOutcome>,
    /// Arrivals the open model dropped because too many were in flight.
    pub dropped: u64,
    /// Wall time of the run.
    pub elapsed: Duration,
}

impl RunOutcome {
    /// All variants together.
    pub fn total(&self) -> VariantOutcome {
        let mut total = VariantOutcome::default();
        for v in &self.variants {
            total.merge(v);
        }
        total
    }
}

struct Completed {
    variant: usize,
    micros: u64,
    status: u16,
    op: Op,
    /// The trace id it was sent with, if any.
    trace: Option<u128>,
}

/// Runs the load: requests go to `targets` round robin, with `variants`
/// rotated request by request.
pub async fn run(
    client: reqwest::Client,
    targets: Vec<String>,
    work: Arc<Workload>,
    variants: Vec<Overrides>,
    model: Model,
    label: &str,
) -> RunOutcome {
    let variants = Arc::new(if variants.is_empty() {
        vec![Overrides::default()]
    } else {
        variants
    });
    let targets = Arc::new(targets);
    let (tx, rx) = mpsc::unbounded_channel::<Completed>();
    let counter = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let collector = tokio::spawn(collect(
        rx,
        variants.len(),
        model.duration(),
        label.to_owned(),
    ));
    let senders = Senders {
        client,
        targets,
        work,
        variants,
        tx,
        counter,
    };
    let dropped = match &model {
        Model::Closed { stages, think_time } => {
            run_closed(
                &senders,
                stages,
                *think_time,
                model.peak_concurrency(),
                started,
            )
            .await;
            0
        }
        Model::Open {
            schedule,
            max_in_flight,
        } => run_open(&senders, schedule, *max_in_flight, started).await,
    };
    let Senders { tx, .. } = senders;
    drop(tx);
    let variants = collector.await.unwrap_or_default();
    RunOutcome {
        variants,
        dropped,
        elapsed: started.elapsed(),
    }
}

/// What every sending task shares: where requests go, what they are, the
/// channel of their results and the count that numbers them.
#[derive(Clone)]
struct Senders {
    client: reqwest::Client,
    targets: Arc<Vec<String>>,
    work: Arc<Workload>,
    variants: Arc<Vec<Overrides>>,
    tx: mpsc::UnboundedSender<Completed>,
    counter: Arc<AtomicU64>,
}

impl Senders {
    /// Sends request number `n` (see [`send_nth`]) and passes its result
    /// to the collector.
    async fn send(&self, n: usize, rng: &mut Rng, since: Instant) {
        let done = send_nth(
            &self.client,
            &self.targets,
            &self.work,
            &self.variants,
            n,
            rng,
            since,
        )
        .await;
        let _ = self.tx.send(done);
    }
}

/// The closed model: `peak` virtual users, each sending while the stage
/// at hand wants it, waiting for its answer and `think` between requests.
async fn run_closed(
    senders: &Senders,
    stages: &[Stage],
    think: Duration,
    peak: usize,
    started: Instant,
) {
    let mut vus = Vec::with_capacity(peak);
    for index in 0..peak {
        let (senders, stages) = (senders.clone(), stages.to_vec());
        vus.push(tokio::spawn(async move {
            let mut rng = Rng::new(0x5EED ^ ((index as u64 + 1) << 17));
            loop {
                let elapsed = started.elapsed();
                let wanted = vus_at(&stages, elapsed);
                if wanted == 0 {
                    break;
                }
                if index >= wanted {
                    // Not in this stage: wait for the ramp to reach us.
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    continue;
                }
                let n = senders.counter.fetch_add(1, Ordering::Relaxed) as usize;
                let sent = Instant::now();
                senders.send(n, &mut rng, sent).await;
                if !think.is_zero() {
                    tokio::time::sleep(think).await;
                }
            }
        }));
    }
    for vu in vus {
        let _ = vu.await;
    }
}

/// The open model: arrivals as `schedule` has them due, at most
/// `max_in_flight` at once; answers the arrivals dropped over that cap.
async fn run_open(
    senders: &Senders,
    schedule: &ArrivalSchedule,
    max_in_flight: usize,
    started: Instant,
) -> u64 {
    let in_flight = Arc::new(AtomicUsize::new(0));
    let mut dropped = 0u64;
    let mut tasks = Vec::new();
    let mut rng = Rng::new(0x0FE7);
    let mut i = 0u64;
    while let Some(due) = schedule.due(i) {
        i += 1;
        let intended = started + due;
        tokio::time::sleep_until(intended.into()).await;
        if in_flight.load(Ordering::Relaxed) >= max_in_flight {
            dropped += 1;
            continue;
        }
        in_flight.fetch_add(1, Ordering::Relaxed);
        let n = senders.counter.fetch_add(1, Ordering::Relaxed) as usize;
        let (senders, in_flight) = (senders.clone(), in_flight.clone());
        let mut task_rng = Rng::new(rng.next_u64());
        tasks.push(tokio::spawn(async move {
            // From the intended send time: queueing in the client
            // or the server counts against the server.
            senders.send(n, &mut task_rng, intended).await;
            in_flight.fetch_sub(1, Ordering::Relaxed);
        }));
    }
    for t in tasks {
        let _ = t.await;
    }
    dropped
}

/// Sends request number `n`: its variant and target round robin, its
/// operation drawn, a trace context on the chosen share of requests; its
/// latency counted from `since`.
async fn send_nth(
    client: &reqwest::Client,
    targets: &[String],
    work: &Workload,
    variants: &[Overrides],
    n: usize,
    rng: &mut Rng,
    since: Instant,
) -> Completed {
    let variant = n % variants.len();
    let target = &targets[n % targets.len()];
    let op = work.scenario.pick(rng.next_u64());
    let trace = TraceParent::pick(work.trace_fraction);
    let status = send(
        client,
        target,
        op,
        work,
        &variants[variant],
        trace.as_ref(),
        rng,
    )
    .await;
    Completed {
        variant,
        micros: since.elapsed().as_micros() as u64,
        status,
        op,
        trace: trace.map(|t| t.trace_id),
    }
}

/// Gathers completions, and shows live progress: rate and p95 of the last
/// second. The one collector sees every completion, so its bounded heap
/// per variant is all the trace bookkeeping a run needs: no sample is
/// stored beyond the slowest few.
async fn collect(
    mut rx: mpsc::UnboundedReceiver<Completed>,
    variants: usize,
    duration: Duration,
    label: String,
) -> Vec<VariantOutcome> {
    let mut out = vec![VariantOutcome::default(); variants];
    let bar = ProgressBar::new(duration.as_millis() as u64);
    bar.set_style(
        ProgressStyle::with_template("{prefix} [{bar:30}] {elapsed}/{duration} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    bar.set_prefix(label);
    let started = Instant::now();
    let mut window = Latencies::new();
    let mut window_start = Instant::now();
    let mut window_errors = 0u64;
    while let Some(c) = rx.recv().await {
        let v = &mut out[c.variant];
        v.latencies.record_micros(c.micros);
        v.by_op
            .entry(c.op.name())
            .or_default()
            .record_micros(c.micros);
        window.record_micros(c.micros);
        if !(200..400).contains(&c.status) {
            *v.errors.entry(c.status).or_default() += 1;
            window_errors += 1;
        }
        if let Some(trace_id) = c.trace {
            v.slowest.offer(TracedRequest {
                micros: c.micros,
                trace_id,
                op: c.op.name(),
                status: c.status,
            });
        }
        if window_start.elapsed() >= Duration::from_secs(1) {
            let secs = window_start.elapsed().as_secs_f64();
            bar.set_position(started.elapsed().as_millis() as u64);
            bar.set_message(format!(
                "{:.0} req/s  p95 {:.1} ms  errors {}",
                window.count() as f64 / secs,
                window.quantile_ms(0.95),
                window_errors
            ));
            window.reset();
            window_errors = 0;
            window_start = Instant::now();
        }
    }
    bar.finish_and_clear();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn totals_merge_variants() {
        let mut a = VariantOutcome::default();
        a.latencies.record_micros(1000);
        a.errors.insert(503, 2);
        let mut b = VariantOutcome::default();
        b.latencies.record_micros(3000);
        b.errors.insert(503, 1);
        let run = RunOutcome {
            variants: vec![a, b],
            dropped: 0,
            elapsed: Duration::from_secs(1),
        };
        let total = run.total();
        assert_eq!(total.requests(), 2);
        assert_eq!(total.errors[&503], 3);
        assert_eq!(total.error_count(), 3);
    }

    #[tokio::test]
    async fn the_collector_keeps_the_slowest_traced_requests_per_variant() {
        let (tx, rx) = mpsc::unbounded_channel();
        // Variant 0: ten traced requests among untraced slower ones;
        // variant 1: one traced request.
        for i in 0..20u64 {
            let traced = i % 2 == 0;
            let _ = tx.send(Completed {
                variant: 0,
                micros: if traced { 1_000 + i } else { 90_000 + i },
                status: 201,
                op: Op::Create,
                trace: traced.then_some(u128::from(i) + 1),
            });
        }
        let _ = tx.send(Completed {
            variant: 1,
            micros: 5,
            status: 503,
            op: Op::Send,
            trace: Some(77),
        });
        drop(tx);
        let out = collect(rx, 2, Duration::from_secs(1), "test".into()).await;
        assert_eq!(out[0].requests(), 20);
        assert_eq!(out[0].slowest.traced(), 10);
        let micros: Vec<u64> = out[0].slowest.slowest().iter().map(|r| r.micros).collect();
        assert_eq!(micros, vec![1_018, 1_016, 1_014, 1_012, 1_010]);
        let other = out[1].slowest.slowest();
        assert_eq!(other.len(), 1);
        assert_eq!(
            (other[0].trace_id, other[0].op, other[0].status),
            (77, "send", 503)
        );
    }

    #[test]
    fn model_durations_and_peaks() {
        let closed = Model::Closed {
            stages: vec![
                Stage {
                    vus: 5,
                    duration: Duration::from_secs(2),
                },
                Stage {
                    vus: 9,
                    duration: Duration::from_secs(3),
                },
            ],
            think_time: Duration::ZERO,
        };
        assert_eq!(closed.duration(), Duration::from_secs(5));
        assert_eq!(closed.peak_concurrency(), 9);
        let open = Model::Open {
            schedule: ArrivalSchedule::new(10.0, Duration::from_secs(4)).unwrap(),
            max_in_flight: 3,
        };
        assert_eq!(open.peak_concurrency(), 3);
        assert_eq!(open.duration(), Duration::from_secs(4));
    }
}
