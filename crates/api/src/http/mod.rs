//! The HTTP edge around the routes: listeners and their socket limits,
//! deadlines and sizes for heads and bodies, request metrics, and the
//! headers that pick a strategy (`overrides`) or replay a write
//! (`idempotency`).

pub mod idempotency;
pub mod limits;
pub mod listener;
pub mod metrics;
pub mod overrides;
