//! `chatlab-delay`: a TCP proxy that puts a database (or a broker) at a
//! distance, for experiments on one machine whose kernel has no `netem`.
//!
//! Each chunk read at time t leaves at t + RTT/2 (plus jitter, if asked)
//! in its direction, whatever the chunks ahead of it are doing: a burst of
//! pipelined statements arrives one delay later as a burst, as it would
//! across a network, instead of one delay per chunk as a proxy that sleeps
//! per chunk would make it (`noxious`). Deadlines are kept to the
//! microsecond by a `timerfd` per direction ([`timer`]), not tokio's
//! millisecond timer wheel.
//!
//! It also counts round trips on the wire ([`stats::Stats::flights`]: a
//! client chunk that follows a server chunk), and can blackhole traffic:
//! stop forwarding without closing anything, as a dead network does,
//! until told to resume ([`proxy::control`]).
//!
//! - [`distance`]: the RTT and jitter settings, parsed and checked;
//! - [`timer`]: microsecond sleeps inside tokio;
//! - [`link`]: one relayed connection;
//! - [`stats`]: the counters;
//! - [`proxy`]: a running proxy and its control port.

pub mod distance;
pub mod link;
pub mod proxy;
pub mod stats;
pub mod timer;

pub use distance::{Distance, DistanceError};
pub use proxy::{Proxy, Settings};
pub use stats::Stats;
