//! The one place every new connection is configured: PostgreSQL session
//! settings applied right after connecting, in one round trip.

use std::time::{Duration, Instant};

use diesel::{ConnectionError, ConnectionResult};
use diesel_async::pooled_connection::{ManagerConfig, RecyclingMethod};
use diesel_async::{AsyncConnection, AsyncPgConnection, SimpleAsyncConnection};
use futures_util::FutureExt;
use futures_util::future::BoxFuture;

use crate::config::{Recycle, SessionSettings};
use crate::database::connect_failures::ConnectFailures;
use crate::database::pool_metrics::{PoolMetrics, secs};

/// What every new connection gets right after it opens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Setup {
    /// The session's `SET` statements, one batch (empty: none are sent).
    pub(crate) sql: String,
    /// Whether the driver keeps its statements prepared on the connection.
    pub(crate) statement_cache: bool,
}

impl Setup {
    /// The setup `settings` ask for.
    pub(crate) fn of(settings: &SessionSettings) -> Self {
        Self {
            sql: if settings.apply_on_connect {
                set_statements(settings)
            } else {
                String::new()
            },
            statement_cache: settings.statement_cache,
        }
    }
}

/// The `SET` statements for `settings`, as one batch.
///
/// It also pins the session's message language to English (`lc_messages`
/// `C`) where the role may set it (a superuser, or a role granted `SET ON
/// PARAMETER lc_messages`): diesel does not hand out an error's SQLSTATE,
/// so timeouts, deadlocks and ended sessions are told apart by PostgreSQL's
/// message text, and a server whose `lc_messages` is another language
/// would turn a statement timeout into a 500. A role that may not set it
/// keeps the server's language, and the session opens all the same.
fn set_statements(settings: &SessionSettings) -> String {
    let quoted = settings.application_name.replace('\'', "''");
    format!(
        "SET application_name = '{quoted}'; SET statement_timeout = {}; \
         SET lock_timeout = {}; SET idle_in_transaction_session_timeout = {}; \
         DO $$BEGIN PERFORM set_config('lc_messages', 'C', false); \
         EXCEPTION WHEN insufficient_privilege THEN NULL; END$$;",
        millis(settings.statement_timeout),
        millis(settings.lock_timeout),
        millis(settings.idle_in_transaction_timeout),
    )
}

fn millis(d: Duration) -> u128 {
    d.as_millis()
}

/// The `fast` checkout check: no round trip, but a connection whose socket
/// the driver has seen close (a session the database ended while the
/// connection sat idle) is refused, so bb8 drops it and opens another
/// instead of handing out a connection whose first statement must fail.
fn closed_socket_check(conn: &mut AsyncPgConnection) -> BoxFuture<'_, diesel::QueryResult<()>> {
    use diesel_async::pooled_connection::PoolableConnection as _;
    let result = if conn.is_broken() {
        Err(diesel::result::Error::DatabaseError(
            diesel::result::DatabaseErrorKind::ClosedConnection,
            Box::new("the connection's session has ended".to_owned()),
        ))
    } else {
        Ok(())
    };
    std::future::ready(result).boxed()
}

/// Opens a connection and sets it up: its session settings, and its
/// statement cache off where the setup says so.
pub(crate) async fn connect(url: &str, setup: &Setup) -> ConnectionResult<AsyncPgConnection> {
    let mut conn = AsyncPgConnection::establish(url).await?;
    if !setup.statement_cache {
        diesel_async::AsyncConnection::set_prepared_statement_cache_size(
            &mut conn,
            diesel::connection::CacheSize::Disabled,
        );
    }
    if !setup.sql.is_empty() {
        conn.batch_execute(&setup.sql).await.map_err(|e| {
            diesel::ConnectionError::BadConnection(format!("session settings: {e}"))
        })?;
    }
    Ok(conn)
}

/// diesel-async's manager configuration: our connect, our recycle check.
pub(crate) fn manager_config(
    settings: &SessionSettings,
    recycle: Recycle,
    metrics: std::sync::Arc<PoolMetrics>,
    failures: ConnectFailures,
) -> ManagerConfig<AsyncPgConnection> {
    let setup = Setup::of(settings);
    let mut config = ManagerConfig::default();
    config.recycling_method = match recycle {
        Recycle::Fast => RecyclingMethod::CustomFunction(Box::new(closed_socket_check)),
        Recycle::Verified => RecyclingMethod::Verified,
    };
    config.custom_setup = Box::new(
        move |url: &str| -> BoxFuture<'_, ConnectionResult<AsyncPgConnection>> {
            let setup = setup.clone();
            let metrics = metrics.clone();
            let failures = failures.clone();
            async move {
                let started = Instant::now();
                let conn = connect(url, &setup).await;
                metrics.create_time.observe(secs(started.elapsed()));
                if let Err(e) = &conn {
                    metrics.open_failures.inc();
                    // bb8 keeps the error itself; the checkout gets a copy.
                    failures.record(std::sync::Arc::new(ConnectionError::BadConnection(
                        e.to_string(),
                    )));
                }
                conn
            }
            .boxed()
        },
    );
    config
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_render_in_milliseconds_and_quote_the_name() {
        let settings = SessionSettings {
            application_name: "it's".into(),
            statement_timeout: Duration::from_secs(2),
            lock_timeout: Duration::from_millis(250),
            idle_in_transaction_timeout: Duration::ZERO,
            ..SessionSettings::default()
        };
        let setup = Setup::of(&settings);
        let sql = &setup.sql;
        assert!(sql.contains("application_name = 'it''s'"));
        assert!(sql.contains("statement_timeout = 2000;"));
        assert!(sql.contains("lock_timeout = 250;"));
        assert!(sql.contains("idle_in_transaction_session_timeout = 0;"));
        assert!(sql.contains("set_config('lc_messages', 'C', false)"));
        assert!(setup.statement_cache);
    }

    #[test]
    fn behind_a_transaction_pooler_nothing_is_set_and_nothing_is_cached() {
        let setup = Setup::of(&SessionSettings {
            apply_on_connect: false,
            statement_cache: false,
            ..SessionSettings::default()
        });
        assert_eq!(setup.sql, "");
        assert!(!setup.statement_cache);
    }
}
