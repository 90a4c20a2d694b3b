//! Watching the servers while a run goes: `/metrics` every interval
//! (default 250 ms) for the pool's gauges, first and last scrapes for the
//! run's histograms and counters, and `/proc` for RSS and CPU.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::observe::procstat;
use crate::observe::prom::{Exposition, HistogramSnapshot};

/// What the servers did during a run, summed or maximised over servers.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ServerStats {
    /// Highest `used` connections seen on any one server.
    pub used_max: f64,
    /// Mean `used` connections per server over the samples.
    pub used_mean: f64,
    /// Highest pending requests seen on any one server.
    pub pending_max: f64,
    /// Connection use time during the run (all servers).
    pub use_time: HistogramSnapshot,
    /// Connection wait time during the run (all servers).
    pub wait_time: HistogramSnapshot,
    /// createChat connection hold time per strategy during the run.
    pub hold_by_strategy: BTreeMap<String, HistogramSnapshot>,
    /// Checkouts that timed out.
    pub timeouts: f64,
    /// Rows inserted by createChat, and by sends' inbox fan-out, per
    /// second (all servers).
    pub rows_per_s: f64,
    /// INSERT statements of createChat per second (all servers).
    pub inserts_per_s: f64,
    /// Highest RSS of any one server, MiB.
    pub rss_max_mib: f64,
    /// CPU used by all servers, percent of one core.
    pub cpu_percent: f64,
    /// CPU seconds used by all servers during the run.
    pub cpu_seconds: f64,
    /// Context switches of all servers' threads during the run.
    pub switches: procstat::Switches,
    /// Checkouts that waited in one worker's slice of the pool while
    /// another slice had a free connection (`DB_POOL_LAYOUT=per_worker`).
    pub imbalanced_waits: f64,
    /// Round trips and committed createChats per strategy during the run
    /// (all servers): their quotient is the round trips of one createChat.
    pub round_trips_by_strategy: BTreeMap<String, (f64, f64)>,
    /// WAL the cluster wrote during the run, bytes (0: not measured).
    pub wal_bytes: f64,
}

/// A running sampler.
pub struct Sampler {
    stop: oneshot::Sender<()>,
    task: JoinHandle<ServerStats>,
}

struct Watch {
    url: String,
    pid: Option<u32>,
    first: Option<Exposition>,
    last: Option<Exposition>,
    cpu_start: Option<f64>,
    cpu_end: Option<f64>,
    switches_start: Option<procstat::Switches>,
    switches_end: Option<procstat::Switches>,
}

impl Sampler {
    /// Takes the first scrape of each server now, then samples every
    /// `interval` until [`Sampler::finish`]. `urls` are the servers'
    /// operator URLs (`OPS_ADDR`, where `/metrics` answers); `pids` are in
    /// their order.
    pub async fn start(
        client: reqwest::Client,
        urls: Vec<String>,
        pids: Vec<Option<u32>>,
        interval: Duration,
    ) -> Self {
        let mut watches: Vec<Watch> = urls
            .into_iter()
            .zip(pids.into_iter().chain(std::iter::repeat(None)))
            .map(|(url, pid)| Watch {
                pid,
                url,
                first: None,
                last: None,
                cpu_start: None,
                cpu_end: None,
                switches_start: None,
                switches_end: None,
            })
            .collect();
        for w in &mut watches {
            w.first = scrape_bound(&client, &w.url).await;
            w.cpu_start = w.pid.and_then(procstat::sample).map(|s| s.cpu_secs);
            w.switches_start = w.pid.and_then(procstat::switches);
        }
        let (stop, mut stopped) = oneshot::channel();
        let task = tokio::spawn(async move {
            let started = Instant::now();
            let mut stats = ServerStats::default();
            let mut used_total = 0.0;
            let mut used_points = 0usize;
            let mut ticker = tokio::time::interval(interval);
            loop {
                tokio::select! {
                    _ = ticker.tick() => {}
                    _ = &mut stopped => break,
                }
                for w in &mut watches {
                    if let Some(e) = scrape(&client, &w.url).await {
                        let used = e.sum(
                            "db_client_connection_count",
                            &[("db_client_connection_state", "used")],
                        );
                        let pending = e.sum("db_client_connection_pending_requests", &[]);
                        stats.used_max = stats.used_max.max(used);
                        stats.pending_max = stats.pending_max.max(pending);
                        used_total += used;
                        used_points += 1;
                    }
                    if let Some(p) = w.pid.and_then(procstat::sample) {
                        stats.rss_max_mib = stats.rss_max_mib.max(p.rss_mib);
                    }
                }
            }
            let elapsed = started.elapsed().as_secs_f64().max(1e-9);
            for w in &mut watches {
                w.last = scrape_bound(&client, &w.url).await;
                if let Some(p) = w.pid.and_then(procstat::sample) {
                    stats.rss_max_mib = stats.rss_max_mib.max(p.rss_mib);
                    w.cpu_end = Some(p.cpu_secs);
                }
                w.switches_end = w.pid.and_then(procstat::switches);
            }
            stats.used_mean = if used_points > 0 {
                used_total / used_points as f64
            } else {
                0.0
            };
            summarise(&mut stats, &watches, elapsed);
            stats
        });
        Self { stop, task }
    }

    /// Stops sampling and returns what the servers did.
    pub async fn finish(self) -> ServerStats {
        let _ = self.stop.send(());
        self.task.await.unwrap_or_default()
    }
}

fn summarise(stats: &mut ServerStats, watches: &[Watch], elapsed: f64) {
    let mut rows = 0.0;
    let mut inserts = 0.0;
    let mut cpu = 0.0;
    for w in watches {
        let (Some(first), Some(last)) = (&w.first, &w.last) else {
            continue;
        };
        let delta = |name: &str| last.sum(name, &[]) - first.sum(name, &[]);
        rows += delta("chatlab_create_chat_rows_inserted_total");
        // A send's inbox rows (MESSAGE_FANOUT=inbox).
        rows += delta("chatlab_inbox_rows_inserted_total");
        inserts += delta("chatlab_create_chat_statements_total");
        stats.timeouts += delta("db_client_connection_timeouts_total");
        stats.imbalanced_waits += delta("db_client_connection_imbalanced_waits_total");
        let hist = |base: &str| last.histogram(base, &[]).since(&first.histogram(base, &[]));
        stats.use_time = stats
            .use_time
            .add(&hist("db_client_connection_use_time_seconds"));
        stats.wait_time = stats
            .wait_time
            .add(&hist("db_client_connection_wait_time_seconds"));
        for s in last.matching("chatlab_create_chat_connection_hold_seconds_count", &[]) {
            let Some(strategy) = s.labels.get("strategy") else {
                continue;
            };
            let labels = [("strategy", strategy.as_str())];
            let base = "chatlab_create_chat_connection_hold_seconds";
            let h = last
                .histogram(base, &labels)
                .since(&first.histogram(base, &labels));
            let entry = stats.hold_by_strategy.entry(strategy.clone()).or_default();
            *entry = entry.add(&h);
        }
        for s in last.matching("chatlab_create_chat_round_trips_total", &[]) {
            let Some(strategy) = s.labels.get("strategy") else {
                continue;
            };
            let labels = [("strategy", strategy.as_str())];
            let delta = |name: &str| last.sum(name, &labels) - first.sum(name, &labels);
            let entry = stats
                .round_trips_by_strategy
                .entry(strategy.clone())
                .or_default();
            entry.0 += delta("chatlab_create_chat_round_trips_total");
            entry.1 += delta("chatlab_create_chat_transactions_total");
        }
        if let (Some(a), Some(b)) = (w.cpu_start, w.cpu_end) {
            cpu += b - a;
        }
        if let (Some(a), Some(b)) = (w.switches_start, w.switches_end) {
            stats.switches += b.since(a);
        }
    }
    stats.cpu_seconds = cpu;
    stats.rows_per_s = rows / elapsed;
    stats.inserts_per_s = inserts / elapsed;
    stats.cpu_percent = 100.0 * cpu / elapsed;
}

/// One scrape of a server's `/metrics` on its operator URL `url` (2 s at
/// most); `None` when it does not answer, answers anything but 200, or
/// sends an exposition without its closing `# EOF`. A run's counters are
/// the difference of two scrapes, so a scrape that parsed as empty would
/// count a counter's whole life as the run's (or its negative).
pub async fn scrape(client: &reqwest::Client, url: &str) -> Option<Exposition> {
    let resp = client
        .get(format!("{url}/metrics"))
        .timeout(Duration::from_secs(2))
        .send()
        .await
        .inspect_err(|e| eprintln!("scrape {url}/metrics: {e}"))
        .ok()?;
    let status = resp.status();
    let text = resp.text().await.ok()?;
    if !status.is_success() || !text.trim_end().ends_with("# EOF") {
        eprintln!(
            "scrape {url}/metrics: {status}, {} bytes, not a whole exposition: left out",
            text.len()
        );
        return None;
    }
    Some(Exposition::parse(&text))
}

/// [`scrape`], tried three times 100 ms apart: the run's first and last
/// scrapes bound every counter of the run.
async fn scrape_bound(client: &reqwest::Client, url: &str) -> Option<Exposition> {
    for _ in 0..2 {
        if let Some(e) = scrape(client, url).await {
            return Some(e);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    scrape(client, url).await
}

/// The pids of servers someone else started, found once by the port they
/// listen on (a scan of every process's sockets: too slow to repeat per
/// run). `None` where none is found; their RSS and CPU are then not read.
pub fn external_pids(urls: &[String]) -> Vec<Option<u32>> {
    urls.iter()
        .map(|url| port_of(url).and_then(procstat::pid_listening_on))
        .collect()
}

fn port_of(url: &str) -> Option<u16> {
    let host = url.split("://").nth(1)?.split('/').next()?;
    host.rsplit(':').next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_from_urls() {
        assert_eq!(port_of("http://127.0.0.1:8080"), Some(8080));
        assert_eq!(port_of("http://127.0.0.1:9/x"), Some(9));
        assert_eq!(port_of("nonsense"), None);
    }
}
