//! Messages posted at a fixed rate to chats already made, as the live
//! experiments (`delivery`, `live-fleet`) write them: an open model (a slow
//! answer does not delay the next write), round robin over the chats, each
//! message from one of its chat's members in turn.

use std::sync::Arc;
use std::time::{Duration, Instant};

use reqwest::header::{AUTHORIZATION, HeaderValue};
use serde_json::json;
use tokio::sync::Semaphore;
use uuid::Uuid;

use crate::load::created::created_id;
use crate::load::monotonic::now_ns;

/// Writes in flight at most; past it the next one waits.
const IN_FLIGHT: usize = 1_000;

/// How long one write may take.
const WRITE_TIMEOUT: Duration = Duration::from_secs(30);

/// One write: its chat, when it started (on this process's clock and on
/// the machine's monotonic one), how long it took, and the message's id if
/// it was written.
#[derive(Debug, Clone)]
pub struct Written {
    pub chat: usize,
    pub start: Instant,
    pub start_ns: u64,
    pub took: Duration,
    pub id: Option<Uuid>,
}

/// Posts `rate` messages a second for `duration` to `url`'s `chats` (each
/// a chat id and its members as indexes into `bearers`), message `i`'s
/// text `body(i)`.
pub async fn write_messages(
    client: &reqwest::Client,
    url: &str,
    chats: &[(Uuid, Vec<usize>)],
    bearers: &[HeaderValue],
    (rate, duration): (f64, Duration),
    body: impl Fn(usize) -> String,
) -> Vec<Written> {
    let total = (rate * duration.as_secs_f64()).round().max(1.0) as usize;
    let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / rate));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let in_flight = Arc::new(Semaphore::new(IN_FLIGHT));
    let mut tasks = Vec::with_capacity(total);
    for i in 0..total {
        tick.tick().await;
        let chat = i % chats.len();
        let (chat_id, members) = &chats[chat];
        let sender = members[(i / chats.len()) % members.len()];
        let request = client
            .post(format!("{url}/v1/chats/{chat_id}/messages"))
            .header(AUTHORIZATION, bearers[sender].clone())
            .timeout(WRITE_TIMEOUT)
            .json(&json!({ "body": body(i) }));
        let Ok(permit) = Arc::clone(&in_flight).acquire_owned().await else {
            break;
        };
        tasks.push(tokio::spawn(async move {
            let _permit = permit;
            let (start, start_ns) = (Instant::now(), now_ns());
            let id = created_id(request.send().await).await;
            Written {
                chat,
                start,
                start_ns,
                took: start.elapsed(),
                id,
            }
        }));
    }
    let mut writes = Vec::with_capacity(tasks.len());
    for task in tasks {
        if let Ok(w) = task.await {
            writes.push(w);
        }
    }
    writes
}
