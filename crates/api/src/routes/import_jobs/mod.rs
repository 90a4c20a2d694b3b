use std::time::Instant;

use actix_web::{HttpResponse, post, web};

use chatlab_domain::{
    ChatId, ImportMembers, ImportMessages, ImportReport, NewImportedMessage, UserId,
};

use crate::dto::{ImportMembersRequest, ImportMessagesRequest, ImportResponse};
mod body;

use crate::auth::Caller;
use crate::overrides::{ChosenStrategy, StrategyName};
use crate::problem::{ApiError, Problem};
use crate::state::AppState;
use body::ImportBody;

/// 201 when every chunk committed; otherwise the problem of the first
/// failed chunk, with what was committed before it stopped.
fn respond(
    report: ImportReport,
    started: Instant,
    strategy: ChosenStrategy,
) -> Result<HttpResponse, ApiError> {
    let response = ImportResponse::new(&report, started.elapsed());
    match report.failure {
        None => Ok(HttpResponse::Created()
            .insert_header(strategy.header())
            .json(response)),
        Some(failure) => Err(ApiError::ImportStopped {
            cause: Box::new(failure.error.into()),
            failed: failure.chunk.into(),
            committed: report.committed.into_iter().map(Into::into).collect(),
        }),
    }
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
            description = "per_row, batch or unnest inside each chunk (single and pipeline write a job's rows as unnest); honoured only with CHATLAB_ALLOW_OVERRIDES=true"),
    ),
    responses(
        (status = 201, description = "Every row written", body = ImportResponse),
        (status = 400, description = "Malformed JSON or id", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "The body is not sent as application/json", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No valid bearer token", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "The caller is a member but not the owner; nothing written", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such chat, or the caller is not a member; nothing written", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "A chunk hit a user already in the chat; earlier chunks committed (listed)", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "Body over HTTP_IMPORT_LIMIT_BYTES", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Invalid job (nothing written), or a chunk named unknown users (earlier chunks committed, listed)", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "Database unavailable; the problem lists any chunks committed before", body = Problem, content_type = "application/problem+json"),
    )
)]
#[post("/chats/{id}/members/import")]
pub async fn import_members(
    caller: Caller,
    state: web::Data<AppState>,
    strategy: ChosenStrategy,
    id: web::Path<uuid::Uuid>,
    body: ImportBody<ImportMembersRequest>,
) -> Result<HttpResponse, ApiError> {
    let started = Instant::now();
    let body = body.0;
    let job = ImportMembers::validate(
        ChatId::from_uuid(*id),
        body.user_ids.into_iter().map(UserId::from_uuid).collect(),
        body.chunk_size,
        body.parallelism,
        &state.limits,
    )?;
    let report = state
        .store
        .import_members(job, strategy.0, caller.0)
        .await?;
    respond(report, started, strategy)
}

/// Imports many messages into an existing chat (the owner only), as a bulk job like the
/// member import (same chunking, same partial-failure report). Every
/// sender must be a member, checked before the first chunk. Imported
/// messages publish no events.
#[utoipa::path(
    tag = "imports",
    request_body = ImportMessagesRequest,
    params(
        ("id" = uuid::Uuid, Path, description = "Chat id"),
        ("x-chatlab-insert-strategy" = Option<StrategyName>, Header,
            description = "per_row, batch or unnest inside each chunk (single and pipeline write a job's rows as unnest); honoured only with CHATLAB_ALLOW_OVERRIDES=true"),
    ),
    responses(
        (status = 201, description = "Every row written", body = ImportResponse),
        (status = 400, description = "Malformed JSON or id", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "The body is not sent as application/json", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No valid bearer token", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "The caller is a member but not the owner, or a sender is not a member; nothing written", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such chat, or the caller is not a member; nothing written", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "Body over HTTP_IMPORT_LIMIT_BYTES", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Invalid job; nothing written", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "Database unavailable; the problem lists any chunks committed before", body = Problem, content_type = "application/problem+json"),
    )
)]
#[post("/chats/{id}/messages/import")]
pub async fn import_messages(
    caller: Caller,
    state: web::Data<AppState>,
    strategy: ChosenStrategy,
    id: web::Path<uuid::Uuid>,
    body: ImportBody<ImportMessagesRequest>,
) -> Result<HttpResponse, ApiError> {
    let started = Instant::now();
    let body = body.0;
    let job = ImportMessages::validate(
        ChatId::from_uuid(*id),
        body.messages
            .into_iter()
            .map(|m| NewImportedMessage {
                sender_id: UserId::from_uuid(m.sender_id),
                body: m.body,
            })
            .collect(),
        body.chunk_size,
        body.parallelism,
        &state.limits,
    )?;
    let report = state
        .store
        .import_messages(job, strategy.0, caller.0)
        .await?;
    respond(report, started, strategy)
}
