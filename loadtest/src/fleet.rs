//! Starting and stopping chatlab servers for an experiment: the harness
//! owns them, so a matrix can restart them with another pool size, and it
//! knows their pids for RSS and CPU.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A server the harness started.
#[derive(Debug)]
pub struct Server {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    /// Its process id.
    pub pid: u32,
    child: Child,
}

/// Servers that stop (SIGTERM, then SIGKILL) when dropped.
#[derive(Debug, Default)]
pub struct Fleet {
    /// The servers.
    pub servers: Vec<Server>,
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
    pub async fn start(spec: &FleetSpec, client: &reqwest::Client) -> Result<Self, String> {
        std::fs::create_dir_all(&spec.log_dir)
            .map_err(|e| format!("cannot create {}: {e}", spec.log_dir.display()))?;
        let mut fleet = Fleet::default();
        for i in 0..spec.count {
            let port = free_port()?;
            let log_path = spec.log_dir.join(format!("server-{i}.log"));
            let log = std::fs::File::create(&log_path)
                .map_err(|e| format!("cannot create {}: {e}", log_path.display()))?;
            let log_err = log
                .try_clone()
                .map_err(|e| format!("cannot share {}: {e}", log_path.display()))?;
            let child = Command::new(&spec.binary)
                .arg("serve")
                .envs(spec.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
                .env("HTTP_ADDR", format!("127.0.0.1:{port}"))
                .stdin(Stdio::null())
                .stdout(log)
                .stderr(log_err)
                .spawn()
                .map_err(|e| format!("cannot start {}: {e}", spec.binary.display()))?;
            fleet.servers.push(Server {
                url: format!("http://127.0.0.1:{port}"),
                pid: child.id(),
                child,
            });
        }
        let deadline = Instant::now() + Duration::from_secs(60);
        for (i, server) in fleet.servers.iter_mut().enumerate() {
            loop {
                if let Ok(Some(status)) = server.child.try_wait() {
                    return Err(format!(
                        "server {i} exited ({status}); see {}",
                        spec.log_dir.join(format!("server-{i}.log")).display()
                    ));
                }
                let ready = client
                    .get(format!("{}/readyz", server.url))
                    .timeout(Duration::from_secs(2))
                    .send()
                    .await
                    .is_ok_and(|r| r.status().is_success());
                if ready {
                    break;
                }
                if Instant::now() > deadline {
                    return Err(format!("server {i} at {} never became ready", server.url));
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
        Ok(fleet)
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
            let _ = Command::new("kill")
                .arg("-TERM")
                .arg(server.pid.to_string())
                .status();
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

fn free_port() -> Result<u16, String> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| format!("no free port: {e}"))
}
