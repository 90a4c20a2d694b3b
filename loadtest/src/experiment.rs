//! Running cells: one load run with the servers watched, turned into
//! [`CellResult`]s, and the matrix over strategy × members × VUs × publish
//! mode × pool size.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use chatlab_domain::{InsertStrategy, PublishMode};

use crate::baseline::{self, BaselineSpec};
use crate::charts;
use crate::choice::Choice;
use crate::error::LoadError;
use crate::fleet::{External, Fleet, FleetSpec};
use crate::otlp_sink::{OtlpSink, SinkCounts};
use crate::prom::HistogramSnapshot;
use crate::report::CellResult;
use crate::runner::{self, Model, RunOutcome, VariantOutcome};
use crate::sampler::{self, Sampler, ServerStats};
use crate::scenario::{Overrides, Scenario, SeedAt, SeedSpec, Seeded, Workload, seed, seed_chats};
use crate::schedule::Stage;
use crate::wal::WalProbe;

/// Where the load goes.
#[derive(Debug, Clone)]
pub enum Servers {
    /// Servers someone else runs.
    External(External),
    /// Servers the harness starts (and restarts per pool size).
    Spawn(FleetSpec),
}

/// A server configuration the matrix compares: a name and the env it adds
/// to spawned servers (`async:DB_DRIVER=async`, `unpooled:DB_POOL=off`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerVariant {
    /// Its name in tables and charts (`-`: the servers as they are).
    pub name: String,
    /// Extra env of its servers.
    pub env: Vec<(String, String)>,
}

impl std::str::FromStr for ServerVariant {
    type Err = String;

    /// `NAME` or `NAME:KEY=VALUE+KEY=VALUE`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (name, env) = s.split_once(':').unwrap_or((s, ""));
        if name.is_empty() {
            return Err(format!(
                "{s:?}: a variant needs a name, e.g. blocking:DB_DRIVER=blocking"
            ));
        }
        let env = env
            .split('+')
            .filter(|kv| !kv.is_empty())
            .map(parse_kv)
            .collect::<Result<_, _>>()?;
        Ok(Self {
            name: name.to_owned(),
            env,
        })
    }
}

/// `KEY=VALUE` as a pair.
pub fn parse_kv(s: &str) -> Result<(String, String), String> {
    s.split_once('=')
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .ok_or_else(|| format!("{s:?} is not KEY=VALUE"))
}

/// The matrix.
#[derive(Debug, Clone)]
pub struct MatrixSpec {
    /// Where.
    pub servers: Servers,
    /// Server configurations (spawned servers restart with each).
    pub variants: Vec<ServerVariant>,
    /// Scenarios; each is a dimension of the grid.
    pub scenarios: Vec<Scenario>,
    /// Insert strategies (sent in the override header; `-` sends none).
    pub strategies: Vec<Choice<InsertStrategy>>,
    /// Members per chat.
    pub members: Vec<usize>,
    /// Virtual users.
    pub vus: Vec<usize>,
    /// Publish modes (sent in the override header; `-` sends none).
    pub publish_modes: Vec<Choice<PublishMode>>,
    /// Pool sizes (restart spawned servers with each; `0` keeps theirs).
    pub pool_sizes: Vec<u32>,
    /// Length of each cell.
    pub duration: Duration,
    /// Unmeasured load before the cells of each fleet.
    pub warmup: Duration,
    /// Rounds: each cell runs this many times, strategies alternating
    /// A B A B, and the rounds are merged. With several fleets (server
    /// variants × pool sizes) the fleets alternate too, round by round.
    pub rounds: usize,
    /// Mix strategies request by request in one run instead of alternating.
    pub mix_strategies: bool,
    /// Think time of each VU.
    pub think_time: Duration,
    /// An open model instead of VUs: this many requests per second, each
    /// cell's VUs then the cap on requests in flight.
    pub rate: Option<f64>,
    /// Share of requests sent with a sampled `traceparent`.
    pub trace_fraction: f64,
    /// Run pgbench on the same SQL at the same database concurrency.
    pub baseline: Option<String>,
    /// Sampling period of the servers' metrics.
    pub sample_interval: Duration,
    /// Users to seed.
    pub seed_users: usize,
    /// Where pgbench scripts go.
    pub work_dir: PathBuf,
    /// The database whose cluster's WAL is measured per cell (`None`: not
    /// measured).
    pub wal_url: Option<String>,
}

/// The servers under load and how to watch them.
#[derive(Debug, Clone)]
pub struct Watched {
    /// Their public URLs, where the load goes.
    pub targets: Vec<String>,
    /// Their operator URLs (`OPS_ADDR`), scraped for `/metrics`.
    pub ops: Vec<String>,
    /// Their pids, in the order of `ops`, when known (else found by port).
    pub pids: Vec<Option<u32>>,
    /// Sampling period.
    pub sample_interval: Duration,
}

/// Runs one load and watches the servers.
pub async fn measure(
    client: &reqwest::Client,
    watched: &Watched,
    work: Arc<Workload>,
    variants: Vec<Overrides>,
    model: Model,
    label: &str,
) -> (RunOutcome, ServerStats) {
    let sampler = Sampler::start(
        client.clone(),
        watched.ops.clone(),
        watched.pids.clone(),
        watched.sample_interval,
    )
    .await;
    let outcome = runner::run(
        client.clone(),
        watched.targets.clone(),
        work,
        variants,
        model,
        label,
    )
    .await;
    let stats = sampler.finish().await;
    (outcome, stats)
}

/// A cell's identity: the fleet it ran on (server variant and pool size)
/// and what its requests sent. Ordered as the spec lists its dimensions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Key {
    variant: usize,
    pool: u32,
    scenario: usize,
    members: usize,
    vus: usize,
    mode_index: usize,
    strategy_index: usize,
    mode: Choice<PublishMode>,
    strategy: Choice<InsertStrategy>,
}

/// A cell's runs so far, merged.
#[derive(Default)]
struct Accumulated {
    client: VariantOutcome,
    elapsed: f64,
    dropped: u64,
    stats: Vec<ServerStats>,
    hold: HistogramSnapshot,
    baseline_tps: Option<f64>,
    seed_baseline_tps: Option<f64>,
    /// The servers' CPU seconds of this cell's requests: a run's CPU, split
    /// by the share of its requests that were this cell's (runs that mix
    /// strategies share one CPU figure).
    cpu_seconds: f64,
    /// Its share of the runs' context switches, split the same way.
    switches: crate::procstat::Switches,
    /// Its share of the runs' imbalanced waits, split the same way.
    imbalanced_waits: f64,
    /// Its share of the WAL the runs wrote, split the same way.
    wal_bytes: f64,
    /// The throughput of each of its runs, in the order they ran.
    round_rps: Vec<f64>,
}

/// The servers of one (variant, pool size) pair, seeded and warmed up.
struct FleetUnderTest {
    /// Spawned servers (stopped when dropped); `None` for external ones.
    _fleet: Option<Fleet>,
    watched: Watched,
    seeded: Seeded,
}

/// One point of the grid within a fleet: scenario × members × VUs ×
/// publish mode.
#[derive(Debug, Clone, Copy)]
struct Point {
    scenario: usize,
    members: usize,
    vus: usize,
    mode_index: usize,
    mode: Choice<PublishMode>,
}

/// What the matrix got: its cells, in a stable order, and what the OTLP
/// sink received from each server variant's fleets (when there is a sink).
pub struct MatrixOutcome {
    /// The cells.
    pub cells: Vec<CellResult>,
    /// Per variant, in the spec's order: what the sink received while its
    /// servers ran, up to their exit (so their final export counts).
    pub sink_counts: Vec<SinkCounts>,
}

/// One start of a fleet: which variant, which pool size, which rounds of
/// its cells it runs before it stops.
#[derive(Debug, Clone, PartialEq, Eq)]
struct FleetRun {
    variant: usize,
    pool: u32,
    rounds: std::ops::Range<usize>,
}

/// The fleets' starts, in order. One fleet, or one round: each fleet starts
/// once and runs every round. Several fleets and several rounds: every
/// round starts each fleet again, in the spec's order in even rounds and
/// the reverse in odd ones (A B C, C B A, ...), so a machine that drifts
/// (a warming cache, a growing table, a throttled CPU) weighs on every
/// variant alike, as strategies alternate within a round.
fn fleet_runs(variants: usize, pool_sizes: &[u32], rounds: usize) -> Vec<FleetRun> {
    let rounds = rounds.max(1);
    let fleets: Vec<(usize, u32)> = (0..variants)
        .flat_map(|v| pool_sizes.iter().map(move |&p| (v, p)))
        .collect();
    if fleets.len() < 2 || rounds < 2 {
        return fleets
            .into_iter()
            .map(|(variant, pool)| FleetRun {
                variant,
                pool,
                rounds: 0..rounds,
            })
            .collect();
    }
    let mut out = Vec::with_capacity(fleets.len() * rounds);
    for round in 0..rounds {
        let mut order = fleets.clone();
        if !round.is_multiple_of(2) {
            order.reverse();
        }
        out.extend(order.into_iter().map(|(variant, pool)| FleetRun {
            variant,
            pool,
            rounds: round..round + 1,
        }));
    }
    out
}

/// Runs the matrix; answers its cells in a stable order, and what `sink`
/// received per variant.
pub async fn run_matrix(
    client: &reqwest::Client,
    spec: &MatrixSpec,
    sink: Option<&OtlpSink>,
) -> Result<MatrixOutcome, LoadError> {
    let mut acc: BTreeMap<Key, Accumulated> = BTreeMap::new();
    let mut server_count = 0;
    let mut baseline_tps = BTreeMap::new();
    let mut sink_counts = vec![SinkCounts::default(); spec.variants.len()];
    let rounds = spec.rounds.max(1);
    let wal = match &spec.wal_url {
        Some(url) => Some(WalProbe::connect(url).await?),
        None => None,
    };
    for FleetRun {
        variant,
        pool,
        rounds: fleet_rounds,
    } in fleet_runs(spec.variants.len(), &spec.pool_sizes, rounds)
    {
        let last_round = fleet_rounds.end == rounds;
        let received_before = sink.map(OtlpSink::counts);
        let under_test = start_fleet(client, spec, variant, pool).await?;
        server_count = under_test.watched.targets.len();
        for point in points(spec) {
            for round in fleet_rounds.clone() {
                for strategies in runs_of_round(spec, round) {
                    let key = |strategy_index, strategy| Key {
                        variant,
                        pool,
                        scenario: point.scenario,
                        members: point.members,
                        vus: point.vus,
                        mode_index: point.mode_index,
                        strategy_index,
                        mode: point.mode,
                        strategy,
                    };
                    let label = run_label(spec, variant, pool, point, &strategies, round);
                    let before = match &wal {
                        Some(wal) => wal.position().await,
                        None => None,
                    };
                    let mut measured =
                        measure_point(client, spec, &under_test, point, &strategies, &label).await;
                    if let (Some(wal), Some(before)) = (&wal, before)
                        && let Some(after) = wal.position().await
                    {
                        measured.1.wal_bytes = after.saturating_sub(before) as f64;
                    }
                    for (i, &strategy) in strategies.iter().enumerate() {
                        let index = spec
                            .strategies
                            .iter()
                            .position(|&s| s == strategy)
                            .unwrap_or(0);
                        acc.entry(key(index, strategy))
                            .or_default()
                            .add(&measured, i, strategy);
                    }
                }
            }
        }
        // Stopping waits for the servers' exit, so their last export
        // has reached the sink by now.
        drop(under_test._fleet);
        if let (Some(sink), Some(before)) = (sink, received_before) {
            sink_counts[variant].add(sink.counts().since(before));
        }
        // The baselines once per fleet, after its last round (pgbench
        // figures are kept across fleets anyway).
        if let (Some(database_url), true) = (&spec.baseline, last_round) {
            // A spawned server left at its default pool sizes it as
            // this machine's cores say; an external one's is unknown.
            let pool_in_effect = match (&spec.servers, pool) {
                (Servers::Spawn(_), 0) => charts::default_pool_size(),
                _ => pool,
            };
            let baseline = Baseline {
                database_url,
                variant,
                pool,
                pool_in_effect,
                server_count,
                seeded: &under_test.seeded,
            };
            baseline.run(spec, &mut baseline_tps, &mut acc).await?;
        }
    }
    Ok(MatrixOutcome {
        cells: acc
            .into_iter()
            .map(|(key, a)| a.into_cell(spec, key, server_count))
            .collect(),
        sink_counts,
    })
}

/// Chats seeded per size for the scenarios that post or read.
const SEEDED_CHATS: usize = 50;

/// Starts (or takes) the servers of `variant` at pool size `pool`, seeds
/// them, and runs the warm-up.
async fn start_fleet(
    client: &reqwest::Client,
    spec: &MatrixSpec,
    variant: usize,
    pool: u32,
) -> Result<FleetUnderTest, LoadError> {
    let (fleet, targets, ops, pids, signer) = match &spec.servers {
        Servers::External(external) => (
            None,
            external.targets.clone(),
            external.ops.clone(),
            sampler::external_pids(&external.ops),
            external.signer.clone(),
        ),
        Servers::Spawn(fleet_spec) => {
            let mut fs = fleet_spec.clone();
            fs.env.extend(spec.variants[variant].env.iter().cloned());
            if pool > 0 {
                fs.env.push(("DB_POOL_MAX_SIZE".into(), pool.to_string()));
            }
            let fleet = Fleet::start(&fs, client).await?;
            let (urls, ops, pids) = (fleet.urls(), fleet.ops_urls(), fleet.pids());
            (Some(fleet), urls, ops, pids, fs.signer.clone())
        }
    };
    let (Some(first), Some(first_ops)) = (targets.first(), ops.first()) else {
        return Err(LoadError::Usage(
            "no target server, or no operator URL (--ops-url)".into(),
        ));
    };
    let first_scenario = spec
        .scenarios
        .first()
        .ok_or_else(|| LoadError::Usage("no scenario".into()))?;
    let max_members = spec.members.iter().copied().max().unwrap_or(2);
    let needs_chats = spec.scenarios.iter().find(|s| s.needs_chats());
    let at = SeedAt {
        public: first,
        ops: first_ops,
        signer: &signer,
    };
    let mut seeded = seed(
        client,
        at,
        SeedSpec {
            members: max_members,
            users: spec.seed_users.max(max_members * 4),
            chats: SEEDED_CHATS,
        },
        needs_chats.unwrap_or(&Scenario::CreateChat),
    )
    .await?;
    // Sends and chat lists go to chats of each member count of the grid
    // (`seed` made those of the largest).
    if spec.scenarios.iter().any(Scenario::sized_chats) {
        for &size in spec.members.iter().filter(|&&m| m != max_members) {
            seed_chats(client, at, &mut seeded, size, SEEDED_CHATS).await?;
        }
    }
    if !spec.warmup.is_zero() {
        let work = Arc::new(Workload::new(
            first_scenario.clone(),
            seeded.clone(),
            max_members,
        ));
        let _ = runner::run(
            client.clone(),
            targets.clone(),
            work,
            variants_for(&spec.strategies, None),
            closed(
                spec.vus.iter().copied().max().unwrap_or(1),
                spec.warmup,
                spec.think_time,
            ),
            "warm-up",
        )
        .await;
    }
    Ok(FleetUnderTest {
        _fleet: fleet,
        watched: Watched {
            targets,
            ops,
            pids,
            sample_interval: spec.sample_interval,
        },
        seeded,
    })
}

/// Every point of the grid, in the spec's order.
fn points(spec: &MatrixSpec) -> Vec<Point> {
    let mut points = Vec::new();
    for scenario in 0..spec.scenarios.len() {
        for &members in &spec.members {
            for &vus in &spec.vus {
                for (mode_index, &mode) in spec.publish_modes.iter().enumerate() {
                    points.push(Point {
                        scenario,
                        members,
                        vus,
                        mode_index,
                        mode,
                    });
                }
            }
        }
    }
    points
}

/// The runs of one round: every strategy in one run when they are mixed per
/// request, else one run each, A B in even rounds and B A in odd ones, so
/// a drifting machine weighs on all strategies alike.
fn runs_of_round(spec: &MatrixSpec, round: usize) -> Vec<Vec<Choice<InsertStrategy>>> {
    if spec.mix_strategies {
        vec![spec.strategies.clone()]
    } else if round.is_multiple_of(2) {
        spec.strategies.iter().map(|&s| vec![s]).collect()
    } else {
        spec.strategies.iter().rev().map(|&s| vec![s]).collect()
    }
}

fn run_label(
    spec: &MatrixSpec,
    variant: usize,
    pool: u32,
    point: Point,
    strategies: &[Choice<InsertStrategy>],
    round: usize,
) -> String {
    let strategies: Vec<String> = strategies.iter().map(Choice::to_string).collect();
    format!(
        "{} pool={pool} {} m={} vus={} {} {} r{}",
        spec.variants[variant].name,
        scenario_name(&spec.scenarios[point.scenario]),
        point.members,
        point.vus,
        point.mode,
        strategies.join("+"),
        round + 1
    )
}

/// One run at `point`, with the servers watched.
async fn measure_point(
    client: &reqwest::Client,
    spec: &MatrixSpec,
    under_test: &FleetUnderTest,
    point: Point,
    strategies: &[Choice<InsertStrategy>],
    label: &str,
) -> (RunOutcome, ServerStats) {
    let work = Arc::new(
        Workload::new(
            spec.scenarios[point.scenario].clone(),
            under_test.seeded.clone(),
            point.members,
        )
        .with_trace_fraction(spec.trace_fraction),
    );
    let (outcome, stats) = measure(
        client,
        &under_test.watched,
        work,
        variants_for(strategies, point.mode.named()),
        match spec.rate {
            Some(rate) => Model::Open {
                rate,
                duration: spec.duration,
                max_in_flight: point.vus.max(1),
            },
            None => closed(point.vus, spec.duration, spec.think_time),
        },
        label,
    )
    .await;
    let total = outcome.total();
    eprintln!(
        "{label}: {:.0} req/s, p95 {:.1} ms, errors {}",
        total.requests() as f64 / outcome.elapsed.as_secs_f64(),
        total.latencies.quantile_ms(0.95),
        total.error_count()
    );
    (outcome, stats)
}

impl Accumulated {
    /// Adds strategy number `i` of a run.
    fn add(
        &mut self,
        (outcome, stats): &(RunOutcome, ServerStats),
        i: usize,
        strategy: Choice<InsertStrategy>,
    ) {
        if let Some(v) = outcome.variants.get(i) {
            self.client.merge(v);
            self.round_rps
                .push(v.requests() as f64 / outcome.elapsed.as_secs_f64().max(1e-9));
            let all = outcome.total().requests();
            if all > 0 {
                let share = v.requests() as f64 / all as f64;
                self.cpu_seconds += stats.cpu_seconds * share;
                self.switches += stats.switches.share(share);
                self.imbalanced_waits += stats.imbalanced_waits * share;
                self.wal_bytes += stats.wal_bytes * share;
            }
        }
        self.elapsed += outcome.elapsed.as_secs_f64();
        self.dropped += outcome.dropped;
        if let Some(h) = stats.hold_by_strategy.get(&strategy.to_string()) {
            self.hold = self.hold.add(h);
        }
        self.stats.push(stats.clone());
    }

    /// The cell's figures.
    fn into_cell(self, spec: &MatrixSpec, key: Key, server_count: usize) -> CellResult {
        let scenario = &spec.scenarios[key.scenario];
        let mut cell = CellResult {
            server: spec.variants[key.variant].name.clone(),
            strategy: key.strategy.to_string(),
            publish_mode: key.mode.to_string(),
            scenario: scenario_name(scenario),
            members: key.members,
            vus: key.vus,
            servers: server_count,
            pool_size: key.pool,
            concurrency_per_server: key.vus as f64 / server_count.max(1) as f64,
            ..CellResult::default()
        };
        let runs = self.stats.len().max(1) as f64;
        let elapsed_per_run = self.elapsed / runs;
        // Throughput: requests of this strategy over the wall time of its
        // runs (in a mixed run each strategy had the whole run).
        cell.set_client(
            &self.client,
            self.elapsed.max(elapsed_per_run),
            self.dropped,
        );
        let mut stats = merge_stats(&self.stats);
        // This cell's share of the runs' CPU, switches and waits, not
        // every strategy's.
        stats.cpu_seconds = self.cpu_seconds;
        stats.switches = self.switches;
        stats.imbalanced_waits = self.imbalanced_waits;
        stats.wal_bytes = self.wal_bytes;
        let hold = (self.hold.count > 0.0).then_some(&self.hold);
        cell.set_server(&stats, hold);
        if let Some(rows) = scenario.rows_per_request() {
            // Import jobs: the rows they carried, not createChat's counter.
            cell.rows_per_s = cell.throughput_rps * rows as f64;
        }
        cell.round_rps = self.round_rps;
        if let Some(tps) = self.baseline_tps {
            cell.pgbench_tps = tps;
            cell.pgbench_ratio = cell.throughput_rps / tps;
        }
        if let Some(tps) = self.seed_baseline_tps {
            cell.pgbench_seed_tps = tps;
            cell.pgbench_seed_ratio = cell.throughput_rps / tps;
        }
        cell
    }
}

/// The pgbench baselines of one fleet's cells.
struct Baseline<'a> {
    database_url: &'a str,
    variant: usize,
    pool: u32,
    /// The pool size the servers ran with (0: unknown).
    pool_in_effect: u32,
    server_count: usize,
    seeded: &'a Seeded,
}

impl Baseline<'_> {
    /// pgbench on each strategy's SQL, and on the seed's SQL (batch's
    /// three-INSERT transaction), at the database concurrency of each cell
    /// (its VUs, capped by the pools in front of PostgreSQL: a pool of 5
    /// and 20 VUs is 5 pgbench clients); `tps` keeps
    /// figures across fleets, since they depend only on members, clients
    /// and strategy. A cell that left the strategy to the server has no SQL
    /// to compare with.
    async fn run(
        &self,
        spec: &MatrixSpec,
        tps: &mut BTreeMap<(usize, usize, InsertStrategy), f64>,
        acc: &mut BTreeMap<Key, Accumulated>,
    ) -> Result<(), LoadError> {
        for &members in &spec.members {
            for &vus in &spec.vus {
                let cap = if self.pool_in_effect > 0 {
                    self.pool_in_effect as usize * self.server_count
                } else {
                    vus
                };
                let clients = vus.min(cap).max(1);
                // The seed's SQL: the three-INSERT transaction of batch.
                let seed = self
                    .measure(spec, tps, members, clients, InsertStrategy::Batch)
                    .await?;
                for strategy in spec.strategies.iter().filter_map(|s| s.named()) {
                    let own = self.measure(spec, tps, members, clients, strategy).await?;
                    for (cell, a) in acc.iter_mut() {
                        if cell.pool == self.pool
                            && cell.variant == self.variant
                            && cell.members == members
                            && cell.vus == vus
                            && cell.strategy == Choice(Some(strategy))
                        {
                            a.baseline_tps = Some(own);
                            a.seed_baseline_tps = Some(seed);
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// pgbench's tps on `strategy`'s SQL at `clients`, measured once per
    /// (members, clients, strategy) across the whole matrix.
    async fn measure(
        &self,
        spec: &MatrixSpec,
        tps: &mut BTreeMap<(usize, usize, InsertStrategy), f64>,
        members: usize,
        clients: usize,
        strategy: InsertStrategy,
    ) -> Result<f64, LoadError> {
        let key = (members, clients, strategy);
        if let Some(&measured) = tps.get(&key) {
            return Ok(measured);
        }
        let bspec = BaselineSpec {
            database_url: self.database_url.to_owned(),
            strategy,
            members,
            clients,
            duration: spec.duration,
            users: self.seeded.users.clone(),
            work_dir: spec.work_dir.clone(),
        };
        let measured = tokio::task::spawn_blocking(move || baseline::run(&bspec)).await??;
        eprintln!("pgbench {strategy} m={members} clients={clients}: {measured:.0} tps");
        tps.insert(key, measured);
        Ok(measured)
    }
}

/// Merges the server stats of several runs: maxima of maxima, means of
/// rates, sums of histograms.
fn merge_stats(all: &[ServerStats]) -> ServerStats {
    let n = all.len().max(1) as f64;
    let mut out = ServerStats::default();
    for s in all {
        out.used_max = out.used_max.max(s.used_max);
        out.pending_max = out.pending_max.max(s.pending_max);
        out.rss_max_mib = out.rss_max_mib.max(s.rss_max_mib);
        out.used_mean += s.used_mean / n;
        out.rows_per_s += s.rows_per_s / n;
        out.inserts_per_s += s.inserts_per_s / n;
        out.cpu_percent += s.cpu_percent / n;
        out.timeouts += s.timeouts;
        out.imbalanced_waits += s.imbalanced_waits;
        out.switches += s.switches;
        out.use_time = out.use_time.add(&s.use_time);
        out.wait_time = out.wait_time.add(&s.wait_time);
        for (strategy, (trips, chats)) in &s.round_trips_by_strategy {
            let entry = out
                .round_trips_by_strategy
                .entry(strategy.clone())
                .or_default();
            entry.0 += trips;
            entry.1 += chats;
        }
    }
    out
}

/// A one-stage closed model.
pub fn closed(vus: usize, duration: Duration, think_time: Duration) -> Model {
    Model::Closed {
        stages: vec![Stage {
            vus: vus.max(1),
            duration,
        }],
        think_time,
    }
}

/// Override headers for each strategy (or one empty set).
pub fn variants_for(
    strategies: &[Choice<InsertStrategy>],
    mode: Option<PublishMode>,
) -> Vec<Overrides> {
    if strategies.is_empty() {
        return vec![Overrides {
            strategy: None,
            publish_mode: mode,
        }];
    }
    strategies
        .iter()
        .map(|s| Overrides {
            strategy: s.named(),
            publish_mode: mode,
        })
        .collect()
}

/// The scenario's name in tables.
pub fn scenario_name(s: &Scenario) -> String {
    match s {
        Scenario::CreateChat => "create-chat".into(),
        Scenario::SendMessage => "send-message".into(),
        Scenario::ReadMessages => "read-messages".into(),
        Scenario::MyChats => "my-chats".into(),
        Scenario::Mix {
            weights: [c, s, r, 0],
        } => format!("mix:{c}:{s}:{r}"),
        Scenario::Mix {
            weights: [c, s, r, l],
        } => format!("mix:{c}:{s}:{r}:{l}"),
        Scenario::Get { path } => format!("get:{path}"),
        Scenario::Import {
            rows,
            chunk,
            parallelism,
        } => format!("import:{rows}:{chunk}:{parallelism}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_variants_parse_name_and_env() {
        let v: ServerVariant = "unpooled:DB_POOL=off+DB_DRIVER=blocking".parse().unwrap();
        assert_eq!(v.name, "unpooled");
        assert_eq!(
            v.env,
            vec![
                ("DB_POOL".to_owned(), "off".to_owned()),
                ("DB_DRIVER".to_owned(), "blocking".to_owned())
            ]
        );
        let bare: ServerVariant = "pooled".parse().unwrap();
        assert!(bare.env.is_empty());
        assert!(":DB_POOL=off".parse::<ServerVariant>().is_err());
        assert!("x:DB_POOL".parse::<ServerVariant>().is_err());
    }

    fn order(runs: &[FleetRun]) -> Vec<(usize, u32, std::ops::Range<usize>)> {
        runs.iter()
            .map(|r| (r.variant, r.pool, r.rounds.clone()))
            .collect()
    }

    #[test]
    fn one_fleet_or_one_round_starts_each_fleet_once() {
        assert_eq!(order(&fleet_runs(1, &[0], 3)), vec![(0, 0, 0..3)]);
        assert_eq!(
            order(&fleet_runs(2, &[5, 10], 1)),
            vec![(0, 5, 0..1), (0, 10, 0..1), (1, 5, 0..1), (1, 10, 0..1)]
        );
        assert_eq!(order(&fleet_runs(1, &[0], 0)), vec![(0, 0, 0..1)]);
    }

    #[test]
    fn several_fleets_alternate_round_by_round() {
        assert_eq!(
            order(&fleet_runs(3, &[0], 4)),
            vec![
                (0, 0, 0..1),
                (1, 0, 0..1),
                (2, 0, 0..1),
                (2, 0, 1..2),
                (1, 0, 1..2),
                (0, 0, 1..2),
                (0, 0, 2..3),
                (1, 0, 2..3),
                (2, 0, 2..3),
                (2, 0, 3..4),
                (1, 0, 3..4),
                (0, 0, 3..4),
            ]
        );
    }

    proptest::proptest! {
        #[test]
        fn every_fleet_runs_every_round_once(
            variants in 1usize..5,
            pools in proptest::collection::vec(0u32..50, 1..4),
            rounds in 0usize..6,
        ) {
            let runs = fleet_runs(variants, &pools, rounds);
            for v in 0..variants {
                for (p_index, &p) in pools.iter().enumerate() {
                    // Pool sizes may repeat; each listed one is a fleet.
                    let copies = pools.iter().filter(|&&q| q == p).count();
                    let mut covered: Vec<usize> = runs
                        .iter()
                        .filter(|r| r.variant == v && r.pool == p)
                        .flat_map(|r| r.rounds.clone())
                        .collect();
                    covered.sort_unstable();
                    let mut expected: Vec<usize> = (0..rounds.max(1))
                        .flat_map(|r| std::iter::repeat_n(r, copies))
                        .collect();
                    expected.sort_unstable();
                    proptest::prop_assert_eq!(covered, expected, "pool #{}", p_index);
                }
            }
            // Rounds never go backwards: a round starts after the last one ended.
            let starts: Vec<usize> = runs.iter().map(|r| r.rounds.start).collect();
            proptest::prop_assert!(starts.windows(2).all(|w| w[0] <= w[1]));
        }
    }

    #[test]
    fn import_scenarios_are_named_by_their_figures() {
        let s: Scenario = "import:100000:1000:8".parse().unwrap();
        assert_eq!(scenario_name(&s), "import:100000:1000:8");
        assert_eq!(s.rows_per_request(), Some(100_000));
    }
}
