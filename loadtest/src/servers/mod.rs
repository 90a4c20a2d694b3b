//! The servers under test: the fleet the harness starts and stops, the
//! configurations it compares, how far PostgreSQL is from them, the
//! broker they publish to, and the balancer in front of a fleet.

pub(crate) mod balancer;
pub(crate) mod broker;
pub(crate) mod fleet;
pub(crate) mod reach;
pub(crate) mod variant;
