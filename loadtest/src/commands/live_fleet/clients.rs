//! The client processes of `live-fleet`: each a `chatlab-load
//! live-clients` child with its share of the tokens and a loopback address
//! of its own, started together, awaited until each says `ready`, and
//! stopped with SIGTERM, after which their records are read back.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command};

use crate::commands::live_clients::{Record, read_records};
use crate::error::LoadError;
use crate::servers::fleet::send_signal;

/// How long the clients have to open their streams.
const OPEN_WITHIN: Duration = Duration::from_secs(600);

/// Running client processes, killed if still running when dropped.
pub(super) struct Clients {
    children: Vec<Child>,
    outs: Vec<PathBuf>,
}

impl Drop for Clients {
    fn drop(&mut self) {
        for child in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Clients {
    /// Starts `processes` clients over `tokens` (stream `i` holds token
    /// `i`), the `n`th from 127.0.0.(10 + n), and waits until every one
    /// has opened its streams.
    pub(super) async fn start(
        dir: &Path,
        url: &str,
        tokens: &[String],
        processes: usize,
    ) -> Result<Self, LoadError> {
        std::fs::create_dir_all(dir).map_err(|e| LoadError::file(dir, e))?;
        let me = std::env::current_exe().map_err(|e| LoadError::program("live-fleet", e))?;
        let share = tokens.len().div_ceil(processes.max(1));
        let mut clients = Self {
            children: Vec::new(),
            outs: Vec::new(),
        };
        for (n, chunk) in tokens.chunks(share.max(1)).enumerate() {
            let first = n * share;
            let list = dir.join(format!("tokens-{n}"));
            let text: String = chunk
                .iter()
                .enumerate()
                .map(|(i, token)| format!("{} {token}\n", first + i))
                .collect();
            std::fs::write(&list, text).map_err(|e| LoadError::file(&list, e))?;
            let out = dir.join(format!("records-{n}"));
            let log = dir.join(format!("client-{n}.log"));
            let log = std::fs::File::create(&log).map_err(|e| LoadError::file(&log, e))?;
            let child = Command::new(&me)
                .arg("live-clients")
                .arg("--url")
                .arg(url)
                .arg("--tokens")
                .arg(&list)
                .arg("--source")
                .arg(format!("127.0.0.{}", 10 + n))
                .arg("--out")
                .arg(&out)
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(log)
                .spawn()
                .map_err(|e| LoadError::program("live-clients", e))?;
            clients.children.push(child);
            clients.outs.push(out);
        }
        let mut waiting = Vec::new();
        for child in &mut clients.children {
            let Some(stdout) = child.stdout.take() else {
                return Err(LoadError::program("live-clients", "no stdout"));
            };
            waiting.push(tokio::task::spawn_blocking(move || {
                BufReader::new(stdout)
                    .lines()
                    .map_while(Result::ok)
                    .any(|line| line.starts_with("ready"))
            }));
        }
        for wait in waiting {
            let ready = tokio::time::timeout(OPEN_WITHIN, wait).await;
            if !matches!(ready, Ok(Ok(true))) {
                return Err(LoadError::program(
                    "live-clients",
                    format!("a client did not open its streams; see {}", dir.display()),
                ));
            }
        }
        Ok(clients)
    }

    /// The client processes' ids.
    pub(super) fn pids(&self) -> Vec<u32> {
        self.children.iter().map(Child::id).collect()
    }

    /// Stops every client (SIGTERM, then their exit) and reads their
    /// records.
    pub(super) async fn stop(&mut self) -> Result<Vec<Record>, LoadError> {
        for child in &self.children {
            let _ = send_signal(child.id(), "TERM");
        }
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        for child in &mut self.children {
            while std::time::Instant::now() < deadline {
                if let Ok(Some(_)) = child.try_wait() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
        let mut records = Vec::new();
        for out in &self.outs {
            records.extend(read_records(out)?);
        }
        Ok(records)
    }
}
