//! What disturbs a round: the machine's load average before and at its
//! end, the CPU the hypervisor stole (`/proc/stat`), and the CPU of the
//! processes that are not the experiment's own (a build, a browser, an
//! indexer), so a round that ran beside something else shows it.
//!
//! The experiment's own processes are known by name: chatlab, the load
//! tool, PostgreSQL, pgbench, the broker, PgBouncer and the delay proxy.
//! The others' CPU is counted for processes alive at the round's end (a
//! process that started and ended within the round is missed: its time
//! still shows in the machine's busy share).

use std::collections::HashMap;
use std::fs;

/// Process names (`/proc/<pid>/comm`, 15 characters at most) that are
/// part of an experiment.
const OURS: &[&str] = &[
    "chatlab",
    "chatlab-load",
    "chatlab-delay",
    "postgres",
    "pgbench",
    "tansu",
    "pgbouncer",
];

/// USER_HZ, the unit of `/proc` CPU times.
const TICKS_PER_SEC: f64 = 100.0;

/// The disturbance of one round.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Noise {
    /// One-minute load average when the round began.
    pub load_before: f64,
    /// One-minute load average when it ended.
    pub load_after: f64,
    /// CPU stolen by the hypervisor, percent of the machine's CPU time.
    pub steal_percent: f64,
    /// The machine's busy share, percent of its CPU time (every process
    /// and the kernel).
    pub busy_percent: f64,
    /// CPU of the processes that are not the experiment's, percent of one
    /// core.
    pub other_cpu_percent: f64,
    /// The busiest of them and its share of one core, when any used CPU.
    pub busiest_other: Option<(String, f64)>,
}

impl Noise {
    /// Whether the round ran beside something that took a fifth of a core
    /// or more, or on a machine that lost a twentieth of its time to steal.
    pub fn disturbed(&self) -> bool {
        self.other_cpu_percent >= 20.0 || self.steal_percent >= 5.0
    }

    /// `load 1.02 → 2.31, steal 0.0%, other processes 3% of a core (cc1)`.
    pub fn describe(&self) -> String {
        let busiest = match &self.busiest_other {
            Some((name, pct)) if *pct >= 1.0 => format!(", the busiest {name} {pct:.0}%"),
            _ => String::new(),
        };
        format!(
            "load {:.2} → {:.2}, steal {:.1}%, other processes {:.0}% of a core{busiest}",
            self.load_before, self.load_after, self.steal_percent, self.other_cpu_percent
        )
    }
}

/// The machine at a round's start.
#[derive(Debug, Clone)]
pub struct NoiseProbe {
    load: f64,
    cpu: Option<CpuTimes>,
    others: HashMap<u32, (String, f64)>,
    started: std::time::Instant,
}

impl NoiseProbe {
    /// Reads the machine now.
    pub fn start() -> Self {
        Self {
            load: load_average().unwrap_or(0.0),
            cpu: cpu_times(),
            others: other_processes(),
            started: std::time::Instant::now(),
        }
    }

    /// What happened since [`start`](Self::start).
    pub fn finish(&self) -> Noise {
        let elapsed = self.started.elapsed().as_secs_f64().max(1e-3);
        let mut noise = Noise {
            load_before: self.load,
            load_after: load_average().unwrap_or(0.0),
            ..Noise::default()
        };
        if let (Some(before), Some(after)) = (self.cpu, cpu_times()) {
            let total = after.total().saturating_sub(before.total()).max(1) as f64;
            noise.steal_percent = 100.0 * after.steal.saturating_sub(before.steal) as f64 / total;
            noise.busy_percent = 100.0 * after.busy().saturating_sub(before.busy()) as f64 / total;
        }
        let mut busiest: Option<(String, f64)> = None;
        for (pid, (name, secs)) in other_processes() {
            let before = match self.others.get(&pid) {
                Some((was, before)) if *was == name => *before,
                // Started within the round: all its time is the round's.
                _ => 0.0,
            };
            let pct = 100.0 * (secs - before).max(0.0) / elapsed;
            noise.other_cpu_percent += pct;
            if busiest.as_ref().is_none_or(|(_, b)| pct > *b) {
                busiest = Some((name, pct));
            }
        }
        noise.busiest_other = busiest.filter(|(_, pct)| *pct > 0.0);
        noise
    }
}

/// The `cpu` line of `/proc/stat`, in ticks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct CpuTimes {
    idle: u64,
    iowait: u64,
    steal: u64,
    all: u64,
}

impl CpuTimes {
    fn total(self) -> u64 {
        self.all
    }

    /// Everything but idle, I/O wait and steal.
    fn busy(self) -> u64 {
        self.all
            .saturating_sub(self.idle)
            .saturating_sub(self.iowait)
            .saturating_sub(self.steal)
    }
}

/// The machine's busy and total CPU ticks so far (`/proc/stat`'s `cpu`
/// line; busy leaves out idle, I/O wait and steal).
pub fn machine_ticks() -> Option<(u64, u64)> {
    cpu_times().map(|t| (t.busy(), t.total()))
}

fn cpu_times() -> Option<CpuTimes> {
    parse_cpu_line(&fs::read_to_string("/proc/stat").ok()?)
}

/// user nice system idle iowait irq softirq steal (guest time is already
/// in user and nice).
fn parse_cpu_line(stat: &str) -> Option<CpuTimes> {
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let f: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .take(8)
        .map(|v| v.parse().ok())
        .collect::<Option<_>>()?;
    (f.len() == 8).then(|| CpuTimes {
        idle: f[3],
        iowait: f[4],
        steal: f[7],
        all: f.iter().sum(),
    })
}

fn load_average() -> Option<f64> {
    fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// Every process that is not the experiment's: pid → (name, CPU seconds).
fn other_processes() -> HashMap<u32, (String, f64)> {
    let mut out = HashMap::new();
    let Ok(entries) = fs::read_dir("/proc") else {
        return out;
    };
    let me = std::process::id();
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == me {
            continue;
        }
        let Ok(stat) = fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        if let Some((name, ticks)) = parse_stat(&stat)
            && !OURS.contains(&name.as_str())
        {
            out.insert(pid, (name, ticks / TICKS_PER_SEC));
        }
    }
    out
}

/// `PF_KTHREAD` in a process's flags: a kernel thread.
const KERNEL_THREAD: u64 = 0x0020_0000;

/// A process's name and user + system ticks from `/proc/<pid>/stat`;
/// `None` for a kernel thread (a kworker flushing PostgreSQL's writes
/// works for the experiment; the machine's busy share counts it anyway).
fn parse_stat(stat: &str) -> Option<(String, f64)> {
    let open = stat.find('(')?;
    let close = stat.rfind(')')?;
    let name = stat.get(open + 1..close)?.to_owned();
    let fields: Vec<&str> = stat.get(close + 1..)?.split_whitespace().collect();
    let flags: u64 = fields.get(6)?.parse().ok()?;
    if flags & KERNEL_THREAD != 0 {
        return None;
    }
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some((name, utime + stime))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_machine_s_cpu_line_and_a_process_s_times() {
        let stat = "cpu  100 5 50 800 10 2 3 30 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n";
        let t = parse_cpu_line(stat).unwrap();
        assert_eq!(t.total(), 1000);
        assert_eq!(t.steal, 30);
        assert_eq!(t.busy(), 1000 - 800 - 10 - 30);
        let p = "42 (cc1 plus) R 1 42 42 0 -1 4194560 1 0 0 0 250 50 0 0 20 0 9 0 1 2 3";
        assert_eq!(parse_stat(p), Some(("cc1 plus".to_owned(), 300.0)));
        let kworker =
            "9 (kworker/0:1-events) I 2 0 0 0 -1 69238880 0 0 0 0 0 25 0 0 20 0 1 0 1 0 0";
        assert_eq!(parse_stat(kworker), None);
    }

    #[test]
    fn a_busy_process_beside_the_round_is_counted_and_named() {
        let probe = NoiseProbe::start();
        // A process of another name that spins for a while.
        let mut child = std::process::Command::new("sh")
            .args(["-c", "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done"])
            .spawn()
            .unwrap();
        child.wait().unwrap();
        // The spinner has exited; a second one still running is seen.
        let mut spinner = std::process::Command::new("sh")
            .args(["-c", "while :; do :; done"])
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(400));
        let noise = probe.finish();
        spinner.kill().unwrap();
        spinner.wait().unwrap();
        assert!(noise.other_cpu_percent > 10.0, "{noise:?}");
        assert!(
            noise.load_before >= 0.0 && noise.busy_percent > 0.0,
            "{noise:?}"
        );
        assert!(
            noise.describe().starts_with("load "),
            "{}",
            noise.describe()
        );
    }
}
