//! What disturbs a round: the machine's load average before and at its
//! end (`/proc/loadavg`), the CPU the hypervisor stole (`/proc/stat`), and
//! the CPU of the processes that are not the experiment's own (a build, a
//! browser, an indexer; `/proc/<pid>/stat`), so a round that ran beside
//! something else shows it. All of it is read through the procfs crate.
//!
//! The experiment's own processes are known by name: chatlab, the load
//! tool, PostgreSQL, pgbench, the broker, PgBouncer and the delay proxy.
//! The others' CPU is counted for processes alive at the round's end (a
//! process that started and ended within the round is missed: its time
//! still shows in the machine's busy share).

use std::collections::HashMap;

use procfs::prelude::*;
use procfs::process::StatFlags;

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

/// user nice system idle iowait irq softirq steal (guest time is already
/// in user and nice); `None` when the kernel leaves any of them out.
fn cpu_times() -> Option<CpuTimes> {
    let cpu = procfs::KernelStats::current().ok()?.total;
    let (iowait, steal) = (cpu.iowait?, cpu.steal?);
    Some(CpuTimes {
        idle: cpu.idle,
        iowait,
        steal,
        all: cpu.user + cpu.nice + cpu.system + cpu.idle + iowait + cpu.irq? + cpu.softirq? + steal,
    })
}

fn load_average() -> Option<f64> {
    procfs::LoadAverage::current()
        .ok()
        .map(|l| f64::from(l.one))
}

/// Every process that is not the experiment's: pid → (name, CPU seconds).
/// Kernel threads are left out (a kworker flushing PostgreSQL's writes
/// works for the experiment; the machine's busy share counts it anyway).
fn other_processes() -> HashMap<u32, (String, f64)> {
    let mut out = HashMap::new();
    let Ok(processes) = procfs::process::all_processes() else {
        return out;
    };
    let ticks_per_sec = procfs::ticks_per_second().max(1) as f64;
    let me = std::process::id();
    for stat in processes.flatten().filter_map(|p| p.stat().ok()) {
        let Ok(pid) = u32::try_from(stat.pid) else {
            continue;
        };
        let kernel_thread = stat.flags & StatFlags::PF_KTHREAD.bits() != 0;
        if pid == me || kernel_thread || OURS.contains(&stat.comm.as_str()) {
            continue;
        }
        let secs = (stat.utime + stat.stime) as f64 / ticks_per_sec;
        out.insert(pid, (stat.comm, secs));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_machine_s_ticks_grow_with_the_work_done_on_it() {
        let (busy_before, total_before) = machine_ticks().unwrap();
        assert!(busy_before <= total_before);
        let started = std::time::Instant::now();
        let mut spins = 0u64;
        while started.elapsed() < std::time::Duration::from_millis(300) {
            spins = std::hint::black_box(spins.wrapping_add(1));
        }
        let (busy_after, total_after) = machine_ticks().unwrap();
        let elapsed = started.elapsed().as_secs_f64();
        assert!(busy_after <= total_after);
        let (busy, total) = (busy_after - busy_before, total_after - total_before);
        let ticks_per_sec = procfs::ticks_per_second() as f64;
        // This thread spun for 0.3 s: a tenth of a second of busy time at
        // least, however crowded the machine.
        assert!(
            busy as f64 >= 0.1 * ticks_per_sec,
            "busy {busy} of {total} ticks"
        );
        // Every CPU's time, in ticks: about the time that passed on each.
        let cpus = procfs::KernelStats::current().unwrap().cpu_time.len() as f64;
        let expected = elapsed * ticks_per_sec * cpus;
        assert!(
            (total as f64) >= 0.5 * expected - 2.0 * cpus
                && (total as f64) <= 1.5 * expected + 2.0 * cpus,
            "{total} ticks in {elapsed} s on {cpus} CPUs"
        );
        let load = load_average().unwrap();
        assert!(load.is_finite() && load >= 0.0, "{load}");
    }

    #[test]
    fn other_processes_are_named_and_the_experiment_s_own_left_out() {
        // The same program, once under its own name and once under one of
        // the experiment's.
        let dir = std::env::temp_dir().join(format!("chatlab-noise-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let ours = dir.join("pgbench");
        std::fs::copy("/bin/sleep", &ours).unwrap();
        let mut other = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let mut mine = std::process::Command::new(&ours).arg("30").spawn().unwrap();
        let others = other_processes();
        other.kill().unwrap();
        other.wait().unwrap();
        mine.kill().unwrap();
        mine.wait().unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        let (name, secs) = &others[&other.id()];
        assert_eq!(name, "sleep");
        assert!(*secs >= 0.0 && *secs < 5.0, "{secs}");
        assert!(!others.contains_key(&mine.id()), "{others:?}");
        assert!(!others.contains_key(&std::process::id()));
        // kthreadd, where this machine shows it.
        let kthreadd = procfs::process::Process::new(2).and_then(|p| p.stat());
        if let Ok(stat) = kthreadd
            && stat.flags & StatFlags::PF_KTHREAD.bits() != 0
        {
            assert!(!others.contains_key(&2), "{:?}", others.get(&2));
        }
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
