//! Read markers and unread state: what a member has read, and their chats
//! with unread counts. Each read counts from the rows of the request's
//! message fan-out (`MESSAGE_FANOUT`, or `X-Chatlab-Message-Fanout` where
//! overrides are allowed), and both fan-outs give the same answers for
//! chats written in one of them.

use actix_web::{HttpResponse, get, post, web};

use chatlab_domain::{
    ChatId, Entity, FieldError, MarkRead, MessageId, PageRequest, RepositoryError, ValidationErrors,
};

use crate::auth::Caller;
use crate::dto::{MarkReadRequest, MyChatsPage, MyChatsQuery, ReadStateResponse};
use crate::http::overrides::{ChosenFanout, FanoutName};
use crate::problem::{ApiError, Problem};
use crate::routes::responses::{NotJson, Unauthenticated};
use crate::state::AppState;

/// Moves the caller's read marker in the chat forward to `up_to`, one of
/// the chat's messages (an older one changes nothing), and answers the
/// read state after it. With the `inbox` fan-out the caller's inbox rows
/// up to the marker are flagged read in the same transaction. With
/// `READ_MARKER_MODE=coalesced` the move is held by this instance and
/// written by its next flush (within `READ_MARKER_FLUSH_MS`): the answer
/// and this instance's `GET /v1/me/chats/{id}` count from it at once, the
/// chat list and other instances once it is written; with `log`, every
/// read on every instance counts from it at once. The caller's live
/// connections (`GET /v1/events`, `/v1/ws`) receive the new marker and
/// unread count as a `chat.read` frame.
#[utoipa::path(
    tag = "read state",
    request_body = MarkReadRequest,
    params(
        ("id" = uuid::Uuid, Path, description = "Chat id"),
        ("x-chatlab-message-fanout" = Option<FanoutName>, Header,
            description = "A message fan-out (the schema lists them); honoured only with CHATLAB_ALLOW_OVERRIDES=true"),
    ),
    responses(
        (status = 200, description = "The read state after the move", body = ReadStateResponse,
            headers(("x-chatlab-message-fanout" = String, description = "The fan-out whose rows were counted"))),
        (status = 400, description = "Malformed JSON or id", body = Problem, content_type = "application/problem+json"),
        NotJson,
        Unauthenticated,
        (status = 404, description = "No such chat, or the caller is not a member (the same answer)", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "`up_to` is not a message of this chat", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "Database unavailable; nothing written", body = Problem, content_type = "application/problem+json"),
    )
)]
#[post("/chats/{id}/read")]
pub async fn mark_read(
    caller: Caller,
    state: web::Data<AppState>,
    fanout: ChosenFanout,
    id: web::Path<uuid::Uuid>,
    body: web::Json<MarkReadRequest>,
) -> Result<HttpResponse, ApiError> {
    let command = MarkRead {
        chat_id: ChatId::from_uuid(*id),
        reader: caller.0,
        up_to: MessageId::from_uuid(body.up_to),
    };
    let read = state
        .store
        .mark_read(command, fanout.0)
        .await
        .map_err(|e| match e {
            RepositoryError::NotFound {
                entity: Entity::Message,
                id,
            } => ApiError::Validation(ValidationErrors(vec![FieldError {
                field: "up_to",
                message: format!("message {id} is not a message of this chat"),
            }])),
            e => e.into(),
        })?;
    state
        .store
        .announce_read(caller.0, &read, state.writes.default_publish_mode);
    Ok(HttpResponse::Ok()
        .insert_header(fanout.header())
        .json(ReadStateResponse::from(read)))
}

/// The caller's chats, the one with the newest message first, each with
/// its newest message, the caller's read marker and unread count; a page
/// at a time.
#[utoipa::path(
    tag = "read state",
    params(
        MyChatsQuery,
        ("x-chatlab-message-fanout" = Option<FanoutName>, Header,
            description = "A message fan-out (the schema lists them); honoured only with CHATLAB_ALLOW_OVERRIDES=true"),
    ),
    responses(
        (status = 200, description = "A page of chats", body = MyChatsPage,
            headers(("x-chatlab-message-fanout" = String, description = "The fan-out whose rows were counted"))),
        (status = 400, description = "Malformed query", body = Problem, content_type = "application/problem+json"),
        Unauthenticated,
        (status = 422, description = "Limit out of range", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "Database unavailable", body = Problem, content_type = "application/problem+json"),
    )
)]
#[get("/me/chats")]
pub async fn my_chats(
    caller: Caller,
    state: web::Data<AppState>,
    fanout: ChosenFanout,
    query: web::Query<MyChatsQuery>,
) -> Result<HttpResponse, ApiError> {
    let page = PageRequest::new(query.before.map(MessageId::from_uuid), query.limit)?;
    let chats = state.store.my_chats(caller.0, page, fanout.0).await?;
    Ok(HttpResponse::Ok()
        .insert_header(fanout.header())
        .json(MyChatsPage::from(chats)))
}

/// The caller's read state of one chat: their marker and unread count.
#[utoipa::path(
    tag = "read state",
    params(
        ("id" = uuid::Uuid, Path, description = "Chat id"),
        ("x-chatlab-message-fanout" = Option<FanoutName>, Header,
            description = "A message fan-out (the schema lists them); honoured only with CHATLAB_ALLOW_OVERRIDES=true"),
    ),
    responses(
        (status = 200, description = "The read state", body = ReadStateResponse,
            headers(("x-chatlab-message-fanout" = String, description = "The fan-out whose rows were counted"))),
        (status = 400, description = "Malformed id", body = Problem, content_type = "application/problem+json"),
        Unauthenticated,
        (status = 404, description = "No such chat, or the caller is not a member (the same answer)", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "Database unavailable", body = Problem, content_type = "application/problem+json"),
    )
)]
#[get("/me/chats/{id}")]
pub async fn my_chat(
    caller: Caller,
    state: web::Data<AppState>,
    fanout: ChosenFanout,
    id: web::Path<uuid::Uuid>,
) -> Result<HttpResponse, ApiError> {
    let read = state
        .store
        .read_state(ChatId::from_uuid(*id), caller.0, fanout.0)
        .await?;
    Ok(HttpResponse::Ok()
        .insert_header(fanout.header())
        .json(ReadStateResponse::from(read)))
}
