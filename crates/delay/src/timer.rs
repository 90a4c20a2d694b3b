//! Sleeping to the microsecond inside tokio: a `timerfd` (the kernel's
//! high-resolution timer, no slack) watched by tokio's reactor. tokio's
//! own timer wheel has millisecond granularity, which would round every
//! 100 µs delay up to a millisecond.

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

/// A one-shot timer with nanosecond resolution, for one task at a time.
#[derive(Debug)]
pub struct PreciseTimer {
    fd: AsyncFd<OwnedFd>,
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
        Ok(Self { fd })
    }

    /// Returns at `deadline` (at once when it has passed).
    pub async fn sleep_until(&self, deadline: Instant) -> io::Result<()> {
        let Some(left) = deadline.checked_duration_since(Instant::now()) else {
            return Ok(());
        };
        if left < TOO_CLOSE {
            return Ok(());
        }
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
        let timer = PreciseTimer::new().unwrap();
        let mut late = Vec::new();
        for _ in 0..50 {
            let deadline = Instant::now() + Duration::from_micros(300);
            timer.sleep_until(deadline).await.unwrap();
            let now = Instant::now();
            assert!(now >= deadline, "woke early");
            late.push(now - deadline);
        }
        late.sort();
        // tokio's timer would be up to a millisecond late; the median here
        // is tens of microseconds (a loaded CI machine gets some slack).
        assert!(
            late[25] < Duration::from_micros(500),
            "median lateness {:?}",
            late[25]
        );
        timer.sleep_until(Instant::now()).await.unwrap();
    }
}
