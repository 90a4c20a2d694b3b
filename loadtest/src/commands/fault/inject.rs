//! The faults themselves, done for real: a PostgreSQL cluster restarted,
//! stopped or its sessions terminated; a broker killed or frozen; the
//! chatlab server killed or asked to stop.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::str::FromStr;
use std::time::{Duration, Instant};

use crate::error::LoadError;
use crate::servers::broker::Broker;
use crate::servers::fleet::Fleet;
use crate::servers::reach::Reach;

/// Which fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// PostgreSQL restarted with a fast shutdown.
    DbRestart,
    /// Every chatlab session ended by `pg_terminate_backend`.
    DbTerminate,
    /// PostgreSQL stopped for the down time, then started.
    DbStop,
    /// The network to PostgreSQL dead for the down time: the delay hop
    /// stops forwarding without closing anything (no reset, no FIN), then
    /// forwards again.
    DbBlackhole,
    /// The broker killed (SIGKILL) for the down time, then started on its
    /// storage.
    BrokerKill,
    /// The broker frozen (SIGSTOP) for the down time, then resumed.
    BrokerFreeze,
    /// The chatlab server killed (SIGKILL), then started again.
    ServerKill,
    /// The chatlab server asked to stop (SIGTERM) under load, then started
    /// again.
    ServerTerm,
    /// Clients hang up at random points; nothing else fails.
    Cancel,
    /// Nothing: a steady load (the soak).
    None,
}

impl Fault {
    /// Its name on the command line and in the tables.
    pub fn name(self) -> &'static str {
        match self {
            Self::DbRestart => "db-restart",
            Self::DbTerminate => "db-terminate",
            Self::DbStop => "db-stop",
            Self::DbBlackhole => "db-blackhole",
            Self::BrokerKill => "broker-kill",
            Self::BrokerFreeze => "broker-freeze",
            Self::ServerKill => "server-kill",
            Self::ServerTerm => "server-term",
            Self::Cancel => "cancel",
            Self::None => "soak",
        }
    }
}

impl FromStr for Fault {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        [
            Self::DbRestart,
            Self::DbTerminate,
            Self::DbStop,
            Self::DbBlackhole,
            Self::BrokerKill,
            Self::BrokerFreeze,
            Self::ServerKill,
            Self::ServerTerm,
            Self::Cancel,
            Self::None,
        ]
        .into_iter()
        .find(|f| f.name() == s)
        .ok_or_else(|| {
            format!(
                "unknown fault {s:?}: db-restart, db-terminate, db-stop, db-blackhole, \
                 broker-kill, broker-freeze, server-kill, server-term, cancel, soak"
            )
        })
    }
}

/// When the fault began and when what it took away answered again, from
/// the start of the run.
#[derive(Debug, Clone, Copy, Default)]
pub struct Timeline {
    /// The fault began.
    pub down_at: Option<Duration>,
    /// It answered again (PostgreSQL accepts a query, the broker's port a
    /// connection, the server `/readyz`).
    pub back_at: Option<Duration>,
    /// SIGTERM only: how long the server took to exit, and its exit code.
    pub exit: Option<(Duration, Option<i32>)>,
}

/// The private PostgreSQL cluster under test.
#[derive(Debug, Clone)]
pub struct Database {
    /// Its URL (the database chatlab uses).
    pub url: String,
    /// `scripts/pg-private.sh`.
    pub script: PathBuf,
    /// The cluster's port.
    pub port: u16,
}

impl Database {
    fn control(&self, action: &str) -> Result<(), LoadError> {
        let program = format!("{} {action} {}", self.script.display(), self.port);
        let status = Command::new(&self.script)
            .args([action, &self.port.to_string()])
            .status()
            .map_err(|e| LoadError::program(&program, e))?;
        if status.success() {
            Ok(())
        } else {
            Err(LoadError::program(program, status))
        }
    }

    /// Runs `sql` with psql; its unaligned output.
    pub fn psql(&self, sql: &str) -> Result<String, LoadError> {
        psql(&self.url, sql)
    }

    /// Waits until the database answers a query (deadline `limit`).
    async fn wait_answers(&self, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if self.psql("SELECT 1").is_ok_and(|out| out.trim() == "1") {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        false
    }
}

/// Runs `sql` (several statements allowed, fed on stdin) against `url`,
/// stopping at the first error; the unaligned, tuples-only output.
pub fn psql(url: &str, sql: &str) -> Result<String, LoadError> {
    use std::io::Write;
    let mut child = Command::new("psql")
        .args(["-X", "-q", "-t", "-A", "-v", "ON_ERROR_STOP=1", url])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| LoadError::program("psql", e))?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(sql.as_bytes())
            .map_err(|e| LoadError::program("psql", e))?;
    }
    let out = child
        .wait_with_output()
        .map_err(|e| LoadError::program("psql", e))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(LoadError::program(
            "psql",
            String::from_utf8_lossy(&out.stderr).trim(),
        ))
    }
}

/// What a fault acts on.
pub struct Targets<'a> {
    /// The database.
    pub database: &'a Database,
    /// The servers' way to it, through a hop that can blackhole it.
    pub reach: &'a Reach,
    /// The broker, when the run has one of its own.
    pub broker: Option<&'a mut Broker>,
    /// The chatlab servers (the first one is the fault's target).
    pub fleet: &'a mut Fleet,
    /// A client for `/readyz`.
    pub client: &'a reqwest::Client,
}

/// Does `fault` at once, keeps it for `down` where it has a duration, and
/// brings back what it took; times are from `started`.
pub async fn inject(
    fault: Fault,
    down: Duration,
    targets: Targets<'_>,
    started: Instant,
) -> Result<Timeline, LoadError> {
    let mut timeline = Timeline {
        down_at: Some(started.elapsed()),
        ..Timeline::default()
    };
    let Targets {
        database,
        reach,
        broker,
        fleet,
        client,
    } = targets;
    match fault {
        Fault::DbRestart => {
            database.control("restart")?;
            database.wait_answers(Duration::from_secs(60)).await;
        }
        Fault::DbStop => {
            database.control("stop")?;
            tokio::time::sleep(down).await;
            database.control("start")?;
            database.wait_answers(Duration::from_secs(60)).await;
        }
        Fault::DbBlackhole => {
            reach.blackhole(true).await?;
            tokio::time::sleep(down).await;
            reach.blackhole(false).await?;
            database.wait_answers(Duration::from_secs(60)).await;
        }
        Fault::DbTerminate => {
            // pg_terminate_backend only signals: the fault is over when the
            // sessions are gone, not when the signals are sent.
            let pids = database.psql(
                "WITH victims AS MATERIALIZED (SELECT pid FROM pg_stat_activity \
                 WHERE datname = current_database() AND pid <> pg_backend_pid() \
                 AND backend_type = 'client backend') \
                 SELECT string_agg(pid::text, ',') FROM victims WHERE pg_terminate_backend(pid)",
            )?;
            let pids = pids.trim();
            if !pids.is_empty() {
                let gone = format!("SELECT count(*) FROM pg_stat_activity WHERE pid IN ({pids})");
                let deadline = Instant::now() + Duration::from_secs(10);
                while Instant::now() < deadline
                    && !database.psql(&gone).is_ok_and(|n| n.trim() == "0")
                {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            }
        }
        Fault::BrokerKill => {
            broker
                .ok_or_else(|| {
                    LoadError::Usage(
                        "broker-kill needs a broker of the run's own (--tansu-bin)".into(),
                    )
                })?
                .kill_and_restart(down)
                .await?;
        }
        Fault::BrokerFreeze => {
            let broker = broker.ok_or_else(|| {
                LoadError::Usage(
                    "broker-freeze needs a broker of the run's own (--tansu-bin)".into(),
                )
            })?;
            broker.signal("STOP")?;
            tokio::time::sleep(down).await;
            broker.signal("CONT")?;
        }
        Fault::ServerKill => {
            fleet.signal(0, "KILL")?;
            fleet.wait_exit(0, Duration::from_secs(10)).await;
            tokio::time::sleep(down).await;
            fleet.restart(0, client).await?;
        }
        Fault::ServerTerm => {
            let asked = Instant::now();
            fleet.signal(0, "TERM")?;
            let status = fleet.wait_exit(0, Duration::from_secs(120)).await;
            timeline.exit = status.map(|s| (asked.elapsed(), s.code()));
            tokio::time::sleep(down).await;
            fleet.restart(0, client).await?;
        }
        Fault::Cancel | Fault::None => {
            timeline.down_at = None;
            return Ok(timeline);
        }
    }
    timeline.back_at = Some(started.elapsed());
    Ok(timeline)
}
