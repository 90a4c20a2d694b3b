//! `chatlab-load charts DIR`: draws a run's charts again from its
//! `results.csv`, so committed runs get the current charts without being
//! run again.

use std::path::PathBuf;

use clap::Args;

use crate::error::LoadError;
use crate::report::charts;
use crate::report::results;

#[derive(Debug, Args)]
pub(crate) struct ChartsArgs {
    /// A results folder (`results/<name>-<timestamp>`).
    dir: PathBuf,
    /// The charts' subtitle: the run's pool, cell length and machine
    /// (default: the pool sizes found in the CSV).
    #[arg(long)]
    subtitle: Option<String>,
}

pub(crate) fn charts(args: ChartsArgs) -> Result<bool, LoadError> {
    let cells = results::read_csv(&args.dir.join("results.csv"))?;
    let subtitle = args.subtitle.unwrap_or_else(|| {
        let mut pools: Vec<u32> = cells.iter().map(|c| c.pool_size).collect();
        pools.sort_unstable();
        pools.dedup();
        let pools: Vec<String> = pools.iter().map(u32::to_string).collect();
        format!("pool {}; redrawn from results.csv", pools.join(", "))
    });
    let written = charts::standard(&args.dir, &cells, &subtitle)?;
    println!("{}: {}", args.dir.display(), written.join(", "));
    Ok(true)
}
