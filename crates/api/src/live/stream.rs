//! `GET /v1/events`: the caller's live feed, as Server-Sent Events.

use std::collections::{HashSet, VecDeque};
use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use actix_web::{HttpRequest, HttpResponse, get, web};
use bytes::Bytes;
use futures_util::{Stream, StreamExt as _};
use tokio::sync::mpsc;
use uuid::Uuid;

use super::Live;
use super::budget::Refusal;
use super::catch_up::{self, CatchUp};
use super::cursor::Cursor;
use super::hub::{Frame, Hub, Registration};
use super::metrics::LiveMetrics;
use crate::auth::{Caller, StreamCaller};
use crate::http::limits::carries_body;
use crate::problem::{ApiError, Problem};
use crate::routes::responses::StreamRefusals;
use crate::state::AppState;
use chatlab_auth::TokenRejection;

/// The caller's live feed: every event of every chat the caller is a member
/// of, as Server-Sent Events (`event:` its type, `data:` its JSON, `id:` a
/// cursor of the event topic), with a heartbeat comment when idle (which
/// also carries the cursor as `id:`, so an idle client's position moves
/// on). Membership changes apply at once: a chat the caller is added to
/// starts with the event that adds them, a chat they are removed from ends
/// with the removal.
///
/// A client that reconnects with `Last-Event-ID` (browsers' `EventSource`
/// sends it on its own) first gets the events it missed, then the live
/// feed, each event once. Where they cannot be replayed (too far behind,
/// gone from the topic, or the broker does not answer) the stream starts
/// with a `reset` event instead: reload through the REST API, then carry
/// on with this stream. So does an id past the end of the topic, or from
/// an earlier life of it (the embedded broker's topic starts again with
/// each server start). A client that reads too slowly for the server's
/// buffer gets a last `overflow` event and the stream ends: reconnect with
/// the last id received.
///
/// A user holds at most `LIVE_MAX_STREAMS_PER_USER` streams (this one and
/// `GET /v1/ws` together) on an instance, and an instance at most
/// `LIVE_MAX_STREAMS`: one more is a 429 with `Retry-After`. The token's
/// user must exist. A browser, whose `EventSource` cannot send `Authorization`,
/// opens it with `?ticket=` (`POST /v1/live/tickets`) instead, and after an
/// error opens it again with a new ticket and `last_event_id`.
#[utoipa::path(
    tag = "live",
    params(
        ("Last-Event-ID" = Option<String>, Header, description = "The `id:` of the last event received, to resume after it", max_length = 16384, pattern = "^[0-9]+:[0-9]+(,[0-9]+:[0-9]+)*(@[0-9]+)?$"),
        ("last_event_id" = Option<String>, Query, description = "The same, for a client that opens the stream again with a new ticket", max_length = 16384, pattern = "^[0-9]+:[0-9]+(,[0-9]+:[0-9]+)*(@[0-9]+)?$"),
        ("ticket" = Option<String>, Query, description = "A live ticket (`POST /v1/live/tickets`) in place of the `Authorization` header, for browsers: it opens one stream, once, before it expires", min_length = 43, max_length = 43, pattern = "^[A-Za-z0-9_-]{43}$"),
    ),
    responses(
        (status = 200, description = "The event stream (text/event-stream)", body = String, content_type = "text/event-stream"),
        (status = 400, description = "`Last-Event-ID` is not an id this stream sent, or the request has a body", body = Problem, content_type = "application/problem+json"),
        StreamRefusals,
    )
)]
#[get("/events")]
pub async fn events(
    request: HttpRequest,
    caller: StreamCaller,
    state: web::Data<AppState>,
    live: web::Data<Live>,
) -> Result<HttpResponse, ApiError> {
    refuse_a_body(&request)?;
    let resume = last_event_id(&request)?;
    let feed = open(caller.0, resume, &state, &live).await?;
    Ok(HttpResponse::Ok()
        .content_type("text/event-stream")
        .insert_header(("cache-control", "no-cache"))
        // Proxies that buffer responses (nginx) must pass this one through.
        .insert_header(("x-accel-buffering", "no"))
        .streaming(stream(feed).map(|frame| Ok::<_, Infallible>(frame.sse))))
}

/// The cursor a client resumes from: its `Last-Event-ID` header, else the
/// `last_event_id` query parameter (a browser's WebSocket cannot send
/// headers).
pub(crate) fn last_event_id(request: &HttpRequest) -> Result<Option<Cursor>, ApiError> {
    let text = match request.headers().get("last-event-id") {
        Some(value) => Some(
            value
                .to_str()
                .map_err(|_| ApiError::BadRequest("Last-Event-ID is not ASCII".to_owned()))?
                .to_owned(),
        ),
        None => web::Query::<ResumeQuery>::from_query(request.query_string())
            .ok()
            .and_then(|q| q.into_inner().last_event_id),
    };
    text.map(|t| Cursor::parse(&t).map_err(|e| ApiError::BadRequest(e.to_string())))
        .transpose()
}

/// A stream's request carries no body: one that never ended would hold
/// the connection past the body timeout for as long as the stream lasts.
pub(crate) fn refuse_a_body(request: &HttpRequest) -> Result<(), ApiError> {
    if carries_body(request.headers()) {
        return Err(ApiError::BadRequest(
            "a live stream's request carries no body (no Content-Length, no Transfer-Encoding)"
                .to_owned(),
        ));
    }
    Ok(())
}

/// The query form of `Last-Event-ID`.
#[derive(Debug, serde::Deserialize)]
struct ResumeQuery {
    last_event_id: Option<String>,
}

/// Opens the caller's feed: registered in the hub with the chats it is a
/// member of, and, when it resumes, what it missed (or a `reset`) ahead of
/// the live frames. Refused when the caller is no user, or holds (or the
/// instance holds) as many streams as allowed.
pub(crate) async fn open(
    caller: Caller,
    resume: Option<Cursor>,
    state: &AppState,
    live: &Live,
) -> Result<Feed, ApiError> {
    let user = caller.0.as_uuid();
    if !live.known.exists(&state.store, caller.0).await? {
        return Err(ApiError::Unauthorized(TokenRejection::UnknownUser));
    }
    // Registered before the chats are read, so an event of a chat created
    // meanwhile finds the caller connected; and before the catch-up, whose
    // range ends where the live feed starts.
    let registration = live
        .hub
        .register(user, live.buffer, resume.clone())
        .map_err(|refusal| refused(refusal, live))?;
    let mut feed = Feed {
        hub: live.hub.clone(),
        metrics: live.metrics.clone(),
        pending: VecDeque::new(),
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
    // The events of its chats fanned out while they were read.
    live.metrics
        .count(live.hub.receive(feed.registration.id, &chats));
    live.metrics.connections.set(live.hub.connections() as i64);
    if let Some(from) = &resume {
        let now: HashSet<Uuid> = chats.iter().copied().collect();
        let at = feed.registration.at.clone();
        match catch_up::read(&live.source, &live.hub, user, from, at.as_ref(), &now).await {
            CatchUp::Frames(frames, ids, served) => {
                let given = live.hub.remember(feed.registration.id, &ids);
                let frames: Vec<Frame> = frames
                    .into_iter()
                    .filter(|f| !given.contains(&f.event_id))
                    .collect();
                live.metrics.resumed.inc();
                live.metrics
                    .catch_ups
                    .get_or_create(&super::metrics::ServedLabel {
                        source: served.label(),
                    })
                    .inc();
                live.metrics.caught_up.inc_by(frames.len() as u64);
                live.metrics.duplicates.inc_by(given.len() as u64);
                feed.pending.extend(frames);
            }
            CatchUp::Reset(reason) => {
                live.hub.clear_floor(feed.registration.id);
                live.metrics.resets.inc();
                feed.pending.push_back(reset_frame(&reason, at.as_ref()));
            }
        }
    }
    Ok(feed)
}

/// A stream the budget refused, counted, as its 429.
fn refused(refusal: Refusal, live: &Live) -> ApiError {
    live.metrics
        .refused
        .get_or_create(&super::metrics::RefusedLabel {
            reason: refusal.label(),
        })
        .inc();
    ApiError::TooManyStreams {
        detail: refusal.to_string(),
        retry_after_secs: live.retry_after.as_secs().max(1),
    }
}

/// One connection's side of the hub; dropping it (the client went away)
/// unregisters it.
pub(crate) struct Feed {
    hub: Arc<Hub>,
    metrics: LiveMetrics,
    /// Frames before the live ones: the catch-up, or a `reset`.
    pending: VecDeque<Frame>,
    registration: Registration,
    /// The `id:` of the last frame sent.
    last: Option<Bytes>,
    finished: bool,
    heartbeat: tokio::time::Interval,
}

impl Drop for Feed {
    fn drop(&mut self) {
        self.hub.unregister(self.registration.id);
        self.metrics.connections.set(self.hub.connections() as i64);
    }
}

impl Feed {
    /// Sends `frame`, remembering its id.
    fn send(mut self, frame: Frame) -> Option<(Frame, Self)> {
        if frame.id.is_some() {
            self.last.clone_from(&frame.id);
        }
        Some((frame, self))
    }

    /// The hub let go of this connection: a last `overflow` frame if that
    /// was why, then the end.
    fn ended(mut self) -> Option<(Frame, Self)> {
        self.finished = true;
        let overflowed = self.registration.state.overflowed.load(Ordering::Acquire);
        overflowed.then(|| (overflow_frame(self.last.as_ref()), self))
    }

    /// A heartbeat, with the hub's position as its id when every frame
    /// before that position has been sent.
    fn heartbeat(self) -> Option<(Frame, Self)> {
        let Some(cursor) = self.hub.position_for(self.registration.id) else {
            return Some((Frame::heartbeat(None), self));
        };
        let mut feed = self;
        match feed.registration.frames.try_recv() {
            Ok(frame) => feed.send(frame),
            Err(mpsc::error::TryRecvError::Disconnected) => feed.ended(),
            Err(mpsc::error::TryRecvError::Empty) => {
                feed.send(Frame::heartbeat(Some(&cursor.to_string())))
            }
        }
    }
}

/// The feed, frame by frame: pending frames first, then the live ones and
/// heartbeats, until the hub lets go. Each transport sends its own form
/// of each frame.
pub(crate) fn stream(feed: Feed) -> impl Stream<Item = Frame> {
    futures_util::stream::unfold(feed, |mut feed| async move {
        if let Some(frame) = feed.pending.pop_front() {
            return feed.send(frame);
        }
        if feed.finished {
            return None;
        }
        tokio::select! {
            frame = feed.registration.frames.recv() => match frame {
                Some(frame) => feed.send(frame),
                None => feed.ended(),
            },
            _ = feed.heartbeat.tick() => feed.heartbeat(),
        }
    })
}

/// The last frame of a connection that read too slowly.
fn overflow_frame(last: Option<&Bytes>) -> Frame {
    let last = last.map(|id| String::from_utf8_lossy(id).into_owned());
    Frame::control(
        "overflow",
        None,
        &serde_json::json!({
            "reason": "the client read too slowly; reconnect with Last-Event-ID",
            "last_event_id": last,
        }),
    )
}

/// The first frame of a resumed connection that cannot be caught up: the
/// live feed's start as its id, so the client, once it has reloaded,
/// resumes from here.
fn reset_frame(reason: &str, at: Option<&Cursor>) -> Frame {
    let id = at.map(Cursor::to_string);
    Frame::control(
        "reset",
        id.as_deref(),
        &serde_json::json!({ "reason": reason }),
    )
}
