//! What a run's figures say: rounds and their 95% intervals, thresholds,
//! the verdict between strategies and the letters that group them, the short summary and the round-trip model.

pub(crate) mod letters;
pub(crate) mod model;
pub(crate) mod rounds;
pub(crate) mod summary;
pub(crate) mod thresholds;
pub(crate) mod uncertainty;
pub(crate) mod verdict;
