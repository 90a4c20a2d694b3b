//! The servers under test: the fleet the harness starts and stops, the
//! configurations it compares, how far PostgreSQL is from them, and the
//! broker they publish to.

pub(crate) mod broker;
pub(crate) mod fleet;
pub(crate) mod reach;
pub(crate) mod variant;
