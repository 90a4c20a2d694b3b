//! `GET /v1/events`: the caller's live feed, as Server-Sent Events.

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use actix_web::{HttpResponse, get, web};
use bytes::Bytes;
use futures_util::Stream;
use uuid::Uuid;

use super::Live;
use super::hub::{Hub, Registration};
use super::metrics::LiveMetrics;
use crate::auth::Caller;
use crate::problem::{ApiError, Problem};
use crate::state::AppState;

/// The caller's live feed: every event of every chat the caller is a member
/// of, as Server-Sent Events (`id:` the event id, `event:` its type,
/// `data:` its JSON), with a heartbeat comment when idle. Membership changes
/// apply at once: a chat the caller is added to starts with the event that
/// adds them, a chat they are removed from ends with the removal. A client
/// that reads too slowly for the server's buffer gets a last `overflow`
/// event naming the last event id it received, and the stream ends.
#[utoipa::path(
    tag = "live",
    responses(
        (status = 200, description = "The event stream (text/event-stream)", body = String, content_type = "text/event-stream"),
        (status = 401, description = "No valid bearer token", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "Database unavailable: the caller's chats could not be read", body = Problem, content_type = "application/problem+json"),
    )
)]
#[get("/events")]
pub async fn events(
    caller: Caller,
    state: web::Data<AppState>,
    live: web::Data<Live>,
) -> Result<HttpResponse, ApiError> {
    // Registered before the chats are read, so an event of a chat created
    // meanwhile finds the caller connected.
    let registration = live.hub.register(caller.0.as_uuid(), &[], live.buffer);
    let feed = Feed {
        hub: live.hub.clone(),
        metrics: live.metrics.clone(),
        registration,
        last: None,
        finished: false,
        heartbeat: tokio::time::interval(live.heartbeat),
    };
    let chats: Vec<Uuid> = state
        .store
        .chats_of(caller.0)
        .await?
        .into_iter()
        .map(|c| c.as_uuid())
        .collect();
    live.hub.receive(feed.registration.id, &chats);
    live.metrics.connections.set(live.hub.connections() as i64);
    Ok(HttpResponse::Ok()
        .content_type("text/event-stream")
        .insert_header(("cache-control", "no-cache"))
        // Proxies that buffer responses (nginx) must pass this one through.
        .insert_header(("x-accel-buffering", "no"))
        .streaming(stream(feed)))
}

/// One connection's side of the hub; dropping it (the client went away)
/// unregisters it.
struct Feed {
    hub: Arc<Hub>,
    metrics: LiveMetrics,
    registration: Registration,
    last: Option<Uuid>,
    finished: bool,
    heartbeat: tokio::time::Interval,
}

impl Drop for Feed {
    fn drop(&mut self) {
        self.hub.unregister(self.registration.id);
        self.metrics.connections.set(self.hub.connections() as i64);
    }
}

fn stream(feed: Feed) -> impl Stream<Item = Result<Bytes, Infallible>> {
    futures_util::stream::unfold(feed, |mut feed| async move {
        if feed.finished {
            return None;
        }
        tokio::select! {
            frame = feed.registration.frames.recv() => match frame {
                Some(frame) => {
                    feed.last = Some(frame.event_id);
                    Some((Ok(frame.text), feed))
                }
                None => {
                    // The hub let go of this connection.
                    feed.finished = true;
                    let overflowed = feed.registration.state.overflowed.load(Ordering::Acquire);
                    overflowed.then(|| (Ok(overflow_frame(feed.last)), feed))
                }
            },
            _ = feed.heartbeat.tick() => Some((Ok(Bytes::from_static(b": heartbeat\n\n")), feed)),
        }
    })
}

/// The last frame of a connection that read too slowly.
fn overflow_frame(last: Option<Uuid>) -> Bytes {
    let last = last.map_or_else(|| "null".to_owned(), |id| format!("\"{id}\""));
    Bytes::from(format!(
        "event: overflow\ndata: {{\"reason\":\"the client read too slowly; reconnect\",\"last_event_id\":{last}}}\n\n"
    ))
}
