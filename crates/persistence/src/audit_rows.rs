//! The database side of the event audit: committed writes that should have
//! an event, with the mode each was written with.

use chrono::{DateTime, Utc};
use diesel::QueryableByName;
use diesel::sql_types::{Text, Timestamptz, Uuid as SqlUuid};
use futures_util::FutureExt;
use uuid::Uuid;

use chatlab_domain::RepositoryError;
use chatlab_domain::audit::CommittedWrite;

use crate::database::Database;
use crate::errors::PersistenceError;

#[derive(QueryableByName)]
struct Row {
    #[diesel(sql_type = SqlUuid)]
    id: Uuid,
    #[diesel(sql_type = Text)]
    publish_mode: String,
}

/// Chats and talk messages created in `[since, until)`, with their publish
/// modes. Rows with a mode this build does not know are skipped.
pub async fn committed_writes(
    db: &Database,
    since: DateTime<Utc>,
    until: DateTime<Utc>,
) -> Result<Vec<CommittedWrite>, RepositoryError> {
    let query = diesel::sql_query(
        "SELECT id, publish_mode FROM chats WHERE created_at >= $1 AND created_at < $2 \
             UNION ALL \
             SELECT id, publish_mode FROM messages \
             WHERE kind = 'talk' AND created_at >= $1 AND created_at < $2",
    )
    .bind::<Timestamptz, _>(since)
    .bind::<Timestamptz, _>(until);
    let rows: Vec<Row> = db
        .run(move |s| async move { s.load(query).await.map_err(PersistenceError::Query) }.boxed())
        .await?;
    Ok(rows
        .into_iter()
        .filter_map(|r| {
            r.publish_mode.parse().ok().map(|mode| CommittedWrite {
                subject_id: r.id,
                mode,
            })
        })
        .collect())
}
