use actix_web::http::StatusCode;
use actix_web::{HttpResponse, get, post, web};

use chatlab_domain::{ChatCreated, ChatId, CreateChat, NewChat, PageRequest, UserId};

use crate::auth::Caller;
use crate::dto::{ChatCreatedResponse, ChatResponse, CreateChatRequest, MembersPage, MembersQuery};
use crate::http::idempotency::{IdempotencyKeyHeader, IdempotencyKeyValue, PreparedResponse};
use crate::http::overrides::{ChosenPublishMode, ChosenStrategy, PublishModeName, StrategyName};
use crate::problem::{ApiError, Problem};
use crate::routes::responses::{NotJson, Unauthenticated};
use crate::state::AppState;

/// createChat: the chat, its members (the caller, who owns it, and those
/// named) and a "room created" system message,
/// in one transaction, and a `chat.created` event. The member rows are
/// written by the server's insert strategy and the event published by its
/// publish mode, or by those named in `X-Chatlab-Insert-Strategy` and
/// `X-Chatlab-Publish-Mode` when the server allows overrides; the response
/// names both.
#[utoipa::path(
    tag = "chats",
    request_body = CreateChatRequest,
    params(
        ("x-chatlab-insert-strategy" = Option<StrategyName>, Header,
            description = "An insert strategy (the schema lists them; copy needs DB_DRIVER=blocking, else 422); honoured only with CHATLAB_ALLOW_OVERRIDES=true"),
        ("x-chatlab-publish-mode" = Option<PublishModeName>, Header,
            description = "A publish mode (the schema lists them); honoured only with CHATLAB_ALLOW_OVERRIDES=true"),
        ("idempotency-key" = Option<IdempotencyKeyValue>, Header,
            description = "Makes a retry safe: the same key from the same user within the retention (24 h) answers the first response and writes nothing more"),
    ),
    responses(
        (status = 201, description = "Created; or, with `Idempotent-Replayed: true`, the first response to this Idempotency-Key", body = ChatCreatedResponse,
            headers(
                ("x-chatlab-insert-strategy" = String, description = "The strategy used"),
                ("x-chatlab-publish-mode" = String, description = "The publish mode used"),
                ("idempotent-replayed" = String, description = "`true` when this is the stored response of an earlier request with the same Idempotency-Key"),
            )),
        (status = 409, description = "A request with the same Idempotency-Key is still being written", body = Problem, content_type = "application/problem+json"),
        (status = 400, description = "Malformed JSON or override header", body = Problem, content_type = "application/problem+json"),
        NotJson,
        Unauthenticated,
        (status = 422, description = "Invalid fields, too many members, unknown users (listed), or an Idempotency-Key used before for another request", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "Database unavailable, pool exhausted, or (in_tx_await) the broker did not acknowledge; nothing written", body = Problem, content_type = "application/problem+json"),
    )
)]
#[post("/chats")]
pub async fn create_chat(
    caller: Caller,
    state: web::Data<AppState>,
    strategy: ChosenStrategy,
    mode: ChosenPublishMode,
    key: IdempotencyKeyHeader,
    body: web::Json<CreateChatRequest>,
) -> Result<HttpResponse, ApiError> {
    let body = body.into_inner();
    let command = CreateChat::validate(
        NewChat {
            name: body.name.clone(),
            creator_id: caller.0,
            member_ids: body
                .member_ids
                .iter()
                .copied()
                .map(UserId::from_uuid)
                .collect(),
        },
        &state.limits,
    )?;
    tracing::Span::current().record("chatlab.member_count", command.member_ids.len());
    let prepared = PreparedResponse::new(
        key,
        caller.0,
        "createChat",
        "/v1/chats",
        &body,
        StatusCode::CREATED,
        &ChatCreatedResponse::from(ChatCreated::of(&command)),
    )?;
    let outcome = state
        .store
        .create_chat_keyed(command, strategy.0, mode.0, prepared.claim())
        .await?;
    prepared.respond(outcome, |r| {
        r.insert_header(strategy.header())
            .insert_header(mode.header());
    })
}

/// Reads a chat with its member count; members only.
#[utoipa::path(
    tag = "chats",
    params(("id" = uuid::Uuid, Path, description = "Chat id")),
    responses(
        (status = 200, description = "The chat", body = ChatResponse),
        (status = 400, description = "Malformed id", body = Problem, content_type = "application/problem+json"),
        Unauthenticated,
        (status = 404, description = "No such chat, or the caller is not a member (the same answer)", body = Problem, content_type = "application/problem+json"),
    )
)]
#[get("/chats/{id}")]
pub async fn get_chat(
    caller: Caller,
    state: web::Data<AppState>,
    id: web::Path<uuid::Uuid>,
) -> Result<HttpResponse, ApiError> {
    let chat = state
        .store
        .get_chat(ChatId::from_uuid(*id), caller.0)
        .await?;
    Ok(HttpResponse::Ok().json(ChatResponse::from(chat)))
}

/// Lists a chat's members by user id, a page at a time; members only.
#[utoipa::path(
    tag = "chats",
    params(("id" = uuid::Uuid, Path, description = "Chat id"), MembersQuery),
    responses(
        (status = 200, description = "A page of members", body = MembersPage),
        (status = 400, description = "Malformed id or query", body = Problem, content_type = "application/problem+json"),
        Unauthenticated,
        (status = 404, description = "No such chat, or the caller is not a member (the same answer)", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Limit out of range", body = Problem, content_type = "application/problem+json"),
    )
)]
#[get("/chats/{id}/members")]
pub async fn list_members(
    caller: Caller,
    state: web::Data<AppState>,
    id: web::Path<uuid::Uuid>,
    query: web::Query<MembersQuery>,
) -> Result<HttpResponse, ApiError> {
    let page = PageRequest::new(query.after.map(UserId::from_uuid), query.limit)?;
    let members = state
        .store
        .list_members(ChatId::from_uuid(*id), caller.0, page)
        .await?;
    Ok(HttpResponse::Ok().json(MembersPage::from(members)))
}
