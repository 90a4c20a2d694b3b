//! The grid engine behind `chatlab-load matrix` (and `make demo`): cells
//! over server variant × pool size × database distance × scenario ×
//! members × VUs × publish mode × strategy, each run in rounds, each round of a createChat cell
//! beside its yardstick (pgbench on the same SQL), every round kept apart
//! so that each figure gets an interval and each comparison a paired ratio.
//!
//! - [`schedule`]: the order of a round's runs, and when to stop adding
//!   rounds;
//! - [`yardstick`]: pgbench beside a cell;
//! - [`cell`]: a cell's rounds as they come in, and the row they make.

pub mod cell;
pub mod schedule;
pub mod yardstick;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use chatlab_delay::Distance;
use chatlab_domain::{InsertStrategy, PublishMode};

use crate::error::LoadError;
use crate::load::choice::Choice;
use crate::load::measure::{Watched, closed, measure, scenario_name, variants_for};
use crate::load::runner::{self, Model, RunOutcome};
use crate::load::scenario::{Scenario, SeedAt, SeedSpec, Seeded, Workload, seed, seed_chats};
use crate::load::schedule::ArrivalSchedule;
use crate::observe::noise::NoiseProbe;
use crate::observe::otlp_sink::{OtlpSink, SinkCounts};
use crate::observe::sampler::{self, ServerStats};
use crate::observe::wal::WalProbe;
use crate::report::charts;
use crate::report::results::CellResult;
use crate::servers::fleet::{External, Fleet, FleetSpec};
use crate::servers::reach::{Calibration, DistanceArgs, Reach};
use crate::servers::variant::ServerVariant;
use crate::stats::verdict;

use cell::{Accumulated, Identity, Measured, Wire};
use schedule::{Rounds, Stopped, in_round_order};
use yardstick::Yardstick;

/// Where the load goes.
#[derive(Debug, Clone)]
pub enum Servers {
    /// Servers someone else runs.
    External(External),
    /// Servers the harness starts (and restarts per pool size).
    Spawn(FleetSpec),
}

/// The grid.
#[derive(Debug, Clone)]
pub struct GridSpec {
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
    /// PostgreSQL, straight: where spawned servers and pgbench connect,
    /// through a delay hop at each distance that asks for one.
    pub database_url: String,
    /// The distances of PostgreSQL to run at (`None`: straight); spawned
    /// servers restart with each, behind a hop of its own.
    pub distances: Vec<Option<Distance>>,
    /// How hops start and are calibrated.
    pub distance_args: DistanceArgs,
    /// Length of each cell's run in a round.
    pub duration: Duration,
    /// Unmeasured load before the cells of each fleet.
    pub warmup: Duration,
    /// How many rounds ([`schedule`]).
    pub rounds: Rounds,
    /// Mix strategies request by request in one run instead of alternating.
    pub mix_strategies: bool,
    /// Think time of each VU.
    pub think_time: Duration,
    /// An open model instead of VUs: requests due as this schedule has
    /// them (its rate checked when the spec was built), each cell's VUs
    /// then the cap on requests in flight.
    pub arrivals: Option<ArrivalSchedule>,
    /// Share of requests sent with a sampled `traceparent`.
    pub trace_fraction: f64,
    /// pgbench beside every createChat cell of a named strategy.
    pub yardstick: Option<Yardstick>,
    /// Sampling period of the servers' metrics.
    pub sample_interval: Duration,
    /// Users to seed.
    pub seed_users: usize,
    /// The database whose cluster's WAL is measured per cell (`None`: not
    /// measured).
    pub wal_url: Option<String>,
}

/// What the grid got.
pub struct GridOutcome {
    /// The cells, in a stable order.
    pub cells: Vec<CellResult>,
    /// Per variant, in the spec's order: what the OTLP sink received while
    /// its servers ran, up to their exit (so their final export counts).
    pub sink_counts: Vec<SinkCounts>,
    /// Why each point (or, with several fleets, the whole grid) stopped
    /// adding rounds, with its name.
    pub stopped: Vec<(String, Stopped)>,
    /// Where PostgreSQL was at each distance, as its calibrations
    /// measured: the first fleet's note, then every calibration when
    /// several fleets ran there.
    pub reach_notes: Vec<String>,
}

/// A cell's identity: the fleet it ran on (server variant, pool size and
/// the database's distance) and what its requests sent. Ordered as the
/// spec lists its dimensions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Key {
    variant: usize,
    pool: u32,
    distance: usize,
    scenario: usize,
    members: usize,
    vus: usize,
    mode_index: usize,
    strategy_index: usize,
    mode: Choice<PublishMode>,
    strategy: Choice<InsertStrategy>,
}

/// One point of the grid within a fleet: scenario × members × VUs ×
/// publish mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Point {
    scenario: usize,
    members: usize,
    vus: usize,
    mode_index: usize,
    mode: Choice<PublishMode>,
}

impl Key {
    fn point(&self) -> Point {
        Point {
            scenario: self.scenario,
            members: self.members,
            vus: self.vus,
            mode_index: self.mode_index,
            mode: self.mode,
        }
    }
}

/// One start of servers: which variant, pool size and distance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FleetId {
    variant: usize,
    pool: u32,
    distance: usize,
}

/// The servers of one fleet, seeded and warmed up, and PostgreSQL as they
/// reach it.
struct FleetUnderTest {
    /// Spawned servers (stopped when dropped); `None` for external ones.
    fleet: Option<Fleet>,
    /// PostgreSQL through its hop, or straight (`None`: external servers,
    /// whose database is theirs to know).
    reach: Option<Reach>,
    watched: Watched,
    seeded: Seeded,
    /// The pool size the servers run with (0: unknown).
    pool_in_effect: u32,
    /// Round trips per second through the hop with no request running.
    background_per_s: f64,
}

/// A grid being run: its spec and what it has measured so far.
struct GridRun<'a> {
    client: &'a reqwest::Client,
    spec: &'a GridSpec,
    sink: Option<&'a OtlpSink>,
    acc: BTreeMap<Key, Accumulated>,
    wal: Option<WalProbe>,
    server_count: usize,
    /// Per distance, what each fleet's reach said of itself and measured,
    /// in the order the fleets started: every fleet is calibrated anew.
    calibrations: BTreeMap<usize, Vec<(String, Calibration)>>,
    sink_counts: Vec<SinkCounts>,
    stopped: Vec<(String, Stopped)>,
}

/// Runs the grid; answers its cells in a stable order.
pub async fn run_grid(
    client: &reqwest::Client,
    spec: &GridSpec,
    sink: Option<&OtlpSink>,
) -> Result<GridOutcome, LoadError> {
    let wal = match &spec.wal_url {
        Some(url) => Some(WalProbe::connect(url).await?),
        None => None,
    };
    let mut run = GridRun {
        client,
        spec,
        sink,
        acc: BTreeMap::new(),
        wal,
        server_count: 0,
        calibrations: BTreeMap::new(),
        sink_counts: vec![SinkCounts::default(); spec.variants.len()],
        stopped: Vec::new(),
    };
    let distances = spec.distances.len().max(1);
    let fleets: Vec<FleetId> = (0..spec.variants.len())
        .flat_map(|variant| {
            spec.pool_sizes.iter().flat_map(move |&pool| {
                (0..distances).map(move |distance| FleetId {
                    variant,
                    pool,
                    distance,
                })
            })
        })
        .collect();
    match fleets.as_slice() {
        [one] => run.one_fleet(*one).await?,
        _ => run.alternating_fleets(&fleets).await?,
    }
    let mut cells: Vec<CellResult> = std::mem::take(&mut run.acc)
        .into_iter()
        .map(|(key, a)| a.into_cell(run.identity(key)))
        .collect();
    cell::set_seed_yardstick(&mut cells);
    Ok(GridOutcome {
        cells,
        sink_counts: run.sink_counts,
        stopped: run.stopped,
        reach_notes: run.calibrations.values().map(|c| reach_note(c)).collect(),
    })
}

/// One distance's lines for results.md: the first fleet's note, then,
/// when several fleets ran at that distance (one per round, variant and
/// pool size), every calibration, so none stands for the others unseen.
fn reach_note(calibrations: &[(String, Calibration)]) -> String {
    let Some((first, _)) = calibrations.first() else {
        return String::new();
    };
    if calibrations.len() < 2 {
        return first.clone();
    }
    let each: Vec<String> = calibrations
        .iter()
        .map(|(_, c)| match c.through_ms {
            Some(through) => format!("{through:.3} through / {:.3} straight", c.straight_ms),
            None => format!("{:.3}", c.straight_ms),
        })
        .collect();
    format!(
        "{first} That was the first of {} calibrations at this distance, one per fleet started (each round, variant and pool size), pgbench `SELECT 1` in ms: {}.",
        calibrations.len(),
        each.join("; ")
    )
}

/// The mean round trip a distance's calibrations measured, ms (through the
/// hop when there is one).
fn mean_round_trip_ms(calibrations: &[(String, Calibration)]) -> f64 {
    let trips: Vec<f64> = calibrations
        .iter()
        .map(|(_, c)| c.through_ms.unwrap_or(c.straight_ms))
        .collect();
    if trips.is_empty() {
        0.0
    } else {
        trips.iter().sum::<f64>() / trips.len() as f64
    }
}

impl GridRun<'_> {
    /// One fleet, started once: each point runs its rounds in a row, as
    /// many as [`Rounds`] asks, with an equal share of any time budget left.
    async fn one_fleet(&mut self, id: FleetId) -> Result<(), LoadError> {
        let started = Instant::now();
        let before = self.sink.map(OtlpSink::counts);
        let under_test = self.start(id).await?;
        let points = points(self.spec);
        for (i, &point) in points.iter().enumerate() {
            let rounds = Rounds {
                budget: self
                    .spec
                    .rounds
                    .budget
                    .map(|b| b.saturating_sub(started.elapsed()) / (points.len() - i) as u32),
                ..self.spec.rounds
            };
            let point_started = Instant::now();
            let (mut done, mut last) = (0, Duration::ZERO);
            loop {
                let widest = self.widest(|k| k.point() == point);
                if let Err(stopped) = rounds.another(done, widest, point_started.elapsed(), last) {
                    self.stopped.push((self.point_name(point), stopped));
                    break;
                }
                let round_started = Instant::now();
                self.run_point(&under_test, id, point, done).await?;
                last = round_started.elapsed();
                done += 1;
            }
        }
        self.stop_fleet(under_test, id.variant, before).await;
        Ok(())
    }

    /// Starts a fleet, and records where its PostgreSQL was.
    async fn start(&mut self, id: FleetId) -> Result<FleetUnderTest, LoadError> {
        let under_test = start_fleet(self.client, self.spec, id).await?;
        self.server_count = under_test.watched.targets.len();
        if let Some(reach) = &under_test.reach {
            self.calibrations
                .entry(id.distance)
                .or_default()
                .push((reach.note(), reach.calibration()));
        }
        Ok(under_test)
    }

    /// Several fleets: every round starts each again, in alternating
    /// order, and runs every point once.
    async fn alternating_fleets(&mut self, fleets: &[FleetId]) -> Result<(), LoadError> {
        let started = Instant::now();
        let (mut done, mut last) = (0, Duration::ZERO);
        loop {
            let widest = self.widest(|_| true);
            if let Err(stopped) = self
                .spec
                .rounds
                .another(done, widest, started.elapsed(), last)
            {
                self.stopped.push(("every fleet".to_owned(), stopped));
                return Ok(());
            }
            let round_started = Instant::now();
            for id in in_round_order(fleets, done) {
                let before = self.sink.map(OtlpSink::counts);
                let under_test = self.start(id).await?;
                for point in points(self.spec) {
                    self.run_point(&under_test, id, point, done).await?;
                }
                self.stop_fleet(under_test, id.variant, before).await;
            }
            last = round_started.elapsed();
            done += 1;
        }
    }

    /// Stops a fleet (waiting for its servers' exit, so their last export
    /// has reached the sink) and counts what the sink got from it.
    async fn stop_fleet(
        &mut self,
        under_test: FleetUnderTest,
        variant: usize,
        before: Option<SinkCounts>,
    ) {
        drop(under_test.fleet);
        if let (Some(sink), Some(before)) = (self.sink, before) {
            self.sink_counts[variant].add(sink.counts().since(before));
        }
    }

    /// One round at `point`: each strategy's run (or one run mixing them),
    /// each beside its yardstick, in the round's order.
    async fn run_point(
        &mut self,
        under_test: &FleetUnderTest,
        id: FleetId,
        point: Point,
        round: usize,
    ) -> Result<(), LoadError> {
        for strategies in runs_of_round(self.spec, round) {
            let first = schedule::yardstick_first(round);
            let probe = NoiseProbe::start();
            let mut tps = Vec::new();
            if first {
                tps = self.yardsticks(under_test, id, point, &strategies).await?;
            }
            let label = run_label(self.spec, id, point, &strategies, round);
            let before = match &self.wal {
                Some(wal) => wal.position().await,
                None => None,
            };
            let wire_before = Wire::read(under_test.reach.as_ref()).await;
            let mut measured = measure_point(
                self.client,
                self.spec,
                under_test,
                point,
                &strategies,
                &label,
            )
            .await;
            let mut wire = Wire::read(under_test.reach.as_ref())
                .await
                .since(&wire_before);
            wire.background_per_s = under_test.background_per_s;
            if let (Some(wal), Some(before)) = (&self.wal, before)
                && let Some(after) = wal.position().await
            {
                measured.1.wal_bytes = after.saturating_sub(before) as f64;
            }
            if !first {
                tps = self.yardsticks(under_test, id, point, &strategies).await?;
            }
            let noise = probe.finish();
            for (i, &strategy) in strategies.iter().enumerate() {
                let key = self.key(id, point, strategy);
                self.acc.entry(key).or_default().add(Measured {
                    run: &measured,
                    index: i,
                    strategy,
                    round,
                    pgbench_tps: tps.get(i).copied().flatten(),
                    yardstick_first: first,
                    noise: noise.clone(),
                    wire,
                });
            }
        }
        Ok(())
    }

    /// pgbench on each named strategy's SQL at `point`, when the grid has
    /// a yardstick and the point creates chats (the SQL pgbench knows).
    async fn yardsticks(
        &self,
        under_test: &FleetUnderTest,
        id: FleetId,
        point: Point,
        strategies: &[Choice<InsertStrategy>],
    ) -> Result<Vec<Option<f64>>, LoadError> {
        let Some(yardstick) = &self.spec.yardstick else {
            return Ok(Vec::new());
        };
        if self.spec.scenarios[point.scenario] != Scenario::CreateChat {
            return Ok(Vec::new());
        }
        let clients = Yardstick::clients(
            point.vus,
            under_test.pool_in_effect,
            under_test.watched.targets.len(),
        );
        let url = under_test
            .reach
            .as_ref()
            .map_or_else(|| self.spec.database_url.clone(), Reach::url);
        let mut out = Vec::with_capacity(strategies.len());
        for &strategy in strategies {
            // Long enough for a few transactions where one takes seconds
            // (per_row at a distance): twice the cell's last p95.
            let slowest = self
                .acc
                .get(&self.key(id, point, strategy))
                .and_then(|a| a.rounds.last())
                .map_or(0.0, |r| 2.0 * r.p95_ms / 1e3);
            let duration = self.spec.duration.max(Duration::from_secs_f64(slowest));
            out.push(match strategy.named() {
                Some(s) => {
                    yardstick
                        .measure(
                            &url,
                            s,
                            point.members,
                            clients,
                            &under_test.seeded.users,
                            duration,
                        )
                        .await?
                }
                None => None,
            });
        }
        Ok(out)
    }

    /// The key of `strategy`'s cell at `point` on fleet `id`.
    fn key(&self, id: FleetId, point: Point, strategy: Choice<InsertStrategy>) -> Key {
        Key {
            variant: id.variant,
            pool: id.pool,
            distance: id.distance,
            scenario: point.scenario,
            members: point.members,
            vus: point.vus,
            mode_index: point.mode_index,
            strategy_index: self
                .spec
                .strategies
                .iter()
                .position(|&s| s == strategy)
                .unwrap_or(0),
            mode: point.mode,
            strategy,
        }
    }

    /// The widest interval of the ratios among the cells `keep` selects
    /// (`None`: some has none yet).
    fn widest(&self, keep: impl Fn(&Key) -> bool) -> Option<(String, f64)> {
        let cells: Vec<CellResult> = self
            .acc
            .iter()
            .filter(|(k, _)| keep(k))
            .map(|(k, a)| {
                let mut c = CellResult {
                    rounds: a.rounds.clone(),
                    ..CellResult::default()
                };
                let id = self.identity(*k);
                (c.server, c.strategy, c.publish_mode, c.scenario) =
                    (id.server, id.strategy, id.publish_mode, id.scenario);
                (c.members, c.vus, c.pool_size) = (id.members, id.vus, id.pool_size);
                c.db_rtt_ms = id.db_rtt_ms;
                c
            })
            .collect();
        verdict::widest_ratio(&cells)
    }

    /// What a cell is, for its row.
    fn identity(&self, key: Key) -> Identity {
        let scenario = &self.spec.scenarios[key.scenario];
        Identity {
            server: self.spec.variants[key.variant].name.clone(),
            strategy: key.strategy.to_string(),
            publish_mode: key.mode.to_string(),
            scenario: scenario_name(scenario),
            members: key.members,
            vus: key.vus,
            servers: self.server_count,
            pool_size: key.pool,
            rows_per_request: scenario.rows_per_request(),
            db_rtt_ms: self
                .spec
                .distances
                .get(key.distance)
                .copied()
                .flatten()
                .map_or(0.0, |d| d.rtt.as_secs_f64() * 1e3),
            db_round_trip_ms: self
                .calibrations
                .get(&key.distance)
                .map_or(0.0, |c| mean_round_trip_ms(c)),
        }
    }

    fn point_name(&self, p: Point) -> String {
        format!(
            "{}, {} members, {} VUs, mode {}",
            scenario_name(&self.spec.scenarios[p.scenario]),
            p.members,
            p.vus,
            p.mode
        )
    }
}

/// Chats seeded per size for the scenarios that post or read.
const SEEDED_CHATS: usize = 50;

/// Starts (or takes) the servers of fleet `id`, behind a hop at its
/// distance, seeds them, and runs the warm-up.
async fn start_fleet(
    client: &reqwest::Client,
    spec: &GridSpec,
    id: FleetId,
) -> Result<FleetUnderTest, LoadError> {
    let pool = id.pool;
    let (fleet, reach, targets, ops, pids, signer) = match &spec.servers {
        Servers::External(external) => (
            None,
            None,
            external.targets.clone(),
            external.ops.clone(),
            sampler::external_pids(&external.ops),
            external.signer.clone(),
        ),
        Servers::Spawn(fleet_spec) => {
            let (fleet, reach) = spawn_fleet(client, spec, fleet_spec, id).await?;
            let (urls, ops, pids) = (fleet.urls(), fleet.ops_urls(), fleet.pids());
            let signer = fleet_spec.signer.clone();
            (Some(fleet), Some(reach), urls, ops, pids, signer)
        }
    };
    // A spawned server left at its default pool sizes it as this machine's
    // cores say; an external one's is unknown.
    let pool_in_effect = match (&spec.servers, pool) {
        (Servers::Spawn(_), 0) => charts::default_pool_size(),
        _ => pool,
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
        let work = Workload::new(first_scenario.clone(), seeded.clone(), max_members);
        warm_up(client, spec, &targets, work).await;
    }
    let background_per_s = background_round_trips(reach.as_ref()).await;
    Ok(FleetUnderTest {
        fleet,
        reach,
        background_per_s,
        watched: Watched {
            targets,
            ops,
            pids,
            sample_interval: spec.sample_interval,
        },
        seeded,
        pool_in_effect,
    })
}

/// Spawns fleet `id`'s servers: the variant's env, the pool size, and a
/// hop at the fleet's distance in front of the database. A variant's own
/// DATABASE_URL (a pooler's, say) is where its hop leads; the hop stays
/// between the servers and it.
async fn spawn_fleet(
    client: &reqwest::Client,
    spec: &GridSpec,
    fleet_spec: &FleetSpec,
    id: FleetId,
) -> Result<(Fleet, Reach), LoadError> {
    let distance = spec.distances.get(id.distance).copied().flatten();
    let own_env = &spec.variants[id.variant].env;
    let upstream = own_env
        .iter()
        .find(|(k, _)| k == "DATABASE_URL")
        .map_or(spec.database_url.as_str(), |(_, url)| url.as_str());
    let reach = Reach::open(upstream, distance, &spec.distance_args).await?;
    let mut fs = fleet_spec.clone().with_database_url(&reach.url());
    fs.env
        .extend(own_env.iter().filter(|(k, _)| k != "DATABASE_URL").cloned());
    if id.pool > 0 {
        fs.env
            .push(("DB_POOL_MAX_SIZE".into(), id.pool.to_string()));
    }
    let fleet = Fleet::start(&fs, client).await?;
    Ok((fleet, reach))
}

/// The grid's warm-up: `work` at the grid's most VUs for `spec.warmup`,
/// its figures thrown away.
async fn warm_up(client: &reqwest::Client, spec: &GridSpec, targets: &[String], work: Workload) {
    let _ = runner::run(
        client.clone(),
        targets.to_vec(),
        Arc::new(work),
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

/// Round trips per second through `reach`'s hop while nothing but the
/// servers' background work runs (over a second, after the warm-up).
async fn background_round_trips(reach: Option<&Reach>) -> f64 {
    let Some(reach) = reach else {
        return 0.0;
    };
    let idle = Duration::from_secs(1);
    let before = reach.wire().await;
    tokio::time::sleep(idle).await;
    match (before, reach.wire().await) {
        (Some(before), Some(after)) => after.since(&before).flights as f64 / idle.as_secs_f64(),
        _ => 0.0,
    }
}

/// Every point of the grid, in the spec's order.
fn points(spec: &GridSpec) -> Vec<Point> {
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
/// request, else one run each, in the round's order.
fn runs_of_round(spec: &GridSpec, round: usize) -> Vec<Vec<Choice<InsertStrategy>>> {
    if spec.mix_strategies {
        vec![spec.strategies.clone()]
    } else {
        in_round_order(&spec.strategies, round)
            .into_iter()
            .map(|s| vec![s])
            .collect()
    }
}

fn run_label(
    spec: &GridSpec,
    id: FleetId,
    point: Point,
    strategies: &[Choice<InsertStrategy>],
    round: usize,
) -> String {
    let strategies: Vec<String> = strategies.iter().map(Choice::to_string).collect();
    let distance = match spec.distances.get(id.distance).copied().flatten() {
        Some(d) => format!(" db {d}"),
        None => String::new(),
    };
    format!(
        "{} pool={}{distance} {} m={} vus={} {} {} r{}",
        spec.variants[id.variant].name,
        id.pool,
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
    spec: &GridSpec,
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
        match spec.arrivals {
            Some(schedule) => Model::Open {
                schedule,
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

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(strategies: &str, mix: bool) -> GridSpec {
        GridSpec {
            servers: Servers::Spawn(FleetSpec {
                binary: "chatlab".into(),
                count: 1,
                env: Vec::new(),
                log_dir: std::env::temp_dir(),
                signer: Arc::new(
                    crate::load::auth::Signer::generate(crate::load::auth::DEFAULT_ISSUER).unwrap(),
                ),
            }),
            variants: vec!["-".parse().unwrap()],
            scenarios: vec![Scenario::CreateChat],
            strategies: strategies.split(',').map(|s| s.parse().unwrap()).collect(),
            members: vec![10, 50],
            vus: vec![20],
            publish_modes: vec!["off".parse().unwrap()],
            pool_sizes: vec![0],
            database_url: "postgres://postgres@127.0.0.1:5432/x".into(),
            distances: vec![None],
            distance_args: crate::servers::reach::DistanceArgs {
                db_rtt: None,
                db_jitter: String::new(),
                delay_bin: "chatlab-delay".into(),
                calibrate_for: Duration::from_secs(1),
            },
            duration: Duration::from_secs(1),
            warmup: Duration::ZERO,
            rounds: Rounds {
                min: 2,
                max: 2,
                within: None,
                budget: None,
            },
            mix_strategies: mix,
            think_time: Duration::ZERO,
            arrivals: None,
            trace_fraction: 0.0,
            yardstick: None,
            sample_interval: Duration::from_millis(250),
            seed_users: 100,
            wal_url: None,
        }
    }

    #[test]
    fn strategies_alternate_by_round_unless_mixed() {
        let s = spec("per_row,batch,single", false);
        let names = |runs: Vec<Vec<Choice<InsertStrategy>>>| -> Vec<String> {
            runs.iter()
                .map(|r| {
                    r.iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join("+")
                })
                .collect()
        };
        assert_eq!(names(runs_of_round(&s, 0)), ["per_row", "batch", "single"]);
        assert_eq!(names(runs_of_round(&s, 1)), ["single", "batch", "per_row"]);
        let mixed = spec("per_row,batch", true);
        assert_eq!(names(runs_of_round(&mixed, 1)), ["per_row+batch"]);
    }

    #[test]
    fn points_follow_the_spec_s_order() {
        let s = spec("batch", false);
        let p = points(&s);
        assert_eq!(p.len(), 2);
        assert_eq!((p[0].members, p[1].members), (10, 50));
        let key = Key {
            variant: 0,
            pool: 0,
            distance: 0,
            scenario: 0,
            members: 50,
            vus: 20,
            mode_index: 0,
            strategy_index: 0,
            mode: p[1].mode,
            strategy: s.strategies[0],
        };
        assert_eq!(key.point(), p[1]);
    }

    #[test]
    fn every_calibration_at_a_distance_is_stated() {
        let cal = |through: f64, straight: f64| {
            (
                format!("hop {through}"),
                Calibration {
                    straight_ms: straight,
                    through_ms: Some(through),
                },
            )
        };
        let one = [cal(5.2, 0.12)];
        assert_eq!(reach_note(&one), "hop 5.2");
        let two = [cal(5.2, 0.12), cal(5.3, 0.1)];
        let note = reach_note(&two);
        assert!(
            note.starts_with("hop 5.2 That was the first of 2"),
            "{note}"
        );
        assert!(
            note.contains("5.200 through / 0.120 straight; 5.300 through / 0.100 straight"),
            "{note}"
        );
        assert!((mean_round_trip_ms(&two) - 5.25).abs() < 1e-9);
        assert_eq!(mean_round_trip_ms(&[]), 0.0);
    }
}
