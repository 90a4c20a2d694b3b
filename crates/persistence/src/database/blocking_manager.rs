//! The blocking driver's connections: how r2d2 opens, checks and discards
//! diesel's synchronous `PgConnection`, mirroring what
//! [`crate::database::session_settings::manager_config`] does for the async driver.

use std::sync::Arc;
use std::time::Instant;

use diesel::connection::{
    AnsiTransactionManager, Connection, SimpleConnection, TransactionManager,
};
use diesel::pg::PgConnection;
use diesel::{ConnectionError, ConnectionResult};

use crate::config::Recycle;
use crate::database::connect_failures::ConnectFailures;
use crate::database::pool_metrics::{PoolMetrics, secs};
use crate::database::session_settings::Setup;

/// Opens a blocking connection and sets it up: its session settings (one
/// extra round trip), and its statement cache off where the setup says so.
pub(crate) fn connect_blocking(url: &str, setup: &Setup) -> ConnectionResult<PgConnection> {
    let mut conn = PgConnection::establish(url)?;
    if !setup.statement_cache {
        conn.set_prepared_statement_cache_size(diesel::connection::CacheSize::Disabled);
    }
    if !setup.sql.is_empty() {
        conn.batch_execute(&setup.sql)
            .map_err(|e| ConnectionError::BadConnection(format!("session settings: {e}")))?;
    }
    Ok(conn)
}

/// r2d2's manager for blocking connections.
pub struct BlockingManager {
    url: String,
    setup: Setup,
    recycle: Recycle,
    metrics: Arc<PoolMetrics>,
    failures: ConnectFailures,
}

impl BlockingManager {
    pub(crate) fn new(
        url: String,
        setup: Setup,
        recycle: Recycle,
        metrics: Arc<PoolMetrics>,
        failures: ConnectFailures,
    ) -> Self {
        Self {
            url,
            setup,
            recycle,
            metrics,
            failures,
        }
    }
}

impl r2d2::ManageConnection for BlockingManager {
    type Connection = PgConnection;
    type Error = BlockingConnectError;

    fn connect(&self) -> Result<PgConnection, BlockingConnectError> {
        let started = Instant::now();
        let conn = connect_blocking(&self.url, &self.setup);
        self.metrics.create_time.observe(secs(started.elapsed()));
        conn.map_err(|e| {
            self.metrics.open_failures.inc();
            let e = Arc::new(e);
            self.failures.record(e.clone());
            BlockingConnectError::Connect(e)
        })
    }

    fn is_valid(&self, conn: &mut PgConnection) -> Result<(), BlockingConnectError> {
        match self.recycle {
            Recycle::Fast => Ok(()),
            Recycle::Verified => conn
                .batch_execute("SELECT 1")
                .map_err(BlockingConnectError::Check),
        }
    }

    fn has_broken(&self, conn: &mut PgConnection) -> bool {
        std::thread::panicking() || AnsiTransactionManager::is_broken_transaction_manager(conn)
    }
}

/// Why r2d2 could not hand out a blocking connection.
#[derive(Debug, thiserror::Error)]
pub enum BlockingConnectError {
    /// Opening the connection (or applying its settings) failed.
    #[error("could not open a database connection: {0}")]
    Connect(#[source] Arc<ConnectionError>),
    /// The checkout check (`SELECT 1`) failed.
    #[error("connection check failed: {0}")]
    Check(#[source] diesel::result::Error),
}
