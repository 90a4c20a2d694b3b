//! The persistence layer's own error type. It says what failed in storage
//! terms; [`crate::error_mapping`] turns it into the domain's
//! `RepositoryError` by meaning (pool timeout → unavailable, unique
//! violation → conflict, ...), keeping the source for the log.

/// What went wrong talking to PostgreSQL.
#[derive(Debug, thiserror::Error)]
pub enum PersistenceError {
    /// No pooled connection became free within the acquire timeout.
    #[error("timed out waiting for a pooled connection")]
    PoolTimeout,
    /// A new connection could not be opened or set up.
    #[error("could not open a database connection")]
    Connect(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// PostgreSQL sent nothing for this long while a unit of work held
    /// its connection (the statement timeout and a margin): the network to
    /// it is gone. The unit runs on, and ends when the network returns.
    #[error("no answer from the database for {0:?}")]
    NoAnswer(std::time::Duration),
    /// A statement failed.
    #[error("database statement failed")]
    Query(#[from] diesel::result::Error),
    /// A connection could not be established outside the pool.
    #[error("could not connect to the database")]
    Establish(#[from] diesel::ConnectionError),
    /// A unit of work's task (async driver) or thread (blocking driver)
    /// panicked or was cancelled.
    #[error("database worker failed: {0}")]
    Worker(String),
    /// Migrations could not be applied.
    #[error("database migration failed: {0}")]
    Migration(String),
    /// A stored value does not fit the domain (a bug or a manual edit).
    #[error("stored data does not fit the domain: {0}")]
    Corrupt(String),
}
