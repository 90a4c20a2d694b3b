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
        // A transaction pooler moved the connection between a statement's
        // prepare and its use, or between two uses of a cached one:
        // SQLSTATE 26000 ("prepared statement ... does not exist"), 42P05
        // (another client's statement of that name on this backend), or
        // 08P01 (a Bind meeting another client's unnamed statement).
        _ if is_pooler_mixup(message) => Classified::Unavailable(UnavailableReason::Pooler),
        _ if message.contains("terminating connection")
            || message.contains("connection closed")
            || message.contains("too many clients") =>
        {
            Classified::Unavailable(UnavailableReason::Connection)
        }
        _ => Classified::Other,
    }
}

/// Whether `message` is one of the errors a transaction pooler causes
/// when a connection's prepared statements do not follow it.
fn is_pooler_mixup(message: &str) -> bool {
    let prepared = message.starts_with("prepared statement \"")
        && (message.ends_with("does not exist") || message.ends_with("already exists"));
    prepared
        || message.starts_with("unnamed prepared statement does not exist")
        || message.starts_with("bind message supplies")
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A statement's failure with PostgreSQL's `message`, as diesel
    /// reports the kinds it has no name for.
    fn failed(message: &str) -> RepositoryError {
        PersistenceError::Query(DieselError::DatabaseError(
            DatabaseErrorKind::Unknown,
            Box::new(message.to_owned()),
        ))
        .into()
    }

    fn reason(err: RepositoryError) -> Option<UnavailableReason> {
        match err {
            RepositoryError::Unavailable { reason, .. } => Some(reason),
            _ => None,
        }
    }

    #[test]
    fn a_pooler_s_lost_statement_is_unavailable_not_internal() {
        for message in [
            "prepared statement \"__diesel_stmt_3\" does not exist",
            "prepared statement \"__diesel_stmt_0\" already exists",
            "unnamed prepared statement does not exist",
            "bind message supplies 3 parameters, but prepared statement \"\" requires 1",
        ] {
            assert_eq!(
                reason(failed(message)),
                Some(UnavailableReason::Pooler),
                "{message}"
            );
        }
        assert_eq!(
            reason(failed("relation \"chats\" does not exist")),
            None,
            "a missing table is a bug, not the pooler"
        );
        assert_eq!(
            reason(failed("canceling statement due to statement timeout")),
            Some(UnavailableReason::Timeout)
        );
    }
}
