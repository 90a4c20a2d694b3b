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
use chatlab_persistence::database::pool_metrics::PoolMetrics;
use chatlab_persistence::{Database, DbConfig, Driver, PoolLayout, Pooling};

use crate::config::Settings;
use chatlab_persistence::events::audit::{committed_writes, receipts};

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
    /// Another audit is running.
    #[error("an audit is already running")]
    Busy,
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
    /// The widest window one audit may read: it holds the window's ids and
    /// the topic's records in memory.
    pub max_window: chrono::Duration,
    /// One audit at a time, for the same reason.
    pub running: tokio::sync::Semaphore,
}

impl AuditSource {
    /// The audit of `settings`' database and topic on `bootstrap`. It reads
    /// the database on connections of its own, opened per audit, never the
    /// request pool's: an audit of a wide window must not take connections
    /// from requests.
    pub fn new(settings: &Settings, bootstrap: String, default_since: DateTime<Utc>) -> Self {
        let config = DbConfig {
            pooling: Pooling::Off,
            driver: Driver::Async,
            layout: PoolLayout::Shared,
            ..settings.db.clone()
        };
        // Its connections are not the pool's: their metrics go nowhere.
        let metrics = PoolMetrics::register(&mut prometheus_client::registry::Registry::default());
        Self {
            db: Database::new(&config, metrics),
            bootstrap,
            topic: settings.kafka.topic.clone(),
            default_since,
            max_window: chrono::Duration::from_std(settings.audit_max_window)
                .unwrap_or(chrono::Duration::MAX),
            running: tokio::sync::Semaphore::new(1),
        }
    }

    /// The window to audit: `until` (default: now minus `settle`) back to
    /// `since` (default: the later of the default start and the widest
    /// window); an error names what is wrong with a window asked for.
    pub fn window(
        &self,
        since: Option<DateTime<Utc>>,
        until: Option<DateTime<Utc>>,
        settle: chrono::Duration,
    ) -> Result<(DateTime<Utc>, DateTime<Utc>), String> {
        window(
            self.default_since,
            self.max_window,
            since,
            until.unwrap_or_else(|| Utc::now() - settle),
        )
    }

    /// Reconciles writes, receipts and events that happened in
    /// `[since, until)`.
    pub async fn run(
        &self,
        since: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> Result<AuditReport, AuditError> {
        let _one_at_a_time = self.running.try_acquire().map_err(|_| AuditError::Busy)?;
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
            // A read marker's move announces no write to match.
            if event.occurred_at < since || event.occurred_at >= until || !event.announces_a_write()
            {
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

fn window(
    default_since: DateTime<Utc>,
    max_window: chrono::Duration,
    since: Option<DateTime<Utc>>,
    until: DateTime<Utc>,
) -> Result<(DateTime<Utc>, DateTime<Utc>), String> {
    let since = since.unwrap_or_else(|| default_since.max(until - max_window));
    // chatlab wrote nothing before 1970, and PostgreSQL's timestamps end
    // in 294276: a bound outside the years 1970 to 9999 is a mistake, not
    // a window, and would otherwise reach the database and fail there.
    let earliest = DateTime::<Utc>::UNIX_EPOCH;
    let latest = DateTime::<Utc>::from_naive_utc_and_offset(
        chrono::NaiveDate::from_ymd_opt(9999, 12, 31)
            .and_then(|d| d.and_hms_opt(23, 59, 59))
            .unwrap_or_default(),
        Utc,
    );
    for (name, at) in [("since", since), ("until", until)] {
        if at < earliest || at > latest {
            return Err(format!(
                "{name} ({at}) must lie between 1970-01-01 and 9999-12-31"
            ));
        }
    }
    if since > until {
        return Err(format!("since ({since}) is after until ({until})"));
    }
    if until - since > max_window {
        return Err(format!(
            "the window from {since} to {until} is wider than the {} s an audit may read \
             (CHATLAB_AUDIT_MAX_WINDOW_SECS): audit it in parts",
            max_window.num_seconds()
        ));
    }
    Ok((since, until))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_are_bounded() {
        let day = chrono::Duration::days(1);
        let now = Utc::now();
        let epoch = DateTime::<Utc>::UNIX_EPOCH;
        // No start: the widest window back from the end, or the default
        // start when that is later.
        assert_eq!(window(epoch, day, None, now), Ok((now - day, now)));
        let started = now - chrono::Duration::minutes(5);
        assert_eq!(window(started, day, None, now), Ok((started, now)));
        // A start asked for is kept when the window fits.
        let hour_ago = now - chrono::Duration::hours(1);
        assert_eq!(window(epoch, day, Some(hour_ago), now), Ok((hour_ago, now)));
        // Too wide, or backwards: refused with a reason.
        let err = window(epoch, day, Some(epoch), now).unwrap_err();
        assert!(err.contains("CHATLAB_AUDIT_MAX_WINDOW_SECS"), "{err}");
        assert!(window(epoch, day, Some(now), hour_ago).is_err());
        // Outside the years 1970 to 9999 (PostgreSQL would refuse the
        // query): refused before it is asked.
        let ancient = DateTime::<Utc>::MIN_UTC;
        let err = window(epoch, day, Some(ancient), ancient).unwrap_err();
        assert!(err.contains("1970"), "{err}");
        let before_epoch = epoch - chrono::Duration::hours(2);
        assert!(
            window(
                epoch,
                day,
                Some(before_epoch),
                before_epoch + chrono::Duration::hours(1)
            )
            .is_err()
        );
    }
}
