//! WAL written during a run: PostgreSQL's insert position
//! (`pg_current_wal_lsn()`) read before and after, on one connection of
//! the load tool's own. The position is the cluster's, so everything
//! written meanwhile counts: run nothing else against the cluster.

use crate::error::LoadError;

/// A connection that reads the WAL insert position.
pub struct WalProbe {
    client: tokio_postgres::Client,
    _connection: tokio::task::JoinHandle<()>,
}

impl WalProbe {
    /// Connects to `database_url`.
    pub async fn connect(database_url: &str) -> Result<Self, LoadError> {
        let (client, connection) = tokio_postgres::connect(database_url, tokio_postgres::NoTls)
            .await
            .map_err(|e| LoadError::Usage(format!("WAL probe: {database_url}: {e}")))?;
        let connection = tokio::spawn(async move {
            let _ = connection.await;
        });
        Ok(Self {
            client,
            _connection: connection,
        })
    }

    /// The WAL insert position, in bytes since the cluster began; `None`
    /// when the query fails (the figure is then left out, not invented).
    pub async fn position(&self) -> Option<u64> {
        let row = self
            .client
            .query_one("SELECT (pg_current_wal_lsn() - '0/0'::pg_lsn)::bigint", &[])
            .await
            .ok()?;
        u64::try_from(row.get::<_, i64>(0)).ok()
    }
}
