use actix_web::{HttpResponse, get, post, web};

use chatlab_domain::{ChatId, MessageId, NewMessage, PageRequest, SendMessage};

use crate::auth::Caller;
use crate::dto::{MessageResponse, MessagesPage, MessagesQuery, SendMessageRequest};
use crate::overrides::{ChosenPublishMode, ChosenStrategy, PublishModeName};
use crate::problem::{ApiError, Problem};
use crate::state::AppState;

/// Posts a message as the caller, with its `message.sent` event (by the
/// publish mode). The membership check and the insert are one statement.
#[utoipa::path(
    tag = "messages",
    request_body = SendMessageRequest,
    params(
        ("id" = uuid::Uuid, Path, description = "Chat id"),
        ("x-chatlab-publish-mode" = Option<PublishModeName>, Header,
            description = "off, in_tx_await, in_tx_enqueue, after_commit or outbox; honoured only with CHATLAB_ALLOW_OVERRIDES=true"),
    ),
    responses(
        (status = 201, description = "Created", body = MessageResponse,
            headers(
                ("x-chatlab-insert-strategy" = String, description = "The server's strategy (a message is one row whatever it is)"),
                ("x-chatlab-publish-mode" = String, description = "The publish mode used"),
            )),
        (status = 400, description = "Malformed JSON or id", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "The body is not sent as application/json", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No valid bearer token", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such chat, or the caller is not a member (the same answer)", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Invalid body", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "Database unavailable, or (in_tx_await) the broker did not acknowledge; nothing written", body = Problem, content_type = "application/problem+json"),
    )
)]
#[post("/chats/{id}/messages")]
pub async fn send_message(
    caller: Caller,
    state: web::Data<AppState>,
    strategy: ChosenStrategy,
    mode: ChosenPublishMode,
    id: web::Path<uuid::Uuid>,
    body: web::Json<SendMessageRequest>,
) -> Result<HttpResponse, ApiError> {
    let body = body.into_inner();
    let command = SendMessage::validate(NewMessage {
        chat_id: ChatId::from_uuid(*id),
        sender_id: caller.0,
        body: body.body,
    })?;
    let message = state.store.send_message(command, mode.0).await?;
    Ok(HttpResponse::Created()
        .insert_header(strategy.header())
        .insert_header(mode.header())
        .json(MessageResponse::from(message)))
}

/// Lists messages newest first (members only), a page at a time (keyset pagination: every
/// page costs the same however far back the client reads).
#[utoipa::path(
    tag = "messages",
    params(("id" = uuid::Uuid, Path, description = "Chat id"), MessagesQuery),
    responses(
        (status = 200, description = "A page of messages", body = MessagesPage),
        (status = 400, description = "Malformed id or query", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No valid bearer token", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such chat, or the caller is not a member (the same answer)", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Limit out of range", body = Problem, content_type = "application/problem+json"),
    )
)]
#[get("/chats/{id}/messages")]
pub async fn list_messages(
    caller: Caller,
    state: web::Data<AppState>,
    id: web::Path<uuid::Uuid>,
    query: web::Query<MessagesQuery>,
) -> Result<HttpResponse, ApiError> {
    let page = PageRequest::new(query.before.map(MessageId::from_uuid), query.limit)?;
    let messages = state
        .store
        .list_messages(ChatId::from_uuid(*id), caller.0, page)
        .await?;
    Ok(HttpResponse::Ok().json(MessagesPage::from(messages)))
}
