//! The servers under test: the fleet the harness starts and stops, the
//! configurations it compares, and how far PostgreSQL is from them.

pub(crate) mod fleet;
pub(crate) mod reach;
pub(crate) mod variant;
