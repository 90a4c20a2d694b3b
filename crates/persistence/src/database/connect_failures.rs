//! A pool's latest failed connect, shared by the code that opens
//! connections and the code that checks them out.
//!
//! Neither pool says why a checkout timed out: bb8 answers
//! `RunError::TimedOut` whether every connection was busy or every connect
//! failed (the failures go to its error sink), and r2d2's error is text,
//! with the failure appended when a connect failed. Recording each failed
//! connect where it happens tells the two apart by what happened: a
//! checkout that timed out after a connect failed during its wait met an
//! unreachable database, not a busy pool.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use diesel::ConnectionError;

use crate::errors::PersistenceError;

/// A failed connect and when it failed.
type Failure = (Instant, Arc<ConnectionError>);

/// The latest failed connect of one pool.
#[derive(Debug, Clone, Default)]
pub(crate) struct ConnectFailures(Arc<Mutex<Option<Failure>>>);

impl ConnectFailures {
    /// Records a failed connect, now.
    pub(crate) fn record(&self, error: Arc<ConnectionError>) {
        if let Ok(mut last) = self.0.lock() {
            *last = Some((Instant::now(), error));
        }
    }

    /// The latest connect failure at or after `since`.
    pub(crate) fn since(&self, since: Instant) -> Option<Arc<ConnectionError>> {
        let last = self.0.lock().ok()?;
        last.as_ref()
            .filter(|(at, _)| *at >= since)
            .map(|(_, e)| e.clone())
    }

    /// Why a wait for a connection that began at `since` timed out: a
    /// connect failed meanwhile (the database is unreachable), or every
    /// connection stayed busy. Neither pool tells the two apart itself.
    pub(crate) fn timed_out(&self, since: Instant) -> PersistenceError {
        match self.since(since) {
            Some(e) => PersistenceError::Connect(Box::new(e)),
            None => PersistenceError::PoolTimeout,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_failures_since_the_checkout_began_count() {
        let failures = ConnectFailures::default();
        let before = Instant::now();
        assert!(failures.since(before).is_none());
        failures.record(Arc::new(ConnectionError::BadConnection("refused".into())));
        assert!(failures.since(before).is_some());
        let later = Instant::now() + std::time::Duration::from_millis(1);
        assert!(failures.since(later).is_none());
    }
}
