//! The claim of an idempotency key, in the keyed write's own transaction.

use chrono::{DateTime, Utc};
use diesel::QueryResult;
use diesel::pg::Pg;
use diesel::query_builder::{AstPass, QueryFragment, QueryId};
use diesel::sql_types::{Bytea, SmallInt, Text, Timestamptz, Uuid as SqlUuid};
use uuid::Uuid;

/// `INSERT INTO idempotency_keys (...) VALUES (...) ON CONFLICT (user_id, key)
///  DO UPDATE SET ... WHERE idempotency_keys.created_at < $expired_before`.
///
/// Affects one row when the key is new (or its row has expired and is
/// taken over), none when a live row holds it. A row another transaction
/// is writing makes this statement wait for that transaction: after its
/// COMMIT the key is held (none affected), after its ROLLBACK it is free
/// (one affected). So two concurrent requests with one key write once.
#[derive(Debug, Clone, QueryId)]
pub struct ClaimIdempotencyKey {
    /// The caller.
    pub user_id: Uuid,
    /// The key as sent.
    pub key: String,
    /// The request's digest.
    pub fingerprint: Vec<u8>,
    /// The response the write answers.
    pub status: i16,
    /// Its body.
    pub response: String,
    /// Now.
    pub created_at: DateTime<Utc>,
    /// Rows created before this have expired.
    pub expired_before: DateTime<Utc>,
}

impl QueryFragment<Pg> for ClaimIdempotencyKey {
    fn walk_ast<'b>(&'b self, mut out: AstPass<'_, 'b, Pg>) -> QueryResult<()> {
        out.push_sql(
            "INSERT INTO idempotency_keys (user_id, key, fingerprint, status, response, created_at) \
             VALUES (",
        );
        out.push_bind_param::<SqlUuid, _>(&self.user_id)?;
        out.push_sql(", ");
        out.push_bind_param::<Text, _>(&self.key)?;
        out.push_sql(", ");
        out.push_bind_param::<Bytea, _>(&self.fingerprint)?;
        out.push_sql(", ");
        out.push_bind_param::<SmallInt, _>(&self.status)?;
        out.push_sql(", ");
        out.push_bind_param::<Text, _>(&self.response)?;
        out.push_sql(", ");
        out.push_bind_param::<Timestamptz, _>(&self.created_at)?;
        out.push_sql(
            ") ON CONFLICT (user_id, key) DO UPDATE SET fingerprint = EXCLUDED.fingerprint, \
             status = EXCLUDED.status, response = EXCLUDED.response, \
             created_at = EXCLUDED.created_at WHERE idempotency_keys.created_at < ",
        );
        out.push_bind_param::<Timestamptz, _>(&self.expired_before)?;
        Ok(())
    }
}
