//! Startup's warnings: settings that work but may not do what the operator
//! expects on this machine or behind this database. None stops startup.

use chatlab_persistence::PgStore;

use crate::config::Settings;
use crate::http::listener;

/// Says once, loudly, that anyone may ask for a token.
pub(super) fn warn_if_dev_tokens(settings: &Settings) {
    if settings.auth.dev_tokens {
        tracing::warn!(
            "CHATLAB_DEV_TOKENS=true: POST /v1/tokens issues a token for any user id to \
             anyone who asks; never run this way where others can reach the port"
        );
    }
}

/// The connection limit bounds open sockets only below the process's file
/// descriptor limit: past that, `accept` fails and the server stops taking
/// anyone, `/healthz` included. Say so at startup when the limit is lower
/// than workers × `HTTP_MAX_CONNECTIONS_PER_WORKER` plus room for the
/// pool, the broker and the logs.
pub(super) fn warn_if_connections_can_outrun_descriptors(settings: &Settings) {
    let Some(max_fds) = crate::telemetry::process_metrics::read().and_then(|r| r.max_fds) else {
        return;
    };
    let connections = (settings.http.workers * settings.http.max_connections_per_worker) as u64;
    let needed = connections + u64::from(settings.db.pool_max_size) + 256;
    if max_fds < needed {
        tracing::warn!(
            max_open_files = max_fds,
            connections,
            needed,
            "the open-file limit is below what HTTP_MAX_CONNECTIONS_PER_WORKER admits: under a \
             flood of idle connections the server could run out of descriptors before the \
             limit applies; raise `ulimit -n` or lower HTTP_MAX_CONNECTIONS_PER_WORKER"
        );
    }
}

/// Linux silently caps a listener's backlog at `net.core.somaxconn`: say
/// so at startup when `HTTP_BACKLOG` asks for more, since a burst of
/// connects then overflows the smaller queue.
pub(super) fn warn_if_backlog_is_capped(backlog: u32) {
    let Some(somaxconn) = listener::somaxconn() else {
        return;
    };
    if somaxconn < backlog {
        tracing::warn!(
            backlog,
            somaxconn,
            "the kernel caps HTTP_BACKLOG at net.core.somaxconn: raise it (sysctl) or lower HTTP_BACKLOG"
        );
    }
}

/// A statement cache turned off means a transaction pooler, most likely;
/// there the session `SET`s chatlab sends stay on whichever server
/// connection ran them, so the timeouts would hold on some connections
/// and not others, silently. Say so at startup.
pub(super) fn warn_if_sets_may_not_stick(session: &chatlab_persistence::SessionSettings) {
    if !session.statement_cache && session.apply_on_connect {
        tracing::warn!(
            "DB_STATEMENT_CACHE=false with DB_SESSION_SETTINGS=true: behind a transaction \
             pooler the session SETs (timeouts, application_name) do not follow the \
             connection; set them on the database and DB_SESSION_SETTINGS=false \
             (docs/operations.md, \"PgBouncer\")"
        );
    }
}

/// Statement and lock timeouts, deadlocks and ended sessions are told apart
/// by PostgreSQL's English message text (diesel hands out no SQLSTATE for
/// them). Sessions pin `lc_messages = C` where their role may; when it may
/// not and the server speaks another language, those errors would answer
/// 500 instead of 503: say so once, before serving. Bounded by a second,
/// so a database that is not up yet delays startup by that at most (and is
/// then not asked); done before the first request, so the connection it
/// opens never mixes with the requests' in the pool's figures.
pub(super) async fn warn_unless_english_messages(store: &PgStore) {
    let asked =
        tokio::time::timeout(std::time::Duration::from_secs(1), store.message_language()).await;
    match asked {
        Ok(Ok(lang)) if lang == "C" || lang == "POSIX" || lang.starts_with("en") => {}
        Ok(Ok(lang)) => tracing::warn!(
            lc_messages = %lang,
            "PostgreSQL answers this role in {lang:?} and it may not set lc_messages: \
             timeouts and deadlocks will answer 500, not 503; grant it \
             `GRANT SET ON PARAMETER lc_messages TO <role>` (PostgreSQL 15+) or set \
             lc_messages = 'C' for the database"
        ),
        Ok(Err(e)) => tracing::debug!(error = %e, "could not read lc_messages at startup"),
        Err(_) => tracing::debug!("lc_messages not read: the database did not answer within 1 s"),
    }
}
