//! The database side of the event audit: committed writes that should have
//! an event, with the mode each was written with, and the receipts the
//! broker gave for the events it acknowledged.

use chrono::{DateTime, Utc};
use diesel::QueryableByName;
use diesel::sql_types::{BigInt, Integer, Text, Timestamptz, Uuid as SqlUuid};
use futures_util::FutureExt;
use uuid::Uuid;

use chatlab_domain::audit::CommittedWrite;
use chatlab_domain::{AckedEvent, Receipt, RepositoryError};

use crate::database::Database;
use crate::errors::PersistenceError;

#[derive(QueryableByName)]
struct Row {
    #[diesel(sql_type = SqlUuid)]
    id: Uuid,
    #[diesel(sql_type = Text)]
    publish_mode: String,
}

/// Chats, talk messages and membership changes created in `[since, until)`, with their publish
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
             WHERE kind IN ('talk', 'membership') AND created_at >= $1 AND created_at < $2",
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

#[derive(QueryableByName)]
struct ReceiptRow {
    #[diesel(sql_type = SqlUuid)]
    event_id: Uuid,
    #[diesel(sql_type = SqlUuid)]
    subject_id: Uuid,
    #[diesel(sql_type = Text)]
    publish_mode: String,
    #[diesel(sql_type = Integer)]
    partition: i32,
    #[diesel(sql_type = BigInt)]
    offset: i64,
    #[diesel(sql_type = Timestamptz)]
    occurred_at: DateTime<Utc>,
}

/// The receipts (see [`crate::events::receipt_ledger`]) of `topic`'s events that
/// occurred in `[since, until)`.
pub async fn receipts(
    db: &Database,
    topic: &str,
    since: DateTime<Utc>,
    until: DateTime<Utc>,
) -> Result<Vec<AckedEvent>, RepositoryError> {
    let query = diesel::sql_query(
        "SELECT event_id, subject_id, publish_mode, \"partition\" AS partition, \
         \"offset\" AS offset, occurred_at FROM event_receipts \
         WHERE topic = $1 AND occurred_at >= $2 AND occurred_at < $3",
    )
    .bind::<Text, _>(topic.to_owned())
    .bind::<Timestamptz, _>(since)
    .bind::<Timestamptz, _>(until);
    let rows: Vec<ReceiptRow> = db
        .run(move |s| async move { s.load(query).await.map_err(PersistenceError::Query) }.boxed())
        .await?;
    Ok(rows
        .into_iter()
        .filter_map(|r| {
            r.publish_mode.parse().ok().map(|mode| AckedEvent {
                event_id: r.event_id,
                subject_id: r.subject_id,
                mode,
                occurred_at: r.occurred_at,
                receipt: Receipt {
                    partition: r.partition,
                    offset: r.offset,
                },
            })
        })
        .collect())
}
