//! `chatlab-load docs`: renders the docs' tables of results from their
//! committed runs, with the conclusions drawn from them, or (`--check`)
//! fails when a rendered block is stale, a conclusion is typed, a
//! mentioned run is not committed or a cited figure is not in its run
//! ([`crate::figures`]).

use std::path::PathBuf;

use clap::Args;

use crate::error::LoadError;
use crate::figures;

#[derive(Debug, Args)]
pub(crate) struct DocsArgs {
    /// The repository root (README.md, docs/, results/).
    #[arg(long, default_value = ".")]
    root: PathBuf,
    /// Change nothing: list what is wrong and exit 1 if anything is.
    #[arg(long)]
    check: bool,
}

pub(crate) fn docs(args: DocsArgs) -> Result<bool, LoadError> {
    if !args.check {
        let rendered = figures::render(&args.root).map_err(|p| LoadError::Usage(p.to_string()))?;
        for (doc, before, after) in rendered {
            if before != after {
                let path = args.root.join(&doc);
                std::fs::write(&path, after).map_err(|source| LoadError::File { path, source })?;
                println!("rendered {}", doc.display());
            }
        }
    }
    let problems = figures::check(&args.root);
    for p in &problems {
        eprintln!("{p}");
    }
    if problems.is_empty() {
        println!("docs: every table and cited figure agrees with its committed run");
    }
    Ok(problems.is_empty())
}
