//! A running proxy: its listener, the connections it relays, and its
//! control port (`stats`, `blackhole`, `resume`, one line each, answered
//! with one line of JSON).

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::distance::Distance;
use crate::link::{Shared, relay};
use crate::stats::{Counters, Stats};

/// What a proxy is asked to do.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Where it listens (port 0: any free port).
    pub listen: SocketAddr,
    /// Where it connects for each client.
    pub upstream: SocketAddr,
    /// The delay it adds.
    pub distance: Distance,
    /// Where its control port listens, if it has one.
    pub control: Option<SocketAddr>,
}

/// A proxy serving on the current tokio runtime until dropped.
#[derive(Debug)]
pub struct Proxy {
    addr: SocketAddr,
    control_addr: Option<SocketAddr>,
    counters: Arc<Counters>,
    blackhole: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
}

impl Proxy {
    /// Binds and starts serving.
    pub async fn start(settings: Settings) -> io::Result<Self> {
        let listener = TcpListener::bind(settings.listen).await?;
        let addr = listener.local_addr()?;
        let counters = Arc::new(Counters::default());
        let (blackhole, watching) = watch::channel(false);
        let shared = Arc::new(Shared {
            distance: settings.distance,
            blackhole: watching,
            counters: counters.clone(),
        });
        let upstream = settings.upstream;
        let mut tasks = vec![tokio::spawn(async move {
            loop {
                match listener.accept().await {
                    Ok((client, _)) => {
                        tokio::spawn(relay(client, upstream, shared.clone()));
                    }
                    Err(e) => accept_failed(&shared.counters, "relay", &e).await,
                }
            }
        })];
        let mut control_addr = None;
        if let Some(at) = settings.control {
            let control = TcpListener::bind(at).await?;
            control_addr = Some(control.local_addr()?);
            let (counters, blackhole) = (counters.clone(), blackhole.clone());
            tasks.push(tokio::spawn(async move {
                loop {
                    match control.accept().await {
                        Ok((stream, _)) => {
                            tokio::spawn(serve_control(
                                stream,
                                counters.clone(),
                                blackhole.clone(),
                            ));
                        }
                        Err(e) => accept_failed(&counters, "control", &e).await,
                    }
                }
            }));
        }
        Ok(Self {
            addr,
            control_addr,
            counters,
            blackhole,
            tasks,
        })
    }

    /// Where clients connect.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Where the control port listens.
    pub fn control_addr(&self) -> Option<SocketAddr> {
        self.control_addr
    }

    /// The counters now.
    pub fn stats(&self) -> Stats {
        self.counters.snapshot(*self.blackhole.borrow())
    }

    /// Stops forwarding (without closing anything), or starts again.
    pub fn set_blackhole(&self, on: bool) {
        self.blackhole.send_replace(on);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// One control connection: a command per line, a JSON answer per line.
async fn serve_control(stream: TcpStream, counters: Arc<Counters>, blackhole: watch::Sender<bool>) {
    let (read, mut write) = stream.into_split();
    let mut lines = BufReader::new(read).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let answer = match line.trim() {
            "stats" => serde_json::to_string(&counters.snapshot(*blackhole.borrow()))
                .unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}")),
            "blackhole" => {
                blackhole.send_replace(true);
                "{\"blackholed\":true}".to_owned()
            }
            "resume" => {
                blackhole.send_replace(false);
                "{\"blackholed\":false}".to_owned()
            }
            other => format!(
                "{{\"error\":\"unknown command {:?}: stats, blackhole or resume\"}}",
                other.replace('"', "'")
            ),
        };
        if write
            .write_all(format!("{answer}\n").as_bytes())
            .await
            .is_err()
        {
            return;
        }
    }
}

/// Sends one command to a proxy's control port and returns its answer.
pub async fn control(addr: SocketAddr, command: &str) -> io::Result<String> {
    let stream = TcpStream::connect(addr).await?;
    let (read, mut write) = stream.into_split();
    write.write_all(format!("{command}\n").as_bytes()).await?;
    let mut lines = BufReader::new(read).lines();
    lines
        .next_line()
        .await?
        .ok_or_else(|| io::Error::new(io::ErrorKind::UnexpectedEof, "no answer"))
}

/// How long a listener waits after a failed accept before the next: a
/// failure such as running out of descriptors lasts until a connection
/// closes, and accepting again at once would spin a core.
pub const ACCEPT_BACKOFF: std::time::Duration = std::time::Duration::from_millis(50);

/// A failed accept: counted, said on stderr, then a pause of
/// [`ACCEPT_BACKOFF`].
async fn accept_failed(counters: &Counters, listener: &str, e: &io::Error) {
    counters.accept_failed();
    eprintln!(
        "chatlab-delay: accepting on the {listener} listener failed: {e}; retrying in {ACCEPT_BACKOFF:?}"
    );
    tokio::time::sleep(ACCEPT_BACKOFF).await;
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    /// An upstream that answers every byte it reads with the same byte.
    async fn echo() -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let mut buf = [0u8; 4096];
                    while let Ok(n) = s.read(&mut buf).await {
                        if n == 0 || s.write_all(&buf[..n]).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        addr
    }

    async fn proxy(rtt: Duration) -> Proxy {
        Proxy::start(Settings {
            listen: "127.0.0.1:0".parse().unwrap(),
            upstream: echo().await,
            distance: Distance {
                rtt,
                jitter: Duration::ZERO,
            },
            control: Some("127.0.0.1:0".parse().unwrap()),
        })
        .await
        .unwrap()
    }

    async fn round_trip(s: &mut TcpStream, bytes: &[u8]) -> Duration {
        let began = Instant::now();
        s.write_all(bytes).await.unwrap();
        let mut back = vec![0u8; bytes.len()];
        s.read_exact(&mut back).await.unwrap();
        assert_eq!(back, bytes);
        began.elapsed()
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_round_trip_takes_the_set_rtt_and_is_counted() {
        let p = proxy(Duration::from_millis(2)).await;
        let mut s = TcpStream::connect(p.local_addr()).await.unwrap();
        s.set_nodelay(true).unwrap();
        let mut times = Vec::new();
        for i in 0..20u8 {
            times.push(round_trip(&mut s, &[i; 16]).await);
        }
        times.sort();
        let median = times[10];
        assert!(
            median >= Duration::from_millis(2) && median < Duration::from_micros(2600),
            "median {median:?}"
        );
        let stats = p.stats();
        assert_eq!(stats.flights, 20, "{stats:?}");
        assert_eq!(stats.bytes_up, 320);
        assert_eq!(stats.open, 1);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_failed_accept_is_counted_and_paused_not_retried_at_once() {
        let counters = Counters::default();
        let e = io::Error::from_raw_os_error(24); // EMFILE: too many open files
        let started = tokio::time::Instant::now();
        accept_failed(&counters, "test", &e).await;
        let stats = counters.snapshot(false);
        assert_eq!(stats.accept_errors, 1, "{stats:?}");
        assert!(
            started.elapsed() >= ACCEPT_BACKOFF,
            "the next accept waits its backoff"
        );
    }

    #[tokio::test]
    async fn a_reset_is_counted_as_a_read_error_not_a_close() {
        let p = proxy(Duration::ZERO).await;
        let mut s = TcpStream::connect(p.local_addr()).await.unwrap();
        s.set_nodelay(true).unwrap();
        round_trip(&mut s, b"hello").await;
        assert_eq!(p.stats().read_errors, 0);
        // Linger 0: dropping the socket sends a reset, not a FIN.
        s.set_zero_linger().unwrap();
        drop(s);
        let mut waited = 0;
        while p.stats().read_errors == 0 && waited < 200 {
            tokio::time::sleep(Duration::from_millis(10)).await;
            waited += 1;
        }
        let stats = p.stats();
        assert_eq!(stats.read_errors, 1, "{stats:?}");
        assert_eq!(stats.accept_errors, 0, "{stats:?}");
        // A clean close is not a read error.
        let mut t = TcpStream::connect(p.local_addr()).await.unwrap();
        round_trip(&mut t, b"bye").await;
        drop(t);
        let mut waited = 0;
        while p.stats().open > 0 && waited < 200 {
            tokio::time::sleep(Duration::from_millis(10)).await;
            waited += 1;
        }
        assert_eq!(p.stats().read_errors, 1, "{:?}", p.stats());
    }

    #[tokio::test(flavor = "current_thread")]
    async fn pipelined_chunks_share_one_delay_instead_of_adding_up() {
        let p = proxy(Duration::from_millis(100)).await;
        let mut s = TcpStream::connect(p.local_addr()).await.unwrap();
        s.set_nodelay(true).unwrap();
        let began = Instant::now();
        // Ten writes a millisecond or two apart, all before the first
        // answer can come back: one flight.
        for i in 0..10u8 {
            s.write_all(&[i; 8]).await.unwrap();
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let sent = began.elapsed();
        let mut back = vec![0u8; 80];
        s.read_exact(&mut back).await.unwrap();
        let took = began.elapsed();
        // One RTT after the last write, not ten RTTs.
        assert!(took >= Duration::from_millis(100), "took {took:?}");
        assert!(
            took < sent + Duration::from_millis(140),
            "took {took:?} (sent in {sent:?})"
        );
        assert_eq!(p.stats().flights, 1);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_blackhole_holds_traffic_without_closing_then_lets_it_through() {
        let p = proxy(Duration::ZERO).await;
        let control_at = p.control_addr().unwrap();
        let mut s = TcpStream::connect(p.local_addr()).await.unwrap();
        round_trip(&mut s, b"before").await;
        let answer = control(control_at, "blackhole").await.unwrap();
        assert_eq!(answer, "{\"blackholed\":true}");
        s.write_all(b"during").await.unwrap();
        let mut back = [0u8; 6];
        let waited =
            tokio::time::timeout(Duration::from_millis(300), s.read_exact(&mut back)).await;
        assert!(waited.is_err(), "nothing gets through a blackhole");
        assert!(p.stats().blackholed);
        control(control_at, "resume").await.unwrap();
        s.read_exact(&mut back).await.unwrap();
        assert_eq!(&back, b"during");
        let stats: Stats =
            serde_json::from_str(&control(control_at, "stats").await.unwrap()).unwrap();
        assert!(!stats.blackholed && stats.connections == 1, "{stats:?}");
        assert!(
            control(control_at, "reboot")
                .await
                .unwrap()
                .contains("unknown command")
        );
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_closed_client_closes_its_upstream() {
        let p = proxy(Duration::from_micros(200)).await;
        let mut s = TcpStream::connect(p.local_addr()).await.unwrap();
        round_trip(&mut s, b"x").await;
        drop(s);
        for _ in 0..100 {
            if p.stats().open == 0 {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("still open: {:?}", p.stats());
    }
}
