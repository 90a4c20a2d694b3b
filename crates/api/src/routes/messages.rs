use actix_web::http::StatusCode;
use actix_web::{HttpResponse, get, post, web};

use chatlab_domain::{ChatId, Message, MessageId, NewMessage, PageRequest, SendMessage};
use chatlab_persistence::SendRoute;

use crate::auth::Caller;
use crate::dto::{MessageResponse, MessagesPage, MessagesQuery, SendMessageRequest};
use crate::http::idempotency::{IdempotencyKeyHeader, IdempotencyKeyValue, PreparedResponse};
use crate::http::overrides::{
    ChosenFanout, ChosenPublishMode, ChosenStrategy, FanoutName, PublishModeName, StrategyName,
};
use crate::problem::{ApiError, Problem};
use crate::routes::responses::{NotJson, Unauthenticated};
use crate::state::AppState;

/// Posts a message as the caller, with its `message.sent` event (by the
/// publish mode). The membership check and the insert are one statement;
/// with the `inbox` fan-out the message's inbox rows (one per member but
/// the sender) are written in its transaction, by the insert strategy.
#[utoipa::path(
    tag = "messages",
    request_body = SendMessageRequest,
    params(
        ("id" = uuid::Uuid, Path, description = "Chat id"),
        ("x-chatlab-publish-mode" = Option<PublishModeName>, Header,
            description = "A publish mode (the schema lists them); honoured only with CHATLAB_ALLOW_OVERRIDES=true"),
        ("x-chatlab-insert-strategy" = Option<StrategyName>, Header,
            description = "How the inbox rows are written under the inbox fan-out (a message is one row whatever it is; copy needs DB_DRIVER=blocking, else 422); honoured only with CHATLAB_ALLOW_OVERRIDES=true"),
        ("x-chatlab-message-fanout" = Option<FanoutName>, Header,
            description = "A message fan-out (the schema lists them); honoured only with CHATLAB_ALLOW_OVERRIDES=true"),
        ("idempotency-key" = Option<IdempotencyKeyValue>, Header,
            description = "Makes a retry safe: the same key from the same user within the retention (24 h) answers the first response and writes nothing more"),
    ),
    responses(
        (status = 201, description = "Created; or, with `Idempotent-Replayed: true`, the first response to this Idempotency-Key", body = MessageResponse,
            headers(
                ("x-chatlab-insert-strategy" = String, description = "The strategy used (it writes the inbox rows under the inbox fan-out; a message is one row whatever it is)"),
                ("x-chatlab-publish-mode" = String, description = "The publish mode used"),
                ("x-chatlab-message-fanout" = String, description = "The message fan-out used"),
                ("idempotent-replayed" = String, description = "`true` when this is the stored response of an earlier request with the same Idempotency-Key"),
            )),
        (status = 409, description = "A request with the same Idempotency-Key is still being written", body = Problem, content_type = "application/problem+json"),
        (status = 400, description = "Malformed JSON or id", body = Problem, content_type = "application/problem+json"),
        NotJson,
        Unauthenticated,
        (status = 404, description = "No such chat, or the caller is not a member (the same answer)", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Invalid body, or an Idempotency-Key used before for another request", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "Database unavailable, or (in_tx_await) the broker did not acknowledge; nothing written", body = Problem, content_type = "application/problem+json"),
    )
)]
#[post("/chats/{id}/messages")]
pub async fn send_message(
    caller: Caller,
    state: web::Data<AppState>,
    (strategy, mode, fanout): (ChosenStrategy, ChosenPublishMode, ChosenFanout),
    id: web::Path<uuid::Uuid>,
    key: IdempotencyKeyHeader,
    body: web::Json<SendMessageRequest>,
) -> Result<HttpResponse, ApiError> {
    let body = body.into_inner();
    let command = SendMessage::validate(NewMessage {
        chat_id: ChatId::from_uuid(*id),
        sender_id: caller.0,
        body: body.body.clone(),
    })?;
    let prepared = PreparedResponse::new(
        key,
        caller.0,
        "sendMessage",
        &format!("/v1/chats/{}/messages", *id),
        &body,
        StatusCode::CREATED,
        &MessageResponse::from(Message::sent(&command)),
    )?;
    let route = SendRoute {
        mode: mode.0,
        fanout: fanout.0,
        strategy: strategy.0,
    };
    let outcome = state
        .store
        .send_message_routed(command, route, prepared.claim())
        .await?;
    prepared.respond(outcome, |r| {
        r.insert_header(strategy.header())
            .insert_header(mode.header())
            .insert_header(fanout.header());
    })
}

/// Lists messages newest first (members only), a page at a time (keyset pagination: every
/// page costs the same however far back the client reads).
#[utoipa::path(
    tag = "messages",
    params(("id" = uuid::Uuid, Path, description = "Chat id"), MessagesQuery),
    responses(
        (status = 200, description = "A page of messages", body = MessagesPage),
        (status = 400, description = "Malformed id or query", body = Problem, content_type = "application/problem+json"),
        Unauthenticated,
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
