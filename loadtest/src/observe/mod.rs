//! Watching a run: the servers' `/metrics` and `/proc`, the WAL written,
//! the traces they export, and what else disturbed the machine.

pub(crate) mod noise;
pub(crate) mod otlp_sink;
pub(crate) mod procstat;
pub(crate) mod prom;
pub(crate) mod sampler;
pub(crate) mod wal;
