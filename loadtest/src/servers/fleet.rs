//! Starting and stopping chatlab servers for an experiment: the harness
//! owns them, so a matrix can restart them with another pool size, and it
//! knows their pids for RSS and CPU.
//!
//! Each server listens twice: its public port (`HTTP_ADDR`), where the
//! load goes, and its operator port (`OPS_ADDR`), where `/metrics`,
//! `/audit` and `POST /v1/users/bulk` answer. Every server of a fleet gets
//! the same `CHATLAB_JWT_SECRET`, which the harness made up for the run, so
//! a token it signs for a seeded user holds on any of them.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::error::LoadError;
use crate::load::auth::Signer;

/// A server the harness started.
#[derive(Debug)]
pub struct Server {
    /// `http://127.0.0.1:PORT`: the public listener.
    pub url: String,
    /// `http://127.0.0.1:PORT` of its operator listener (`OPS_ADDR`).
    pub ops_url: String,
    /// Its process id.
    pub pid: u32,
    port: u16,
    ops_port: u16,
    child: Child,
}

/// Servers someone else runs (`--target`): where the load goes, where
/// their operator listeners answer, and their token secret.
#[derive(Debug, Clone)]
pub struct External {
    /// Public URLs, loaded round robin.
    pub targets: Vec<String>,
    /// Operator URLs (`OPS_ADDR`): scraped, audited, and the first one
    /// seeds users.
    pub ops: Vec<String>,
    /// Signs tokens with their `CHATLAB_JWT_SECRET`.
    pub signer: Arc<Signer>,
}

/// Servers that stop (SIGTERM, then SIGKILL) when dropped.
#[derive(Debug, Default)]
pub struct Fleet {
    /// The servers.
    pub servers: Vec<Server>,
    spec: Option<FleetSpec>,
}

/// How to start servers.
#[derive(Debug, Clone)]
pub struct FleetSpec {
    /// The `chatlab` binary.
    pub binary: PathBuf,
    /// How many instances, on consecutive free ports.
    pub count: usize,
    /// Env vars for every instance (on top of the harness's own).
    pub env: Vec<(String, String)>,
    /// Where their logs go.
    pub log_dir: PathBuf,
    /// Signs the seeded users' tokens; its secret and issuer are given to
    /// every instance (`CHATLAB_JWT_SECRET`, `CHATLAB_JWT_ISSUER`).
    pub signer: Arc<Signer>,
}

impl FleetSpec {
    /// The same servers, pointed at the database `url` (a delay hop's).
    pub fn with_database_url(mut self, url: &str) -> Self {
        self.env.retain(|(k, _)| k != "DATABASE_URL");
        self.env.push(("DATABASE_URL".to_owned(), url.to_owned()));
        self
    }
}

impl Fleet {
    /// Starts the servers and waits until each answers `/readyz`.
    pub async fn start(spec: &FleetSpec, client: &reqwest::Client) -> Result<Self, LoadError> {
        std::fs::create_dir_all(&spec.log_dir).map_err(|e| LoadError::file(&spec.log_dir, e))?;
        let mut fleet = Fleet {
            servers: Vec::with_capacity(spec.count),
            spec: Some(spec.clone()),
        };
        let ports = free_ports(2 * spec.count)?;
        for (index, pair) in ports.chunks_exact(2).enumerate() {
            fleet.servers.push(spawn(spec, index, pair[0], pair[1])?);
        }
        for index in 0..fleet.servers.len() {
            fleet.wait_ready(index, client).await?;
        }
        Ok(fleet)
    }

    /// Waits until server `index` answers `/readyz` on both its listeners
    /// (60 s at most).
    pub async fn wait_ready(
        &mut self,
        index: usize,
        client: &reqwest::Client,
    ) -> Result<(), LoadError> {
        let log = self.log_path(index);
        let server = self
            .servers
            .get_mut(index)
            .ok_or_else(|| LoadError::server(index.to_string(), "no such server"))?;
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Ok(Some(status)) = server.child.try_wait() {
                return Err(LoadError::server(
                    server.url.clone(),
                    format!("exited ({status}); see {}", log.display()),
                ));
            }
            let public = answers_ready(client, &server.url).await;
            let ops = public && answers_ready(client, &server.ops_url).await;
            if ops {
                return Ok(());
            }
            if Instant::now() > deadline {
                let message = if public {
                    format!(
                        "its operator listener ({}, OPS_ADDR) never answered /readyz (60 s); see {}",
                        server.ops_url,
                        log.display()
                    )
                } else {
                    format!("never became ready (60 s); see {}", log.display())
                };
                return Err(LoadError::server(server.url.clone(), message));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Sends `signal` (`KILL`, `TERM`, `STOP`, `CONT`) to server `index`.
    pub fn signal(&self, index: usize, signal: &str) -> Result<(), LoadError> {
        let server = self
            .servers
            .get(index)
            .ok_or_else(|| LoadError::server(index.to_string(), "no such server"))?;
        send_signal(server.pid, signal)
    }

    /// Waits up to `limit` for server `index` to exit; its exit status, or
    /// `None` when it is still running.
    pub async fn wait_exit(
        &mut self,
        index: usize,
        limit: Duration,
    ) -> Option<std::process::ExitStatus> {
        let server = self.servers.get_mut(index)?;
        let deadline = Instant::now() + limit;
        loop {
            if let Ok(Some(status)) = server.child.try_wait() {
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Starts server `index` again on the same ports (after it exited), and
    /// waits until it is ready. Its log is appended to.
    pub async fn restart(
        &mut self,
        index: usize,
        client: &reqwest::Client,
    ) -> Result<(), LoadError> {
        let spec = self.spec.clone().ok_or_else(|| {
            LoadError::server(index.to_string(), "this fleet was not started here")
        })?;
        let (port, ops_port) = self
            .servers
            .get(index)
            .map(|s| (s.port, s.ops_port))
            .ok_or_else(|| LoadError::server(index.to_string(), "no such server"))?;
        let mut old = std::mem::replace(
            &mut self.servers[index],
            spawn(&spec, index, port, ops_port)?,
        );
        let _ = old.child.kill();
        let _ = old.child.wait();
        self.wait_ready(index, client).await
    }

    fn log_path(&self, index: usize) -> PathBuf {
        self.spec
            .as_ref()
            .map(|s| s.log_dir.join(format!("server-{index}.log")))
            .unwrap_or_default()
    }

    /// The first server started, where a command that needs one server
    /// sends its load and seeds its users; a usage error when none started.
    pub fn first(&self) -> Result<&Server, LoadError> {
        self.servers
            .first()
            .ok_or_else(|| LoadError::Usage("no server started".into()))
    }

    /// The servers' public URLs.
    pub fn urls(&self) -> Vec<String> {
        self.servers.iter().map(|s| s.url.clone()).collect()
    }

    /// The servers' operator URLs, in the order of [`Fleet::urls`].
    pub fn ops_urls(&self) -> Vec<String> {
        self.servers.iter().map(|s| s.ops_url.clone()).collect()
    }

    /// The servers' pids.
    pub fn pids(&self) -> Vec<Option<u32>> {
        self.servers.iter().map(|s| Some(s.pid)).collect()
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        for server in &mut self.servers {
            // SIGTERM lets the server drain; `kill` is the only portable
            // way to send it without unsafe code.
            let _ = send_signal(server.pid, "TERM");
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        for server in &mut self.servers {
            while Instant::now() < deadline {
                if let Ok(Some(_)) = server.child.try_wait() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = server.child.kill();
            let _ = server.child.wait();
        }
    }
}

/// Whether `base` answers `GET /readyz` with a success (2 s at most).
async fn answers_ready(client: &reqwest::Client, base: &str) -> bool {
    client
        .get(format!("{base}/readyz"))
        .timeout(Duration::from_secs(2))
        .send()
        .await
        .is_ok_and(|r| r.status().is_success())
}

/// The env the harness gives server `port`/`ops_port` on top of the
/// spec's, set last so that it wins: the listeners, and the algorithm,
/// secret and issuer of the tokens the harness signs.
fn own_env(spec: &FleetSpec, port: u16, ops_port: u16) -> [(&'static str, String); 5] {
    [
        ("HTTP_ADDR", format!("127.0.0.1:{port}")),
        ("OPS_ADDR", format!("127.0.0.1:{ops_port}")),
        ("CHATLAB_JWT_ALGORITHM", "HS256".to_owned()),
        ("CHATLAB_JWT_SECRET", spec.signer.secret().to_owned()),
        ("CHATLAB_JWT_ISSUER", spec.signer.issuer().to_owned()),
    ]
}

/// Key files an inherited environment might name: they are for EdDSA or
/// RS256, and the harness signs HS256, so its servers never get them.
const KEY_FILE_VARS: [&str; 2] = [
    "CHATLAB_JWT_PUBLIC_KEY_FILE",
    "CHATLAB_JWT_PRIVATE_KEY_FILE",
];

/// A child's stdout and stderr, both appended to the log at `path`.
pub(crate) fn append_log(path: &Path) -> Result<(std::fs::File, std::fs::File), LoadError> {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| LoadError::file(path, e))?;
    let log_err = log.try_clone().map_err(|e| LoadError::file(path, e))?;
    Ok((log, log_err))
}

/// Starts server `index` of `spec` on `port` (public) and `ops_port`
/// (operator), its output appended to its log.
fn spawn(spec: &FleetSpec, index: usize, port: u16, ops_port: u16) -> Result<Server, LoadError> {
    let log_path = spec.log_dir.join(format!("server-{index}.log"));
    let (log, log_err) = append_log(&log_path)?;
    let child = Command::new(&spec.binary)
        .arg("serve")
        .envs(spec.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .env_remove(KEY_FILE_VARS[0])
        .env_remove(KEY_FILE_VARS[1])
        .envs(own_env(spec, port, ops_port))
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(log_err)
        .spawn()
        .map_err(|e| LoadError::program(spec.binary.display().to_string(), e))?;
    Ok(Server {
        url: format!("http://127.0.0.1:{port}"),
        ops_url: format!("http://127.0.0.1:{ops_port}"),
        pid: child.id(),
        port,
        ops_port,
        child,
    })
}

/// `kill -SIGNAL pid`: the only portable way to send a signal without
/// unsafe code.
pub fn send_signal(pid: u32, signal: &str) -> Result<(), LoadError> {
    let status = Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(pid.to_string())
        .status()
        .map_err(|e| LoadError::program(format!("kill -{signal} {pid}"), e))?;
    if status.success() {
        Ok(())
    } else {
        Err(LoadError::program(format!("kill -{signal} {pid}"), status))
    }
}

/// A free loopback port.
pub fn free_port() -> Result<u16, LoadError> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| LoadError::server("127.0.0.1:0", format!("no free port: {e}")))
}

/// `n` distinct free loopback ports: every listener is held until all are
/// found, so no port is handed out twice.
pub fn free_ports(n: usize) -> Result<Vec<u16>, LoadError> {
    let listeners = (0..n)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0"))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| LoadError::server("127.0.0.1:0", format!("no free port: {e}")))?;
    listeners
        .iter()
        .map(|l| l.local_addr().map(|a| a.port()))
        .collect::<Result<_, _>>()
        .map_err(|e| LoadError::server("127.0.0.1:0", format!("no free port: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_ports_are_distinct() {
        let ports = free_ports(8).unwrap();
        let unique: std::collections::HashSet<_> = ports.iter().collect();
        assert_eq!(unique.len(), 8);
        assert!(ports.iter().all(|&p| p > 0));
    }

    #[test]
    fn servers_get_both_listeners_and_the_fleets_secret_last() {
        let signer = Arc::new(Signer::generate("lab").unwrap());
        let spec = FleetSpec {
            binary: PathBuf::from("chatlab"),
            count: 2,
            // The harness's own settings win over the same names given
            // as extra env.
            env: vec![("OPS_ADDR".into(), "0.0.0.0:1".into())],
            log_dir: PathBuf::from("logs"),
            signer: signer.clone(),
        };
        let env = own_env(&spec, 18080, 19464);
        assert_eq!(env[0], ("HTTP_ADDR", "127.0.0.1:18080".to_owned()));
        assert_eq!(env[1], ("OPS_ADDR", "127.0.0.1:19464".to_owned()));
        assert_eq!(env[2], ("CHATLAB_JWT_ALGORITHM", "HS256".to_owned()));
        assert_eq!(env[3], ("CHATLAB_JWT_SECRET", signer.secret().to_owned()));
        assert_eq!(env[4], ("CHATLAB_JWT_ISSUER", "lab".to_owned()));
    }
}
