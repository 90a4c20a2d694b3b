//! `chatlab-load live-clients`: one of the client processes of
//! `live-fleet` (a process may hold 20,000 descriptors, and a bound source
//! address has some 14,000 ephemeral ports, so 100,000 streams need
//! several). It opens a live stream per token through the balancer, from
//! a loopback address of its own, reopens every stream that ends with `Last-Event-ID` of
//! the last id it carried, as `EventSource` does, and writes what it saw
//! to a file of fixed-size records for the parent to read: each
//! `message.sent` frame, each cut and each return, timed on the machine's
//! monotonic clock ([`crate::load::monotonic`]).
//!
//! It prints `ready` once every stream is open, and stops on SIGTERM.

use std::io::Write;
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use reqwest::header::HeaderValue;
use tokio::sync::{Semaphore, mpsc};
use uuid::Uuid;

use crate::error::LoadError;
use crate::load::live_stream::{self, LastId, Sighting};
use crate::load::monotonic::now_ns;
use crate::load::schedule::parse_duration;

/// Bytes of one record: kind (u32), stream index (u32), message id (16),
/// time (u64 ns).
pub(crate) const RECORD: usize = 32;

/// What a record says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A `message.sent` frame arrived.
    Frame = 0,
    /// The stream ended (the instance died, or cut it).
    Cut = 1,
    /// The stream was open again.
    Back = 2,
    /// The stream could not be opened again within the attempts.
    GaveUp = 3,
}

impl Kind {
    fn from_u32(n: u32) -> Option<Self> {
        match n {
            0 => Some(Self::Frame),
            1 => Some(Self::Cut),
            2 => Some(Self::Back),
            3 => Some(Self::GaveUp),
            _ => None,
        }
    }
}

/// One record of a client process's file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Record {
    pub(crate) kind: Kind,
    pub(crate) stream: u32,
    pub(crate) message: Uuid,
    pub(crate) at_ns: u64,
}

impl Record {
    /// Its bytes, little-endian.
    pub(crate) fn encode(&self) -> [u8; RECORD] {
        let mut out = [0u8; RECORD];
        out[0..4].copy_from_slice(&(self.kind as u32).to_le_bytes());
        out[4..8].copy_from_slice(&self.stream.to_le_bytes());
        out[8..24].copy_from_slice(self.message.as_bytes());
        out[24..32].copy_from_slice(&self.at_ns.to_le_bytes());
        out
    }

    /// The record of `bytes`; `None` for a kind it does not know.
    pub(crate) fn decode(bytes: &[u8; RECORD]) -> Option<Self> {
        let word = |range: std::ops::Range<usize>| {
            let mut b = [0u8; 4];
            b.copy_from_slice(&bytes[range]);
            u32::from_le_bytes(b)
        };
        let mut id = [0u8; 16];
        id.copy_from_slice(&bytes[8..24]);
        let mut at = [0u8; 8];
        at.copy_from_slice(&bytes[24..32]);
        Some(Self {
            kind: Kind::from_u32(word(0..4))?,
            stream: word(4..8),
            message: Uuid::from_bytes(id),
            at_ns: u64::from_le_bytes(at),
        })
    }
}

/// Flags of `live-clients` (given by `live-fleet`, not typed by hand).
#[derive(Debug, Args)]
pub struct LiveClientsArgs {
    /// The balancer's URL.
    #[arg(long)]
    url: String,
    /// A file of `INDEX TOKEN` lines: the streams to open.
    #[arg(long)]
    tokens: PathBuf,
    /// The loopback address the streams come from.
    #[arg(long)]
    source: IpAddr,
    /// Where the records go.
    #[arg(long)]
    out: PathBuf,
    /// Streams being opened at once.
    #[arg(long, default_value_t = 200)]
    opening: usize,
    /// The wait before opening an ended stream again.
    #[arg(long, default_value = "250ms", value_parser = parse_duration)]
    retry_after: Duration,
    /// Opens tried for one return before it gives up.
    #[arg(long, default_value_t = 240)]
    attempts: u32,
}

/// Runs until SIGTERM; true when every record was written.
pub async fn run(args: LiveClientsArgs) -> Result<bool, LoadError> {
    let text =
        std::fs::read_to_string(&args.tokens).map_err(|e| LoadError::file(&args.tokens, e))?;
    let mut streams: Vec<(u32, HeaderValue)> = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let (index, token) = line
            .split_once(' ')
            .ok_or_else(|| LoadError::Usage(format!("a tokens line without a space: {line:?}")))?;
        let index: u32 = index
            .parse()
            .map_err(|e| LoadError::Usage(format!("a tokens line's index {index:?}: {e}")))?;
        let mut bearer = HeaderValue::from_str(&format!("Bearer {token}"))
            .map_err(|e| LoadError::Usage(format!("a token as a header: {e}")))?;
        bearer.set_sensitive(true);
        streams.push((index, bearer));
    }
    let client = reqwest::Client::builder()
        .local_address(args.source)
        .tcp_nodelay(true)
        .pool_max_idle_per_host(0)
        .build()
        .map_err(|e| LoadError::http("building the HTTP client", e))?;

    let (records, written) = mpsc::unbounded_channel::<Record>();
    let writer = tokio::task::spawn_blocking({
        let out = args.out.clone();
        move || write_records(&out, written)
    });
    let opening = Arc::new(Semaphore::new(args.opening.max(1)));
    let (opened_tx, mut opened) = mpsc::unbounded_channel::<()>();
    let mut tasks = Vec::with_capacity(streams.len());
    for (index, bearer) in streams.iter().cloned() {
        tasks.push(tokio::spawn(hold(
            client.clone(),
            args.url.clone(),
            index,
            bearer,
            Arc::clone(&opening),
            opened_tx.clone(),
            records.clone(),
            (args.retry_after, args.attempts),
        )));
    }
    drop(opened_tx);
    let mut open = 0;
    while open < streams.len() && opened.recv().await.is_some() {
        open += 1;
    }
    println!("ready {open}");
    let _ = std::io::stdout().flush();

    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(|e| LoadError::program("live-clients: SIGTERM", e))?;
    term.recv().await;
    for task in &tasks {
        task.abort();
    }
    for task in tasks {
        let _ = task.await;
    }
    drop(records);
    writer
        .await
        .map_err(|e| LoadError::program("live-clients: the writer", e))?
}

/// Holds stream `index` open: opens it (its first open once `opening`
/// has room), reads it, and opens it again with its last id whenever it
/// ends; `opened` hears of the first open.
#[allow(clippy::too_many_arguments)] // one task's whole setting
async fn hold(
    client: reqwest::Client,
    url: String,
    index: u32,
    bearer: HeaderValue,
    opening: Arc<Semaphore>,
    opened: mpsc::UnboundedSender<()>,
    records: mpsc::UnboundedSender<Record>,
    (retry_after, attempts): (Duration, u32),
) {
    let last = LastId::default();
    let first = {
        let _permit = opening.acquire().await;
        open_with_retries(&client, &url, &bearer, None, retry_after, attempts).await
    };
    let Some(mut resp) = first else {
        let _ = records.send(record(Kind::GaveUp, index, Uuid::nil()));
        return;
    };
    let _ = opened.send(());
    loop {
        let (seen_tx, mut seen) = mpsc::unbounded_channel::<Sighting>();
        let (cut_tx, _cuts) = mpsc::unbounded_channel::<usize>();
        let reader = tokio::spawn(live_stream::read(
            resp,
            index as usize,
            seen_tx,
            cut_tx,
            Arc::clone(&last),
        ));
        while let Some((_, message, _, _)) = seen.recv().await {
            let _ = records.send(record(Kind::Frame, index, message));
        }
        let _ = reader.await;
        let _ = records.send(record(Kind::Cut, index, Uuid::nil()));
        let resume = last.lock().ok().and_then(|slot| slot.clone());
        match open_with_retries(
            &client,
            &url,
            &bearer,
            resume.as_deref(),
            retry_after,
            attempts,
        )
        .await
        {
            Some(again) => {
                let _ = records.send(record(Kind::Back, index, Uuid::nil()));
                resp = again;
            }
            None => {
                let _ = records.send(record(Kind::GaveUp, index, Uuid::nil()));
                return;
            }
        }
    }
}

/// A record of `kind` for stream `index`, timed now.
fn record(kind: Kind, index: u32, message: Uuid) -> Record {
    Record {
        kind,
        stream: index,
        message,
        at_ns: now_ns(),
    }
}

/// Opens the stream, resuming after `last` when given, trying up to
/// `attempts` times `retry_after` apart.
async fn open_with_retries(
    client: &reqwest::Client,
    url: &str,
    bearer: &HeaderValue,
    last: Option<&str>,
    retry_after: Duration,
    attempts: u32,
) -> Option<reqwest::Response> {
    for _ in 0..attempts {
        if let Ok(resp) = live_stream::open_from(client, url, bearer, last).await {
            return Some(resp);
        }
        tokio::time::sleep(retry_after).await;
    }
    None
}

/// Writes every record it receives to `out` until the channel closes.
fn write_records(
    out: &std::path::Path,
    mut records: mpsc::UnboundedReceiver<Record>,
) -> Result<bool, LoadError> {
    let file = std::fs::File::create(out).map_err(|e| LoadError::file(out, e))?;
    let mut file = std::io::BufWriter::with_capacity(1 << 20, file);
    while let Some(record) = records.blocking_recv() {
        file.write_all(&record.encode())
            .map_err(|e| LoadError::file(out, e))?;
    }
    file.flush().map_err(|e| LoadError::file(out, e))?;
    Ok(true)
}

/// Every record of a client process's file, in the order written.
pub(crate) fn read_records(path: &std::path::Path) -> Result<Vec<Record>, LoadError> {
    let bytes = std::fs::read(path).map_err(|e| LoadError::file(path, e))?;
    Ok(bytes
        .chunks_exact(RECORD)
        .filter_map(|chunk| {
            let mut record = [0u8; RECORD];
            record.copy_from_slice(chunk);
            Record::decode(&record)
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_reads_back_as_written() {
        let record = Record {
            kind: Kind::Back,
            stream: 99_999,
            message: Uuid::now_v7(),
            at_ns: 1_234_567_890_123,
        };
        assert_eq!(Record::decode(&record.encode()), Some(record));
        let mut unknown = record.encode();
        unknown[0] = 9;
        assert_eq!(Record::decode(&unknown), None);
    }

    #[test]
    fn a_file_of_records_reads_back_whole_records_only() {
        let dir = std::env::temp_dir().join(format!("live-clients-{}", Uuid::now_v7()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("records");
        let (tx, rx) = mpsc::unbounded_channel();
        let a = record(Kind::Frame, 1, Uuid::now_v7());
        let b = record(Kind::Cut, 2, Uuid::nil());
        tx.send(a).unwrap();
        tx.send(b).unwrap();
        drop(tx);
        assert!(write_records(&path, rx).unwrap());
        // A torn last record (a process killed mid-write) is left out.
        let mut bytes = std::fs::read(&path).unwrap();
        bytes.extend_from_slice(&[1, 2, 3]);
        std::fs::write(&path, bytes).unwrap();
        assert_eq!(read_records(&path).unwrap(), vec![a, b]);
        std::fs::remove_dir_all(dir).unwrap();
    }
}
