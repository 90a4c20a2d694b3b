//! What the virtual users do: the scenarios, the data they need seeded, and
//! one request of each.
//!
//! Every chat request carries the acting user's bearer token, signed before
//! the run for each seeded user: createChat as its creator, sendMessage as
//! a member, reads as a member, import jobs as the chat's creator (its
//! owner). Users are seeded through the operator listener
//! (`POST /v1/users/bulk` on `OPS_ADDR`), chats through the public one.

use std::collections::HashMap;
use std::str::FromStr;
use std::time::Duration;

use reqwest::header::{AUTHORIZATION, HeaderValue};
use serde_json::{Value, json};
use uuid::Uuid;

use crate::error::LoadError;
use crate::load::auth::Signer;
use crate::load::traces::TraceParent;
use chatlab_domain::{InsertStrategy, PublishMode};

/// A scenario.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scenario {
    /// `POST /v1/chats` with `members` members.
    CreateChat,
    /// `POST /v1/chats/{id}/messages` into seeded chats.
    SendMessage,
    /// `GET /v1/chats/{id}/messages?limit=20` of seeded chats.
    ReadMessages,
    /// `GET /v1/me/chats?limit=20` (the caller's chats, each with its
    /// unread count and newest message) as a member of a seeded chat of
    /// `members` members: the read that fan-out on write exists for.
    MyChats,
    /// A weighted mix (`mix:create:send:read[:my-chats]`); the results
    /// give each operation's latencies as well as the cell's.
    Mix {
        /// Weights of create, send, read and my-chats.
        weights: [u32; 4],
    },
    /// `GET` of a fixed path (the harness cross-check against wrk).
    Get {
        /// The path, e.g. `/healthz`.
        path: String,
    },
    /// `POST /v1/chats/{id}/messages/import`: one bulk job of `rows`
    /// messages into a seeded chat, in chunks of `chunk` rows, `parallelism`
    /// chunks at once (`import:ROWS:CHUNK:PARALLELISM`).
    Import {
        /// Messages per job (the seed 003 `dataSize`).
        rows: usize,
        /// Rows per transaction.
        chunk: usize,
        /// Chunks in flight.
        parallelism: usize,
    },
}

impl FromStr for Scenario {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        if let Some(w) = s.strip_prefix("mix") {
            let w = w.trim_start_matches(':');
            let weights: Vec<u32> = if w.is_empty() {
                vec![1, 3, 6]
            } else {
                w.split(':')
                    .map(|x| x.parse().map_err(|_| format!("bad mix weight {x:?}")))
                    .collect::<Result<_, _>>()?
            };
            let (c, m, r, l) = match weights[..] {
                [c, m, r] => (c, m, r, 0),
                [c, m, r, l] => (c, m, r, l),
                _ => {
                    return Err(
                        "mix takes three or four weights, create:send:read[:my-chats] \
                                (e.g. mix:1:3:6, mix:0:1:0:1)"
                            .into(),
                    );
                }
            };
            if c + m + r + l == 0 {
                return Err("mix weights are all zero".into());
            }
            return Ok(Self::Mix {
                weights: [c, m, r, l],
            });
        }
        if let Some(spec) = s.strip_prefix("import:") {
            let parts: Vec<usize> = spec
                .split(':')
                .map(|x| x.parse().map_err(|_| format!("bad import figure {x:?}")))
                .collect::<Result<_, _>>()?;
            let [rows, chunk, parallelism] = parts[..] else {
                return Err(
                    "import takes ROWS:CHUNK:PARALLELISM (e.g. import:10000:1000:4)".into(),
                );
            };
            if rows == 0 || chunk == 0 || parallelism == 0 {
                return Err("import figures must be at least 1".into());
            }
            return Ok(Self::Import {
                rows,
                chunk,
                parallelism,
            });
        }
        if let Some(path) = s.strip_prefix("get:") {
            return Ok(Self::Get {
                path: path.to_owned(),
            });
        }
        match s {
            "create-chat" | "create_chat" => Ok(Self::CreateChat),
            "send-message" | "send_message" => Ok(Self::SendMessage),
            "read-messages" | "read_messages" => Ok(Self::ReadMessages),
            "my-chats" | "my_chats" => Ok(Self::MyChats),
            other => Err(format!(
                "unknown scenario {other:?}: create-chat, send-message, read-messages, my-chats, mix[:C:S:R[:L]], \
                 import:ROWS:CHUNK:PARALLELISM, get:/path"
            )),
        }
    }
}

/// One operation a virtual user performs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// createChat.
    Create,
    /// send a message.
    Send,
    /// read messages.
    Read,
    /// list the caller's chats with their unread counts.
    MyChats,
    /// the fixed GET.
    Get,
    /// one import job.
    Import,
}

impl Op {
    /// Its name in tables (`create`, `send`, `read`, `get`, `import`).
    pub fn name(self) -> &'static str {
        match self {
            Self::Create => "create",
            Self::Send => "send",
            Self::Read => "read",
            Self::MyChats => "my-chats",
            Self::Get => "get",
            Self::Import => "import",
        }
    }
}

impl Scenario {
    /// Whether the scenario needs seeded chats.
    pub fn needs_chats(&self) -> bool {
        matches!(
            self,
            Self::SendMessage
                | Self::ReadMessages
                | Self::MyChats
                | Self::Mix { .. }
                | Self::Import { .. }
        )
    }

    /// Whether its chats must have the cell's member count: a send's cost
    /// per member (the inbox fan-out) and a chat list's unread counts are
    /// measured at that size. Other scenarios read and import into chats
    /// of ten.
    pub fn sized_chats(&self) -> bool {
        match self {
            Self::SendMessage | Self::MyChats => true,
            Self::Mix { weights } => weights[1] > 0 || weights[3] > 0,
            _ => false,
        }
    }

    /// Rows one request of this scenario writes, when that is fixed
    /// (import jobs), for a rows-per-second figure.
    pub fn rows_per_request(&self) -> Option<usize> {
        match self {
            Self::Import { rows, .. } => Some(*rows),
            _ => None,
        }
    }

    /// The next operation, from a uniform random number.
    pub fn pick(&self, r: u64) -> Op {
        match self {
            Self::CreateChat => Op::Create,
            Self::SendMessage => Op::Send,
            Self::ReadMessages => Op::Read,
            Self::MyChats => Op::MyChats,
            Self::Get { .. } => Op::Get,
            Self::Import { .. } => Op::Import,
            Self::Mix { weights } => {
                let total = u64::from(weights.iter().sum::<u32>());
                let x = r % total.max(1);
                if x < u64::from(weights[0]) {
                    Op::Create
                } else if x < u64::from(weights[0] + weights[1]) {
                    Op::Send
                } else if x < u64::from(weights[0] + weights[1] + weights[2]) {
                    Op::Read
                } else {
                    Op::MyChats
                }
            }
        }
    }
}

/// A small fast PRNG (xorshift64*), one per virtual user: request choice
/// needs no cryptographic quality, only speed and independence.
#[derive(Debug, Clone)]
pub struct Rng(fastrand::Rng);

impl Rng {
    /// Seeded, so a run's choices can be replayed.
    pub fn new(seed: u64) -> Self {
        Self(fastrand::Rng::with_seed(seed))
    }

    /// The next number.
    pub fn next_u64(&mut self) -> u64 {
        self.0.u64(..)
    }

    /// Uniform in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 { 0 } else { self.0.usize(..n) }
    }
}

/// Seeded data the scenarios draw from.
#[derive(Debug, Clone, Default)]
pub struct Seeded {
    /// User ids.
    pub users: Vec<Uuid>,
    /// Chats for send/read, with their members, the creator (the chat's
    /// owner) first.
    pub chats: Vec<(Uuid, Vec<Uuid>)>,
    /// `Authorization: Bearer <token>` of every seeded user, signed before
    /// the run.
    pub bearers: HashMap<Uuid, HeaderValue>,
}

impl Seeded {
    /// The `Authorization` header value of seeded user `user`.
    pub fn bearer(&self, user: &Uuid) -> Option<&HeaderValue> {
        self.bearers.get(user)
    }

    /// A random seeded chat of `size` members, or of any size when none
    /// has that many (chats seeded for another scenario).
    pub fn chat_of_size(&self, size: usize, rng: &mut Rng) -> Option<&(Uuid, Vec<Uuid>)> {
        let sized: Vec<&(Uuid, Vec<Uuid>)> =
            self.chats.iter().filter(|(_, m)| m.len() == size).collect();
        if sized.is_empty() {
            self.chats.get(rng.below(self.chats.len()))
        } else {
            sized.get(rng.below(sized.len())).copied()
        }
    }

    /// Signs a token for each of `users` that has none yet.
    fn sign(&mut self, signer: &Signer) -> Result<(), LoadError> {
        for &user in &self.users {
            if let std::collections::hash_map::Entry::Vacant(slot) = self.bearers.entry(user) {
                slot.insert(signer.bearer(user)?);
            }
        }
        Ok(())
    }
}

/// Where to seed: the public URL (chats), the operator URL (users), and
/// the signer of the servers' tokens.
#[derive(Debug, Clone, Copy)]
pub struct SeedAt<'a> {
    /// A server's public URL.
    pub public: &'a str,
    /// A server's operator URL (`OPS_ADDR`), where `POST /v1/users/bulk`
    /// answers.
    pub ops: &'a str,
    /// Signs the seeded users' tokens.
    pub signer: &'a Signer,
}

/// How much to seed and how big a chat is.
#[derive(Debug, Clone, Copy)]
pub struct SeedSpec {
    /// Members per created chat, creator included.
    pub members: usize,
    /// Users to seed (at least `members`).
    pub users: usize,
    /// Chats to seed for send/read scenarios.
    pub chats: usize,
}

/// Seeds users through `POST /v1/users/bulk` on the operator listener,
/// signs a token for each, and, when needed, seeds chats through the
/// public listener, each created by its first member.
pub async fn seed(
    client: &reqwest::Client,
    at: SeedAt<'_>,
    spec: SeedSpec,
    scenario: &Scenario,
) -> Result<Seeded, LoadError> {
    let SeedAt { ops, signer, .. } = at;
    let mut seeded = Seeded {
        users: seed_users(client, ops, spec.users.max(spec.members).max(2), "load-").await?,
        ..Seeded::default()
    };
    seeded.sign(signer)?;
    if scenario.needs_chats() {
        let size = if scenario.sized_chats() {
            spec.members
        } else {
            10
        };
        seed_chats(client, at, &mut seeded, size, spec.chats.max(1)).await?;
    }
    Ok(seeded)
}

/// Seeds `count` chats of `size` members (creator included, a window of
/// the seeded users) through the public listener, each created by its
/// first member, and adds them to `seeded`.
pub async fn seed_chats(
    client: &reqwest::Client,
    at: SeedAt<'_>,
    seeded: &mut Seeded,
    size: usize,
    count: usize,
) -> Result<(), LoadError> {
    let base = at.public;
    let mut rng = Rng::new(0xC4A7 ^ size as u64);
    for i in 0..count {
        let members = pick_members(&seeded.users, size.min(seeded.users.len()), &mut rng);
        let (creator, others) = members
            .split_first()
            .ok_or_else(|| LoadError::http("seeding chats", "no users seeded"))?;
        let mut request = client.post(format!("{base}/v1/chats")).json(&json!({
            "name": format!("load seed {size}x{i}"),
            "member_ids": others,
        }));
        if let Some(bearer) = seeded.bearer(creator) {
            request = request.header(AUTHORIZATION, bearer.clone());
        }
        let resp = request
            .timeout(Duration::from_secs(120))
            .send()
            .await
            .map_err(|e| LoadError::http("seeding chats", e))?;
        if !resp.status().is_success() {
            let status = resp.status();
            let body = resp.text().await.unwrap_or_default();
            return Err(LoadError::http(
                "seeding chats",
                format!("{status}: {body}"),
            ));
        }
        let body: Value = resp
            .json()
            .await
            .map_err(|e| LoadError::http("seeding chats", e))?;
        let id = body["id"]
            .as_str()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| LoadError::http("seeding chats", "no id in the answer"))?;
        seeded.chats.push((id, members));
    }
    Ok(())
}

/// Creates `count` users named `prefix`N through `POST /v1/users/bulk` on
/// the operator listener `ops`, 50,000 a request: their ids.
pub async fn seed_users(
    client: &reqwest::Client,
    ops: &str,
    count: usize,
    prefix: &str,
) -> Result<Vec<Uuid>, LoadError> {
    let mut users = Vec::with_capacity(count);
    while users.len() < count {
        let batch = (count - users.len()).min(50_000);
        let resp = client
            .post(format!("{ops}/v1/users/bulk"))
            .json(&json!({ "count": batch, "name_prefix": prefix }))
            .timeout(Duration::from_secs(120))
            .send()
            .await
            .map_err(|e| LoadError::http("seeding users", e))?;
        let status = resp.status();
        let body: Value = resp
            .json()
            .await
            .map_err(|e| LoadError::http("seeding users", e))?;
        if !status.is_success() {
            return Err(LoadError::http(
                "seeding users",
                format!("{status}: {body}"),
            ));
        }
        let before = users.len();
        users.extend(
            body["ids"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|v| v.as_str()?.parse::<Uuid>().ok()),
        );
        if users.len() != before + batch {
            return Err(LoadError::http(
                "seeding users",
                format!("asked for {batch}, got {}", users.len() - before),
            ));
        }
    }
    Ok(users)
}

/// `n` distinct users: a random window of the pool (wrapping).
pub fn pick_members(users: &[Uuid], n: usize, rng: &mut Rng) -> Vec<Uuid> {
    let n = n.min(users.len());
    let start = rng.below(users.len());
    (0..n).map(|i| users[(start + i) % users.len()]).collect()
}

/// Per-request header overrides.
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    /// `X-Chatlab-Insert-Strategy`.
    pub strategy: Option<InsertStrategy>,
    /// `X-Chatlab-Publish-Mode`.
    pub publish_mode: Option<PublishMode>,
}

/// Everything a virtual user needs to build requests.
#[derive(Debug, Clone)]
pub struct Workload {
    /// The scenario.
    pub scenario: Scenario,
    /// Seeded users and chats.
    pub seeded: Seeded,
    /// Members per created chat.
    pub members: usize,
    /// Share of requests sent with a sampled `traceparent` (0: none).
    pub trace_fraction: f64,
    /// The import job's chat, JSON body and owner's `Authorization`, built
    /// once: the server gives every imported message a new id, so the same
    /// body serves every job.
    import: Option<(Uuid, bytes::Bytes, Option<HeaderValue>)>,
    /// The `Authorization` of the fixed GET (`get:/path`), if any.
    get_bearer: Option<HeaderValue>,
}

impl Workload {
    /// The workload; builds the import body when the scenario has one. The
    /// fixed GET of `get:/path` goes as the first seeded user, if any
    /// ([`Workload::with_get_bearer`] changes that).
    pub fn new(scenario: Scenario, seeded: Seeded, members: usize) -> Self {
        let import = match &scenario {
            Scenario::Import {
                rows,
                chunk,
                parallelism,
            } => seeded.chats.first().map(|(chat, chat_members)| {
                let messages: Vec<Value> = (0..*rows)
                    .map(|i| {
                        json!({
                            "sender_id": chat_members[i % chat_members.len()],
                            "body": format!("imported message {i} from chatlab-load"),
                        })
                    })
                    .collect();
                let body = json!({
                    "messages": messages,
                    "chunk_size": chunk,
                    "parallelism": parallelism,
                });
                let owner = chat_members.first().and_then(|u| seeded.bearer(u)).cloned();
                (*chat, bytes::Bytes::from(body.to_string()), owner)
            }),
            _ => None,
        };
        let get_bearer = seeded.users.first().and_then(|u| seeded.bearer(u)).cloned();
        Self {
            scenario,
            seeded,
            members,
            trace_fraction: 0.0,
            import,
            get_bearer,
        }
    }

    /// The same workload with the fixed GET sent with `bearer` as its
    /// `Authorization` (`None`: none).
    pub fn with_get_bearer(self, bearer: Option<HeaderValue>) -> Self {
        Self {
            get_bearer: bearer,
            ..self
        }
    }

    /// The same workload with `fraction` of its requests traced.
    pub fn with_trace_fraction(self, fraction: f64) -> Self {
        Self {
            trace_fraction: fraction,
            ..self
        }
    }
}

/// Sends one operation, with `trace` as its `traceparent` when given;
/// answers the HTTP status (0 for a transport error or timeout, or when
/// there is nothing to send it to).
pub async fn send(
    client: &reqwest::Client,
    base: &str,
    op: Op,
    work: &Workload,
    overrides: &Overrides,
    trace: Option<&TraceParent>,
    rng: &mut Rng,
) -> u16 {
    let Some(request) = request(client, base, op, work, overrides, trace, rng) else {
        return 0;
    };
    match request.send().await {
        Ok(resp) => {
            let status = resp.status().as_u16();
            // Read the body so the connection goes back to the pool.
            let _ = resp.bytes().await;
            status
        }
        Err(_) => 0,
    }
}

/// One operation as a request, as the acting user (`None`: no seeded chat
/// to send it to).
fn request(
    client: &reqwest::Client,
    base: &str,
    op: Op,
    work: &Workload,
    overrides: &Overrides,
    trace: Option<&TraceParent>,
    rng: &mut Rng,
) -> Option<reqwest::RequestBuilder> {
    let (scenario, seeded, members) = (&work.scenario, &work.seeded, work.members);
    let (request, bearer) = match op {
        Op::Create => {
            let m = pick_members(&seeded.users, members, rng);
            let (creator, others) = m.split_first()?;
            let request = client.post(format!("{base}/v1/chats")).json(&json!({
                "name": "load",
                "member_ids": others,
            }));
            (request, seeded.bearer(creator))
        }
        Op::Send => {
            let (chat, chat_members) = seeded.chat_of_size(members, rng)?;
            let sender = chat_members.get(rng.below(chat_members.len()))?;
            let request = client
                .post(format!("{base}/v1/chats/{chat}/messages"))
                .json(&json!({ "body": "hello from chatlab-load" }));
            (request, seeded.bearer(sender))
        }
        Op::Read => {
            let (chat, chat_members) = seeded.chats.get(rng.below(seeded.chats.len()))?;
            let reader = chat_members.get(rng.below(chat_members.len()))?;
            let request = client.get(format!("{base}/v1/chats/{chat}/messages?limit=20"));
            (request, seeded.bearer(reader))
        }
        Op::MyChats => {
            let (_, chat_members) = seeded.chat_of_size(members, rng)?;
            let reader = chat_members.get(rng.below(chat_members.len()))?;
            let request = client.get(format!("{base}/v1/me/chats?limit=20"));
            (request, seeded.bearer(reader))
        }
        Op::Import => {
            let (chat, body, owner) = work.import.as_ref()?;
            let request = client
                .post(format!("{base}/v1/chats/{chat}/messages/import"))
                .header("content-type", "application/json")
                .body(body.clone());
            (request, owner.as_ref())
        }
        Op::Get => {
            let path = match scenario {
                Scenario::Get { path } => path.as_str(),
                _ => "/healthz",
            };
            (
                client.get(format!("{base}{path}")),
                work.get_bearer.as_ref(),
            )
        }
    };
    let mut request = request;
    if let Some(bearer) = bearer {
        request = request.header(AUTHORIZATION, bearer.clone());
    }
    if let Some(trace) = trace {
        request = request.header("traceparent", trace.header());
    }
    if matches!(op, Op::Create | Op::Send | Op::Import) {
        if let Some(s) = overrides.strategy {
            request = request.header("x-chatlab-insert-strategy", s.as_str());
        }
        if let Some(m) = overrides.publish_mode {
            request = request.header("x-chatlab-publish-mode", m.as_str());
        }
    }
    Some(request)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scenarios_parse() {
        assert_eq!("create-chat".parse::<Scenario>(), Ok(Scenario::CreateChat));
        assert_eq!("my-chats".parse::<Scenario>(), Ok(Scenario::MyChats));
        assert_eq!(Scenario::MyChats.pick(7), Op::MyChats);
        assert!(Scenario::MyChats.needs_chats());
        assert!(Scenario::MyChats.sized_chats() && Scenario::SendMessage.sized_chats());
        let mixed = |w| Scenario::Mix { weights: w }.sized_chats();
        assert!(mixed([0, 1, 0, 1]) && mixed([0, 0, 0, 1]) && !mixed([1, 0, 3, 0]));
        assert!(!Scenario::ReadMessages.sized_chats());
        assert_eq!(
            "mix".parse::<Scenario>(),
            Ok(Scenario::Mix {
                weights: [1, 3, 6, 0]
            })
        );
        assert_eq!(
            "mix:0:1:0:1".parse::<Scenario>(),
            Ok(Scenario::Mix {
                weights: [0, 1, 0, 1]
            })
        );
        assert_eq!(
            "mix:2:0:1".parse::<Scenario>(),
            Ok(Scenario::Mix {
                weights: [2, 0, 1, 0]
            })
        );
        assert!("mix:1:2".parse::<Scenario>().is_err());
        assert!("mix:1:2:3:4:5".parse::<Scenario>().is_err());
        assert!("mix:0:0:0".parse::<Scenario>().is_err());
        assert!("delete".parse::<Scenario>().is_err());
        assert_eq!(
            "import:10000:1000:4".parse::<Scenario>(),
            Ok(Scenario::Import {
                rows: 10_000,
                chunk: 1_000,
                parallelism: 4
            })
        );
        assert!("import:10:0:1".parse::<Scenario>().is_err());
        assert!("import:10:5".parse::<Scenario>().is_err());
        assert_eq!(
            "get:/healthz".parse::<Scenario>(),
            Ok(Scenario::Get {
                path: "/healthz".into()
            })
        );
    }

    #[test]
    fn mix_follows_its_weights() {
        let s = Scenario::Mix {
            weights: [1, 3, 4, 2],
        };
        let mut rng = Rng::new(7);
        let mut counts = [0usize; 4];
        for _ in 0..100_000 {
            match s.pick(rng.next_u64()) {
                Op::Create => counts[0] += 1,
                Op::Send => counts[1] += 1,
                Op::Read => counts[2] += 1,
                Op::MyChats => counts[3] += 1,
                Op::Get | Op::Import => unreachable!(),
            }
        }
        for (n, share) in counts.iter().zip([0.1, 0.3, 0.4, 0.2]) {
            assert!((*n as f64 / 100_000.0 - share).abs() < 0.01, "{counts:?}");
        }
    }

    /// 30 users, three chats of ten (creator first), every token signed.
    fn signed_seed(signer: &Signer) -> Seeded {
        let users: Vec<Uuid> = (0..30).map(|_| Uuid::now_v7()).collect();
        let chats = (0..3)
            .map(|i| (Uuid::now_v7(), users[i * 10..i * 10 + 10].to_vec()))
            .collect();
        let mut seeded = Seeded {
            users,
            chats,
            bearers: HashMap::new(),
        };
        seeded.sign(signer).unwrap();
        seeded
    }

    fn built(work: &Workload, op: Op, rng: &mut Rng) -> reqwest::Request {
        let client = reqwest::Client::new();
        let overrides = Overrides {
            strategy: Some(InsertStrategy::Batch),
            publish_mode: None,
        };
        request(
            &client,
            "http://127.0.0.1:9",
            op,
            work,
            &overrides,
            None,
            rng,
        )
        .expect("a request")
        .build()
        .unwrap()
    }

    /// The user the request's token speaks for, verified by chatlab-auth.
    fn acting(req: &reqwest::Request, signer: &Signer) -> Uuid {
        let header = req.headers().get(AUTHORIZATION).expect("a bearer token");
        crate::load::auth::tests::subject(signer.secret(), signer.issuer(), header)
    }

    fn body(req: &reqwest::Request) -> Value {
        serde_json::from_slice(req.body().and_then(|b| b.as_bytes()).expect("a body")).unwrap()
    }

    /// The chat id in `/v1/chats/{id}/...`.
    fn chat_of(req: &reqwest::Request) -> Uuid {
        req.url()
            .path_segments()
            .unwrap()
            .nth(2)
            .unwrap()
            .parse()
            .unwrap()
    }

    fn members_of(seeded: &Seeded, chat: Uuid) -> &[Uuid] {
        &seeded.chats.iter().find(|(id, _)| *id == chat).unwrap().1
    }

    #[test]
    fn create_chat_goes_as_its_creator_without_creator_id() {
        let signer = Signer::generate("chatlab").unwrap();
        let work = Workload::new(Scenario::CreateChat, signed_seed(&signer), 7);
        let mut rng = Rng::new(11);
        for _ in 0..50 {
            let req = built(&work, Op::Create, &mut rng);
            assert_eq!(req.url().path(), "/v1/chats");
            let body = body(&req);
            let mut keys: Vec<&String> = body.as_object().unwrap().keys().collect();
            keys.sort();
            assert_eq!(keys, ["member_ids", "name"]);
            let others: Vec<Uuid> = serde_json::from_value(body["member_ids"].clone()).unwrap();
            assert_eq!(others.len(), 6);
            let creator = acting(&req, &signer);
            assert!(work.seeded.users.contains(&creator));
            assert!(!others.contains(&creator));
            assert_eq!(req.headers()["x-chatlab-insert-strategy"], "batch");
        }
    }

    #[test]
    fn messages_are_sent_and_read_as_members_of_the_chat() {
        let signer = Signer::generate("chatlab").unwrap();
        let work = Workload::new(
            Scenario::Mix {
                weights: [0, 1, 1, 0],
            },
            signed_seed(&signer),
            7,
        );
        let mut rng = Rng::new(5);
        let mut senders = std::collections::HashSet::new();
        for _ in 0..100 {
            let req = built(&work, Op::Send, &mut rng);
            assert_eq!(req.method(), reqwest::Method::POST);
            assert_eq!(body(&req), json!({ "body": "hello from chatlab-load" }));
            let sender = acting(&req, &signer);
            assert!(members_of(&work.seeded, chat_of(&req)).contains(&sender));
            senders.insert(sender);

            let req = built(&work, Op::Read, &mut rng);
            assert_eq!(req.method(), reqwest::Method::GET);
            assert!(req.url().path().ends_with("/messages"));
            assert!(members_of(&work.seeded, chat_of(&req)).contains(&acting(&req, &signer)));
            assert!(req.headers().get("x-chatlab-insert-strategy").is_none());
        }
        // Not always the creator: any member may send.
        assert!(senders.len() > 3);
    }

    #[test]
    fn import_jobs_go_as_the_chats_owner() {
        let signer = Signer::generate("chatlab").unwrap();
        let scenario = Scenario::Import {
            rows: 25,
            chunk: 10,
            parallelism: 2,
        };
        let work = Workload::new(scenario, signed_seed(&signer), 7);
        let req = built(&work, Op::Import, &mut Rng::new(1));
        let chat = chat_of(&req);
        let members = members_of(&work.seeded, chat);
        assert_eq!(acting(&req, &signer), members[0]);
        let body = body(&req);
        let messages = body["messages"].as_array().unwrap();
        assert_eq!(messages.len(), 25);
        for m in messages {
            let sender: Uuid = m["sender_id"].as_str().unwrap().parse().unwrap();
            assert!(members.contains(&sender));
        }
    }

    #[test]
    fn the_fixed_get_goes_as_the_first_seeded_user_unless_told() {
        let signer = Signer::generate("chatlab").unwrap();
        let seeded = signed_seed(&signer);
        let first = seeded.users[0];
        let work = Workload::new(
            Scenario::Get {
                path: "/v1/users/x".into(),
            },
            seeded,
            1,
        );
        let req = built(&work, Op::Get, &mut Rng::new(1));
        assert_eq!(acting(&req, &signer), first);
        let work = work.with_get_bearer(None);
        let req = built(&work, Op::Get, &mut Rng::new(1));
        assert!(req.headers().get(AUTHORIZATION).is_none());
        let bare = Workload::new(
            Scenario::Get {
                path: "/healthz".into(),
            },
            Seeded::default(),
            1,
        );
        let req = built(&bare, Op::Get, &mut Rng::new(1));
        assert!(req.headers().get(AUTHORIZATION).is_none());
    }

    #[test]
    fn member_windows_are_distinct_users() {
        let users: Vec<Uuid> = (0..10).map(|_| Uuid::now_v7()).collect();
        let mut rng = Rng::new(3);
        for _ in 0..100 {
            let m = pick_members(&users, 7, &mut rng);
            let unique: std::collections::HashSet<_> = m.iter().collect();
            assert_eq!(unique.len(), 7);
        }
        assert_eq!(pick_members(&users, 50, &mut rng).len(), 10);
    }
}
