//! HAProxy in front of a fleet of chatlab instances, as a live tier runs
//! behind one: long-lived streams, `leastconn`, and active health checks
//! on each instance's `/readyz`, so a dead instance leaves the rotation
//! and its clients' reconnections go to the others.
//!
//! A process may hold 20,000 descriptors here, and a proxied stream costs
//! the balancer two (the client's and the instance's), so one HAProxy
//! process (Debian's 2.6 has threads, not processes) holds under 10,000
//! streams. The balancer is therefore several HAProxy processes with one
//! configuration, all bound to one port (HAProxy sets `SO_REUSEPORT` on
//! Linux): the kernel spreads new connections over them, each checks the
//! instances itself, and to a client it is one address.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::error::LoadError;
use crate::servers::fleet::send_signal;

/// Descriptors a balancer process keeps for itself beyond its streams.
const SPARE_FILES: usize = 200;

/// One instance behind the balancer.
#[derive(Debug, Clone)]
pub struct Backend {
    /// Its name in HAProxy's configuration and logs.
    pub name: String,
    /// Its public listener, `127.0.0.1:PORT`.
    pub address: String,
    /// The port of its operator listener, where `/readyz` is checked.
    pub check_port: u16,
    /// The loopback addresses the balancer connects to it from, a server
    /// line each. A connection from a bound source address takes its port
    /// from half the ephemeral range (some 14,000 ports here), and more
    /// streams than that to one instance from one address fail ("no free
    /// ports"): each instance gets addresses of its own.
    pub sources: Vec<String>,
}

/// How the balancer runs.
#[derive(Debug, Clone)]
pub struct BalancerSpec {
    /// The `haproxy` binary.
    pub binary: PathBuf,
    /// Where its configuration and logs go.
    pub dir: PathBuf,
    /// The instances.
    pub backends: Vec<Backend>,
    /// HAProxy processes sharing the port.
    pub processes: usize,
    /// Descriptors one process may hold (its `ulimit-n`).
    pub files_per_process: usize,
    /// Time between two health checks of an instance.
    pub check_every: Duration,
    /// Whether HAProxy sends each piece of a response as it comes
    /// (`option http-no-delay`); without it, HAProxy's default lets the
    /// kernel hold a small write while more may follow, and a live frame
    /// waits some 200 ms.
    pub no_delay: bool,
}

impl BalancerSpec {
    /// Streams one process may hold: two descriptors each, less its own.
    pub fn streams_per_process(&self) -> usize {
        self.files_per_process.saturating_sub(SPARE_FILES) / 2
    }

    /// Streams the whole balancer may hold.
    pub fn streams(&self) -> usize {
        self.streams_per_process() * self.processes
    }
}

/// A running balancer: its processes, and the URL clients use.
#[derive(Debug)]
pub struct Balancer {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    children: Vec<Child>,
}

impl Balancer {
    /// Writes the configuration and starts `spec.processes` HAProxy
    /// processes on one free port; returns once the port answers.
    pub async fn start(spec: &BalancerSpec) -> Result<Self, LoadError> {
        std::fs::create_dir_all(&spec.dir).map_err(|e| LoadError::file(&spec.dir, e))?;
        let port = crate::servers::fleet::free_port()?;
        let path = spec.dir.join("haproxy.cfg");
        std::fs::write(&path, config(spec, port)).map_err(|e| LoadError::file(&path, e))?;
        let mut children = Vec::with_capacity(spec.processes);
        for n in 0..spec.processes {
            let log = spec.dir.join(format!("haproxy-{n}.log"));
            let out = std::fs::File::create(&log).map_err(|e| LoadError::file(&log, e))?;
            let err = out.try_clone().map_err(|e| LoadError::file(&log, e))?;
            let child = Command::new(&spec.binary)
                .arg("-db")
                .arg("-f")
                .arg(&path)
                .stdin(Stdio::null())
                .stdout(out)
                .stderr(err)
                .spawn()
                .map_err(|e| LoadError::program("haproxy", e))?;
            children.push(child);
        }
        let balancer = Self {
            url: format!("http://127.0.0.1:{port}"),
            children,
        };
        let address = format!("127.0.0.1:{port}");
        let deadline = Instant::now() + Duration::from_secs(10);
        while tokio::net::TcpStream::connect(&address).await.is_err() {
            if Instant::now() > deadline {
                return Err(LoadError::program(
                    "haproxy",
                    format!("did not listen on {address}; see {}", spec.dir.display()),
                ));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(balancer)
    }

    /// The processes' ids.
    pub fn pids(&self) -> Vec<u32> {
        self.children.iter().map(Child::id).collect()
    }
}

impl Drop for Balancer {
    fn drop(&mut self) {
        for child in &mut self.children {
            let _ = send_signal(child.id(), "KILL");
            let _ = child.wait();
        }
    }
}

/// The configuration every process of the balancer runs.
fn config(spec: &BalancerSpec, port: u16) -> String {
    let check_ms = spec.check_every.as_millis().max(1);
    let servers: String = spec
        .backends
        .iter()
        .map(|b| {
            b.sources
                .iter()
                .enumerate()
                .map(|(k, source)| {
                    format!(
                        "    server {}-{k} {} check port {} source {source}\n",
                        b.name, b.address, b.check_port
                    )
                })
                .collect::<String>()
        })
        .collect();
    format!(
        "global\n\
         \x20   maxconn {maxconn}\n\
         \x20   ulimit-n {files}\n\
         \x20   nbthread 1\n\
         \x20   log stdout format raw local0\n\
         \n\
         defaults\n\
         \x20   mode http\n\
         \x20   log global\n\
         \x20   option httplog\n\
         {no_delay}\
         \x20   timeout connect 2s\n\
         \x20   timeout client 1h\n\
         \x20   timeout server 1h\n\
         \x20   timeout http-request 10s\n\
         \x20   timeout http-keep-alive 5s\n\
         \n\
         frontend live\n\
         \x20   bind 127.0.0.1:{port}\n\
         \x20   maxconn {maxconn}\n\
         \x20   default_backend chatlab\n\
         \n\
         backend chatlab\n\
         \x20   balance leastconn\n\
         \x20   option httpchk GET /readyz\n\
         \x20   http-check expect status 200\n\
         \x20   default-server inter {check_ms}ms fall 2 rise 2\n\
         {servers}",
        maxconn = spec.streams_per_process(),
        files = spec.files_per_process,
        no_delay = if spec.no_delay {
            "    option http-no-delay\n"
        } else {
            ""
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> BalancerSpec {
        BalancerSpec {
            binary: PathBuf::from("haproxy"),
            dir: PathBuf::from("x"),
            backends: (0..2)
                .map(|n| Backend {
                    name: format!("s{n}"),
                    address: format!("127.0.0.1:{}", 8000 + n),
                    check_port: 9000 + n,
                    sources: vec![format!("127.0.1.{}", n + 1), format!("127.0.2.{}", n + 1)],
                })
                .collect(),
            processes: 11,
            files_per_process: 20_000,
            check_every: Duration::from_millis(500),
            no_delay: true,
        }
    }

    #[test]
    fn each_process_holds_what_its_descriptors_allow() {
        let spec = spec();
        assert_eq!(spec.streams_per_process(), 9_900);
        assert!(spec.streams() >= 100_000, "{}", spec.streams());
    }

    #[test]
    fn the_configuration_checks_every_instance_on_its_readyz() {
        let text = config(&spec(), 7000);
        assert!(text.contains("    bind 127.0.0.1:7000\n"), "{text}");
        assert!(text.contains("    maxconn 9900\n"), "{text}");
        assert!(text.contains("    ulimit-n 20000\n"), "{text}");
        assert!(text.contains("    option httpchk GET /readyz\n"), "{text}");
        // Each stream's end is logged with its termination state, so a cut
        // nobody made says which side made it.
        assert!(text.contains("    option httplog\n"), "{text}");
        // A live frame must not wait for more data to fill a packet.
        assert!(text.contains("    option http-no-delay\n"), "{text}");
        assert!(
            text.contains("    server s1-1 127.0.0.1:8001 check port 9001 source 127.0.2.2\n"),
            "{text}"
        );
        assert!(text.contains("inter 500ms fall 2 rise 2"), "{text}");
        let default = config(
            &BalancerSpec {
                no_delay: false,
                ..spec()
            },
            7000,
        );
        assert!(!default.contains("http-no-delay"), "{default}");
    }
}
