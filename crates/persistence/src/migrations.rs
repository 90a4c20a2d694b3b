//! The migrations in the top-level `migrations/` folder (diesel CLI layout),
//! embedded in the binary and applied at startup.

use diesel::Connection;
use diesel::connection::SimpleConnection;
use diesel_async::AsyncPgConnection;
use diesel_async::async_connection_wrapper::AsyncConnectionWrapper;
use diesel_migrations::{EmbeddedMigrations, MigrationHarness, embed_migrations};
use secrecy::{ExposeSecret, SecretString};

use crate::errors::PersistenceError;

/// Every migration, compiled in.
pub const MIGRATIONS: EmbeddedMigrations = embed_migrations!("../../migrations");

/// Advisory lock key held while migrating, so that several instances
/// starting at once apply each migration exactly once ("chatlab" in ASCII).
const MIGRATION_LOCK_KEY: i64 = 0x63_68_61_74_6c_61_62;

/// Applies pending migrations under an advisory lock; returns how many ran.
///
/// diesel's migration harness is synchronous, so it runs on a blocking
/// thread through diesel-async's `AsyncConnectionWrapper` (which must not
/// run on a current-thread runtime's own thread).
pub async fn run_pending(url: &SecretString) -> Result<usize, PersistenceError> {
    let url = url.clone();
    tokio::task::spawn_blocking(move || run_pending_blocking(url.expose_secret()))
        .await
        .map_err(|e| PersistenceError::Migration(format!("migration task failed: {e}")))?
}

fn run_pending_blocking(url: &str) -> Result<usize, PersistenceError> {
    let mut conn = AsyncConnectionWrapper::<AsyncPgConnection>::establish(url)?;
    conn.batch_execute(&format!("SELECT pg_advisory_lock({MIGRATION_LOCK_KEY})"))?;
    let applied = conn
        .run_pending_migrations(MIGRATIONS)
        .map(|done| done.len())
        .map_err(|e| PersistenceError::Migration(e.to_string()));
    let unlocked = conn.batch_execute(&format!("SELECT pg_advisory_unlock({MIGRATION_LOCK_KEY})"));
    let applied = applied?;
    unlocked?;
    Ok(applied)
}
