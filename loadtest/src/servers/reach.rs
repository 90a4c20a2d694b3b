//! How far PostgreSQL is from what a run connects to it: straight, over
//! loopback, or through a delay hop (`chatlab-delay`) at a set round-trip
//! time, between PostgreSQL and everything the run points at it (the
//! servers it spawns, pgbench, the direct clients of `syncs` and
//! `crossover`). Every run measures the distance it ran at: pgbench
//! `SELECT 1` from one client, straight and through the hop, and says both
//! in its results with the hop's own CPU.

use std::io::{BufRead as _, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use clap::Args;

use chatlab_delay::{Distance, Stats};

use crate::error::LoadError;
use crate::load::schedule::parse_duration;
use crate::observe::procstat;

/// Where PostgreSQL is, for every command that reaches it.
#[derive(Debug, Args, Clone)]
pub(crate) struct DistanceArgs {
    /// Put PostgreSQL this far away: a round-trip time (1ms, 200us, 0.5ms;
    /// 0: straight, no hop) that a delay proxy (chatlab-delay) adds between
    /// PostgreSQL and everything the run connects to it.
    #[arg(long = "db-rtt", env = "DB_RTT")]
    pub(crate) db_rtt: Option<String>,
    /// How much that round trip varies: each one-way delay ± half of it
    /// (at most --db-rtt).
    #[arg(long = "db-jitter", env = "DB_JITTER", default_value = "")]
    pub(crate) db_jitter: String,
    /// The chatlab-delay binary.
    #[arg(
        long,
        env = "LOAD_DELAY_BIN",
        default_value = "target/release/chatlab-delay"
    )]
    pub(crate) delay_bin: PathBuf,
    /// How long each calibration (pgbench `SELECT 1`, one client) runs.
    #[arg(long, default_value = "2s", value_parser = parse_duration)]
    pub(crate) calibrate_for: Duration,
}

impl DistanceArgs {
    /// The distance asked for, checked (`None`: straight).
    pub(crate) fn distance(&self) -> Result<Option<Distance>, LoadError> {
        match &self.db_rtt {
            None => Ok(None),
            Some(rtt) => {
                let d = Distance::parse(
                    "DB_RTT (--db-rtt)",
                    rtt,
                    "DB_JITTER (--db-jitter)",
                    &self.db_jitter,
                )
                .map_err(|e| LoadError::Usage(e.to_string()))?;
                Ok((!d.rtt.is_zero()).then_some(d))
            }
        }
    }
}

/// A list of distances for a grid (`0,200us,1ms`), checked; 0 is straight.
pub(crate) fn parse_distances(list: &str, jitter: &str) -> Result<Vec<Option<Distance>>, String> {
    list.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|rtt| {
            let d = Distance::parse("--db-rtts", rtt, "DB_JITTER (--db-jitter)", jitter)
                .map_err(|e| e.to_string())?;
            Ok((!d.rtt.is_zero()).then_some(d))
        })
        .collect()
}

/// A running `chatlab-delay`, stopped when dropped.
#[derive(Debug)]
pub(crate) struct Hop {
    child: Child,
    addr: SocketAddr,
    control: SocketAddr,
    distance: Distance,
}

impl Hop {
    /// Starts a hop in front of `upstream` and waits for its ready line.
    fn start(bin: &Path, upstream: SocketAddr, distance: Distance) -> Result<Self, LoadError> {
        let name = bin.display().to_string();
        let mut child = Command::new(bin)
            .arg("--upstream")
            .arg(upstream.to_string())
            .arg("--rtt")
            .arg(format!("{}ns", distance.rtt.as_nanos()))
            .arg("--jitter")
            .arg(format!("{}ns", distance.jitter.as_nanos()))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| {
                LoadError::program(
                    &name,
                    format!("{e} (build it: cargo build --release --bin chatlab-delay)"),
                )
            })?;
        let Some(stdout) = child.stdout.take() else {
            return Err(LoadError::program(&name, "no standard output"));
        };
        let mut line = String::new();
        BufReader::new(stdout)
            .read_line(&mut line)
            .map_err(|e| LoadError::program(&name, e))?;
        // `listening ADDR control ADDR upstream ADDR RTT ...`
        let words: Vec<&str> = line.split_whitespace().collect();
        let at = |key: &str| {
            words
                .iter()
                .position(|w| *w == key)
                .and_then(|i| words.get(i + 1))
                .and_then(|a| a.parse::<SocketAddr>().ok())
        };
        match (at("listening"), at("control")) {
            (Some(addr), Some(control)) => Ok(Self {
                child,
                addr,
                control,
                distance,
            }),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                Err(LoadError::program(
                    &name,
                    format!("did not start: {line:?}"),
                ))
            }
        }
    }

    /// Its pid.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// A control command's answer.
    async fn control(&self, command: &str) -> Result<String, LoadError> {
        chatlab_delay::proxy::control(self.control, command)
            .await
            .map_err(|e| LoadError::program("chatlab-delay control", e))
    }
}

impl Drop for Hop {
    fn drop(&mut self) {
        let _ = crate::servers::fleet::send_signal(self.child.id(), "TERM");
        let _ = self.child.wait();
    }
}

/// pgbench `SELECT 1` from one client: the round trip as a client sees it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Calibration {
    /// Straight to PostgreSQL, ms.
    pub(crate) straight_ms: f64,
    /// Through the hop, ms (`None`: no hop).
    pub(crate) through_ms: Option<f64>,
}

/// PostgreSQL as a run reaches it.
#[derive(Debug)]
pub(crate) struct Reach {
    straight_url: String,
    hop: Option<Hop>,
    calibration: Calibration,
    /// The hop's CPU seconds when the run began.
    hop_cpu_start: f64,
}

impl Reach {
    /// PostgreSQL at `url`, straight or through a hop at `distance`,
    /// calibrated for `calibrate_for` each way.
    pub(crate) async fn open(
        url: &str,
        distance: Option<Distance>,
        args: &DistanceArgs,
    ) -> Result<Self, LoadError> {
        let hop = match distance {
            Some(d) => Some(Hop::start(&args.delay_bin, upstream_of(url)?, d)?),
            None => None,
        };
        let through_url = hop.as_ref().map(|h| rewrite(url, h.addr)).transpose()?;
        let seconds = args.calibrate_for;
        let straight = url.to_owned();
        let straight_ms =
            tokio::task::spawn_blocking(move || select_one_ms(&straight, seconds)).await??;
        let through_ms = match through_url {
            Some(u) => {
                Some(tokio::task::spawn_blocking(move || select_one_ms(&u, seconds)).await??)
            }
            None => None,
        };
        let hop_cpu_start = hop
            .as_ref()
            .and_then(|h| procstat::sample(h.pid()))
            .map_or(0.0, |s| s.cpu_secs);
        Ok(Self {
            straight_url: url.to_owned(),
            hop,
            calibration: Calibration {
                straight_ms,
                through_ms,
            },
            hop_cpu_start,
        })
    }

    /// PostgreSQL at `url`, straight, calibrated for two seconds: for a
    /// command that offers no distance but states the one it ran at.
    pub(crate) async fn straight(url: &str) -> Result<Self, LoadError> {
        let args = DistanceArgs {
            db_rtt: None,
            db_jitter: String::new(),
            delay_bin: PathBuf::new(),
            calibrate_for: Duration::from_secs(2),
        };
        Self::open(url, None, &args).await
    }

    /// The URL to give whatever the run measures: the hop's, or PostgreSQL's.
    pub(crate) fn url(&self) -> String {
        match &self.hop {
            Some(h) => {
                rewrite(&self.straight_url, h.addr).unwrap_or_else(|_| self.straight_url.clone())
            }
            None => self.straight_url.clone(),
        }
    }

    /// The distance set (`None`: straight).
    pub(crate) fn distance(&self) -> Option<Distance> {
        self.hop.as_ref().map(|h| h.distance)
    }

    /// The set RTT in ms (0 straight).
    pub(crate) fn set_rtt_ms(&self) -> f64 {
        self.distance().map_or(0.0, |d| d.rtt.as_secs_f64() * 1e3)
    }

    /// What its calibration measured.
    pub(crate) fn calibration(&self) -> Calibration {
        self.calibration
    }

    /// The round trip measured for what the run measures, ms.
    pub(crate) fn measured_rtt_ms(&self) -> f64 {
        self.calibration
            .through_ms
            .unwrap_or(self.calibration.straight_ms)
    }

    /// The hop's counters now (`None`: no hop, or it did not answer).
    pub(crate) async fn wire(&self) -> Option<Stats> {
        let hop = self.hop.as_ref()?;
        serde_json::from_str(&hop.control("stats").await.ok()?).ok()
    }

    /// Stops forwarding through the hop, without closing anything (a dead
    /// network), or starts again.
    pub(crate) async fn blackhole(&self, on: bool) -> Result<(), LoadError> {
        let hop = self
            .hop
            .as_ref()
            .ok_or_else(|| LoadError::Usage("a blackhole needs a hop: set --db-rtt".into()))?;
        hop.control(if on { "blackhole" } else { "resume" }).await?;
        Ok(())
    }

    /// The hop's CPU seconds so far (0 without one).
    pub(crate) fn hop_cpu_seconds(&self) -> f64 {
        self.hop
            .as_ref()
            .and_then(|h| procstat::sample(h.pid()))
            .map_or(0.0, |s| s.cpu_secs - self.hop_cpu_start)
    }

    /// One sentence for results.md: where PostgreSQL was and what a round
    /// trip to it measured.
    pub(crate) fn note(&self) -> String {
        let c = self.calibration;
        match (self.distance(), c.through_ms) {
            (Some(d), Some(through)) => {
                let expected = d.rtt.as_secs_f64() * 1e3 + c.straight_ms;
                let off = through - expected;
                let within = off.abs() <= 0.020 || off.abs() <= 0.05 * expected;
                format!(
                    "PostgreSQL: through a delay hop (chatlab-delay) at {d}. pgbench `SELECT 1` from one client: {through:.3} ms a round trip through it, {:.3} ms straight; the set RTT plus the straight one is {expected:.3} ms, {} by {:+.3} ms ({}).",
                    c.straight_ms,
                    if off >= 0.0 { "over" } else { "under" },
                    off,
                    if within {
                        "within the ±5% or ±20 µs the hop aims at"
                    } else {
                        "outside the ±5% or ±20 µs the hop aims at"
                    }
                )
            }
            _ => format!(
                "PostgreSQL: straight, over loopback. pgbench `SELECT 1` from one client: {:.3} ms a round trip.",
                c.straight_ms
            ),
        }
    }
}

/// A distance in ms as tables show it: `0`, `0.2`, `1`, `2.5`.
pub(crate) fn show_ms(ms: f64) -> String {
    let text = format!("{ms:.3}");
    text.trim_end_matches('0').trim_end_matches('.').to_owned()
}

/// The host and port of a `postgres://` URL, as an address.
fn upstream_of(url: &str) -> Result<SocketAddr, LoadError> {
    let parsed = url::Url::parse(url).map_err(|e| LoadError::Usage(format!("{url}: {e}")))?;
    let host = parsed.host_str().unwrap_or("127.0.0.1");
    let host = if host == "localhost" {
        "127.0.0.1"
    } else {
        host
    };
    let port = parsed.port().unwrap_or(5432);
    format!("{host}:{port}")
        .parse()
        .map_err(|e| LoadError::Usage(format!("{url}: the delay hop needs an IP address: {e}")))
}

/// `url` with its host and port replaced by `addr`.
fn rewrite(url: &str, addr: SocketAddr) -> Result<String, LoadError> {
    let mut parsed = url::Url::parse(url).map_err(|e| LoadError::Usage(format!("{url}: {e}")))?;
    parsed
        .set_host(Some(&addr.ip().to_string()))
        .map_err(|e| LoadError::Usage(format!("{url}: {e}")))?;
    parsed
        .set_port(Some(addr.port()))
        .map_err(|()| LoadError::Usage(format!("{url}: cannot set a port")))?;
    Ok(parsed.to_string())
}

/// pgbench `SELECT 1;` from one client for `duration`: its mean latency, ms.
fn select_one_ms(url: &str, duration: Duration) -> Result<f64, LoadError> {
    let dir = std::env::temp_dir().join(format!("chatlab-reach-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| LoadError::file(&dir, e))?;
    let script = dir.join("select1.sql");
    std::fs::write(&script, "SELECT 1;\n").map_err(|e| LoadError::file(&script, e))?;
    let out = Command::new("pgbench")
        .args(["-n", "-c", "1", "-T"])
        .arg(duration.as_secs().max(1).to_string())
        .arg("-f")
        .arg(&script)
        .arg(url)
        .output()
        .map_err(|e| LoadError::program("pgbench", format!("{e} (install postgresql-client)")))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(LoadError::program(
            "pgbench",
            format!("{stdout}{}", String::from_utf8_lossy(&out.stderr)),
        ));
    }
    parse_latency_ms(&stdout).ok_or_else(|| {
        LoadError::program("pgbench", format!("no latency in its output:\n{stdout}"))
    })
}

/// The `latency average = … ms` figure of pgbench's report.
fn parse_latency_ms(output: &str) -> Option<f64> {
    output
        .lines()
        .find_map(|l| l.trim_start().strip_prefix("latency average = "))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_pgbench_s_latency() {
        let out = "number of failed transactions: 0 (0.000%)\nlatency average = 0.021 ms\ninitial connection time = 2.1 ms\ntps = 47000.1 (without initial connection time)\n";
        assert_eq!(parse_latency_ms(out), Some(0.021));
        assert_eq!(parse_latency_ms("tps = 1"), None);
    }

    #[test]
    fn urls_are_pointed_at_the_hop() {
        let url = "postgres://postgres@127.0.0.1:5432/chatlab_load?application_name=x";
        assert_eq!(upstream_of(url).unwrap(), "127.0.0.1:5432".parse().unwrap());
        assert_eq!(
            rewrite(url, "127.0.0.1:40123".parse().unwrap()).unwrap(),
            "postgres://postgres@127.0.0.1:40123/chatlab_load?application_name=x"
        );
        assert_eq!(
            upstream_of("postgres://u@localhost/db").unwrap(),
            "127.0.0.1:5432".parse().unwrap()
        );
    }

    #[test]
    fn bad_distances_are_refused_naming_the_setting() {
        let args = |rtt: &str, jitter: &str| DistanceArgs {
            db_rtt: Some(rtt.to_owned()),
            db_jitter: jitter.to_owned(),
            delay_bin: PathBuf::new(),
            calibrate_for: Duration::from_secs(1),
        };
        let e = args("-1ms", "").distance().unwrap_err().to_string();
        assert!(e.contains("DB_RTT") && e.contains("negative"), "{e}");
        let e = args("fast", "").distance().unwrap_err().to_string();
        assert!(e.contains("DB_RTT") && e.contains("not a duration"), "{e}");
        let e = args("1ms", "2ms").distance().unwrap_err().to_string();
        assert!(
            e.contains("DB_JITTER") && e.contains("above the round trip"),
            "{e}"
        );
        assert_eq!(args("0", "").distance().unwrap(), None);
        assert!(args("1ms", "200us").distance().unwrap().is_some());
        let grid = parse_distances("0, 200us,1ms", "").unwrap();
        assert_eq!(grid.len(), 3);
        assert!(grid[0].is_none() && grid[2].is_some());
        assert!(parse_distances("1ms,-2ms", "").is_err());
        assert_eq!(show_ms(0.2), "0.2");
        assert_eq!(show_ms(1.0), "1");
        assert_eq!(show_ms(0.0), "0");
    }
}
