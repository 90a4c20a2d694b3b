//! A frame of the live feed, encoded once into what each transport sends.
//!
//! An event's JSON is written once, when the hub fans it out, and the
//! frame carries it in both forms at once: the Server-Sent Events text of
//! `GET /v1/events` (`id:`, `event:`, `data:`) and the WebSocket text of
//! `GET /v1/ws` (`{"id", "type", "data"}`), each shared by every
//! connection it goes to. Nothing is parsed back: the cursor a stream
//! remembers is kept beside the bytes, not read out of them.

use bytes::Bytes;
use bytestring::ByteString;
use uuid::Uuid;

use chatlab_domain::Event;

use super::cursor::Cursor;

/// One frame, ready for either transport.
#[derive(Debug, Clone)]
pub struct Frame {
    /// The event's id (nil for a frame that carries no event).
    pub event_id: Uuid,
    /// Its cursor (`id:`), what a client resumes from; none for frames
    /// that do not move the client's position.
    pub id: Option<Bytes>,
    /// The Server-Sent Events text.
    pub sse: Bytes,
    /// The WebSocket text message; none for a frame with nothing to say
    /// there (a heartbeat before the tail follows the topic).
    pub ws: Option<ByteString>,
}

impl Frame {
    /// The frame of `event` at `cursor`: the cursor as its id (what the
    /// client sends back as `Last-Event-ID`), its type as the event name,
    /// its client JSON as the data. An event whose JSON cannot be written
    /// is an error for the caller to count, never a frame of `null`.
    pub fn of(event: &Event, cursor: &Cursor) -> Result<Self, serde_json::Error> {
        Ok(Self::at(event, &event.client_json()?, cursor))
    }

    /// The frame of `event`, whose client JSON is `data`, at `cursor`: for
    /// a connection whose cursor differs from the one the event's shared
    /// frame names, without writing the event's JSON again.
    pub fn at(event: &Event, data: &str, cursor: &Cursor) -> Self {
        Self::encode(
            event.event_id,
            Some(&cursor.to_string()),
            event.event_type(),
            data,
        )
    }

    /// A frame of the feed's own (`reset`, `overflow`, `closing`) whose
    /// data is `data` (a JSON value).
    pub fn control(kind: &str, id: Option<&str>, data: &serde_json::Value) -> Self {
        Self::encode(Uuid::nil(), id, kind, &data.to_string())
    }

    /// A heartbeat: an SSE comment, carrying `id` when the stream may move
    /// its client's position there; on a WebSocket a `heartbeat` message,
    /// sent only with an id.
    pub fn heartbeat(id: Option<&str>) -> Self {
        match id {
            Some(id) => Self {
                event_id: Uuid::nil(),
                id: Some(Bytes::copy_from_slice(id.as_bytes())),
                sse: Bytes::from(format!(": heartbeat\nid: {id}\n\n")),
                ws: Some(ByteString::from(format!(
                    "{{\"id\":{},\"type\":\"heartbeat\",\"data\":null}}",
                    json_string(id)
                ))),
            },
            None => Self {
                event_id: Uuid::nil(),
                id: None,
                sse: Bytes::from_static(b": heartbeat\n\n"),
                ws: None,
            },
        }
    }

    /// Both texts of a frame from its parts; `data` is JSON already.
    fn encode(event_id: Uuid, id: Option<&str>, kind: &str, data: &str) -> Self {
        let sse = match id {
            Some(id) => format!("id: {id}\nevent: {kind}\ndata: {data}\n\n"),
            None => format!("event: {kind}\ndata: {data}\n\n"),
        };
        let ws = format!(
            "{{\"id\":{},\"type\":{},\"data\":{data}}}",
            id.map_or_else(|| "null".to_owned(), json_string),
            json_string(kind)
        );
        Self {
            event_id,
            id: id.map(|i| Bytes::copy_from_slice(i.as_bytes())),
            sse: Bytes::from(sse),
            ws: Some(ByteString::from(ws)),
        }
    }
}

/// `text` as a JSON string literal.
fn json_string(text: &str) -> String {
    serde_json::Value::from(text).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::live::test_events::message_in;
    use serde_json::{Value, json};

    #[test]
    fn an_event_is_one_value_in_both_transports() {
        let event = message_in(Uuid::now_v7());
        let cursor = Cursor::parse("0:3,1:7").unwrap();
        let frame = Frame::of(&event, &cursor).unwrap();
        assert_eq!(frame.id.as_deref(), Some(&b"0:3,1:7"[..]));
        let sse = std::str::from_utf8(&frame.sse).unwrap();
        let mut lines = sse.lines();
        assert_eq!(lines.next(), Some("id: 0:3,1:7"));
        assert_eq!(lines.next(), Some("event: message.sent"));
        let data: Value =
            serde_json::from_str(lines.next().unwrap().strip_prefix("data: ").unwrap()).unwrap();
        assert!(sse.ends_with("\n\n"));
        let ws: Value = serde_json::from_str(frame.ws.as_deref().unwrap()).unwrap();
        assert_eq!(
            ws,
            json!({"id": "0:3,1:7", "type": "message.sent", "data": data})
        );
        assert_eq!(data["message_id"], ws["data"]["message_id"]);
        assert_eq!(data["body"], "hi");
    }

    #[test]
    fn heartbeats_and_the_feeds_own_frames() {
        let beat = Frame::heartbeat(Some("0:4"));
        assert_eq!(&beat.sse[..], b": heartbeat\nid: 0:4\n\n");
        let ws: Value = serde_json::from_str(beat.ws.as_deref().unwrap()).unwrap();
        assert_eq!(ws, json!({"id": "0:4", "type": "heartbeat", "data": null}));
        let bare = Frame::heartbeat(None);
        assert_eq!(&bare.sse[..], b": heartbeat\n\n");
        assert!(bare.ws.is_none() && bare.id.is_none());
        let overflow = Frame::control("overflow", None, &json!({"last_event_id": "0:4"}));
        assert_eq!(
            &overflow.sse[..],
            &b"event: overflow\ndata: {\"last_event_id\":\"0:4\"}\n\n"[..]
        );
        let ws: Value = serde_json::from_str(overflow.ws.as_deref().unwrap()).unwrap();
        assert_eq!(
            ws,
            json!({"id": null, "type": "overflow", "data": {"last_event_id": "0:4"}})
        );
    }
}
