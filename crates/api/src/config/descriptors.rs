//! How many connections this process can hold, from its open-file limit:
//! every socket is a descriptor, and a process past its limit cannot
//! accept anyone, `/healthz` included. So the listeners' connection limit
//! and the live streams' budget default to what the limit leaves once the
//! descriptors the server needs for itself are set aside, rather than to
//! fixed numbers that either waste a large limit or overrun a small one.
//!
//! The soft limit is raised to the hard one first (as Go's runtime does
//! since 1.19): the soft limit is often 1,024 for compatibility with
//! `select(2)`, which this server does not use.

use std::sync::OnceLock;

/// Descriptors set aside for what is not a client's connection: listeners,
/// the runtime's own, the broker's sockets (producer, live tail, catch-up
/// readers), log and `/proc` files. The pool's connections come on top.
pub const RESERVED: u64 = 256;

/// Share of the connections the live streams leave to requests, and the
/// least they leave.
const FOR_REQUESTS_SHARE: usize = 20;
const FOR_REQUESTS_AT_LEAST: usize = 256;

/// The process's open-file limit, its soft limit raised to the hard one
/// the first time it is asked; `None` where it cannot be read.
pub fn open_file_limit() -> Option<u64> {
    static LIMIT: OnceLock<Option<u64>> = OnceLock::new();
    *LIMIT.get_or_init(raise_to_hard_limit)
}

fn raise_to_hard_limit() -> Option<u64> {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let mut limit = getrlimit(Resource::Nofile);
    if limit.current != limit.maximum {
        let raised = rustix::process::Rlimit {
            current: limit.maximum,
            maximum: limit.maximum,
        };
        if setrlimit(Resource::Nofile, raised).is_ok() {
            limit = raised;
        }
    }
    // No limit at all: count as the kernel's own ceiling would allow.
    Some(limit.current.unwrap_or(1 << 20))
}

/// Connections each of `workers` may take when the process may hold
/// `open_files` descriptors and the pools hold `db_connections`: what is
/// left after [`RESERVED`], shared evenly; at least one each.
pub fn connections_per_worker(open_files: u64, workers: usize, db_connections: usize) -> usize {
    let left = open_files.saturating_sub(RESERVED + db_connections as u64);
    let per_worker = left / workers.max(1) as u64;
    usize::try_from(per_worker).unwrap_or(usize::MAX).max(1)
}

/// Streams an instance admits when its listeners take `connections`: all
/// but a twentieth (at least 256, at most half) kept for requests, so a
/// full stream budget still lets `/healthz` and the API in.
pub fn streams_for(connections: usize) -> usize {
    let for_requests = (connections / FOR_REQUESTS_SHARE)
        .max(FOR_REQUESTS_AT_LEAST)
        .min(connections / 2);
    connections.saturating_sub(for_requests).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn twenty_thousand_descriptors_hold_over_eighteen_thousand_streams() {
        let per_worker = connections_per_worker(20_000, 2, 20);
        assert_eq!(per_worker, (20_000 - 256 - 20) / 2);
        let streams = streams_for(2 * per_worker);
        assert!(streams >= 18_000, "{streams}");
        assert!(streams < 2 * per_worker, "requests keep room");
    }

    #[test]
    fn a_small_limit_keeps_half_for_requests_and_never_none() {
        assert_eq!(connections_per_worker(1_024, 2, 10), (1_024 - 266) / 2);
        assert_eq!(streams_for(400), 200);
        assert_eq!(connections_per_worker(100, 4, 10), 1);
        assert_eq!(streams_for(1), 1);
    }

    #[test]
    fn the_limit_is_read_and_raised_to_the_hard_one() {
        let limit = open_file_limit().unwrap();
        let now = rustix::process::getrlimit(rustix::process::Resource::Nofile);
        assert_eq!(now.current, now.maximum.or(now.current));
        assert_eq!(Some(limit), now.current.or(Some(1 << 20)));
    }
}
