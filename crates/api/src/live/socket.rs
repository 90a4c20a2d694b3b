//! `GET /v1/ws`: the caller's live feed over a WebSocket, for clients that
//! prefer one to Server-Sent Events. The same feed, the same order, the
//! same resume: each text message is one JSON object,
//! `{"id": cursor, "type": event type, "data": event}`; a heartbeat is
//! `{"id": cursor, "type": "heartbeat", "data": null}`. What the client
//! sends is not read, except pings (answered) and a close.

use std::time::Duration;

use actix_web::{HttpRequest, HttpResponse, get, web};
use actix_ws::{CloseCode, CloseReason, Message};
use futures_util::StreamExt as _;

use super::Live;
use super::stream::{last_event_id, open, refuse_a_body, stream};
use crate::auth::StreamCaller;
use crate::problem::{ApiError, Problem};
use crate::routes::responses::StreamRefusals;
use crate::state::AppState;

/// Largest message a client may send (pings and closes are all it needs).
const MAX_CLIENT_FRAME: usize = 4096;

/// How long the server waits for the client's close handshake.
const CLOSE_WAIT: Duration = Duration::from_secs(2);

/// The caller's live feed over a WebSocket: every event of every chat the
/// caller is a member of, one JSON text message each
/// (`{"id", "type", "data"}`, `id` being what to resume from); heartbeats
/// as `type: "heartbeat"`; `reset`, `overflow` and `closing` as on
/// `GET /v1/events`, after which the server closes the socket. Resume with
/// the `Last-Event-ID` header or the `last_event_id` query parameter. The
/// limits of `GET /v1/events` apply (the two count together): 429 with
/// `Retry-After` beyond them, 401 for a token whose user does not exist. A
/// browser, whose `WebSocket` cannot send `Authorization`, opens it with
/// `?ticket=` (`POST /v1/live/tickets`).
#[utoipa::path(
    tag = "live",
    params(
        ("Last-Event-ID" = Option<String>, Header, description = "The `id` of the last message received, to resume after it", max_length = 16384, pattern = "^[0-9]+:[0-9]+(,[0-9]+:[0-9]+)*(@[0-9]+)?$"),
        ("last_event_id" = Option<String>, Query, description = "The same, for clients that cannot send headers", max_length = 16384, pattern = "^[0-9]+:[0-9]+(,[0-9]+:[0-9]+)*(@[0-9]+)?$"),
        ("ticket" = Option<String>, Query, description = "A live ticket (`POST /v1/live/tickets`) in place of the `Authorization` header, for browsers: it opens one stream, once, before it expires", min_length = 43, max_length = 43, pattern = "^[A-Za-z0-9_-]{43}$"),
    ),
    responses(
        (status = 101, description = "Switched to the WebSocket protocol"),
        (status = 400, description = "Not a WebSocket handshake, or `Last-Event-ID` is not an id this feed sent", body = Problem, content_type = "application/problem+json"),
        StreamRefusals,
    )
)]
#[get("/ws")]
pub async fn socket(
    request: HttpRequest,
    body: web::Payload,
    caller: StreamCaller,
    state: web::Data<AppState>,
    live: web::Data<Live>,
) -> Result<HttpResponse, ApiError> {
    refuse_a_body(&request)?;
    let resume = last_event_id(&request)?;
    let (response, mut session, messages) = actix_ws::handle(&request, body)
        .map_err(|e| ApiError::BadRequest(format!("not a WebSocket handshake: {e}")))?;
    let feed = open(caller.0, resume, &state, &live).await?;
    let mut messages = messages.max_frame_size(MAX_CLIENT_FRAME);
    actix_web::rt::spawn(async move {
        let mut frames = std::pin::pin!(stream(feed));
        let reason = loop {
            tokio::select! {
                frame = frames.next() => match frame {
                    Some(frame) => {
                        // A frame with nothing to say on a WebSocket (a
                        // heartbeat with no position yet) is not sent.
                        let Some(text) = frame.ws else { continue };
                        if session.text(text).await.is_err() {
                            // The client is gone.
                            return;
                        }
                    }
                    None => break CloseReason {
                        code: CloseCode::Away,
                        description: Some("the feed ended; resume with the last id".to_owned()),
                    },
                },
                message = messages.next() => match message {
                    Some(Ok(Message::Ping(bytes))) => {
                        if session.pong(&bytes).await.is_err() {
                            return;
                        }
                    }
                    Some(Ok(Message::Close(_))) | None => break CloseReason::from(CloseCode::Normal),
                    Some(Err(_)) => break CloseReason {
                        code: CloseCode::Protocol,
                        description: Some("a message this server does not read".to_owned()),
                    },
                    Some(Ok(_)) => {}
                },
            }
        };
        let _ = tokio::time::timeout(CLOSE_WAIT, session.close(Some(reason))).await;
    });
    Ok(response)
}
