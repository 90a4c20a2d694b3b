use std::time::Instant;

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, post, web};

use chatlab_domain::{
    ChatId, ImportMembers, ImportMessages, ImportReport, Keyed, NewImportedMessage, UserId,
};
use chatlab_persistence::writes::idempotency;

use crate::dto::{ImportMembersRequest, ImportMessagesRequest, ImportResponse};
use crate::routes::responses::{NotJson, Unauthenticated};
mod body;

use crate::auth::Caller;
use crate::http::idempotency::{IdempotencyKeyHeader, IdempotencyKeyValue, PreparedResponse};
use crate::http::overrides::{ChosenFanout, ChosenStrategy, FanoutName, StrategyName};
use crate::problem::{ApiError, Problem};
use crate::state::AppState;
use body::ImportBody;

/// An import's key: the claim its chunks derive their parts from, and the
/// whole job's response once it is known.
struct ImportKey {
    key: IdempotencyKeyHeader,
    caller: UserId,
    operation: &'static str,
    path: String,
}

impl ImportKey {
    /// The claim for the request `body`, with `response` as its answer
    /// (the chunks store their own; only the finished job stores this).
    fn claim(
        &self,
        body: &impl serde::Serialize,
        response: &impl serde::Serialize,
    ) -> Result<PreparedResponse, ApiError> {
        PreparedResponse::new(
            self.key.clone(),
            self.caller,
            self.operation,
            &self.path,
            body,
            StatusCode::CREATED,
            response,
        )
    }
}

/// The response stored for this job's key by an earlier request, if any.
async fn earlier_answer(
    state: &AppState,
    prepared: &PreparedResponse,
) -> Result<Option<HttpResponse>, ApiError> {
    let Some(claim) = prepared.claim() else {
        return Ok(None);
    };
    let stored = idempotency::stored(state.store.db(), &claim, state.store.key_retention()).await?;
    stored.map(PreparedResponse::replay).transpose()
}

/// 201 when every chunk committed (stored under the key, when one was
/// sent); otherwise the problem of the first failed chunk, with what was
/// committed before it stopped, and no stored answer: a retry with the key
/// writes only the chunks that did not commit.
async fn respond(
    state: &AppState,
    report: ImportReport,
    started: Instant,
    strategy: ChosenStrategy,
    key: &ImportKey,
    body: &impl serde::Serialize,
) -> Result<HttpResponse, ApiError> {
    if let Some(failure) = report.failure {
        return Err(ApiError::ImportStopped {
            cause: Box::new(failure.error.into()),
            failed: failure.chunk.into(),
            committed: report.committed.into_iter().map(Into::into).collect(),
        });
    }
    let prepared = key.claim(body, &ImportResponse::new(&report, started.elapsed()))?;
    let outcome = match prepared.claim() {
        Some(claim) => {
            idempotency::finish(state.store.db(), claim, state.store.key_retention()).await?
        }
        None => Keyed::Fresh(()),
    };
    prepared.respond(outcome, |r| {
        r.insert_header(strategy.header());
    })
}

/// Adds many users to an existing chat (the owner only): a bulk job, split into
/// transactions of `chunk_size` rows (the server's insert strategy, or the
/// override header's, inside each), run `parallelism` at a time. Not
/// atomic: when a chunk fails, the chunks committed before it stay, and
/// the problem document lists them (`committed_chunks`, `rows_written`)
/// and the chunk that failed (`failed_chunk`). A malformed job writes
/// nothing.
#[utoipa::path(
    tag = "imports",
    request_body = ImportMembersRequest,
    params(
        ("id" = uuid::Uuid, Path, description = "Chat id"),
        ("x-chatlab-insert-strategy" = Option<StrategyName>, Header,
            description = "The insert strategy inside each chunk (the schema lists them; the strategies that write a whole chat as one statement or one flight write a job's rows as unnest; copy needs DB_DRIVER=blocking, else 422); honoured only with CHATLAB_ALLOW_OVERRIDES=true"),
        ("idempotency-key" = Option<IdempotencyKeyValue>, Header,
            description = "Makes a retry safe: each chunk claims its part of the key in its own transaction, so a retry writes only the chunks not committed before; a finished job's response is answered again within the retention (24 h)"),
    ),
    responses(
        (status = 201, description = "Every row written; or, with `Idempotent-Replayed: true`, the first response to this Idempotency-Key", body = ImportResponse,
            headers(("idempotent-replayed" = String, description = "`true` when this is the stored response of an earlier request with the same Idempotency-Key"))),
        (status = 400, description = "Malformed JSON or id", body = Problem, content_type = "application/problem+json"),
        NotJson,
        Unauthenticated,
        (status = 403, description = "The caller is a member but not the owner; nothing written", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such chat, or the caller is not a member; nothing written", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "A chunk hit a user already in the chat, or a request with the same Idempotency-Key was writing it; earlier chunks committed (listed)", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "Body over HTTP_IMPORT_LIMIT_BYTES", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Invalid job, or an Idempotency-Key used before for another request (nothing written), or a chunk named unknown users (earlier chunks committed, listed)", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "Database unavailable; the problem lists any chunks committed before", body = Problem, content_type = "application/problem+json"),
    )
)]
#[post("/chats/{id}/members/import")]
pub async fn import_members(
    caller: Caller,
    state: web::Data<AppState>,
    strategy: ChosenStrategy,
    id: web::Path<uuid::Uuid>,
    key: IdempotencyKeyHeader,
    body: ImportBody<ImportMembersRequest>,
) -> Result<HttpResponse, ApiError> {
    let started = Instant::now();
    let body = body.0;
    let job = ImportMembers::validate(
        ChatId::from_uuid(*id),
        body.user_ids
            .iter()
            .copied()
            .map(UserId::from_uuid)
            .collect(),
        body.chunk_size,
        body.parallelism,
        &state.limits,
    )?;
    let key = ImportKey {
        key,
        caller: caller.0,
        operation: "importMembers",
        path: format!("/v1/chats/{}/members/import", *id),
    };
    let lookup = key.claim(&body, &())?;
    if let Some(answer) = earlier_answer(&state, &lookup).await? {
        return Ok(answer);
    }
    let report = state
        .store
        .import_members_keyed(job, strategy.0, caller.0, lookup.claim())
        .await?;
    respond(&state, report, started, strategy, &key, &body).await
}

/// Imports many messages into an existing chat (the owner only), as a bulk job like the
/// member import (same chunking, same partial-failure report). Every
/// sender must be a member, checked before the first chunk. Imported
/// messages publish no events; under the `inbox` fan-out each chunk writes
/// its messages' inbox rows in its transaction.
#[utoipa::path(
    tag = "imports",
    request_body = ImportMessagesRequest,
    params(
        ("id" = uuid::Uuid, Path, description = "Chat id"),
        ("x-chatlab-insert-strategy" = Option<StrategyName>, Header,
            description = "The insert strategy inside each chunk (the schema lists them; the strategies that write a whole chat as one statement or one flight write a job's rows as unnest; copy needs DB_DRIVER=blocking, else 422); honoured only with CHATLAB_ALLOW_OVERRIDES=true"),
        ("x-chatlab-message-fanout" = Option<FanoutName>, Header,
            description = "A message fan-out (the schema lists them; with inbox each chunk also writes its inbox rows); honoured only with CHATLAB_ALLOW_OVERRIDES=true"),
        ("idempotency-key" = Option<IdempotencyKeyValue>, Header,
            description = "Makes a retry safe: each chunk claims its part of the key in its own transaction, so a retry writes only the chunks not committed before; a finished job's response is answered again within the retention (24 h)"),
    ),
    responses(
        (status = 201, description = "Every row written; or, with `Idempotent-Replayed: true`, the first response to this Idempotency-Key", body = ImportResponse,
            headers(("idempotent-replayed" = String, description = "`true` when this is the stored response of an earlier request with the same Idempotency-Key"))),
        (status = 400, description = "Malformed JSON or id", body = Problem, content_type = "application/problem+json"),
        NotJson,
        Unauthenticated,
        (status = 403, description = "The caller is a member but not the owner, or a sender is not a member; nothing written", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such chat, or the caller is not a member; nothing written", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "Body over HTTP_IMPORT_LIMIT_BYTES", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "A request with the same Idempotency-Key was writing a chunk; earlier chunks committed (listed)", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Invalid job, or an Idempotency-Key used before for another request; nothing written", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "Database unavailable; the problem lists any chunks committed before", body = Problem, content_type = "application/problem+json"),
    )
)]
#[post("/chats/{id}/messages/import")]
pub async fn import_messages(
    caller: Caller,
    state: web::Data<AppState>,
    strategy: ChosenStrategy,
    fanout: ChosenFanout,
    id: web::Path<uuid::Uuid>,
    key: IdempotencyKeyHeader,
    body: ImportBody<ImportMessagesRequest>,
) -> Result<HttpResponse, ApiError> {
    let started = Instant::now();
    let body = body.0;
    let job = ImportMessages::validate(
        ChatId::from_uuid(*id),
        body.messages
            .iter()
            .map(|m| NewImportedMessage {
                sender_id: UserId::from_uuid(m.sender_id),
                body: m.body.clone(),
            })
            .collect(),
        body.chunk_size,
        body.parallelism,
        &state.limits,
    )?;
    let key = ImportKey {
        key,
        caller: caller.0,
        operation: "importMessages",
        path: format!("/v1/chats/{}/messages/import", *id),
    };
    let lookup = key.claim(&body, &())?;
    if let Some(answer) = earlier_answer(&state, &lookup).await? {
        return Ok(answer);
    }
    let report = state
        .store
        .import_messages_routed(job, strategy.0, fanout.0, caller.0, lookup.claim())
        .await?;
    respond(&state, report, started, strategy, &key, &body).await
}
