//! Starting and stopping chatlab servers for an experiment: the harness
//! owns them, so a matrix can restart them with another pool size, and it
//! knows their pids for RSS and CPU.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::error::LoadError;

/// A server the harness started.
#[derive(Debug)]
pub struct Server {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    /// Its process id.
    pub pid: u32,
    port: u16,
    child: Child,
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
}

impl Fleet {
    /// Starts the servers and waits until each answers `/readyz`.
    pub async fn start(spec: &FleetSpec, client: &reqwest::Client) -> Result<Self, LoadError> {
        std::fs::create_dir_all(&spec.log_dir).map_err(|e| LoadError::file(&spec.log_dir, e))?;
        let mut fleet = Fleet {
            servers: Vec::with_capacity(spec.count),
            spec: Some(spec.clone()),
        };
        for index in 0..spec.count {
            fleet.servers.push(spawn(spec, index, free_port()?)?);
        }
        for index in 0..fleet.servers.len() {
            fleet.wait_ready(index, client).await?;
        }
        Ok(fleet)
    }

    /// Waits until server `index` answers `/readyz` (60 s at most).
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
            let ready = client
                .get(format!("{}/readyz", server.url))
                .timeout(Duration::from_secs(2))
                .send()
                .await
                .is_ok_and(|r| r.status().is_success());
            if ready {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(LoadError::server(
                    server.url.clone(),
                    "never became ready (60 s)",
                ));
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

    /// Starts server `index` again on the same port (after it exited), and
    /// waits until it is ready. Its log is appended to.
    pub async fn restart(
        &mut self,
        index: usize,
        client: &reqwest::Client,
    ) -> Result<(), LoadError> {
        let spec = self.spec.clone().ok_or_else(|| {
            LoadError::server(index.to_string(), "this fleet was not started here")
        })?;
        let port = self
            .servers
            .get(index)
            .map(|s| s.port)
            .ok_or_else(|| LoadError::server(index.to_string(), "no such server"))?;
        let mut old = std::mem::replace(&mut self.servers[index], spawn(&spec, index, port)?);
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

    /// The servers' URLs.
    pub fn urls(&self) -> Vec<String> {
        self.servers.iter().map(|s| s.url.clone()).collect()
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

/// Starts server `index` of `spec` on `port`, its output appended to its log.
fn spawn(spec: &FleetSpec, index: usize, port: u16) -> Result<Server, LoadError> {
    let log_path = spec.log_dir.join(format!("server-{index}.log"));
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log_path)
        .map_err(|e| LoadError::file(&log_path, e))?;
    let log_err = log.try_clone().map_err(|e| LoadError::file(&log_path, e))?;
    let child = Command::new(&spec.binary)
        .arg("serve")
        .envs(spec.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .env("HTTP_ADDR", format!("127.0.0.1:{port}"))
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(log_err)
        .spawn()
        .map_err(|e| LoadError::program(spec.binary.display().to_string(), e))?;
    Ok(Server {
        url: format!("http://127.0.0.1:{port}"),
        pid: child.id(),
        port,
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
