//! What createChat sends, per strategy: INSERT statements and rows. The
//! statement count is what distinguishes the strategies on the wire (52 for a
//! 50-member chat per row, 3 for batch and unnest); BEGIN and COMMIT are the
//! same for all three and are not counted.

use std::sync::Arc;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Registry, Unit};

use chatlab_domain::{InsertStrategy, PublishMode};

use crate::database::pool_metrics::latency_buckets;

/// Label: the insert strategy.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StrategyLabel {
    /// `per_row`, `batch` or `unnest`.
    pub strategy: &'static str,
}

/// Labels of the hold-time histogram: strategy and publish mode.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct HoldLabel {
    /// `per_row`, `batch` or `unnest`.
    pub strategy: &'static str,
    /// `off`, `in_tx_await`, `in_tx_enqueue`, `after_commit` or `outbox`.
    pub publish_mode: &'static str,
}

/// What an import job writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImportKind {
    /// Chat members.
    Members,
    /// Messages.
    Messages,
}

impl ImportKind {
    fn as_str(self) -> &'static str {
        match self {
            Self::Members => "members",
            Self::Messages => "messages",
        }
    }
}

/// Labels of the import row counter.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ImportRowsLabel {
    /// `members` or `messages`.
    pub kind: &'static str,
    /// `per_row`, `batch` or `unnest`.
    pub strategy: &'static str,
}

/// Labels of the import chunk counter.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ImportChunkLabel {
    /// `members` or `messages`.
    pub kind: &'static str,
    /// `committed` or `failed`.
    pub outcome: &'static str,
}

/// Counters of the createChat write path, and of import jobs.
#[derive(Debug, Clone)]
pub struct WriteMetrics {
    /// INSERT statements executed by committed createChat transactions.
    pub statements: Family<StrategyLabel, Counter>,
    /// Rows inserted by committed createChat transactions (chat, members,
    /// system message).
    pub rows: Family<StrategyLabel, Counter>,
    /// Committed createChat transactions.
    pub chats: Family<StrategyLabel, Counter>,
    /// Round trips to PostgreSQL of committed createChats: statements,
    /// BEGIN and COMMIT, the outbox row.
    pub round_trips: Family<StrategyLabel, Counter>,
    /// How long each committed createChat held its pooled connection, by
    /// strategy and publish mode: the pool's own use-time histogram mixes
    /// every checkout, this one lets a run that mixes them compare them.
    pub connection_hold: Family<HoldLabel, Histogram, fn() -> Histogram>,
    /// Rows committed by import chunks.
    pub import_rows: Family<ImportRowsLabel, Counter>,
    /// Import chunks, by outcome.
    pub import_chunks: Family<ImportChunkLabel, Counter>,
    /// Inbox rows committed by sends that fan out on write
    /// (`MESSAGE_FANOUT=inbox`), by strategy.
    pub inbox_rows: Family<StrategyLabel, Counter>,
}

fn new_histogram() -> Histogram {
    Histogram::new(latency_buckets())
}

impl WriteMetrics {
    /// Creates the counters and registers them in `registry`.
    pub fn register(registry: &mut Registry) -> Arc<Self> {
        let m = Self {
            statements: Family::default(),
            rows: Family::default(),
            chats: Family::default(),
            round_trips: Family::default(),
            connection_hold: Family::new_with_constructor(new_histogram),
            import_rows: Family::default(),
            import_chunks: Family::default(),
            inbox_rows: Family::default(),
        };
        registry.register(
            "chatlab_create_chat_statements",
            "INSERT statements executed by committed createChat transactions",
            m.statements.clone(),
        );
        registry.register(
            "chatlab_create_chat_rows_inserted",
            "Rows inserted by committed createChat transactions",
            m.rows.clone(),
        );
        registry.register(
            "chatlab_create_chat_transactions",
            "Committed createChat transactions",
            m.chats.clone(),
        );
        registry.register(
            "chatlab_create_chat_round_trips",
            "Round trips to PostgreSQL of committed createChats (statements, BEGIN, COMMIT)",
            m.round_trips.clone(),
        );
        registry.register_with_unit(
            "chatlab_create_chat_connection_hold",
            "Time a committed createChat held its pooled connection, by strategy and publish mode",
            Unit::Seconds,
            m.connection_hold.clone(),
        );
        registry.register(
            "chatlab_import_rows_inserted",
            "Rows committed by import jobs, by kind and strategy",
            m.import_rows.clone(),
        );
        registry.register(
            "chatlab_import_chunks",
            "Import chunks (one transaction each), by kind and outcome",
            m.import_chunks.clone(),
        );
        registry.register(
            "chatlab_inbox_rows_inserted",
            "Inbox rows committed by sends that fan out on write (MESSAGE_FANOUT=inbox), by strategy",
            m.inbox_rows.clone(),
        );
        m.create_every_series();
        Arc::new(m)
    }

    /// Creates every counter's label combinations at 0, so that a
    /// dashboard shows 0 for a strategy not used yet, not "no data"
    /// (histograms appear with their first observation).
    fn create_every_series(&self) {
        for strategy in InsertStrategy::ALL {
            let label = StrategyLabel {
                strategy: strategy.as_str(),
            };
            let _ = self.statements.get_or_create(&label);
            let _ = self.rows.get_or_create(&label);
            let _ = self.chats.get_or_create(&label);
            let _ = self.round_trips.get_or_create(&label);
            let _ = self.inbox_rows.get_or_create(&label);
            for kind in [ImportKind::Members, ImportKind::Messages] {
                let _ = self.import_rows.get_or_create(&ImportRowsLabel {
                    kind: kind.as_str(),
                    strategy: strategy.as_str(),
                });
            }
        }
        for kind in [ImportKind::Members, ImportKind::Messages] {
            for outcome in ["committed", "failed"] {
                let _ = self.import_chunks.get_or_create(&ImportChunkLabel {
                    kind: kind.as_str(),
                    outcome,
                });
            }
        }
    }

    /// Records one import chunk.
    pub(crate) fn record_import(
        &self,
        kind: ImportKind,
        strategy: InsertStrategy,
        committed: bool,
        count: crate::writes::row_writes::WriteCount,
    ) {
        self.import_chunks
            .get_or_create(&ImportChunkLabel {
                kind: kind.as_str(),
                outcome: if committed { "committed" } else { "failed" },
            })
            .inc();
        if committed {
            self.import_rows
                .get_or_create(&ImportRowsLabel {
                    kind: kind.as_str(),
                    strategy: strategy.as_str(),
                })
                .inc_by(count.rows);
        }
    }

    /// Records the inbox rows of one committed send.
    pub(crate) fn record_inbox(&self, strategy: InsertStrategy, rows: u64) {
        self.inbox_rows
            .get_or_create(&StrategyLabel {
                strategy: strategy.as_str(),
            })
            .inc_by(rows);
    }

    /// Records one committed createChat.
    pub(crate) fn record(
        &self,
        strategy: InsertStrategy,
        mode: PublishMode,
        write: crate::writes::chat_statements::ChatWrite,
        held: Duration,
    ) {
        self.connection_hold
            .get_or_create(&HoldLabel {
                strategy: strategy.as_str(),
                publish_mode: mode.as_str(),
            })
            .observe(held.as_secs_f64());
        let label = StrategyLabel {
            strategy: strategy.as_str(),
        };
        self.statements
            .get_or_create(&label)
            .inc_by(write.count.statements);
        self.rows.get_or_create(&label).inc_by(write.count.rows);
        self.round_trips
            .get_or_create(&label)
            .inc_by(write.round_trips);
        self.chats.get_or_create(&label).inc();
    }
}
