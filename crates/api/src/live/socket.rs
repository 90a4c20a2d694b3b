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
use serde_json::{Value, json};

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
                    Some(Ok(sse)) => {
                        let Some(text) = to_message(&sse) else { continue };
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

/// One SSE frame of the feed as a WebSocket message: `None` for a frame
/// with nothing to say (a heartbeat before the tail follows the topic).
fn to_message(sse: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(sse).ok()?;
    let (mut id, mut kind, mut data) = (None, None, None);
    for line in text.lines() {
        if let Some(v) = line.strip_prefix("id: ") {
            id = Some(v);
        } else if let Some(v) = line.strip_prefix("event: ") {
            kind = Some(v);
        } else if let Some(v) = line.strip_prefix("data: ") {
            data = serde_json::from_str::<Value>(v).ok();
        }
    }
    if kind.is_none() && id.is_none() {
        return None;
    }
    Some(
        json!({
            "id": id,
            "type": kind.unwrap_or("heartbeat"),
            "data": data,
        })
        .to_string(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sse_frames_become_json_messages() {
        let event = to_message(b"id: 0:3,1:7\nevent: message.sent\ndata: {\"a\":1}\n\n").unwrap();
        let event: Value = serde_json::from_str(&event).unwrap();
        assert_eq!(
            event,
            json!({"id": "0:3,1:7", "type": "message.sent", "data": {"a": 1}})
        );
        let beat: Value =
            serde_json::from_str(&to_message(b": heartbeat\nid: 0:4\n\n").unwrap()).unwrap();
        assert_eq!(
            beat,
            json!({"id": "0:4", "type": "heartbeat", "data": null})
        );
        assert!(to_message(b": heartbeat\n\n").is_none());
        let overflow: Value = serde_json::from_str(
            &to_message(b"event: overflow\ndata: {\"last_event_id\":\"0:4\"}\n\n").unwrap(),
        )
        .unwrap();
        assert_eq!(overflow["type"], "overflow");
        assert_eq!(overflow["id"], Value::Null);
    }
}
