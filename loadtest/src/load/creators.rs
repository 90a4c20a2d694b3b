//! A background load of chat creation: client tasks creating chats back
//! to back (a closed model: each sends its next createChat when the last
//! answered), each chat by a user of a pool with other users of the pool
//! as its members, so the users a command measures are never in one
//! (`delivery-busy`'s busy phase, `delivery --creators`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use reqwest::header::{AUTHORIZATION, HeaderValue};
use serde_json::{Value, json};
use uuid::Uuid;

/// How long one createChat may take before it counts as failed.
const CREATE_TIMEOUT: Duration = Duration::from_secs(30);

/// Who creates chats where.
pub(crate) struct Creators {
    /// The HTTP client.
    pub(crate) client: reqwest::Client,
    /// The public URL of the instance that takes the writes.
    pub(crate) url: String,
    /// The users chats are made of.
    pub(crate) pool: Arc<Vec<Uuid>>,
    /// Their tokens, in the order of `pool`.
    pub(crate) bearers: Arc<Vec<HeaderValue>>,
    /// Members of each chat besides its creator.
    pub(crate) members: usize,
    /// Concurrent client tasks.
    pub(crate) tasks: usize,
}

/// What the creators did in a phase.
#[derive(Debug, Default, Clone)]
pub(crate) struct Created {
    /// Chats created (201).
    pub(crate) chats: u64,
    /// createChats that failed.
    pub(crate) failed: u64,
    /// From the first request to the last answer.
    pub(crate) elapsed: Duration,
    /// What the first failure said.
    pub(crate) first_failure: Option<String>,
}

impl Created {
    /// Chats created per second.
    pub(crate) fn per_second(&self) -> f64 {
        let secs = self.elapsed.as_secs_f64();
        if secs > 0.0 {
            self.chats as f64 / secs
        } else {
            0.0
        }
    }
}

impl Creators {
    /// Every task creates chats until `duration` has passed (a request in
    /// flight then is let finish).
    pub(crate) async fn create_for(&self, duration: Duration) -> Created {
        let start = Instant::now();
        let end = start + duration;
        let tasks: Vec<_> = (0..self.tasks)
            .map(|task| {
                let client = self.client.clone();
                let url = self.url.clone();
                let pool = Arc::clone(&self.pool);
                let bearers = Arc::clone(&self.bearers);
                let members = self.members;
                tokio::spawn(async move {
                    let mut rng = fastrand::Rng::with_seed(task as u64);
                    let mut created = Created::default();
                    let mut n = 0usize;
                    while Instant::now() < end {
                        let (creator, others) = draw(&mut rng, &pool, members);
                        let name = format!("busy {task}-{n}");
                        n += 1;
                        match create_chat(&client, &url, &bearers[creator], &name, &others).await {
                            Ok(_) => created.chats += 1,
                            Err(e) => {
                                created.failed += 1;
                                created.first_failure.get_or_insert(e);
                            }
                        }
                    }
                    created
                })
            })
            .collect();
        let mut total = Created::default();
        for task in tasks {
            match task.await {
                Ok(c) => {
                    total.chats += c.chats;
                    total.failed += c.failed;
                    if total.first_failure.is_none() {
                        total.first_failure = c.first_failure;
                    }
                }
                Err(e) => {
                    total
                        .first_failure
                        .get_or_insert(format!("a creator task: {e}"));
                }
            }
        }
        total.elapsed = start.elapsed();
        total
    }
}

/// A creator (an index of `pool`) and `members` other users of the pool,
/// all different.
fn draw(rng: &mut fastrand::Rng, pool: &[Uuid], members: usize) -> (usize, Vec<Uuid>) {
    let creator = rng.usize(..pool.len());
    let mut picked: Vec<usize> = Vec::with_capacity(members);
    let wanted = members.min(pool.len().saturating_sub(1));
    while picked.len() < wanted {
        let i = rng.usize(..pool.len());
        if i != creator && !picked.contains(&i) {
            picked.push(i);
        }
    }
    (creator, picked.into_iter().map(|i| pool[i]).collect())
}

/// `POST /v1/chats` by the holder of `bearer`, with `members` besides
/// them: the new chat's id, or what went wrong.
pub(crate) async fn create_chat(
    client: &reqwest::Client,
    url: &str,
    bearer: &HeaderValue,
    name: &str,
    members: &[Uuid],
) -> Result<Uuid, String> {
    let resp = client
        .post(format!("{url}/v1/chats"))
        .header(AUTHORIZATION, bearer.clone())
        .timeout(CREATE_TIMEOUT)
        .json(&json!({ "name": name, "member_ids": members }))
        .send()
        .await
        .map_err(|e| e.to_string())?;
    let status = resp.status();
    let body: Value = resp.json().await.map_err(|e| format!("{status}: {e}"))?;
    if status.as_u16() != 201 {
        return Err(format!("{status}: {body}"));
    }
    body["id"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("{status}: no id in {body}"))
}

/// One chat per `members` consecutive users of `users`, created by the
/// first of them and named `{label} N`: each chat's id and its members (as
/// indexes of `users`), in order. Stops at the first chat not created.
pub(crate) async fn create_groups(
    client: &reqwest::Client,
    url: &str,
    users: &[Uuid],
    bearers: &[HeaderValue],
    members: usize,
    label: &str,
) -> Result<Vec<(Uuid, Vec<usize>)>, crate::error::LoadError> {
    let indexes: Vec<usize> = (0..users.len()).collect();
    let mut chats = Vec::new();
    for (n, group) in indexes.chunks(members.max(1)).enumerate() {
        let others: Vec<Uuid> = group[1..].iter().map(|&i| users[i]).collect();
        let id = create_chat(
            client,
            url,
            &bearers[group[0]],
            &format!("{label} {n}"),
            &others,
        )
        .await
        .map_err(|e| crate::error::LoadError::http("creating chats", e))?;
        chats.push((id, group.to_vec()));
    }
    Ok(chats)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chat_is_its_creator_and_other_users_all_different() {
        let pool: Vec<Uuid> = (0..12).map(|_| Uuid::now_v7()).collect();
        let mut rng = fastrand::Rng::with_seed(7);
        for _ in 0..100 {
            let (creator, others) = draw(&mut rng, &pool, 10);
            assert_eq!(others.len(), 10);
            assert!(!others.contains(&pool[creator]));
            let mut unique = others.clone();
            unique.sort();
            unique.dedup();
            assert_eq!(unique.len(), 10);
        }
        // A pool too small gives every other user, and never loops.
        let (_, others) = draw(&mut rng, &pool[..3], 10);
        assert_eq!(others.len(), 2);
    }
}
