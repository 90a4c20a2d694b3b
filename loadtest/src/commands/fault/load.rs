//! The fault experiments' load: an open model of createChat, sendMessage
//! and read-marker moves that keeps, for every request, when it was sent,
//! how it ended and the id of what it wrote (or the marker it moved), so
//! that the invariants can be checked against the database afterwards.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use reqwest::header::{AUTHORIZATION, HeaderValue};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use uuid::Uuid;

use crate::load::scenario::{Rng, Seeded, pick_members};
use crate::load::schedule::ArrivalSchedule;
use chatlab_domain::PublishMode;

/// What a request did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// `POST /v1/chats`.
    Create,
    /// `POST /v1/chats/{id}/messages`.
    Send,
    /// `POST /v1/chats/{id}/read`: a member's read marker moved to the
    /// newest message of the chat the load has seen acknowledged.
    Mark,
}

/// A read-marker move: whose marker, in which chat, up to which message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mark {
    /// The chat.
    pub chat: Uuid,
    /// The member who read.
    pub reader: Uuid,
    /// The message read up to.
    pub up_to: Uuid,
}

/// How a request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// An HTTP answer with this status.
    Status(u16),
    /// The connection was refused: nothing listened (a server down).
    Refused,
    /// The connection was closed or reset after the request went out and
    /// before any answer: a server that stopped (or died) with the
    /// connection still in its accept queue, or a request in flight when
    /// it was killed.
    Unanswered,
    /// The answer's head arrived, then the connection broke before its
    /// body was complete: an answer cut mid-way.
    Cut,
    /// The client's own deadline passed (the cancellation experiment sets
    /// short ones on purpose).
    Abandoned,
}

/// One request of the run.
#[derive(Debug, Clone)]
pub struct Request {
    /// createChat or sendMessage.
    pub op: Op,
    /// Index into the run's publish modes.
    pub mode: usize,
    /// When it was due, from the start of the run.
    pub due: Duration,
    /// From due to answer (open model: waiting to be sent counts).
    pub latency: Duration,
    /// How it ended.
    pub outcome: Outcome,
    /// A 503 carried `Retry-After`.
    pub retry_after: bool,
    /// Times it was sent again after a failed attempt.
    pub retries: u32,
    /// Its answer was `Idempotent-Replayed`: an earlier attempt had
    /// written it, and the server answered from the stored key.
    pub replayed: bool,
    /// The id the server answered with a 201.
    pub id: Option<Uuid>,
    /// The marker a [`Op::Mark`] moved.
    pub mark: Option<Mark>,
}

impl Request {
    /// Whether the write was acknowledged: a 201, or a marker move's 200.
    pub fn acknowledged(&self) -> bool {
        let ok = if self.op == Op::Mark { 200 } else { 201 };
        self.outcome == Outcome::Status(ok)
    }
}

/// The load to send.
#[derive(Debug, Clone)]
pub struct LoadSpec {
    /// When each request is due: the rate and how long, checked when the
    /// spec was built.
    pub arrivals: ArrivalSchedule,
    /// Share of createChat among the requests.
    pub create_share: f64,
    /// Share of read-marker moves among the requests (the rest send
    /// messages); a move goes as a send until the load has seen a message
    /// of a chat acknowledged.
    pub mark_share: f64,
    /// Members per created chat, the creator included.
    pub members: usize,
    /// The chats' name: a tag that tells this run's chats from others.
    pub chat_name: String,
    /// Publish modes sent in `X-Chatlab-Publish-Mode`, request by request
    /// (`None`: no header, the server's own mode).
    pub modes: Vec<Option<PublishMode>>,
    /// Client deadline per request: a fixed one, or drawn uniformly from a
    /// range (the cancellation experiment hangs up at random points).
    pub deadline: (Duration, Duration),
    /// Most requests in flight; arrivals beyond it are not sent.
    pub max_in_flight: usize,
    /// Times a failed request (no answer, abandoned, 503, 409) is sent
    /// again, after a backoff.
    pub retries: u32,
    /// Whether each request carries an `Idempotency-Key` (the same on its
    /// retries).
    pub keyed: bool,
}

/// What the load did.
#[derive(Debug, Default)]
pub struct LoadResult {
    /// Every request that was sent, in completion order.
    pub requests: Vec<Request>,
    /// Arrivals not sent because too many were in flight.
    pub not_sent: u64,
}

/// Sends the load to `target` (a public URL) from `started`, with `seeded`
/// users and chats, each request as its acting user (the creator, the
/// sender).
pub async fn run(
    client: reqwest::Client,
    target: String,
    seeded: Arc<Seeded>,
    spec: Arc<LoadSpec>,
    started: Instant,
) -> LoadResult {
    let schedule = spec.arrivals;
    let (tx, mut rx) = mpsc::unbounded_channel::<Request>();
    let collector = tokio::spawn(async move {
        let mut requests = Vec::new();
        while let Some(r) = rx.recv().await {
            requests.push(r);
        }
        requests
    });
    let in_flight = Arc::new(AtomicUsize::new(0));
    let target = Arc::new(target);
    let mut rng = Rng::new(0xFA17);
    // The newest acknowledged message of each chat: what a move marks read.
    let newest: Arc<Mutex<HashMap<Uuid, Uuid>>> = Arc::default();
    let mut not_sent = 0u64;
    let mut tasks = Vec::new();
    let mut n = 0usize;
    while let Some(due) = schedule.due(n as u64) {
        n += 1;
        tokio::time::sleep_until((started + due).into()).await;
        if in_flight.load(Ordering::Relaxed) >= spec.max_in_flight {
            not_sent += 1;
            continue;
        }
        in_flight.fetch_add(1, Ordering::Relaxed);
        let op = draw_op(&spec, &mut rng);
        let mode = n % spec.modes.len().max(1);
        let deadline = draw_deadline(&spec, &mut rng);
        let body = {
            let newest = newest.lock().unwrap_or_else(|e| e.into_inner());
            build_body(op, n, &spec, &seeded, &newest, &mut rng)
        };
        let op = body.as_ref().map_or(op, |b| b.op);
        let (client, target, spec, tx, in_flight, newest) = (
            client.clone(),
            target.clone(),
            spec.clone(),
            tx.clone(),
            in_flight.clone(),
            newest.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let (chat, mark) = body.as_ref().map_or((None, None), |b| (b.chat, b.mark));
            let ((outcome, retry_after, id, replayed), retries) = match body {
                Some(built) => {
                    let header = spec.modes.get(mode).copied().flatten();
                    send_with_retries(&client, &target, &spec, built, header, deadline).await
                }
                None => ((Outcome::Status(0), false, None, false), 0),
            };
            if let (Op::Send, Some(chat), Some(id)) = (op, chat, id) {
                let mut newest = newest.lock().unwrap_or_else(|e| e.into_inner());
                let seen = newest.entry(chat).or_insert(id);
                *seen = (*seen).max(id);
            }
            let _ = tx.send(Request {
                op,
                mode,
                due,
                latency: started.elapsed().saturating_sub(due),
                outcome,
                retry_after,
                retries,
                replayed,
                id,
                mark,
            });
            in_flight.fetch_sub(1, Ordering::Relaxed);
        }));
    }
    drop(tx);
    for t in tasks {
        let _ = t.await;
    }
    LoadResult {
        requests: collector.await.unwrap_or_default(),
        not_sent,
    }
}

/// The operation of the next arrival, drawn by the spec's shares.
fn draw_op(spec: &LoadSpec, rng: &mut Rng) -> Op {
    let draw = (rng.next_u64() % 10_000) as f64 / 10_000.0;
    if draw < spec.create_share {
        Op::Create
    } else if draw < spec.create_share + spec.mark_share {
        Op::Mark
    } else {
        Op::Send
    }
}

/// The client's deadline for the next request, drawn uniformly from the
/// spec's range (the lower bound when the range is one value).
fn draw_deadline(spec: &LoadSpec, rng: &mut Rng) -> Duration {
    let (lo, hi) = spec.deadline;
    let span = hi.saturating_sub(lo).as_micros() as u64;
    lo + Duration::from_micros(if span == 0 { 0 } else { rng.next_u64() % span })
}

/// Sends `built`, under an Idempotency-Key of its own when the spec keys
/// its requests, again after a backoff while the answer is worth a retry
/// and retries are left; answers the last answer and the retries made.
async fn send_with_retries(
    client: &reqwest::Client,
    target: &str,
    spec: &LoadSpec,
    built: Built,
    mode: Option<PublishMode>,
    deadline: Duration,
) -> ((Outcome, bool, Option<Uuid>, bool), u32) {
    let key = spec.keyed.then(|| Uuid::now_v7().to_string());
    let to = To {
        target,
        path: &built.path,
        bearer: built.bearer.as_ref(),
        key: key.as_deref(),
    };
    let mut retries = 0;
    loop {
        let answer = send(client, &to, &built.body, mode, deadline).await;
        if retries >= spec.retries || !worth_retrying(answer.0) {
            return (answer, retries);
        }
        retries += 1;
        tokio::time::sleep(backoff(retries)).await;
    }
}

/// One request, built before it is due: what it is, its path, body and
/// acting user's `Authorization`, and the chat a send goes to or the
/// marker a move moves.
#[derive(Debug)]
struct Built {
    op: Op,
    path: String,
    body: Value,
    bearer: Option<HeaderValue>,
    chat: Option<Uuid>,
    mark: Option<Mark>,
}

/// Request `n`'s body. A chat is named after the run's tag and `n`, so a
/// request written twice (a retry that wrote again) shows as two chats of
/// one name. A marker move marks the newest acknowledged message of a
/// chat (`newest`) read, as one of its members; it goes as a send where
/// the chat drawn has none yet.
fn build_body(
    op: Op,
    n: usize,
    spec: &LoadSpec,
    seeded: &Seeded,
    newest: &HashMap<Uuid, Uuid>,
    rng: &mut Rng,
) -> Option<Built> {
    match op {
        Op::Create => {
            let m = pick_members(&seeded.users, spec.members, rng);
            let (creator, others) = m.split_first()?;
            Some(Built {
                op,
                path: "/v1/chats".to_owned(),
                body: json!({ "name": chat_name(&spec.chat_name, n), "member_ids": others }),
                bearer: seeded.bearer(creator).cloned(),
                chat: None,
                mark: None,
            })
        }
        Op::Send | Op::Mark => {
            let (chat, members) = seeded.chats.get(rng.below(seeded.chats.len()))?;
            let member = *members.get(rng.below(members.len()))?;
            let chat = *chat;
            match newest.get(&chat) {
                Some(&up_to) if op == Op::Mark => Some(Built {
                    op,
                    path: format!("/v1/chats/{chat}/read"),
                    body: json!({ "up_to": up_to }),
                    bearer: seeded.bearer(&member).cloned(),
                    chat: Some(chat),
                    mark: Some(Mark {
                        chat,
                        reader: member,
                        up_to,
                    }),
                }),
                _ => Some(Built {
                    op: Op::Send,
                    path: format!("/v1/chats/{chat}/messages"),
                    body: json!({ "body": spec.chat_name }),
                    bearer: seeded.bearer(&member).cloned(),
                    chat: Some(chat),
                    mark: None,
                }),
            }
        }
    }
}

/// Whether a client would send the request again: it got no answer, gave
/// up waiting, or was told to come back (503, or 409 while a request with
/// its key is still being written).
fn worth_retrying(outcome: Outcome) -> bool {
    !matches!(outcome, Outcome::Status(s) if s != 503 && s != 409)
}

/// The wait before retry `n` (from 1): 50 ms doubling, at most 1.6 s.
fn backoff(n: u32) -> Duration {
    Duration::from_millis(50 << n.saturating_sub(1).min(5))
}

/// The name of the chat request `n` of a run tagged `tag` creates.
pub fn chat_name(tag: &str, n: usize) -> String {
    format!("{tag} #{n}")
}

/// Where a request goes, as whom, and under which key.
struct To<'a> {
    target: &'a str,
    path: &'a str,
    bearer: Option<&'a HeaderValue>,
    key: Option<&'a str>,
}

async fn send(
    client: &reqwest::Client,
    to: &To<'_>,
    body: &Value,
    mode: Option<PublishMode>,
    deadline: Duration,
) -> (Outcome, bool, Option<Uuid>, bool) {
    let mut request = client
        .post(format!("{}{}", to.target, to.path))
        .json(body)
        .timeout(deadline);
    if let Some(bearer) = to.bearer {
        request = request.header(AUTHORIZATION, bearer.clone());
    }
    if let Some(key) = to.key {
        request = request.header("idempotency-key", key);
    }
    if let Some(mode) = mode {
        request = request.header("x-chatlab-publish-mode", mode.as_str());
    }
    let resp = match request.send().await {
        Ok(resp) => resp,
        Err(e) if e.is_timeout() => return (Outcome::Abandoned, false, None, false),
        Err(e) if e.is_connect() => return (Outcome::Refused, false, None, false),
        Err(_) => return (Outcome::Unanswered, false, None, false),
    };
    let status = resp.status().as_u16();
    let retry_after = resp.headers().contains_key("retry-after");
    let replayed = resp
        .headers()
        .get("idempotent-replayed")
        .is_some_and(|v| v == "true");
    match resp.bytes().await {
        Ok(bytes) => {
            let id = (status == 201)
                .then(|| serde_json::from_slice::<Value>(&bytes).ok())
                .flatten()
                .and_then(|v| v["id"].as_str()?.parse().ok());
            (Outcome::Status(status), retry_after, id, replayed)
        }
        Err(e) if e.is_timeout() => (Outcome::Abandoned, retry_after, None, false),
        Err(_) => (Outcome::Cut, retry_after, None, false),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;
    use crate::load::auth::Signer;

    #[test]
    fn only_unanswered_and_come_back_later_answers_are_retried() {
        for retried in [
            Outcome::Abandoned,
            Outcome::Refused,
            Outcome::Unanswered,
            Outcome::Cut,
            Outcome::Status(503),
            Outcome::Status(409),
        ] {
            assert!(worth_retrying(retried), "{retried:?}");
        }
        for settled in [
            Outcome::Status(201),
            Outcome::Status(422),
            Outcome::Status(404),
        ] {
            assert!(!worth_retrying(settled), "{settled:?}");
        }
        assert_eq!(backoff(1), Duration::from_millis(50));
        assert_eq!(backoff(3), Duration::from_millis(200));
        assert_eq!(backoff(30), Duration::from_millis(1600));
    }

    #[test]
    fn writes_go_as_the_creator_and_a_member_without_ids_in_the_body() {
        let signer = Signer::generate("chatlab").unwrap();
        let users: Vec<Uuid> = (0..20).map(|_| Uuid::now_v7()).collect();
        let bearers: HashMap<Uuid, HeaderValue> = users
            .iter()
            .map(|&u| (u, signer.bearer(u).unwrap()))
            .collect();
        let chat = Uuid::now_v7();
        let seeded = Seeded {
            chats: vec![(chat, users[..5].to_vec())],
            users,
            bearers,
        };
        let spec = LoadSpec {
            arrivals: ArrivalSchedule::new(1.0, Duration::from_secs(1)).unwrap(),
            create_share: 0.5,
            mark_share: 0.0,
            members: 4,
            chat_name: "fault tag".into(),
            modes: vec![None],
            deadline: (Duration::from_secs(1), Duration::from_secs(1)),
            max_in_flight: 1,
            retries: 0,
            keyed: false,
        };
        let subject = |b: &Built| {
            crate::load::auth::tests::subject(
                signer.secret(),
                "chatlab",
                b.bearer.as_ref().unwrap(),
            )
        };
        let mut rng = Rng::new(9);
        let none = HashMap::new();
        let newest = HashMap::from([(chat, Uuid::now_v7())]);
        for _ in 0..20 {
            let create = build_body(Op::Create, 7, &spec, &seeded, &none, &mut rng).unwrap();
            assert_eq!(create.path, "/v1/chats");
            assert_eq!(create.body["name"], "fault tag #7");
            assert!(create.body.get("creator_id").is_none());
            let others: Vec<Uuid> =
                serde_json::from_value(create.body["member_ids"].clone()).unwrap();
            assert_eq!(others.len(), 3);
            let creator = subject(&create);
            assert!(seeded.users.contains(&creator) && !others.contains(&creator));

            let post = build_body(Op::Send, 8, &spec, &seeded, &newest, &mut rng).unwrap();
            assert_eq!(post.path, format!("/v1/chats/{chat}/messages"));
            assert_eq!(post.body, json!({ "body": "fault tag" }));
            assert!(seeded.chats[0].1.contains(&subject(&post)));

            // A move before any message of the chat was acknowledged is a send.
            let early = build_body(Op::Mark, 9, &spec, &seeded, &none, &mut rng).unwrap();
            assert_eq!((early.op, early.mark), (Op::Send, None));
            let mark = build_body(Op::Mark, 9, &spec, &seeded, &newest, &mut rng).unwrap();
            assert_eq!(mark.op, Op::Mark);
            assert_eq!(mark.path, format!("/v1/chats/{chat}/read"));
            assert_eq!(mark.body, json!({ "up_to": newest[&chat] }));
            let moved = mark.mark.unwrap();
            assert_eq!((moved.chat, moved.up_to), (chat, newest[&chat]));
            assert_eq!(moved.reader, subject(&mark));
        }
    }
}
