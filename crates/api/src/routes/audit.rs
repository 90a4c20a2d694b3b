use actix_web::{HttpResponse, get, web};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use chatlab_domain::Receipt;
use chatlab_domain::audit::Verdict;

use crate::problem::{ApiError, Problem};
use crate::state::AppState;

/// `GET /audit` query.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct AuditQuery {
    /// Start of the window (RFC 3339); default: `until` minus
    /// `CHATLAB_AUDIT_MAX_WINDOW_SECS` (a day), or the server's start when
    /// it runs the embedded broker (whose events die with it) and started
    /// later. A wider window is refused (400): audit it in parts.
    pub since: Option<DateTime<Utc>>,
    /// End of the window (RFC 3339, exclusive); default: now minus `settle_ms`.
    pub until: Option<DateTime<Utc>>,
    /// When `until` is not given, leave out the last milliseconds, whose
    /// events may still be on their way (default 2000).
    pub settle_ms: Option<u64>,
    /// Which per-event lines to include: `findings` (default: every line
    /// whose verdict is not `ok`) or `all`.
    pub events: Option<LinesShown>,
}

/// Which per-event lines `GET /audit` includes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum LinesShown {
    /// Lines with a finding.
    #[default]
    Findings,
    /// Every line.
    All,
}

/// Where a record is: a partition and an offset (below 0: not named).
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct PositionResponse {
    /// Partition.
    pub partition: i32,
    /// Offset.
    pub offset: i64,
}

impl From<&Receipt> for PositionResponse {
    fn from(r: &Receipt) -> Self {
        Self {
            partition: r.partition,
            offset: r.offset,
        }
    }
}

/// One chat or message of the window: whether its write committed, where
/// the broker said it stored its event, where the reader found it.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct EventLineResponse {
    /// The chat (`chat.created`) or message (`message.sent`).
    pub subject_id: uuid::Uuid,
    /// Its publish mode.
    pub mode: String,
    /// Whether its write is committed.
    pub committed: bool,
    /// Its event ids, on the topic or in receipts.
    pub event_ids: Vec<uuid::Uuid>,
    /// One position per acknowledgement the broker gave; empty: never
    /// acknowledged.
    pub acked_at: Vec<PositionResponse>,
    /// Where the reader found the event; empty: not on the topic.
    pub seen_at: Vec<PositionResponse>,
    /// `ok`, `duplicated`, `phantom`, `lost (never acknowledged)` or
    /// `acknowledged, not on the topic`.
    pub verdict: String,
}

/// What the receipts say about the broker over the window.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct BrokerFindingsResponse {
    /// Receipts checked.
    pub receipts: usize,
    /// Acknowledged at or past the partition's high watermark.
    pub acked_past_end: usize,
    /// Offsets acknowledged for more than one event.
    pub offsets_acked_twice: usize,
    /// Acknowledged offsets inside the watermarks that the reader did not get.
    pub acked_unread: usize,
    /// Acknowledged without an offset.
    pub acked_without_offset: usize,
    /// Acknowledged below the low watermark (removed by retention).
    pub expired: usize,
}

/// The reconciliation of one publish mode.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ModeAuditResponse {
    /// The mode.
    pub mode: String,
    /// Committed writes made with it.
    pub committed: usize,
    /// Distinct events of it on the topic.
    pub events: usize,
    /// Distinct events of it the broker acknowledged (receipts).
    pub acked: usize,
    /// Committed writes without an event on the topic.
    pub lost: usize,
    /// Of `lost`, those the broker had acknowledged: the broker's loss.
    pub lost_after_ack: usize,
    /// Events without a committed write.
    pub phantom: usize,
    /// Extra copies of events.
    pub duplicated: usize,
    /// A no-loss mode (`outbox`, `in_tx_await`) lost an event the broker
    /// never acknowledged.
    pub failed: bool,
}

/// The audit of a window.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct AuditResponse {
    /// Window start.
    pub since: DateTime<Utc>,
    /// Window end (exclusive).
    pub until: DateTime<Utc>,
    /// One entry per mode seen.
    pub modes: Vec<ModeAuditResponse>,
    /// Records on the topic that were not chatlab events.
    pub unreadable: usize,
    /// Whether any no-loss mode lost an event the broker never
    /// acknowledged (chatlab's loss).
    pub failed: bool,
    /// Whether the broker lost or misplaced events it acknowledged.
    pub broker_failed: bool,
    /// The receipts against the topic.
    pub broker: BrokerFindingsResponse,
    /// Per-event lines (see the `events` query parameter), findings first.
    pub events: Vec<EventLineResponse>,
    /// The same, as Markdown tables.
    pub table: String,
}

/// Reconciles the event topic with the committed writes, per publish mode.
#[utoipa::path(
    tag = "operations",
    params(AuditQuery),
    responses(
        (status = 200, description = "The audit", body = AuditResponse),
        (status = 400, description = "Malformed query", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "Database or broker unavailable", body = Problem, content_type = "application/problem+json"),
    )
)]
#[get("/audit")]
pub async fn audit(
    state: web::Data<AppState>,
    query: web::Query<AuditQuery>,
) -> Result<HttpResponse, ApiError> {
    let settle =
        chrono::Duration::milliseconds(query.settle_ms.unwrap_or(2000).min(86_400_000) as i64);
    let (since, until) = state
        .audit
        .window(query.since, query.until, settle)
        .map_err(ApiError::BadRequest)?;
    let shown = query.events.unwrap_or_default();
    let report = state.audit.run(since, until).await.map_err(|e| match e {
        crate::audit::AuditError::Database(e) => ApiError::from(e),
        crate::audit::AuditError::Busy => ApiError::Unavailable {
            reason: chatlab_domain::UnavailableReason::AlreadyRunning,
            source: Box::new(e),
        },
        other => ApiError::Unavailable {
            reason: chatlab_domain::UnavailableReason::EventBroker,
            source: Box::new(other),
        },
    })?;
    Ok(HttpResponse::Ok().json(AuditResponse {
        since,
        until,
        modes: report
            .modes
            .iter()
            .map(|m| ModeAuditResponse {
                mode: m.mode.as_str().to_owned(),
                committed: m.committed,
                events: m.events,
                acked: m.acked,
                lost: m.lost,
                lost_after_ack: m.lost_after_ack,
                phantom: m.phantom,
                duplicated: m.duplicated,
                failed: m.failed(),
            })
            .collect(),
        unreadable: report.unreadable,
        failed: report.failed(),
        broker_failed: report.broker_failed(),
        broker: BrokerFindingsResponse {
            receipts: report.broker.receipts,
            acked_past_end: report.broker.acked_past_end,
            offsets_acked_twice: report.broker.offsets_acked_twice,
            acked_unread: report.broker.acked_unread,
            acked_without_offset: report.broker.acked_without_offset,
            expired: report.broker.expired,
        },
        events: report
            .lines
            .iter()
            .filter(|l| shown == LinesShown::All || l.verdict != Verdict::Ok)
            .map(|l| EventLineResponse {
                subject_id: l.subject_id,
                mode: l.mode.as_str().to_owned(),
                committed: l.committed,
                event_ids: l.event_ids.clone(),
                acked_at: l.acked_at.iter().map(PositionResponse::from).collect(),
                seen_at: l.seen_at.iter().map(PositionResponse::from).collect(),
                verdict: l.verdict.as_str().to_owned(),
            })
            .collect(),
        table: report.to_table(),
    }))
}
