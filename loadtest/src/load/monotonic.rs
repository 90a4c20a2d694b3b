//! One clock for several processes: `CLOCK_MONOTONIC` in nanoseconds,
//! which every process on the machine reads alike, so a write timed by
//! one process and its frame's arrival timed by another subtract.

use rustix::time::{ClockId, clock_gettime};

/// Nanoseconds on the machine's monotonic clock.
pub fn now_ns() -> u64 {
    let t = clock_gettime(ClockId::Monotonic);
    u64::try_from(t.tv_sec).unwrap_or(0) * 1_000_000_000 + u64::try_from(t.tv_nsec).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::now_ns;

    #[test]
    fn it_moves_forward_with_the_wall() {
        let before = now_ns();
        std::thread::sleep(std::time::Duration::from_millis(5));
        let after = now_ns();
        assert!(after - before >= 5_000_000, "{before} {after}");
    }
}
