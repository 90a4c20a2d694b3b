//! Storage errors to domain errors, by meaning.

use diesel::result::{DatabaseErrorKind, Error as DieselError};

use chatlab_domain::{RepositoryError, UnavailableReason};

use crate::errors::PersistenceError;
use crate::reads;
use crate::session::DbSession;

impl From<PersistenceError> for RepositoryError {
    fn from(err: PersistenceError) -> Self {
        let unavailable = |reason, err: PersistenceError| RepositoryError::Unavailable {
            reason,
            source: Box::new(err),
        };
        match err {
            PersistenceError::PoolTimeout => unavailable(UnavailableReason::PoolTimeout, err),
            PersistenceError::Connect(_)
            | PersistenceError::Establish(_)
            | PersistenceError::NoAnswer(_) => unavailable(UnavailableReason::Connection, err),
            PersistenceError::Query(ref q) => match classify(q) {
                Classified::Unavailable(reason) => unavailable(reason, err),
                Classified::Conflict(what) => RepositoryError::Conflict(what),
                Classified::Other => RepositoryError::Internal(Box::new(err)),
            },
            PersistenceError::Migration(_)
            | PersistenceError::Corrupt(_)
            | PersistenceError::Worker(_) => RepositoryError::Internal(Box::new(err)),
        }
    }
}

enum Classified {
    Unavailable(UnavailableReason),
    Conflict(String),
    Other,
}

/// By kind where diesel names one; by message for the SQLSTATEs it does
/// not: 57014 (statement_timeout), 55P03 (lock_timeout), 40P01 (deadlock),
/// 57P01 (admin shutdown, a terminated session) and 53300 (too many
/// clients) all arrive as `Unknown`, and diesel's error information has no
/// SQLSTATE accessor (diesel-rs/diesel#5232, open). Their messages are
/// stable in the C locale, which every session pins where its role may
/// (`session_settings::set_statements`), and startup warns when a session
/// speaks another language.
fn classify(err: &DieselError) -> Classified {
    let DieselError::DatabaseError(kind, info) = err else {
        return Classified::Other;
    };
    let message = info.message();
    match kind {
        DatabaseErrorKind::UniqueViolation => {
            Classified::Conflict(info.constraint_name().map_or_else(
                || "duplicate key".to_owned(),
                |c| format!("{c} already taken"),
            ))
        }
        // The socket broke or closed (diesel-async reports a failed send
        // this way, libpq a closed connection).
        DatabaseErrorKind::ClosedConnection | DatabaseErrorKind::UnableToSendCommand => {
            Classified::Unavailable(UnavailableReason::Connection)
        }
        DatabaseErrorKind::SerializationFailure => {
            Classified::Unavailable(UnavailableReason::Contention)
        }
        // SQLSTATE 57014 (statement_timeout) and 55P03 (lock_timeout) have no
        // DatabaseErrorKind of their own; their messages are stable.
        _ if message.starts_with("canceling statement due to")
            || message.starts_with("could not obtain lock") =>
        {
            Classified::Unavailable(UnavailableReason::Timeout)
        }
        _ if message.starts_with("deadlock detected") => {
            Classified::Unavailable(UnavailableReason::Contention)
        }
        _ if message.contains("terminating connection")
            || message.contains("connection closed")
            || message.contains("too many clients") =>
        {
            Classified::Unavailable(UnavailableReason::Connection)
        }
        _ => Classified::Other,
    }
}

/// Whether `err` is a foreign-key violation (an unknown user or chat id).
pub(crate) fn is_foreign_key_violation(err: &DieselError) -> bool {
    matches!(
        err,
        DieselError::DatabaseError(DatabaseErrorKind::ForeignKeyViolation, _)
    )
}

/// A failed statement as the domain's error.
pub(crate) fn query_err(e: DieselError) -> RepositoryError {
    PersistenceError::Query(e).into()
}

/// After a rolled-back write failed with `err`: when it is a foreign-key
/// violation and some of `ids` name no user, `UnknownUsers` listing them;
/// otherwise `err` itself. The query runs only on this failure path, never
/// on the happy one.
pub(crate) async fn name_unknown_users(
    s: &mut DbSession,
    ids: &[chatlab_domain::UserId],
    err: DieselError,
) -> RepositoryError {
    if !is_foreign_key_violation(&err) {
        return query_err(err);
    }
    match reads::missing_users(s, ids).await {
        Ok(missing) if !missing.is_empty() => RepositoryError::UnknownUsers(missing),
        Ok(_) => query_err(err),
        Err(e) => query_err(e),
    }
}
