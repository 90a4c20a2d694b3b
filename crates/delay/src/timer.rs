//! Sleeping to the microsecond inside tokio: a `timerfd` (the kernel's
//! high-resolution timer, no slack) watched by tokio's reactor. tokio's
//! own timer wheel has millisecond granularity, which would round every
//! 100 µs delay up to a millisecond.
//!
//! A timer can still wake late: on a virtual machine a vCPU that halts
//! for a sleep longer than the hypervisor's halt-polling window (about
//! 200 µs by default) takes a host wake-up of 50 to 150 µs to run again,
//! and on busy cores the woken thread waits its turn. A second, shorter
//! sleep to make up the difference pays that again, so each timer instead
//! arms once, early by the lateness it has learnt, and corrects the
//! estimate from every wake-up: on average a chunk leaves on time, any one
//! of them early or late by the wake-ups' jitter.

use std::io;
use std::os::fd::OwnedFd;
use std::time::{Duration, Instant};

use rustix::time::{
    Itimerspec, TimerfdClockId, TimerfdFlags, TimerfdTimerFlags, Timespec, timerfd_create,
    timerfd_settime,
};
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

/// Closer than this to its deadline, a chunk goes at once: arming a timer
/// and waking for it costs about as much.
const TOO_CLOSE: Duration = Duration::from_micros(5);

/// The most a timer arms early: a wake-up later than this is a loaded
/// machine, not a halted vCPU, and arming earlier would not help.
const MAX_EARLY: Duration = Duration::from_micros(400);

/// A one-shot timer with nanosecond resolution, for one task at a time.
#[derive(Debug)]
pub struct PreciseTimer {
    fd: AsyncFd<OwnedFd>,
    /// How late the wake-ups have been, smoothed: what the next sleep
    /// arms early by.
    early: Duration,
}

impl PreciseTimer {
    /// A timer on the monotonic clock (the clock `Instant` reads).
    pub fn new() -> io::Result<Self> {
        let fd = timerfd_create(
            TimerfdClockId::Monotonic,
            TimerfdFlags::NONBLOCK | TimerfdFlags::CLOEXEC,
        )?;
        // `with_interest` is deprecated because an arbitrary `AsRawFd` may
        // hand tokio a descriptor it does not own for the registration's
        // life; an `OwnedFd` does, so this use is sound. Its replacement,
        // `register_with_interest`, is `unsafe`, which the workspace forbids.
        #[allow(deprecated)]
        let fd = AsyncFd::with_interest(fd, Interest::READABLE)?;
        Ok(Self {
            fd,
            early: Duration::ZERO,
        })
    }

    /// How early the next sleep arms, learnt from the last wake-ups.
    pub fn early(&self) -> Duration {
        self.early
    }

    /// Returns close to `deadline`, on average at it (at once when it has
    /// passed): arms early by the wake-up lateness learnt so far, then
    /// moves the estimate an eighth of the way towards this wake-up's error.
    pub async fn sleep_until(&mut self, deadline: Instant) -> io::Result<()> {
        let Some(left) = deadline.checked_duration_since(Instant::now()) else {
            return Ok(());
        };
        if left < TOO_CLOSE {
            return Ok(());
        }
        let armed = left.saturating_sub(self.early);
        if armed >= TOO_CLOSE {
            self.sleep_for(armed).await?;
        }
        let now = Instant::now();
        self.early = match now.checked_duration_since(deadline) {
            Some(late) => (self.early + late / 8).min(MAX_EARLY),
            None => self.early.saturating_sub((deadline - now) / 8),
        };
        Ok(())
    }

    /// One arming of the timerfd for `left`, and the wait for it.
    async fn sleep_for(&self, left: Duration) -> io::Result<()> {
        let zero = Timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        timerfd_settime(
            self.fd.get_ref(),
            TimerfdTimerFlags::empty(),
            &Itimerspec {
                it_interval: zero,
                it_value: Timespec {
                    tv_sec: left.as_secs() as i64,
                    tv_nsec: i64::from(left.subsec_nanos()),
                },
            },
        )?;
        loop {
            let mut ready = self.fd.readable().await?;
            let mut expirations = [0u8; 8];
            match rustix::io::read(self.fd.get_ref(), &mut expirations) {
                Ok(_) => return Ok(()),
                Err(rustix::io::Errno::AGAIN) => ready.clear_ready(),
                Err(e) => return Err(e.into()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "current_thread")]
    async fn wakes_within_a_fraction_of_a_millisecond() {
        let mut timer = PreciseTimer::new().unwrap();
        let mut off = Vec::new();
        for _ in 0..50 {
            let deadline = Instant::now() + Duration::from_micros(300);
            timer.sleep_until(deadline).await.unwrap();
            let now = Instant::now();
            // Early by at most what it has learnt to arm early by.
            assert!(now + MAX_EARLY >= deadline, "woke too early");
            off.push(if now >= deadline {
                now - deadline
            } else {
                deadline - now
            });
        }
        off.sort();
        // tokio's timer would be up to a millisecond late; the median here
        // is tens of microseconds (a loaded CI machine gets some slack).
        assert!(
            off[25] < Duration::from_micros(500),
            "median error {:?}",
            off[25]
        );
        timer.sleep_until(Instant::now()).await.unwrap();
    }

    #[tokio::test(flavor = "current_thread")]
    async fn the_learnt_lead_stays_within_its_bound_and_a_past_deadline_returns_at_once() {
        let mut timer = PreciseTimer::new().unwrap();
        for micros in [1_000, 2_500, 150, 1_000, 40, 5_000, 1_000, 700] {
            for _ in 0..4 {
                let deadline = Instant::now() + Duration::from_micros(micros);
                timer.sleep_until(deadline).await.unwrap();
                assert!(timer.early() <= MAX_EARLY);
                assert!(Instant::now() + MAX_EARLY >= deadline, "woke too early");
            }
        }
        let before = Instant::now();
        timer
            .sleep_until(before - Duration::from_millis(1))
            .await
            .unwrap();
        assert!(before.elapsed() < Duration::from_millis(50));
    }
}
