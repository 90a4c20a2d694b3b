//! Membership changes: adding members, removing one (or leaving), and
//! handing the ownership over.

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, delete, post, put, web};

use chatlab_domain::{AddMembers, ChatId, NewMembers, RemoveMember, TransferOwnership, UserId};

use crate::auth::Caller;
use crate::dto::{
    AddMembersRequest, MembersAddedResponse, OwnerChangedResponse, TransferOwnershipRequest,
};
use crate::http::idempotency::{IdempotencyKeyHeader, IdempotencyKeyValue, PreparedResponse};
use crate::http::overrides::{ChosenPublishMode, ChosenStrategy, PublishModeName, StrategyName};
use crate::problem::{ApiError, Problem};
use crate::routes::responses::{NotJson, Unauthenticated};
use crate::state::AppState;

/// Adds members to a chat (the owner only), in one transaction: the member
/// rows by the insert strategy, a `membership` message, and a
/// `members.added` event by the publish mode (both overridable per request
/// like createChat's).
#[utoipa::path(
    tag = "chats",
    request_body = AddMembersRequest,
    params(
        ("id" = uuid::Uuid, Path, description = "Chat id"),
        ("x-chatlab-insert-strategy" = Option<StrategyName>, Header,
            description = "An insert strategy (the schema lists them; the strategies that write a whole chat as one statement or one flight write the rows as unnest; copy needs DB_DRIVER=blocking, else 422); honoured only with CHATLAB_ALLOW_OVERRIDES=true"),
        ("x-chatlab-publish-mode" = Option<PublishModeName>, Header,
            description = "A publish mode (the schema lists them); honoured only with CHATLAB_ALLOW_OVERRIDES=true"),
        ("idempotency-key" = Option<IdempotencyKeyValue>, Header,
            description = "Makes a retry safe: the same key from the same user within the retention (24 h) answers the first response and writes nothing more"),
    ),
    responses(
        (status = 201, description = "Added; or, with `Idempotent-Replayed: true`, the first response to this Idempotency-Key", body = MembersAddedResponse,
            headers(
                ("x-chatlab-insert-strategy" = String, description = "The strategy used"),
                ("x-chatlab-publish-mode" = String, description = "The publish mode used"),
                ("idempotent-replayed" = String, description = "`true` when this is the stored response of an earlier request with the same Idempotency-Key"),
            )),
        (status = 400, description = "Malformed JSON, id or header", body = Problem, content_type = "application/problem+json"),
        Unauthenticated,
        (status = 403, description = "The caller is a member but not the owner; nothing written", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such chat, or the caller is not a member (the same answer)", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "Some users are members already (listed), or a request with the same Idempotency-Key is still being written; nothing written", body = Problem, content_type = "application/problem+json"),
        NotJson,
        (status = 422, description = "No or too many users, unknown users (listed), or an Idempotency-Key used before for another request; nothing written", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "Database unavailable, or (in_tx_await) the broker did not acknowledge; nothing written", body = Problem, content_type = "application/problem+json"),
    )
)]
#[post("/chats/{id}/members")]
pub async fn add_members(
    caller: Caller,
    state: web::Data<AppState>,
    strategy: ChosenStrategy,
    mode: ChosenPublishMode,
    id: web::Path<uuid::Uuid>,
    key: IdempotencyKeyHeader,
    body: web::Json<AddMembersRequest>,
) -> Result<HttpResponse, ApiError> {
    let body = body.into_inner();
    let command = AddMembers::validate(
        NewMembers {
            chat_id: ChatId::from_uuid(*id),
            actor_id: caller.0,
            user_ids: body
                .user_ids
                .iter()
                .copied()
                .map(UserId::from_uuid)
                .collect(),
        },
        &state.limits,
    )?;
    let prepared = PreparedResponse::new(
        key,
        caller.0,
        "addMembers",
        &format!("/v1/chats/{}/members", *id),
        &body,
        StatusCode::CREATED,
        &MembersAddedResponse::from(&command),
    )?;
    let outcome = state
        .store
        .add_members(command, strategy.0, mode.0, prepared.claim())
        .await?;
    prepared.respond(outcome, |r| {
        r.insert_header(strategy.header())
            .insert_header(mode.header());
    })
}

/// Removes a member: the owner removes anyone else, and any member removes
/// themself (leaves). The owner cannot leave before handing the chat over.
/// Writes a `membership` message and publishes a `member.removed` event.
#[utoipa::path(
    tag = "chats",
    params(
        ("id" = uuid::Uuid, Path, description = "Chat id"),
        ("user_id" = uuid::Uuid, Path, description = "The member to remove (the caller's own id to leave)"),
        ("x-chatlab-publish-mode" = Option<PublishModeName>, Header,
            description = "A publish mode (the schema lists them); honoured only with CHATLAB_ALLOW_OVERRIDES=true"),
    ),
    responses(
        (status = 204, description = "Removed",
            headers(("x-chatlab-publish-mode" = String, description = "The publish mode used"))),
        (status = 400, description = "Malformed id or header", body = Problem, content_type = "application/problem+json"),
        Unauthenticated,
        (status = 403, description = "The caller is a member but not the owner, and not removing themself", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such chat, the caller is not a member, or the user is not a member", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The owner cannot leave before handing the chat over", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "Database unavailable, or (in_tx_await) the broker did not acknowledge; nothing written", body = Problem, content_type = "application/problem+json"),
    )
)]
// Hex digits and hyphens only, so that `/members/import` (no UUID) is not
// this route's: asked with DELETE it is then the 405 of the import path.
#[delete("/chats/{id}/members/{user_id:[0-9a-fA-F-]+}")]
pub async fn remove_member(
    caller: Caller,
    state: web::Data<AppState>,
    mode: ChosenPublishMode,
    path: web::Path<(uuid::Uuid, uuid::Uuid)>,
) -> Result<HttpResponse, ApiError> {
    let (chat, user) = path.into_inner();
    let command = RemoveMember::new(ChatId::from_uuid(chat), caller.0, UserId::from_uuid(user));
    state.store.remove_member(command, mode.0).await?;
    Ok(HttpResponse::NoContent()
        .insert_header(mode.header())
        .finish())
}

/// Hands the chat over to another member (the owner only). Writes a
/// `membership` message and publishes a `chat.owner_changed` event; the
/// former owner stays a member, and may then leave.
#[utoipa::path(
    tag = "chats",
    request_body = TransferOwnershipRequest,
    params(
        ("id" = uuid::Uuid, Path, description = "Chat id"),
        ("x-chatlab-publish-mode" = Option<PublishModeName>, Header,
            description = "A publish mode (the schema lists them); honoured only with CHATLAB_ALLOW_OVERRIDES=true"),
    ),
    responses(
        (status = 200, description = "Handed over", body = OwnerChangedResponse,
            headers(("x-chatlab-publish-mode" = String, description = "The publish mode used"))),
        (status = 400, description = "Malformed JSON, id or header", body = Problem, content_type = "application/problem+json"),
        Unauthenticated,
        (status = 403, description = "The caller is not the owner, or the new owner is not a member", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such chat, or the caller is not a member (the same answer)", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The user owns the chat already", body = Problem, content_type = "application/problem+json"),
        NotJson,
        (status = 503, description = "Database unavailable, or (in_tx_await) the broker did not acknowledge; nothing written", body = Problem, content_type = "application/problem+json"),
    )
)]
#[put("/chats/{id}/owner")]
pub async fn transfer_ownership(
    caller: Caller,
    state: web::Data<AppState>,
    mode: ChosenPublishMode,
    id: web::Path<uuid::Uuid>,
    body: web::Json<TransferOwnershipRequest>,
) -> Result<HttpResponse, ApiError> {
    let command = TransferOwnership::new(
        ChatId::from_uuid(*id),
        caller.0,
        UserId::from_uuid(body.user_id),
    );
    let response = OwnerChangedResponse::from(&command);
    state.store.transfer_ownership(command, mode.0).await?;
    Ok(HttpResponse::Ok()
        .insert_header(mode.header())
        .json(response))
}
