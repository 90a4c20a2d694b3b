//! A transaction pooler in the path, found at startup rather than suffered
//! in 500s: the probe ([`pooler_probe`]) asks whether one connection's
//! transactions are served by different backends, and settings that cannot
//! work there stop startup (`DB_POOLER_CHECK=refuse`, the default) with a
//! message naming the ones that do.

use std::time::Duration;

use secrecy::ExposeSecret as _;

use chatlab_persistence::Driver;
use chatlab_persistence::database::pooler_probe::{self, Pooling};

use super::StartupError;
use crate::config::{PoolerCheck, Settings};

/// How long the probe may take before startup goes on without its answer.
const PROBE_TIMEOUT: Duration = Duration::from_secs(10);

/// The settings a transaction pooler needs that `settings` do not have, as
/// `NAME=value`: the blocking driver (diesel-async prepares each statement
/// in a Sync of its own, so a pooler may hand its Bind to another server),
/// no statement cache (a statement prepared on one server is unknown on the
/// next), no session SETs (they stay on whichever server ran them), and
/// migrations straight to PostgreSQL (their session advisory lock would be
/// split from its unlock).
pub(crate) fn unfit_settings(settings: &Settings) -> Vec<&'static str> {
    let mut unfit = Vec::new();
    if settings.db.driver != Driver::Blocking {
        unfit.push("DB_DRIVER=blocking");
    }
    if settings.db.session.statement_cache {
        unfit.push("DB_STATEMENT_CACHE=false");
    }
    if settings.db.session.apply_on_connect {
        unfit.push("DB_SESSION_SETTINGS=false");
    }
    if settings.run_migrations && settings.migration_url.is_none() {
        unfit.push("DB_MIGRATION_URL=<PostgreSQL itself>");
    }
    unfit
}

/// Probes `DATABASE_URL` and, when a transaction pooler answers and the
/// settings do not fit it, stops startup (or warns, by `DB_POOLER_CHECK`).
/// A probe that fails or takes too long is logged and startup goes on: a
/// database that is not up yet is the migrations' and the pool's to report.
pub(super) async fn check_for_a_transaction_pooler(
    settings: &Settings,
) -> Result<(), StartupError> {
    if settings.pooler_check == PoolerCheck::Off {
        return Ok(());
    }
    let found = match probe(settings.db.url.expose_secret().to_owned()).await {
        Ok(found) => found,
        Err(why) => {
            tracing::warn!("could not ask whether DATABASE_URL is a transaction pooler: {why}");
            return Ok(());
        }
    };
    let Pooling::TransactionPooler { before, after } = found else {
        tracing::debug!("no transaction pooler: one backend served each connection");
        return Ok(());
    };
    let unfit = unfit_settings(settings);
    if unfit.is_empty() {
        tracing::info!(
            before,
            after,
            "DATABASE_URL is a transaction pooler (one connection's transactions ran on backends \
             {before} and {after}); the database settings fit it"
        );
        return Ok(());
    }
    let needed = unfit.join(", ");
    match settings.pooler_check {
        PoolerCheck::Refuse => Err(StartupError::Pooler {
            before,
            after,
            needed,
        }),
        PoolerCheck::Warn | PoolerCheck::Off => {
            tracing::warn!(
                before,
                after,
                needed,
                "DATABASE_URL is a transaction pooler and DB_POOLER_CHECK=warn: requests may \
                 answer 503 (a prepared statement the pooler lost); it needs {needed}"
            );
            Ok(())
        }
    }
}

/// The probe on a blocking thread, bounded by [`PROBE_TIMEOUT`]; any way
/// it fails, said in words.
async fn probe(url: String) -> Result<Pooling, String> {
    let asked = tokio::task::spawn_blocking(move || pooler_probe::probe(&url));
    match tokio::time::timeout(PROBE_TIMEOUT, asked).await {
        Ok(Ok(answer)) => answer.map_err(|e| e.to_string()),
        Ok(Err(e)) => Err(format!("the probe's thread failed: {e}")),
        Err(_) => Err(format!("no answer within {PROBE_TIMEOUT:?}")),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn settings(pairs: &[(&str, &str)]) -> Settings {
        let vars: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        Settings::from_vars(vars).unwrap()
    }

    #[test]
    fn the_defaults_name_every_setting_a_transaction_pooler_needs() {
        let s = settings(&[]);
        assert_eq!(s.pooler_check, PoolerCheck::Refuse);
        assert_eq!(
            unfit_settings(&s),
            vec![
                "DB_DRIVER=blocking",
                "DB_STATEMENT_CACHE=false",
                "DB_SESSION_SETTINGS=false",
                "DB_MIGRATION_URL=<PostgreSQL itself>",
            ]
        );
    }

    #[test]
    fn the_documented_settings_fit_a_transaction_pooler() {
        let s = settings(&[
            ("DB_DRIVER", "blocking"),
            ("DB_STATEMENT_CACHE", "false"),
            ("DB_SESSION_SETTINGS", "false"),
            (
                "DB_MIGRATION_URL",
                "postgres://postgres@127.0.0.1:5432/chatlab",
            ),
        ]);
        assert!(unfit_settings(&s).is_empty());
        let no_migrations = settings(&[
            ("DB_DRIVER", "blocking"),
            ("DB_STATEMENT_CACHE", "false"),
            ("DB_SESSION_SETTINGS", "false"),
            ("DB_RUN_MIGRATIONS", "false"),
        ]);
        assert!(unfit_settings(&no_migrations).is_empty());
        let cached = settings(&[("DB_DRIVER", "blocking"), ("DB_SESSION_SETTINGS", "false")]);
        assert_eq!(
            unfit_settings(&cached),
            vec![
                "DB_STATEMENT_CACHE=false",
                "DB_MIGRATION_URL=<PostgreSQL itself>"
            ]
        );
    }

    #[test]
    fn the_check_takes_three_answers_and_refuses_others() {
        assert_eq!("warn".parse(), Ok(PoolerCheck::Warn));
        assert_eq!(" Off ".parse(), Ok(PoolerCheck::Off));
        assert_eq!("refuse".parse(), Ok(PoolerCheck::Refuse));
        assert!("maybe".parse::<PoolerCheck>().is_err());
    }
}
