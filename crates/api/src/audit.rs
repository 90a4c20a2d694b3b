//! The event audit: reads the whole topic, the committed writes and the
//! broker's receipts of a time window and reconciles them per publish mode
//! (lost, phantom, duplicated), telling chatlab's losses (never
//! acknowledged) from the broker's (acknowledged, not served). Served at
//! `GET /audit` and run by `chatlab audit`.

use std::time::Duration;

use chrono::{DateTime, Utc};

use chatlab_domain::RepositoryError;
use chatlab_domain::audit::{AuditInput, AuditReport, SeenEvent, reconcile};
use chatlab_kafka::topic_reader;
use chatlab_persistence::Database;
use chatlab_persistence::audit_rows::{committed_writes, receipts};

/// How long reading the topic may take.
const READ_TIMEOUT: Duration = Duration::from_secs(30);

/// Why an audit could not run.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    /// The database could not be read.
    #[error("reading the committed writes failed")]
    Database(#[from] RepositoryError),
    /// The topic could not be read.
    #[error("reading the topic failed: {0}")]
    Topic(String),
}

/// Where the audit reads from.
pub struct AuditSource {
    /// The database.
    pub db: Database,
    /// The broker's bootstrap servers (the embedded one's, when it runs).
    pub bootstrap: String,
    /// The events topic.
    pub topic: String,
    /// Where a window starts when the caller names no start: the process's
    /// start with the embedded broker (its events die with the process, so
    /// older rows would all count as lost), else the epoch.
    pub default_since: DateTime<Utc>,
}

impl AuditSource {
    /// Reconciles writes, receipts and events that happened in
    /// `[since, until)`.
    pub async fn run(
        &self,
        since: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> Result<AuditReport, AuditError> {
        let writes = committed_writes(&self.db, since, until).await?;
        let bootstrap = self.bootstrap.clone();
        let topic = self.topic.clone();
        let snapshot = tokio::task::spawn_blocking(move || {
            topic_reader::read_all(&bootstrap, &topic, READ_TIMEOUT)
        })
        .await
        .map_err(|e| AuditError::Topic(e.to_string()))?
        .map_err(|e| AuditError::Topic(e.to_string()))?;
        // Receipts are read after the topic: a receipt written meanwhile
        // is of a record the topic already holds, never the other way.
        let acked = receipts(&self.db, &self.topic, since, until).await?;
        let mut unreadable = 0;
        let mut events = Vec::new();
        let mut read_positions = Vec::with_capacity(snapshot.records.len());
        for record in snapshot.records {
            let at = record.position();
            read_positions.push(at);
            let Ok(event) = record.event else {
                unreadable += 1;
                continue;
            };
            if event.occurred_at < since || event.occurred_at >= until {
                continue;
            }
            match event.publish_mode.parse() {
                Ok(mode) => events.push(SeenEvent {
                    event_id: event.event_id,
                    subject_id: event.subject_id(),
                    mode,
                    at,
                }),
                Err(_) => unreadable += 1,
            }
        }
        Ok(reconcile(&AuditInput {
            writes: &writes,
            events: &events,
            read_positions: &read_positions,
            receipts: &acked,
            ends: &snapshot.ends,
            unreadable,
        }))
    }
}
