//! Live tickets: short-lived, single-use credentials that open a live
//! stream where a browser cannot send `Authorization` (an `EventSource`, a
//! `WebSocket`). The table keeps each ticket's SHA-256, never the ticket;
//! the database's clock sets and judges expiry, so instances with skewed
//! clocks agree; redeeming deletes the row, so a ticket opens one stream,
//! once, on any instance.

use std::time::Duration;

use chrono::{DateTime, Utc};
use diesel::QueryableByName;
use diesel::sql_types::{Bool, Bytea, Double, Timestamptz, Uuid as SqlUuid};
use futures_util::FutureExt;

use chatlab_domain::{RepositoryError, UserId};

use crate::database::Database;
use crate::error_mapping::query_err;

#[derive(QueryableByName)]
struct Issued {
    #[diesel(sql_type = Timestamptz)]
    expires_at: DateTime<Utc>,
}

#[derive(QueryableByName)]
struct Redeemed {
    #[diesel(sql_type = SqlUuid)]
    user_id: uuid::Uuid,
    #[diesel(sql_type = Bool)]
    live: bool,
}

/// Stores a ticket (its hash) for `user`, valid for `ttl`, and deletes the
/// expired ones nobody redeemed, in one statement. Answers when it
/// expires, or `None` when `user` does not exist.
pub async fn issue(
    db: &Database,
    user: UserId,
    ticket_hash: Vec<u8>,
    ttl: Duration,
) -> Result<Option<DateTime<Utc>>, RepositoryError> {
    let query = diesel::sql_query(
        "WITH expired AS (DELETE FROM live_tickets WHERE expires_at < now()) \
         INSERT INTO live_tickets (ticket_hash, user_id, expires_at) \
         SELECT $1, id, now() + make_interval(secs => $3) FROM users WHERE id = $2 \
         RETURNING expires_at",
    )
    .bind::<Bytea, _>(ticket_hash)
    .bind::<SqlUuid, _>(user.as_uuid())
    .bind::<Double, _>(ttl.as_secs_f64());
    let rows: Vec<Issued> = db
        .run(move |s| async move { s.load(query).await.map_err(query_err) }.boxed())
        .await?;
    Ok(rows.into_iter().next().map(|row| row.expires_at))
}

/// Redeems a ticket: deletes it and answers its user, or `None` when no
/// such ticket is stored (never issued, used already, or its user gone) or
/// it has expired (it is deleted all the same).
pub async fn redeem(
    db: &Database,
    ticket_hash: Vec<u8>,
) -> Result<Option<UserId>, RepositoryError> {
    let query = diesel::sql_query(
        "DELETE FROM live_tickets WHERE ticket_hash = $1 \
         RETURNING user_id, expires_at > now() AS live",
    )
    .bind::<Bytea, _>(ticket_hash);
    let rows: Vec<Redeemed> = db
        .run(move |s| async move { s.load(query).await.map_err(query_err) }.boxed())
        .await?;
    Ok(rows
        .into_iter()
        .next()
        .filter(|row| row.live)
        .map(|row| UserId::from_uuid(row.user_id)))
}
