//! [`LoadError`]: why a command of chatlab-load could not run to its end.
//! A run whose threshold or invariant broke is not an error: its command
//! answers `Ok(false)` and exits 1; a `LoadError` exits 2.

use std::path::{Path, PathBuf};

/// What stopped a command, by what failed.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// Arguments that cannot be run as given.
    #[error("{0}")]
    Usage(String),
    /// A file or folder of the run's output or of its helpers.
    #[error("{}: {source}", path.display())]
    File {
        /// Which.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A program the harness runs (chatlab, pgbench, psql, wrk, tansu,
    /// kill) that could not start or failed.
    #[error("{program}: {message}")]
    Program {
        /// Which.
        program: String,
        /// What it said, or why it could not start.
        message: String,
    },
    /// A chatlab server that is not there, did not become ready, or exited.
    #[error("server {server}: {message}")]
    Server {
        /// Its URL or index.
        server: String,
        /// What happened.
        message: String,
    },
    /// An HTTP exchange the harness needs (seeding, the audit, a scrape).
    #[error("{what}: {message}")]
    Http {
        /// What the exchange was for.
        what: &'static str,
        /// What went wrong.
        message: String,
    },
    /// Signing the seeded users' tokens: a bad secret, or no random bytes
    /// for a generated one.
    #[error("tokens: {0}")]
    Auth(String),
    /// A database answer the checks cannot read.
    #[error("database: {0}")]
    Database(String),
    /// The Kafka client of the broker check.
    #[error("broker: {0}")]
    Broker(String),
    /// Drawing a chart.
    #[error("chart {name}: {message}")]
    Chart {
        /// The chart's file.
        name: String,
        /// plotters' error.
        message: String,
    },
    /// A task of the harness panicked or was cancelled.
    #[error("a harness task failed: {0}")]
    Task(#[from] tokio::task::JoinError),
}

impl LoadError {
    /// A file error at `path`.
    pub fn file(path: impl AsRef<Path>, source: std::io::Error) -> Self {
        Self::File {
            path: path.as_ref().to_path_buf(),
            source,
        }
    }

    /// A program's failure.
    pub fn program(program: impl Into<String>, message: impl ToString) -> Self {
        Self::Program {
            program: program.into(),
            message: message.to_string(),
        }
    }

    /// A server's failure.
    pub fn server(server: impl Into<String>, message: impl ToString) -> Self {
        Self::Server {
            server: server.into(),
            message: message.to_string(),
        }
    }

    /// An HTTP exchange's failure.
    pub fn http(what: &'static str, message: impl ToString) -> Self {
        Self::Http {
            what,
            message: message.to_string(),
        }
    }
}
