//! A server process's memory, CPU and context switches, and the process
//! that listens on a local port, read from `/proc` (Linux) through the
//! procfs crate. Each function answers `None` where `/proc` cannot be read
//! or the process is gone.

use std::collections::HashSet;

use procfs::net::{TcpNetEntry, TcpState};
use procfs::process::{FDTarget, Process};

/// Resident set size and CPU time of a process at one moment.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProcSample {
    /// Resident memory, MiB.
    pub rss_mib: f64,
    /// User + system CPU time so far, seconds.
    pub cpu_secs: f64,
}

/// Context switches of a process so far, summed over its live threads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Switches {
    /// The threads gave up the CPU (to wait: a futex, a socket, a timer).
    pub voluntary: u64,
    /// The scheduler took the CPU from them.
    pub involuntary: u64,
}

impl Switches {
    /// Both kinds.
    pub fn total(self) -> u64 {
        self.voluntary + self.involuntary
    }

    /// The switches from `earlier` to these (0 where a thread that counted
    /// then has since exited).
    pub fn since(self, earlier: Self) -> Self {
        Self {
            voluntary: self.voluntary.saturating_sub(earlier.voluntary),
            involuntary: self.involuntary.saturating_sub(earlier.involuntary),
        }
    }

    /// A share of these (`share` in 0..=1), rounded down.
    pub fn share(self, share: f64) -> Self {
        Self {
            voluntary: (self.voluntary as f64 * share) as u64,
            involuntary: (self.involuntary as f64 * share) as u64,
        }
    }
}

impl std::ops::AddAssign for Switches {
    fn add_assign(&mut self, other: Self) {
        self.voluntary += other.voluntary;
        self.involuntary += other.involuntary;
    }
}

/// Reads `voluntary_ctxt_switches` and `nonvoluntary_ctxt_switches` of every
/// thread (`/proc/<pid>/task/*/status`; the process's own `status` counts
/// its main thread only). A thread that exits while it is read is left out.
pub fn switches(pid: u32) -> Option<Switches> {
    let mut total = Switches::default();
    for task in process(pid)?.tasks().ok()?.flatten() {
        if let Ok(status) = task.status() {
            total += Switches {
                voluntary: status.voluntary_ctxt_switches.unwrap_or(0),
                involuntary: status.nonvoluntary_ctxt_switches.unwrap_or(0),
            };
        }
    }
    Some(total)
}

/// Reads VmRSS (`/proc/<pid>/status`) and user + system time
/// (`/proc/<pid>/stat`, in the kernel's clock ticks).
pub fn sample(pid: u32) -> Option<ProcSample> {
    let process = process(pid)?;
    let rss_kib = process.status().ok()?.vmrss?;
    let stat = process.stat().ok()?;
    let ticks_per_sec = procfs::ticks_per_second().max(1) as f64;
    Some(ProcSample {
        rss_mib: rss_kib as f64 / 1024.0,
        cpu_secs: (stat.utime + stat.stime) as f64 / ticks_per_sec,
    })
}

/// The pid of the process listening on TCP `port` (IPv4 or IPv6), found
/// through the socket's inode in `/proc/net/tcp*` and `/proc/*/fd`.
pub fn pid_listening_on(port: u16) -> Option<u32> {
    let inodes = sockets(|e| e.state == TcpState::Listen && e.local_address.port() == port);
    if inodes.is_empty() {
        return None;
    }
    procfs::process::all_processes()
        .ok()?
        .flatten()
        .find(|p| {
            socket_fds(p)
                .into_iter()
                .flatten()
                .any(|inode| inodes.contains(&inode))
        })
        .and_then(|p| u32::try_from(p.pid).ok())
}

/// TCP connections of process `pid` to a peer's `port` (a broker's, say),
/// in any state but listening: the sockets in `/proc/net/tcp*` whose
/// remote port is `port`, counted among the process's descriptors.
pub fn connections_to(pid: u32, port: u16) -> Option<usize> {
    let inodes = sockets(|e| e.remote_address.port() == port);
    Some(
        socket_fds(&process(pid)?)?
            .filter(|inode| inodes.contains(inode))
            .count(),
    )
}

/// Process `pid`, when it exists.
fn process(pid: u32) -> Option<Process> {
    Process::new(i32::try_from(pid).ok()?).ok()
}

/// The inodes of the IPv4 and IPv6 TCP sockets that `keep` accepts.
fn sockets(keep: impl Fn(&TcpNetEntry) -> bool) -> HashSet<u64> {
    [procfs::net::tcp(), procfs::net::tcp6()]
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| keep(e))
        .map(|e| e.inode)
        .collect()
}

/// The inodes of the sockets among `process`'s descriptors; `None` when
/// they cannot be read (a descriptor closed while they are read is left
/// out).
fn socket_fds(process: &Process) -> Option<impl Iterator<Item = u64>> {
    Some(
        process
            .fd()
            .ok()?
            .flatten()
            .filter_map(|fd| match fd.target {
                FDTarget::Socket(inode) => Some(inode),
                _ => None,
            }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_connection_to_a_port_is_counted_and_others_are_not() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let me = std::process::id();
        assert_eq!(connections_to(me, port), Some(0));
        let _one = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        let _two = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        // Both ends are this process's: the accepted ones have `port` as
        // their local port, not their remote one, and are not counted.
        let _accepted = listener.accept().unwrap();
        assert_eq!(connections_to(me, port), Some(2));
    }

    #[test]
    fn counts_both_kinds_of_switch_of_every_thread() {
        // Four threads that each give up the CPU at least twice (two
        // sleeps), still alive when counted: the sum over every thread
        // holds at least their eight, whatever the test harness's other
        // threads do meanwhile.
        let threads = 4;
        let counted = std::sync::Arc::new(std::sync::Barrier::new(threads + 1));
        let done = std::sync::Arc::new(std::sync::Barrier::new(threads + 1));
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                let (counted, done) = (counted.clone(), done.clone());
                std::thread::spawn(move || {
                    for _ in 0..2 {
                        std::thread::sleep(std::time::Duration::from_millis(5));
                    }
                    counted.wait();
                    done.wait();
                })
            })
            .collect();
        counted.wait();
        // The workers now wait on `done`: blocked, not gone.
        let during = switches(std::process::id()).unwrap();
        done.wait();
        for w in workers {
            w.join().unwrap();
        }
        assert!(during.voluntary >= 8, "{during:?}");
        assert_eq!(
            during.since(Switches::default()).total(),
            during.voluntary + during.involuntary
        );
    }

    /// This process's CPU time by the kernel's clock, seconds.
    fn process_cpu_clock() -> f64 {
        let t = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
        t.tv_sec as f64 + t.tv_nsec as f64 / 1e9
    }

    #[test]
    fn cpu_time_and_memory_of_this_process_grow_as_it_works() {
        let me = std::process::id();
        let before = sample(me).unwrap();
        let clock_before = process_cpu_clock();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let mut spins = 0u64;
        while process_cpu_clock() - clock_before < 0.3 && std::time::Instant::now() < deadline {
            spins = std::hint::black_box(spins.wrapping_add(1));
        }
        // Every byte written, so every page is resident.
        let held = std::hint::black_box(vec![1u8; 96 << 20]);
        let after = sample(me).unwrap();
        let clock = process_cpu_clock() - clock_before;
        let cpu = after.cpu_secs - before.cpu_secs;
        // Seconds, as the kernel's CPU clock counts them (ticks divided by
        // the right rate), give or take a few ticks.
        assert!(clock >= 0.3, "spun {clock} s only");
        assert!(
            (cpu - clock).abs() <= 0.05 + clock * 0.1,
            "/proc says {cpu} s, the CPU clock {clock} s"
        );
        assert!(
            after.rss_mib - before.rss_mib >= 64.0,
            "{before:?} → {after:?}"
        );
        drop(held);
    }

    #[test]
    fn a_process_that_does_not_exist_has_no_figures() {
        // Above the kernel's largest pid (2^22).
        let none = (1u32 << 22) + 1;
        assert_eq!(sample(none), None);
        assert_eq!(switches(none), None);
        assert_eq!(connections_to(none, 80), None);
    }

    #[test]
    fn samples_this_process_and_finds_its_listener() {
        let me = std::process::id();
        let s = sample(me).unwrap();
        assert!(s.rss_mib > 0.0);
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        assert_eq!(pid_listening_on(port), Some(me));
        // A client's socket to that port is not a listener on it.
        let client = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        let client_port = client.local_addr().unwrap().port();
        assert_eq!(pid_listening_on(client_port), None);
        drop(client);
        drop(listener);
        assert_eq!(pid_listening_on(port), None);
        // IPv6, where the machine has it.
        if let Ok(v6) = std::net::TcpListener::bind("[::1]:0") {
            assert_eq!(pid_listening_on(v6.local_addr().unwrap().port()), Some(me));
        }
    }
}
