//! One proxied connection: two directions, each a reader that stamps every
//! chunk with the time it is due (its arrival plus a one-way delay) and a
//! writer that sends it then. Chunks never wait for one another's delay,
//! only for their own deadline, so a burst of pipelined statements arrives
//! as a burst, one RTT later; deadlines never go backwards (jitter cannot
//! reorder a byte stream).

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::{mpsc, watch};

use crate::distance::Distance;
use crate::stats::Counters;
use crate::timer::PreciseTimer;

/// Bytes read at once: a PostgreSQL message of a large COPY or a wide
/// multi-row INSERT arrives in several.
const CHUNK: usize = 64 * 1024;
/// Chunks a direction holds before it stops reading (and TCP pushes back).
const QUEUED: usize = 256;

/// What every connection of a proxy shares.
#[derive(Debug)]
pub struct Shared {
    /// The delay to add.
    pub distance: Distance,
    /// `true` while traffic is blackholed.
    pub blackhole: watch::Receiver<bool>,
    /// The proxy's counters.
    pub counters: Arc<Counters>,
}

/// Which way a chunk goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Direction {
    /// Client to server.
    Up = 1,
    /// Server to client.
    Down = 2,
}

/// One chunk, or the end of the stream, and when it is due.
enum Item {
    Chunk(Instant, Vec<u8>),
    End(Instant),
}

/// Relays `client` to a new connection to `upstream` until both sides
/// have closed. A connection the upstream refuses is closed at once.
pub async fn relay(client: TcpStream, upstream: std::net::SocketAddr, shared: Arc<Shared>) {
    let Ok(server) = TcpStream::connect(upstream).await else {
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    shared.counters.opened();
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();
    // The direction of the last chunk read: a chunk up after one down
    // starts a new round trip.
    let last = Arc::new(AtomicU8::new(0));
    tokio::join!(
        pump(client_read, server_write, Direction::Up, &shared, &last),
        pump(server_read, client_write, Direction::Down, &shared, &last),
    );
    shared.counters.closed();
}

async fn pump(
    from: OwnedReadHalf,
    to: OwnedWriteHalf,
    direction: Direction,
    shared: &Shared,
    last: &AtomicU8,
) {
    let (tx, rx) = mpsc::channel(QUEUED);
    tokio::join!(
        read_side(from, tx, direction, shared, last),
        write_side(rx, to, shared),
    );
}

async fn read_side(
    mut from: OwnedReadHalf,
    tx: mpsc::Sender<Item>,
    direction: Direction,
    shared: &Shared,
    last: &AtomicU8,
) {
    let mut rng = fastrand::Rng::new();
    let mut previous = Instant::now();
    loop {
        let mut buf = vec![0u8; CHUNK];
        // A failed read (a reset) ends this direction as a close does, so
        // the other side sees the connection end; it is counted apart.
        let n = match from.read(&mut buf).await {
            Ok(n) => n,
            Err(_) => {
                shared.counters.read_failed();
                0
            }
        };
        let now = Instant::now();
        // Jitter may not reorder bytes: a deadline is never before the one
        // of the chunk ahead of it.
        let due = (now + shared.distance.sample_one_way(&mut rng)).max(previous);
        previous = due;
        if n == 0 {
            let _ = tx.send(Item::End(due)).await;
            return;
        }
        buf.truncate(n);
        let up = direction == Direction::Up;
        if up && last.swap(Direction::Up as u8, Ordering::Relaxed) != Direction::Up as u8 {
            shared.counters.flight();
        } else if !up {
            last.store(Direction::Down as u8, Ordering::Relaxed);
        }
        shared.counters.read(up, n);
        if tx.send(Item::Chunk(due, buf)).await.is_err() {
            return;
        }
    }
}

async fn write_side(mut rx: mpsc::Receiver<Item>, mut to: OwnedWriteHalf, shared: &Shared) {
    let Ok(mut timer) = PreciseTimer::new() else {
        return;
    };
    let mut blackhole = shared.blackhole.clone();
    while let Some(item) = rx.recv().await {
        let due = match &item {
            Item::Chunk(due, _) | Item::End(due) => *due,
        };
        if timer.sleep_until(due).await.is_err() {
            return;
        }
        let late = Instant::now().saturating_duration_since(due);
        // A dead network: nothing moves, nothing closes, until it is back.
        while *blackhole.borrow_and_update() {
            if blackhole.changed().await.is_err() {
                return;
            }
        }
        match item {
            Item::Chunk(_, bytes) => {
                if to.write_all(&bytes).await.is_err() {
                    return;
                }
                shared.counters.delivered(late.min(Duration::from_secs(60)));
            }
            Item::End(_) => {
                let _ = to.shutdown().await;
                return;
            }
        }
    }
}
