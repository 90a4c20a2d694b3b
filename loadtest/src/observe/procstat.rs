//! A server process's memory and CPU, read from `/proc` (Linux), and the
//! process that listens on a local port.

use std::fs;

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
/// thread in `/proc/<pid>/task/*/status` (the process's own `status` counts
/// its main thread only).
pub fn switches(pid: u32) -> Option<Switches> {
    let mut total = Switches::default();
    for task in fs::read_dir(format!("/proc/{pid}/task")).ok()?.flatten() {
        if let Ok(status) = fs::read_to_string(task.path().join("status")) {
            total += parse_switches(&status);
        }
    }
    Some(total)
}

fn parse_switches(status: &str) -> Switches {
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    };
    Switches {
        voluntary: field("voluntary_ctxt_switches:"),
        involuntary: field("nonvoluntary_ctxt_switches:"),
    }
}

/// Clock ticks per second of `/proc/<pid>/stat` times: 100 on every Linux
/// architecture chatlab runs on (USER_HZ).
const TICKS_PER_SEC: f64 = 100.0;

/// Reads `/proc/<pid>/status` and `/proc/<pid>/stat`.
pub fn sample(pid: u32) -> Option<ProcSample> {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    Some(ProcSample {
        rss_mib: parse_rss_kib(&status)? / 1024.0,
        cpu_secs: parse_cpu_ticks(&stat)? / TICKS_PER_SEC,
    })
}

fn parse_rss_kib(status: &str) -> Option<f64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
}

fn parse_cpu_ticks(stat: &str) -> Option<f64> {
    // The command name (field 2) may hold spaces and parentheses: split
    // after its closing parenthesis. utime and stime are fields 14 and 15.
    let after = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = after.split_whitespace().collect();
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

/// The pid of the process listening on TCP `port` (IPv4 or IPv6), found
/// through the socket's inode in `/proc/net/tcp*` and `/proc/*/fd`.
pub fn pid_listening_on(port: u16) -> Option<u32> {
    let inodes: Vec<String> = ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .filter_map(|p| fs::read_to_string(p).ok())
        .flat_map(|t| listening_inodes(&t, port))
        .collect();
    if inodes.is_empty() {
        return None;
    }
    for entry in fs::read_dir("/proc").ok()?.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(fds) = fs::read_dir(entry.path().join("fd")) else {
            continue;
        };
        for fd in fds.flatten() {
            if let Ok(target) = fs::read_link(fd.path()) {
                let target = target.to_string_lossy();
                if inodes.iter().any(|i| target == format!("socket:[{i}]")) {
                    return Some(pid);
                }
            }
        }
    }
    None
}

fn listening_inodes(table: &str, port: u16) -> Vec<String> {
    const LISTEN: &str = "0A";
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            let local_port = f.get(1)?.rsplit(':').next()?;
            let state = f.get(3)?;
            (u16::from_str_radix(local_port, 16).ok()? == port && *state == LISTEN)
                .then(|| f.get(9).map(|s| (*s).to_owned()))
                .flatten()
        })
        .collect()
}

/// TCP connections of process `pid` to a peer's `port` (a broker's, say),
/// in any state but listening: the sockets in `/proc/net/tcp*` whose
/// remote port is `port`, counted among the process's descriptors.
pub fn connections_to(pid: u32, port: u16) -> Option<usize> {
    let inodes: std::collections::HashSet<String> = ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .filter_map(|p| fs::read_to_string(p).ok())
        .flat_map(|t| inodes_to_port(&t, port))
        .map(|inode| format!("socket:[{inode}]"))
        .collect();
    let fds = fs::read_dir(format!("/proc/{pid}/fd")).ok()?;
    Some(
        fds.flatten()
            .filter_map(|fd| fs::read_link(fd.path()).ok())
            .filter(|target| inodes.contains(target.to_string_lossy().as_ref()))
            .count(),
    )
}

/// The inodes of the sockets of a `/proc/net/tcp` table whose remote port
/// is `port`.
fn inodes_to_port(table: &str, port: u16) -> Vec<String> {
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            let remote_port = f.get(2)?.rsplit(':').next()?;
            (u16::from_str_radix(remote_port, 16).ok()? == port)
                .then(|| f.get(9).map(|s| (*s).to_owned()))
                .flatten()
        })
        .collect()
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
    fn parses_status_and_stat() {
        assert_eq!(
            parse_rss_kib("Name:\tx\nVmRSS:\t   13556 kB\n"),
            Some(13556.0)
        );
        let stat = "42 (chat lab) S 1 42 42 0 -1 4194560 1 0 0 0 250 50 0 0 20 0 9 0 1 2 3";
        assert_eq!(parse_cpu_ticks(stat), Some(300.0));
    }

    #[test]
    fn counts_both_kinds_of_switch_of_every_thread() {
        let status = "Name:\tx\nvoluntary_ctxt_switches:\t120\nnonvoluntary_ctxt_switches:\t7\n";
        assert_eq!(
            parse_switches(status),
            Switches {
                voluntary: 120,
                involuntary: 7
            }
        );
        let me = std::process::id();
        let before = switches(me).unwrap();
        let sleeper =
            std::thread::spawn(|| std::thread::sleep(std::time::Duration::from_millis(20)));
        std::thread::sleep(std::time::Duration::from_millis(5));
        let during = switches(me).unwrap();
        sleeper.join().unwrap();
        assert!(during.voluntary > before.voluntary, "{before:?} {during:?}");
        assert_eq!(
            during.since(before).total(),
            during.total() - before.total()
        );
    }

    #[test]
    fn finds_listening_sockets_in_proc_net_tcp() {
        let table = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 12345 1\n   1: 0100007F:1F90 0100007F:D431 01 00000000:00000000 00:00000000 00000000     0        0 67890 1\n";
        assert_eq!(listening_inodes(table, 8080), vec!["12345".to_owned()]);
        assert!(listening_inodes(table, 8081).is_empty());
    }

    #[test]
    fn samples_this_process_and_finds_its_listener() {
        let me = std::process::id();
        let s = sample(me).unwrap();
        assert!(s.rss_mib > 0.0);
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        assert_eq!(pid_listening_on(port), Some(me));
    }
}
