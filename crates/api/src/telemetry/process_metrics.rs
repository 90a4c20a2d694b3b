//! The process's own figures on `/metrics`, under the names every
//! Prometheus client uses (`process_*`): resident and virtual memory, CPU
//! seconds, open and allowed file descriptors, threads, start time. Read
//! from `/proc/self` at each scrape, so memory is visible without the load
//! harness reading `/proc` itself. Where `/proc` cannot be read (not
//! Linux), the series are left out.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric as _};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::{Registry, Unit};

/// The `process_*` collector.
#[derive(Debug, Default)]
pub struct ProcessMetrics;

impl ProcessMetrics {
    /// Registers the collector in `registry`.
    pub fn register(registry: &mut Registry) {
        registry.register_collector(Box::new(Self));
    }
}

/// One reading of `/proc/self`.
#[derive(Debug, Clone, PartialEq)]
pub struct Reading {
    /// Resident set size, bytes.
    pub resident_bytes: u64,
    /// Virtual memory size, bytes.
    pub virtual_bytes: u64,
    /// User and system CPU time, seconds.
    pub cpu_seconds: f64,
    /// Threads.
    pub threads: i64,
    /// Open file descriptors.
    pub open_fds: Option<u64>,
    /// The soft limit on open files.
    pub max_fds: Option<u64>,
    /// Start time, seconds since the epoch.
    pub start_time_seconds: Option<f64>,
}

/// Reads the process's figures; `None` when `/proc/self` is unreadable.
pub fn read() -> Option<Reading> {
    let me = procfs::process::Process::myself().ok()?;
    let stat = me.stat().ok()?;
    let ticks = procfs::ticks_per_second() as f64;
    let page = procfs::page_size();
    let max_fds = me
        .limits()
        .ok()
        .and_then(|l| match l.max_open_files.soft_limit {
            procfs::process::LimitValue::Value(v) => Some(v),
            procfs::process::LimitValue::Unlimited => None,
        });
    let start_time_seconds = procfs::boot_time_secs()
        .ok()
        .map(|boot| boot as f64 + stat.starttime as f64 / ticks);
    Some(Reading {
        resident_bytes: stat.rss * page,
        virtual_bytes: stat.vsize,
        cpu_seconds: (stat.utime + stat.stime) as f64 / ticks,
        threads: stat.num_threads,
        open_fds: me.fd_count().ok().map(|n| n as u64),
        max_fds,
        start_time_seconds,
    })
}

fn gauge<N>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    unit: Option<&Unit>,
    value: N,
) -> std::fmt::Result
where
    ConstGauge<N>: prometheus_client::encoding::EncodeMetric,
{
    let g = ConstGauge::new(value);
    let e = encoder.encode_descriptor(name, help, unit, g.metric_type())?;
    g.encode(e)
}

impl Collector for ProcessMetrics {
    fn encode(&self, mut encoder: DescriptorEncoder) -> std::fmt::Result {
        let Some(r) = read() else {
            return Ok(());
        };
        let bytes = Some(&Unit::Bytes);
        gauge(
            &mut encoder,
            "process_resident_memory",
            "Resident memory size",
            bytes,
            r.resident_bytes as i64,
        )?;
        gauge(
            &mut encoder,
            "process_virtual_memory",
            "Virtual memory size",
            bytes,
            r.virtual_bytes as i64,
        )?;
        let cpu = ConstCounter::new(r.cpu_seconds);
        let e = encoder.encode_descriptor(
            "process_cpu",
            "User and system CPU time spent",
            Some(&Unit::Seconds),
            cpu.metric_type(),
        )?;
        cpu.encode(e)?;
        gauge(
            &mut encoder,
            "process_threads",
            "OS threads",
            None,
            r.threads,
        )?;
        if let Some(n) = r.open_fds {
            gauge(
                &mut encoder,
                "process_open_fds",
                "Open file descriptors",
                None,
                n as i64,
            )?;
        }
        if let Some(n) = r.max_fds {
            gauge(
                &mut encoder,
                "process_max_fds",
                "Most file descriptors the process may open",
                None,
                n as i64,
            )?;
        }
        if let Some(t) = r.start_time_seconds {
            gauge(
                &mut encoder,
                "process_start_time",
                "Start time since the epoch",
                Some(&Unit::Seconds),
                t,
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_reading_is_this_process() {
        let Some(r) = super::read() else {
            panic!("/proc/self is readable on Linux");
        };
        assert!(r.resident_bytes > 1 << 20, "{r:?}");
        assert!(r.virtual_bytes >= r.resident_bytes);
        assert!(r.threads >= 1);
        let open = r.open_fds.unwrap_or(0);
        // Other tests of this binary open and close files meanwhile: hold
        // enough that their churn cannot hide ours.
        let held: Vec<_> = (0..32)
            .filter_map(|_| std::fs::File::open("/proc/self/stat").ok())
            .collect();
        let after = super::read().and_then(|r| r.open_fds).unwrap_or(0);
        assert!(held.len() == 32 && after >= open + 16, "{open} -> {after}");
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs_f64())
            .unwrap_or(0.0);
        let started = r.start_time_seconds.unwrap_or(0.0);
        assert!(
            started <= now + 1.0 && started > now - 3600.0,
            "{started} vs {now}"
        );
    }
}
