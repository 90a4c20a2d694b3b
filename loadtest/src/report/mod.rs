//! What a run leaves behind: a row per cell in `results.csv` and
//! `results.md`, and the SVG charts drawn from them.

pub(crate) mod charts;
pub(crate) mod results;
