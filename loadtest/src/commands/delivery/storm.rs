//! A reconnect storm in `delivery`: every live stream cut at once and
//! opened again at once, each with `Last-Event-ID` of the last id it
//! carried, while the writes go on. What it costs the subscriber
//! instances (how long until every stream is back, where their catch-ups
//! came from, their TCP connections to the broker and their memory at the
//! peak) is measured here; whether any delivery was missed or repeated,
//! the delivery tally says.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use reqwest::header::HeaderValue;
use tokio::sync::mpsc;

use crate::error::LoadError;
use crate::load::live_stream::{self, LastId, Sighting};
use crate::observe::procstat;
use crate::observe::prom::Exposition;

/// How many times one stream tries to open again (a refused or failed
/// open waits [`RETRY_AFTER`] before the next), as a browser's
/// `EventSource` keeps retrying.
pub(super) const ATTEMPTS: u32 = 120;

/// The wait after a refused or failed open.
pub(super) const RETRY_AFTER: Duration = Duration::from_millis(250);

/// How often the subscriber instances are sampled during the storm.
pub(super) const SAMPLE_EVERY: Duration = Duration::from_millis(20);

/// How long after the last stream is back they are still sampled (the
/// catch-ups run after the answer).
const SAMPLE_AFTER: Duration = Duration::from_secs(2);

/// Every subscriber's stream: where it goes, who holds it, what reads it.
pub(super) struct Streams {
    /// The instance each stream is on.
    pub(super) urls: Vec<String>,
    /// The task reading each stream.
    pub(super) readers: Vec<tokio::task::JoinHandle<()>>,
    /// The last id each stream carried.
    pub(super) last: Vec<LastId>,
    /// Every message a subscriber saw.
    pub(super) seen: mpsc::UnboundedReceiver<Sighting>,
    /// A subscriber index per stream the server cut.
    pub(super) cuts: mpsc::UnboundedReceiver<usize>,
    seen_tx: mpsc::UnboundedSender<Sighting>,
    cut_tx: mpsc::UnboundedSender<usize>,
}

impl Streams {
    /// Opens a stream per bearer, subscriber `i` on `urls_of(i)`, one after
    /// another.
    pub(super) async fn open(
        client: &reqwest::Client,
        bearers: &[HeaderValue],
        urls_of: impl Fn(usize) -> String,
    ) -> Result<Self, LoadError> {
        let (seen_tx, seen) = mpsc::unbounded_channel::<Sighting>();
        let (cut_tx, cuts) = mpsc::unbounded_channel::<usize>();
        let mut streams = Self {
            urls: Vec::with_capacity(bearers.len()),
            readers: Vec::with_capacity(bearers.len()),
            last: Vec::with_capacity(bearers.len()),
            seen,
            cuts,
            seen_tx,
            cut_tx,
        };
        for (index, bearer) in bearers.iter().enumerate() {
            let url = urls_of(index);
            let resp = live_stream::open(client, &url, bearer).await?;
            let last = LastId::default();
            streams.readers.push(tokio::spawn(live_stream::read(
                resp,
                index,
                streams.seen_tx.clone(),
                streams.cut_tx.clone(),
                Arc::clone(&last),
            )));
            streams.urls.push(url);
            streams.last.push(last);
        }
        Ok(streams)
    }

    /// Stops reading every stream (their connections close).
    pub(super) fn abort(&self) {
        for reader in &self.readers {
            reader.abort();
        }
    }
}

/// The subscriber instances the storm hits.
pub(super) struct Watched<'a> {
    /// Their process ids.
    pub(super) pids: &'a [u32],
    /// Their operator URLs (for `/metrics`).
    pub(super) ops_urls: &'a [String],
    /// The broker's port.
    pub(super) broker_port: u16,
}

/// What one storm cost.
#[derive(Debug, Default, Clone)]
pub(super) struct Storm {
    /// Streams cut and opened again.
    pub(super) streams: usize,
    /// Of them, resumed with a `Last-Event-ID` (a stream that carried no id
    /// yet opens afresh).
    pub(super) resumed: usize,
    /// From the cut to the last stream's answer.
    pub(super) all_back: Duration,
    /// Opens refused or failed before a stream got back (each retried).
    pub(super) retries: u64,
    /// Streams that never got back.
    pub(super) lost: usize,
    /// The instances' catch-ups during the storm, served from memory and
    /// read from the topic.
    pub(super) catch_ups: (f64, f64),
    /// The instances' TCP connections to the broker, before and at the
    /// peak (summed over instances).
    pub(super) broker_connections: (usize, usize),
    /// The largest instance's RSS before and at the peak, MiB.
    pub(super) rss_mib: (f64, f64),
}

/// Cuts every stream of `streams` and opens them all again at once, each
/// resuming from its last id; waits until all are back (or have given up)
/// and the catch-ups have had [`SAMPLE_AFTER`].
pub(super) async fn storm(
    client: &reqwest::Client,
    streams: &mut Streams,
    bearers: &[HeaderValue],
    watched: &Watched<'_>,
) -> Storm {
    let before = scrape_all(client, watched.ops_urls).await;
    let connections_before = broker_connections(watched);
    let rss_before = largest_rss(watched.pids);

    let sampling = Arc::new(AtomicBool::new(true));
    let sampler = {
        let sampling = Arc::clone(&sampling);
        let pids = watched.pids.to_vec();
        let port = watched.broker_port;
        tokio::spawn(async move {
            let (mut connections, mut rss) = (0usize, 0.0f64);
            while sampling.load(Ordering::Relaxed) {
                let now: usize = pids
                    .iter()
                    .filter_map(|&pid| procstat::connections_to(pid, port))
                    .sum();
                connections = connections.max(now);
                rss = rss.max(largest_rss(&pids));
                tokio::time::sleep(SAMPLE_EVERY).await;
            }
            (connections, rss)
        })
    };

    let cut = Instant::now();
    streams.abort();
    let mut reopening = Vec::with_capacity(streams.readers.len());
    let mut resumed = 0;
    for (index, (slot, bearer)) in streams.last.iter().zip(bearers).enumerate() {
        let last = slot.lock().ok().and_then(|slot| slot.clone());
        resumed += usize::from(last.is_some());
        let (client, url, bearer) = (client.clone(), streams.urls[index].clone(), bearer.clone());
        let (seen, cuts, slot) = (
            streams.seen_tx.clone(),
            streams.cut_tx.clone(),
            Arc::clone(slot),
        );
        reopening.push(tokio::spawn(async move {
            let mut retries = 0u64;
            for _ in 0..ATTEMPTS {
                match live_stream::open_from(&client, &url, &bearer, last.as_deref()).await {
                    Ok(resp) => {
                        let back = cut.elapsed();
                        let reader = tokio::spawn(live_stream::read(resp, index, seen, cuts, slot));
                        return (Some((reader, back)), retries);
                    }
                    Err(_) => {
                        retries += 1;
                        tokio::time::sleep(RETRY_AFTER).await;
                    }
                }
            }
            (None, retries)
        }));
    }
    let mut out = Storm {
        streams: reopening.len(),
        resumed,
        ..Storm::default()
    };
    for (index, task) in reopening.into_iter().enumerate() {
        match task.await {
            Ok((Some((reader, back)), retries)) => {
                streams.readers[index] = reader;
                out.all_back = out.all_back.max(back);
                out.retries += retries;
            }
            Ok((None, retries)) => {
                out.lost += 1;
                out.retries += retries;
            }
            Err(_) => out.lost += 1,
        }
    }
    tokio::time::sleep(SAMPLE_AFTER).await;
    sampling.store(false, Ordering::Relaxed);
    let (connections_peak, rss_peak) = sampler.await.unwrap_or_default();
    let after = scrape_all(client, watched.ops_urls).await;
    let served = |source: &str| {
        let name = "chatlab_live_catch_ups_total";
        let labels = [("source", source)];
        let count = |e: &[Exposition]| e.iter().map(|x| x.sum(name, &labels)).sum::<f64>();
        count(&after) - count(&before)
    };
    out.catch_ups = (served("memory"), served("topic"));
    out.broker_connections = (connections_before, connections_peak.max(connections_before));
    out.rss_mib = (rss_before, rss_peak.max(rss_before));
    out
}

/// Every instance's `/metrics` that answered.
async fn scrape_all(client: &reqwest::Client, ops_urls: &[String]) -> Vec<Exposition> {
    let mut all = Vec::with_capacity(ops_urls.len());
    for ops in ops_urls {
        if let Some(exposition) = crate::observe::sampler::scrape(client, ops).await {
            all.push(exposition);
        }
    }
    all
}

/// The instances' TCP connections to the broker, summed.
fn broker_connections(watched: &Watched<'_>) -> usize {
    watched
        .pids
        .iter()
        .filter_map(|&pid| procstat::connections_to(pid, watched.broker_port))
        .sum()
}

/// The largest RSS among `pids`, MiB.
pub(super) fn largest_rss(pids: &[u32]) -> f64 {
    pids.iter()
        .filter_map(|&pid| procstat::sample(pid))
        .map(|s| s.rss_mib)
        .fold(0.0, f64::max)
}

/// The storm's table, one row per variant that had one.
pub(super) fn to_markdown(rows: &[(String, Storm)]) -> String {
    let mut out = String::from(
        "| variant | streams cut | resumed with Last-Event-ID | all back after ms | opens retried | never back | catch-ups from memory | from the topic | broker connections before → peak | largest RSS MiB before → peak |\n\
         |---|---|---|---|---|---|---|---|---|---|\n",
    );
    for (variant, s) in rows {
        out.push_str(&format!(
            "| {variant} | {} | {} | {:.0} | {} | {} | {:.0} | {:.0} | {} → {} | {:.1} → {:.1} |\n",
            s.streams,
            s.resumed,
            s.all_back.as_secs_f64() * 1e3,
            s.retries,
            s.lost,
            s.catch_ups.0,
            s.catch_ups.1,
            s.broker_connections.0,
            s.broker_connections.1,
            s.rss_mib.0,
            s.rss_mib.1,
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_storm_row_says_how_long_until_all_were_back_and_what_it_opened() {
        let storm = Storm {
            streams: 1000,
            resumed: 998,
            all_back: Duration::from_millis(1234),
            retries: 3,
            lost: 0,
            catch_ups: (998.0, 0.0),
            broker_connections: (3, 3),
            rss_mib: (50.0, 61.25),
        };
        let table = to_markdown(&[("outbox".to_owned(), storm)]);
        assert!(
            table
                .contains("| outbox | 1000 | 998 | 1234 | 3 | 0 | 998 | 0 | 3 → 3 | 50.0 → 61.2 |"),
            "{table}"
        );
    }
}
