//! A tansu broker of one test's own, on a free loopback port, so the test
//! can freeze it (`SIGSTOP`: a hung broker, or a partition) and resume it
//! without touching the broker the other tests share.
//!
//! The binary is `TANSU_BIN` (`make test` sets it to the one
//! `scripts/ensure-tansu.sh` installs), else that install's path.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct PrivateBroker {
    dir: PathBuf,
    port: u16,
    child: Child,
}

fn tansu_bin() -> PathBuf {
    if let Some(bin) = std::env::var_os("TANSU_BIN") {
        return PathBuf::from(bin);
    }
    let home = std::env::var_os("HOME").unwrap_or_default();
    let bin = PathBuf::from(home).join(".cache/chatlab/tansu-0.6.0-dynostore-libsql/bin/tansu");
    assert!(
        bin.exists(),
        "no tansu at {} and TANSU_BIN is unset: run `make test`, which installs it",
        bin.display()
    );
    bin
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

fn signal(pid: u32, sig: &str) {
    let status = Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(pid.to_string())
        .status()
        .expect("kill runs");
    assert!(status.success(), "kill -{sig} {pid} failed");
}

impl PrivateBroker {
    /// Starts a broker on tansu's in-memory engine and waits until it
    /// answers.
    pub async fn start() -> Self {
        let bin = tansu_bin();
        let port = free_port();
        let dir =
            std::env::temp_dir().join(format!("chatlab-tansu-{port}-{}", uuid::Uuid::now_v7()));
        std::fs::create_dir_all(&dir).expect("broker dir");
        let log = std::fs::File::create(dir.join("tansu.log")).expect("broker log");
        let url = format!("tcp://127.0.0.1:{port}");
        let child = Command::new(&bin)
            .current_dir(&dir)
            .args([
                "broker",
                "--listener-url",
                &url,
                "--advertised-listener-url",
                &url,
            ])
            .args(["--storage-engine", "memory://tansu/"])
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log handle"))
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", bin.display()));
        let broker = Self { dir, port, child };
        let deadline = Instant::now() + Duration::from_secs(20);
        let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
        while std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err() {
            assert!(Instant::now() < deadline, "tansu did not come up on {port}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        broker
    }

    /// `host:port`, for `KAFKA_BROKERS`.
    pub fn bootstrap(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Freezes the process: connections stay open, nothing is answered.
    pub fn freeze(&self) {
        signal(self.pid(), "STOP");
    }

    /// Resumes a frozen process.
    pub fn resume(&self) {
        signal(self.pid(), "CONT");
    }
}

impl Drop for PrivateBroker {
    fn drop(&mut self) {
        // SIGKILL ends even a frozen process.
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
