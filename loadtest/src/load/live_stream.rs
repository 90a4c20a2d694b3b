//! A member's live stream as the load tool reads it: `GET /v1/events`
//! (server-sent events) opened with the member's token, and read by a task
//! that reports each `message.sent` frame with the instant it arrived, so a
//! command can set it against when the message was written (`delivery`,
//! `delivery-busy`).

use std::sync::{Arc, Mutex};
use std::time::Instant;

use reqwest::header::{AUTHORIZATION, HeaderValue};
use tokio::sync::mpsc;
use uuid::Uuid;

use crate::error::LoadError;

/// What a stream saw: the stream's index, the message, when its frame
/// arrived, and the frame's bytes.
pub type Sighting = (usize, Uuid, Instant, usize);

/// The last `id:` a stream carried, shared with whoever may reopen it:
/// what its client sends back as `Last-Event-ID`.
pub type LastId = Arc<Mutex<Option<String>>>;

/// Opens the live stream of the member whose token is `bearer` on the
/// server at `url`; an error when it does not answer with a success.
pub async fn open(
    client: &reqwest::Client,
    url: &str,
    bearer: &HeaderValue,
) -> Result<reqwest::Response, LoadError> {
    open_from(client, url, bearer, None).await
}

/// [`open`], resuming after `last_event_id` when given (the header a
/// browser's `EventSource` sends when it reconnects).
pub async fn open_from(
    client: &reqwest::Client,
    url: &str,
    bearer: &HeaderValue,
    last_event_id: Option<&str>,
) -> Result<reqwest::Response, LoadError> {
    let mut request = client
        .get(format!("{url}/v1/events"))
        .header(AUTHORIZATION, bearer.clone());
    if let Some(id) = last_event_id {
        request = request.header("last-event-id", id);
    }
    let resp = request
        .send()
        .await
        .map_err(|e| LoadError::http("opening a live stream", e))?;
    if !resp.status().is_success() {
        return Err(LoadError::http(
            "opening a live stream",
            format!("{}", resp.status()),
        ));
    }
    Ok(resp)
}

/// Reads one live stream, reporting each `message.sent` it carries as a
/// [`Sighting`] of stream `index`, and a cut (`overflow`, `reset`, or the
/// stream's end); keeps the last `id:` it carried in `last`. Returns when
/// the stream ends or nobody listens.
pub async fn read(
    mut resp: reqwest::Response,
    index: usize,
    seen: mpsc::UnboundedSender<Sighting>,
    cut: mpsc::UnboundedSender<usize>,
    last: LastId,
) {
    let mut buffer: Vec<u8> = Vec::new();
    loop {
        let chunk = match resp.chunk().await {
            Ok(Some(chunk)) => chunk,
            _ => {
                let _ = cut.send(index);
                return;
            }
        };
        let at = Instant::now();
        buffer.extend_from_slice(&chunk);
        while let Some(end) = buffer.windows(2).position(|w| w == b"\n\n") {
            let frame: Vec<u8> = buffer.drain(..end + 2).collect();
            let text = String::from_utf8_lossy(&frame);
            if let (Some(id), Ok(mut slot)) = (
                text.lines().find_map(|line| line.strip_prefix("id: ")),
                last.lock(),
            ) {
                *slot = Some(id.to_owned());
            }
            if matches!(event_name(&text), Some("overflow" | "reset")) {
                let _ = cut.send(index);
            }
            let Some(id) = message_sent_id(&text) else {
                continue;
            };
            if seen.send((index, id, at, frame.len())).is_err() {
                return;
            }
        }
    }
}

/// The `event:` line of an SSE frame, wherever it stands in the frame.
fn event_name(frame: &str) -> Option<&str> {
    frame.lines().find_map(|line| line.strip_prefix("event: "))
}

/// The `message_id` of a `message.sent` frame; `None` for any other frame
/// (`chat.created`, a comment, a keep-alive).
fn message_sent_id(frame: &str) -> Option<Uuid> {
    if event_name(frame) != Some("message.sent") {
        return None;
    }
    frame
        .split("\"message_id\":\"")
        .nth(1)
        .and_then(|rest| rest.get(..36))
        .and_then(|id| id.parse::<Uuid>().ok())
}

#[cfg(test)]
mod tests {
    use super::{event_name, message_sent_id};

    #[test]
    fn only_message_sent_frames_give_their_message_id() {
        let id = "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b";
        let sent = format!(
            "id: 7\nevent: message.sent\ndata: {{\"chat_id\":\"x\",\"message_id\":\"{id}\"}}\n\n"
        );
        assert_eq!(message_sent_id(&sent), id.parse().ok());
        let created = format!("event: chat.created\ndata: {{\"message_id\":\"{id}\"}}\n\n");
        assert_eq!(message_sent_id(&created), None);
        assert_eq!(message_sent_id(": keep-alive\n\n"), None);
    }

    #[test]
    fn the_event_line_is_found_first_or_after_the_id() {
        assert_eq!(
            event_name("event: overflow\ndata: {}\n\n"),
            Some("overflow")
        );
        assert_eq!(
            event_name("id: 0:1\nevent: reset\ndata: {}\n\n"),
            Some("reset")
        );
        assert_eq!(event_name(": heartbeat\nid: 0:4\n\n"), None);
    }
}
