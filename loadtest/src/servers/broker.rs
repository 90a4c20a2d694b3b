//! The tansu broker an experiment starts, owns and can kill, restart or
//! freeze (`fault`, `delivery`).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::error::LoadError;
use crate::servers::fleet::{append_log, send_signal};

/// tansu's storage engine for a run's broker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum BrokerStorage {
    /// SQLite in the cell's directory: survives a kill.
    Sqlite,
    /// In memory: forgets everything when the process ends, and loses some
    /// acknowledged records under pipelined produce (the audit tells those
    /// apart); handles a producer epoch bump, which SQLite does not.
    Memory,
}

/// A tansu broker the experiment owns, so it can be killed and started
/// again, or frozen.
#[derive(Debug)]
pub struct Broker {
    binary: PathBuf,
    dir: PathBuf,
    storage: BrokerStorage,
    /// `127.0.0.1:PORT`.
    pub address: String,
    child: Child,
}

impl Broker {
    /// Starts tansu on a free port, its log (and SQLite storage) in `dir`.
    pub async fn start(
        binary: &Path,
        dir: &Path,
        storage: BrokerStorage,
    ) -> Result<Self, LoadError> {
        std::fs::create_dir_all(dir).map_err(|e| LoadError::file(dir, e))?;
        let port = crate::servers::fleet::free_port()?;
        let address = format!("127.0.0.1:{port}");
        let child = spawn_tansu(binary, dir, &address, storage)?;
        let broker = Self {
            binary: binary.to_owned(),
            dir: dir.to_owned(),
            storage,
            address,
            child,
        };
        if !broker.wait_listening(Duration::from_secs(30)).await {
            return Err(LoadError::program(
                "tansu",
                format!(
                    "did not listen on {}; see {}",
                    broker.address,
                    dir.join("tansu.log").display()
                ),
            ));
        }
        Ok(broker)
    }

    async fn wait_listening(&self, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if tokio::net::TcpStream::connect(&self.address).await.is_ok() {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        false
    }

    /// The broker's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends `signal` to the broker's process (`STOP` freezes it, `CONT`
    /// thaws it).
    pub(crate) fn signal(&self, signal: &str) -> Result<(), LoadError> {
        send_signal(self.child.id(), signal)
    }

    /// Kills the broker (SIGKILL), waits `down`, and starts it again on
    /// the same address and storage.
    pub(crate) async fn kill_and_restart(&mut self, down: Duration) -> Result<(), LoadError> {
        self.child
            .kill()
            .map_err(|e| LoadError::program("kill tansu", e))?;
        let _ = self.child.wait();
        tokio::time::sleep(down).await;
        self.child = spawn_tansu(&self.binary, &self.dir, &self.address, self.storage)?;
        if self.wait_listening(Duration::from_secs(30)).await {
            Ok(())
        } else {
            Err(LoadError::program(
                "tansu",
                format!("did not listen on {} again within 30 s", self.address),
            ))
        }
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        let _ = send_signal(self.child.id(), "CONT");
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts tansu listening on `address`, its log appended to `dir/tansu.log`.
fn spawn_tansu(
    binary: &Path,
    dir: &Path,
    address: &str,
    storage: BrokerStorage,
) -> Result<Child, LoadError> {
    let log_path = dir.join("tansu.log");
    let (log, log_err) = append_log(&log_path)?;
    Command::new(binary)
        .current_dir(dir)
        .args([
            "broker",
            "--listener-url",
            &format!("tcp://{address}"),
            "--advertised-listener-url",
            &format!("tcp://{address}"),
            "--storage-engine",
            match storage {
                BrokerStorage::Sqlite => "sqlite://tansu.db",
                BrokerStorage::Memory => "memory://tansu/",
            },
        ])
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(log_err)
        .spawn()
        .map_err(|e| LoadError::program(binary.display().to_string(), e))
}
