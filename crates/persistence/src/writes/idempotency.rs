//! Idempotency keys in PostgreSQL: the claim a keyed write makes first in
//! its own transaction, and the retention sweep ([`KeySweep`]).
//!
//! A claim is one statement on the fresh path
//! ([`ClaimIdempotencyKey`]); only a retry reads the stored row back.
//! Writes sent without a key pay nothing.

use std::time::Duration;

use chrono::{DateTime, Utc};
use diesel::prelude::*;
use futures_util::FutureExt;
use secrecy::SecretString;

use chatlab_domain::{KeyClaim, RepositoryError, StoredResponse, UnavailableReason};

use crate::config::SessionSettings;
use crate::database::Database;
use crate::database::dedicated::{Dedicated, delete_in_batches};
use crate::error_mapping::query_err;
use crate::errors::PersistenceError;
use crate::queries::ClaimIdempotencyKey;
use crate::schema::idempotency_keys;
use crate::session::DbSession;

/// Rows one sweep statement deletes at most, so that no sweep holds many
/// row locks or one long transaction.
const SWEEP_BATCH: i64 = 10_000;

/// Most batches one sweep runs; what is left waits for the next sweep.
const SWEEP_MAX_BATCHES: usize = 1_000;

/// What a claim found.
#[derive(Debug)]
pub(crate) enum Claimed {
    /// The key is this write's now: go on and write.
    Fresh,
    /// The same request was written before under this key: answer this,
    /// write nothing.
    Replay(StoredResponse),
}

/// The first statement of a keyed write's transaction: claims the key, or
/// finds the response of the request that claimed it before. The same key
/// with another request is [`RepositoryError::IdempotencyKeyReused`]; a
/// claim that waited past `lock_timeout` on a concurrent request with the
/// same key is [`RepositoryError::IdempotencyKeyInFlight`].
pub(crate) async fn claim(
    s: &mut DbSession,
    claim: &KeyClaim,
    retention: Duration,
) -> Result<Claimed, ClaimError> {
    let now = Utc::now();
    let claimed = s
        .execute(ClaimIdempotencyKey {
            user_id: claim.user_id.as_uuid(),
            key: claim.key.as_str().to_owned(),
            fingerprint: claim.fingerprint.clone(),
            status: i16::try_from(claim.response.status).unwrap_or(i16::MAX),
            response: claim.response.body.clone(),
            created_at: now,
            expired_before: expired_before(now, retention),
        })
        .await
        .map_err(ClaimError::from_claim)?;
    if claimed == 1 {
        return Ok(Claimed::Fresh);
    }
    let (fingerprint, status, body): (Vec<u8>, i16, String) = s
        .get_result(
            idempotency_keys::table
                .find((claim.user_id.as_uuid(), claim.key.as_str().to_owned()))
                .select((
                    idempotency_keys::fingerprint,
                    idempotency_keys::status,
                    idempotency_keys::response,
                )),
        )
        .await?;
    if fingerprint != claim.fingerprint {
        return Err(ClaimError::Refused(RepositoryError::IdempotencyKeyReused));
    }
    Ok(Claimed::Replay(StoredResponse {
        status: u16::try_from(status).unwrap_or(500),
        body,
    }))
}

/// The response stored under `claim`'s key, if any (an expired row does
/// not count); `IdempotencyKeyReused` when it was stored for another
/// request. One read, no lock.
pub async fn stored(
    db: &Database,
    claim: &KeyClaim,
    retention: Duration,
) -> Result<Option<StoredResponse>, RepositoryError> {
    let (user, key) = (claim.user_id.as_uuid(), claim.key.as_str().to_owned());
    let live_since = expired_before(Utc::now(), retention);
    let row: Option<(Vec<u8>, i16, String)> = db
        .run(move |s| {
            async move {
                s.optional(
                    idempotency_keys::table
                        .find((user, key))
                        .filter(idempotency_keys::created_at.ge(live_since))
                        .select((
                            idempotency_keys::fingerprint,
                            idempotency_keys::status,
                            idempotency_keys::response,
                        )),
                )
                .await
                .map_err(query_err)
            }
            .boxed()
        })
        .await?;
    match row {
        None => Ok(None),
        Some((fingerprint, _, _)) if fingerprint != claim.fingerprint => {
            Err(RepositoryError::IdempotencyKeyReused)
        }
        Some((_, status, body)) => Ok(Some(StoredResponse {
            status: u16::try_from(status).unwrap_or(500),
            body,
        })),
    }
}

/// Stores `claim`'s response under its key after a write that committed in
/// several transactions (an import): `Replayed` with the stored one when a
/// concurrent request with the same key stored its response first.
pub async fn finish(
    db: &Database,
    claim: KeyClaim,
    retention: Duration,
) -> Result<chatlab_domain::Keyed<()>, RepositoryError> {
    db.run(move |s| {
        async move {
            s.transaction(async |s| self::claim(s, &claim, retention).await)
                .await
                .map_err(|e| match e {
                    ClaimError::Db(e) => query_err(e),
                    ClaimError::Refused(e) => e,
                })
        }
        .boxed()
    })
    .await
    .map(|claimed| match claimed {
        Claimed::Fresh => chatlab_domain::Keyed::Fresh(()),
        Claimed::Replay(r) => chatlab_domain::Keyed::Replayed(r),
    })
}

/// Why a claim did not succeed.
#[derive(Debug)]
pub(crate) enum ClaimError {
    /// A statement failed.
    Db(diesel::result::Error),
    /// The key is refused (reused, or held by a request still running).
    Refused(RepositoryError),
}

impl ClaimError {
    /// The claim statement's error: a lock wait cut off by `lock_timeout`
    /// means a concurrent request holds the key.
    fn from_claim(e: diesel::result::Error) -> Self {
        match query_err(e) {
            RepositoryError::Unavailable {
                reason: UnavailableReason::Timeout,
                ..
            } => Self::Refused(RepositoryError::IdempotencyKeyInFlight),
            RepositoryError::Unavailable { source, .. } | RepositoryError::Internal(source) => {
                Self::Refused(RepositoryError::Internal(source))
            }
            other => Self::Refused(other),
        }
    }
}

impl From<diesel::result::Error> for ClaimError {
    fn from(e: diesel::result::Error) -> Self {
        Self::Db(e)
    }
}

/// The cutoff: rows created before it have expired.
fn expired_before(now: DateTime<Utc>, retention: Duration) -> DateTime<Utc> {
    chrono::Duration::from_std(retention)
        .ok()
        .and_then(|r| now.checked_sub_signed(r))
        .unwrap_or(DateTime::<Utc>::MIN_UTC)
}

/// The retention sweep of expired keys, on a connection of its own: not
/// one of the request pool's, so the pool's figures count requests only.
/// It is opened for each sweep and closed after it (a sweep runs every
/// few minutes).
pub struct KeySweep {
    conn: Dedicated,
    retention: Duration,
}

impl std::fmt::Debug for KeySweep {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeySweep")
            .field("retention", &self.retention)
            .finish_non_exhaustive()
    }
}

/// Deletes up to `$2` keys created before `$1`.
const SWEEP_SQL: &str = "DELETE FROM idempotency_keys WHERE ctid = ANY(ARRAY(\
     SELECT ctid FROM idempotency_keys WHERE created_at < $1 LIMIT $2))";

impl KeySweep {
    /// A sweep of the keys older than `retention` in the database at `url`.
    pub fn new(url: SecretString, session: &SessionSettings, retention: Duration) -> Self {
        Self {
            // Its period is its retry: no backoff of its own.
            conn: Dedicated::new(url, session, "key-sweeper", Duration::ZERO),
            retention,
        }
    }

    /// Deletes the keys older than the retention, a batch per statement
    /// (each its own short transaction); answers how many went.
    pub async fn sweep(&mut self) -> Result<u64, PersistenceError> {
        let cutoff = expired_before(Utc::now(), self.retention);
        let conn = self.conn.get().await?;
        let deleted =
            delete_in_batches(conn, SWEEP_SQL, cutoff, SWEEP_BATCH, SWEEP_MAX_BATCHES).await;
        self.conn.close();
        Ok(deleted?)
    }
}
