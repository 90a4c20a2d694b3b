//! Read markers held in memory between flushes (`READ_MARKER_MODE=
//! coalesced`): the newest marker each member moved to since the last
//! flush, and what the flushes cost and how stale they left a marker.
//!
//! A move is held, not written; every `READ_MARKER_FLUSH_MS` the
//! [`MarkerWriter`] takes everything held and writes it as one `UPDATE
//! ... FROM unnest(...)` (see [`crate::queries::FlushReadMarkers`]) on a
//! connection of its own: not one of the pool's, so a flush never waits
//! behind requests, and the last one still runs once the server's workers
//! (and their slices of the pool) have stopped. A flush that fails holds
//! its markers again, merged with those held meanwhile, for the next one.
//! What a crash loses is what is held: at most one window of moves.
//!
//! With `READ_MARKER_MODE=log` the same task, at the same period, compacts
//! the append-only log instead: nothing is held in memory, so a crash loses
//! nothing.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use diesel_async::{AsyncConnection, RunQueryDsl};
use secrecy::SecretString;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Registry, Unit};
use uuid::Uuid;

use chatlab_domain::ReadMarkerMode;

use crate::config::SessionSettings;
use crate::database::dedicated::Dedicated;
use crate::database::pool_metrics::{latency_buckets, secs};
use crate::errors::PersistenceError;
use crate::queries::{
    CompactReadMarkerLog, Compacted, FLUSH_LOCK_CLASS, FlagInboxRead, FlushReadMarkers,
    MarkerColumns,
};

/// One member's held marker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct HeldMarker {
    /// The chat.
    pub chat_id: Uuid,
    /// The member.
    pub user_id: Uuid,
    /// The newest message read.
    pub up_to: Uuid,
    /// Whether a move asked for the reader's inbox rows to be flagged read.
    pub inbox: bool,
    /// When the first move since the last flush was held: the marker's
    /// staleness at the flush is counted from here.
    pub since: Instant,
}

impl HeldMarker {
    /// `self` and `other`, one member's two holds, as one: the further
    /// marker, the older hold.
    fn merge(self, other: Self) -> Self {
        Self {
            up_to: self.up_to.max(other.up_to),
            inbox: self.inbox || other.inbox,
            since: self.since.min(other.since),
            ..self
        }
    }
}

/// What the coalescing costs and saves.
#[derive(Debug, Clone)]
pub struct MarkerMetrics {
    /// Marker moves held (each a `POST /v1/chats/{id}/read` answered).
    pub held: Counter,
    /// Flushes (with `log`: compactions) that wrote something.
    pub flushes: Counter,
    /// Members' markers written by flushes (with `log`: member rows moved
    /// by compactions).
    pub flushed: Counter,
    /// Flushes that failed (their markers are kept for the next).
    pub failed_flushes: Counter,
    /// Log rows folded into member rows and deleted by compactions
    /// (`READ_MARKER_MODE=log`; each is one accepted move).
    pub compacted: Counter,
    /// How old each flushed marker's first hold was when its flush
    /// committed: the staleness the database saw.
    pub staleness: Histogram,
}

impl MarkerMetrics {
    /// Registers the metrics in `registry`.
    pub fn register(registry: &mut Registry) -> Self {
        let metrics = Self {
            held: Counter::default(),
            flushes: Counter::default(),
            flushed: Counter::default(),
            failed_flushes: Counter::default(),
            compacted: Counter::default(),
            staleness: Histogram::new(latency_buckets()),
        };
        registry.register(
            "chatlab_read_marker_moves_held",
            "Read marker moves held in memory (READ_MARKER_MODE=coalesced)",
            metrics.held.clone(),
        );
        registry.register(
            "chatlab_read_marker_flushes",
            "Flushes of held read markers that wrote something",
            metrics.flushes.clone(),
        );
        registry.register(
            "chatlab_read_marker_flushed_markers",
            "Members' read markers written by flushes",
            metrics.flushed.clone(),
        );
        registry.register(
            "chatlab_read_marker_failed_flushes",
            "Flushes of held read markers that failed (their markers wait for the next)",
            metrics.failed_flushes.clone(),
        );
        registry.register(
            "chatlab_read_marker_log_rows_compacted",
            "Read marker log rows folded into member rows and deleted (READ_MARKER_MODE=log)",
            metrics.compacted.clone(),
        );
        registry.register_with_unit(
            "chatlab_read_marker_staleness",
            "Age of a flushed read marker's first hold when its flush committed",
            Unit::Seconds,
            metrics.staleness.clone(),
        );
        metrics
    }
}

/// How markers are written (`READ_MARKER_MODE`), and with `coalesced` the
/// markers held since the last flush, one per member and chat.
#[derive(Debug)]
pub struct ReadMarkers {
    mode: ReadMarkerMode,
    held: Mutex<HashMap<(Uuid, Uuid), HeldMarker>>,
    metrics: MarkerMetrics,
}

impl ReadMarkers {
    /// Nothing held yet; `metrics` counts the holds and flushes.
    pub fn new(mode: ReadMarkerMode, metrics: MarkerMetrics) -> Self {
        Self {
            mode,
            held: Mutex::default(),
            metrics,
        }
    }

    /// The mode.
    pub fn mode(&self) -> ReadMarkerMode {
        self.mode
    }

    /// The counters and histogram of holds and flushes.
    pub fn metrics(&self) -> &MarkerMetrics {
        &self.metrics
    }

    /// Holds `marker` (merged with the member's held one); answers the
    /// member's held marker after it.
    pub(crate) fn hold(&self, marker: HeldMarker) -> Uuid {
        self.metrics.held.inc();
        self.merge_in(marker)
    }

    fn merge_in(&self, marker: HeldMarker) -> Uuid {
        let mut held = self.lock();
        let key = (marker.chat_id, marker.user_id);
        let merged = held.get(&key).map_or(marker, |h| h.merge(marker));
        held.insert(key, merged);
        merged.up_to
    }

    /// The member's held marker, if any.
    pub(crate) fn held_by(&self, chat_id: Uuid, user_id: Uuid) -> Option<Uuid> {
        self.lock().get(&(chat_id, user_id)).map(|h| h.up_to)
    }

    /// Everything held, taken out, in (chat, member) order.
    pub(crate) fn take(&self) -> Vec<HeldMarker> {
        let mut taken: Vec<HeldMarker> = std::mem::take(&mut *self.lock()).into_values().collect();
        taken.sort_unstable_by_key(|h| (h.chat_id, h.user_id));
        taken
    }

    /// Records the committed flush of `markers`.
    pub(crate) fn flushed(&self, markers: &[HeldMarker]) {
        let now = Instant::now();
        self.metrics.flushes.inc();
        self.metrics.flushed.inc_by(markers.len() as u64);
        for m in markers {
            self.metrics
                .staleness
                .observe(secs(now.duration_since(m.since)));
        }
    }

    /// Holds again the markers of a failed flush (merged with any held
    /// since), for the next one.
    pub(crate) fn failed(&self, markers: Vec<HeldMarker>) {
        self.metrics.failed_flushes.inc();
        for marker in markers {
            self.merge_in(marker);
        }
    }

    /// How many members have a marker held.
    pub fn held(&self) -> usize {
        self.lock().len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(Uuid, Uuid), HeldMarker>> {
        // A panic while holding the lock leaves a map that is still whole
        // (every change is one insert or one take).
        self.held
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The background writer of read markers, on a connection of its own
/// (opened when first needed and again after a failure): in `coalesced`
/// mode each [`Self::flush`] writes the markers held in one
/// [`ReadMarkers`]; in `log` mode it compacts the marker log.
pub struct MarkerWriter {
    conn: Dedicated,
    markers: Arc<ReadMarkers>,
}

impl std::fmt::Debug for MarkerWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MarkerWriter")
            .field("connection", &self.conn)
            .finish_non_exhaustive()
    }
}

impl MarkerWriter {
    /// A writer of `markers` to the database at `url`.
    pub fn new(url: SecretString, session: &SessionSettings, markers: Arc<ReadMarkers>) -> Self {
        Self {
            // Its period is its retry: no backoff of its own.
            conn: Dedicated::new(url, session, "read-markers", Duration::ZERO),
            markers,
        }
    }

    /// The markers it writes.
    pub fn markers(&self) -> &Arc<ReadMarkers> {
        &self.markers
    }

    /// Writes every marker held since the last flush, in one transaction;
    /// answers how many. On failure they are held again for the next one.
    /// With `READ_MARKER_MODE=log` nothing is held: it compacts the log
    /// instead and answers the member rows it moved.
    pub async fn flush(&mut self) -> Result<usize, PersistenceError> {
        if self.markers.mode() == ReadMarkerMode::Log {
            return self.compact().await;
        }
        let taken = self.markers.take();
        if taken.is_empty() {
            return Ok(0);
        }
        match self.write(&taken).await {
            Ok(()) => {
                self.markers.flushed(&taken);
                Ok(taken.len())
            }
            Err(e) => {
                self.markers.failed(taken);
                Err(e)
            }
        }
    }

    /// Folds the read marker log into the member rows and deletes what it
    /// folded ([`CompactReadMarkerLog`]), behind the flushes' advisory
    /// lock so the compactions of several instances take turns; answers
    /// the member rows moved. A failed compaction changes nothing (the
    /// rows wait for the next).
    async fn compact(&mut self) -> Result<usize, PersistenceError> {
        let conn = self.conn.get().await?;
        let done = conn
            .transaction(async |c| {
                diesel::sql_query("SELECT pg_advisory_xact_lock($1, 0)")
                    .bind::<diesel::sql_types::Integer, _>(FLUSH_LOCK_CLASS)
                    .execute(c)
                    .await?;
                CompactReadMarkerLog.get_result::<Compacted>(c).await
            })
            .await;
        let (gone, _members, moved, _flagged) = match done {
            Ok(done) => done,
            Err(e) => {
                self.conn.lost();
                self.markers.metrics.failed_flushes.inc();
                return Err(PersistenceError::from(e));
            }
        };
        let metrics = &self.markers.metrics;
        if gone > 0 {
            metrics.flushes.inc();
            metrics.flushed.inc_by(u64::try_from(moved).unwrap_or(0));
            metrics.compacted.inc_by(u64::try_from(gone).unwrap_or(0));
        }
        Ok(usize::try_from(moved).unwrap_or(0))
    }

    /// The member rows of `markers`, then the read flags of the inbox
    /// rows of those whose moves asked for them, in one transaction behind
    /// an advisory lock, so the flushes of several instances take turns.
    async fn write(&mut self, markers: &[HeldMarker]) -> Result<(), PersistenceError> {
        let conn = self.conn.get().await?;
        let columns = |only_inbox: bool| {
            let rows = markers.iter().filter(|m| m.inbox || !only_inbox);
            MarkerColumns {
                chats: rows.clone().map(|m| m.chat_id).collect(),
                users: rows.clone().map(|m| m.user_id).collect(),
                up_to: rows.map(|m| m.up_to).collect(),
            }
        };
        let flush = FlushReadMarkers(columns(false));
        let flag = FlagInboxRead(columns(true));
        conn.transaction(async |c| {
            diesel::sql_query("SELECT pg_advisory_xact_lock($1, 0)")
                .bind::<diesel::sql_types::Integer, _>(FLUSH_LOCK_CLASS)
                .execute(c)
                .await?;
            flush.execute(c).await?;
            if !flag.0.chats.is_empty() {
                flag.execute(c).await?;
            }
            Ok::<_, diesel::result::Error>(())
        })
        .await
        .map_err(|e| {
            // A connection that failed is not trusted again.
            self.conn.lost();
            PersistenceError::from(e)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn marker(chat: u128, user: u128, up_to: u128, inbox: bool) -> HeldMarker {
        HeldMarker {
            chat_id: Uuid::from_u128(chat),
            user_id: Uuid::from_u128(user),
            up_to: Uuid::from_u128(up_to),
            inbox,
            since: Instant::now(),
        }
    }

    fn markers() -> ReadMarkers {
        ReadMarkers::new(
            ReadMarkerMode::Coalesced,
            MarkerMetrics::register(&mut Registry::default()),
        )
    }

    #[test]
    fn a_member_keeps_the_furthest_marker_and_the_oldest_hold() {
        let held = markers();
        let first = marker(1, 1, 5, false);
        assert_eq!(held.hold(first), Uuid::from_u128(5));
        assert_eq!(held.hold(marker(1, 1, 3, true)), Uuid::from_u128(5));
        assert_eq!(held.hold(marker(1, 1, 9, false)), Uuid::from_u128(9));
        held.hold(marker(1, 2, 1, false));
        assert_eq!(held.held(), 2);
        let taken = held.take();
        assert_eq!(held.held(), 0);
        assert_eq!(taken.len(), 2);
        assert_eq!(taken[0].up_to, Uuid::from_u128(9));
        assert!(taken[0].inbox, "an inbox move is kept");
        assert_eq!(taken[0].since, first.since);
    }

    #[test]
    fn a_failed_flush_gives_back_without_moving_a_marker_back() {
        let held = markers();
        held.hold(marker(1, 1, 5, false));
        let taken = held.take();
        held.hold(marker(1, 1, 7, false));
        held.failed(taken);
        assert_eq!(
            held.held_by(Uuid::from_u128(1), Uuid::from_u128(1)),
            Some(Uuid::from_u128(7))
        );
        assert_eq!(held.metrics().failed_flushes.get(), 1);
        assert_eq!(held.metrics().held.get(), 2, "a give-back is no new move");
    }

    #[test]
    fn taken_markers_come_in_chat_and_member_order() {
        let held = markers();
        for (chat, user) in [(2, 1), (1, 2), (1, 1), (2, 0)] {
            held.hold(marker(chat, user, 1, false));
        }
        let keys: Vec<_> = held
            .take()
            .iter()
            .map(|h| (h.chat_id.as_u128(), h.user_id.as_u128()))
            .collect();
        assert_eq!(keys, [(1, 1), (1, 2), (2, 0), (2, 1)]);
    }
}
