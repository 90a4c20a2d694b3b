//! The probe of `delivery-busy`: a sender posting to a chat it shares with
//! the listening member at a steady pace, and the tally of what the
//! member's live stream delivered. A message's latency runs from the
//! moment its POST's 201 answer arrived to the moment its `message.sent`
//! frame arrived on the stream, both on this process's monotonic clock.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use reqwest::header::{AUTHORIZATION, HeaderValue};
use serde_json::json;
use tokio::sync::mpsc;
use uuid::Uuid;

use crate::load::created::created_id;
use crate::load::latency::Latencies;
use crate::load::live_stream::Sighting;

/// How long one probe POST may take before it counts as failed.
const POST_TIMEOUT: Duration = Duration::from_secs(10);

/// How long after the last first delivery repeats are still counted.
const REPEAT_WINDOW: Duration = Duration::from_millis(500);

/// Who posts where, and how often.
pub(crate) struct Probe {
    /// The HTTP client.
    pub(crate) client: reqwest::Client,
    /// The public URL of the instance that takes the writes.
    pub(crate) url: String,
    /// The chat of the sender and the member.
    pub(crate) chat: Uuid,
    /// The sender's token.
    pub(crate) bearer: HeaderValue,
    /// Time between two posts.
    pub(crate) every: Duration,
}

/// One probe POST: the message's id if it was written (201), when it was
/// sent and when its answer arrived.
pub(crate) struct Posted {
    id: Option<Uuid>,
    sent: Instant,
    answered: Instant,
}

/// What the member's stream delivered of one phase's probes.
#[derive(Debug, Default)]
pub(crate) struct Deliveries {
    /// Probes written (201).
    pub(crate) sent: u64,
    /// Probes not written (no answer, or another status).
    pub(crate) failed: u64,
    /// Written probes the stream delivered within the drain.
    pub(crate) received: u64,
    /// Written probes it did not.
    pub(crate) missing: u64,
    /// Frames of a probe after its first.
    pub(crate) duplicated: u64,
    /// Probes whose frame arrived before their POST's answer (latency 0).
    pub(crate) early: u64,
    /// From the POST's answer to the frame, per received probe.
    pub(crate) latency: Latencies,
    /// From the POST's start to the frame (the write's own time included).
    pub(crate) from_start: Latencies,
}

impl Probe {
    /// Posts a probe every `self.every` for `duration` (an open model: a
    /// slow answer does not delay the next post), and waits for every
    /// answer (at most [`POST_TIMEOUT`] each).
    pub(crate) async fn post_for(&self, duration: Duration) -> Vec<Posted> {
        let end = Instant::now() + duration;
        let mut tick = tokio::time::interval(self.every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut tasks = Vec::new();
        loop {
            tick.tick().await;
            if Instant::now() >= end {
                break;
            }
            let request = self
                .client
                .post(format!("{}/v1/chats/{}/messages", self.url, self.chat))
                .header(AUTHORIZATION, self.bearer.clone())
                .timeout(POST_TIMEOUT)
                .json(&json!({ "body": format!("busy probe {}", tasks.len()) }));
            tasks.push(tokio::spawn(async move {
                let sent = Instant::now();
                let id = created_id(request.send().await).await;
                // The answer's arrival: its body is read by now, as a
                // client would have it.
                Posted {
                    id,
                    sent,
                    answered: Instant::now(),
                }
            }));
        }
        let mut posted = Vec::with_capacity(tasks.len());
        for task in tasks {
            if let Ok(p) = task.await {
                posted.push(p);
            }
        }
        posted
    }
}

/// Matches the stream's sightings against the `posted` probes, waiting at
/// most `drain` for those not delivered yet; frames of other messages (an
/// earlier phase's, the chat's own) are passed over.
pub(crate) async fn tally(
    posted: &[Posted],
    seen: &mut mpsc::UnboundedReceiver<Sighting>,
    drain: Duration,
) -> Deliveries {
    let mut out = Deliveries::default();
    let mut expected: HashMap<Uuid, (Instant, Instant)> = HashMap::with_capacity(posted.len());
    for p in posted {
        match p.id {
            Some(id) => {
                expected.insert(id, (p.sent, p.answered));
            }
            None => out.failed += 1,
        }
    }
    out.sent = expected.len() as u64;
    let mut got: HashMap<Uuid, u32> = HashMap::with_capacity(expected.len());
    let drain_until = tokio::time::Instant::now() + drain;
    while got.len() < expected.len() {
        let Ok(Some((_, message, at, _))) = tokio::time::timeout_at(drain_until, seen.recv()).await
        else {
            break;
        };
        count(&mut out, &expected, &mut got, message, at);
    }
    // Repeats that come after the last first delivery still count.
    tokio::time::sleep(REPEAT_WINDOW).await;
    while let Ok((_, message, at, _)) = seen.try_recv() {
        count(&mut out, &expected, &mut got, message, at);
    }
    out.missing = out.sent - out.received;
    out
}

/// Counts one sighting of `message` at `at` into `out`.
fn count(
    out: &mut Deliveries,
    expected: &HashMap<Uuid, (Instant, Instant)>,
    got: &mut HashMap<Uuid, u32>,
    message: Uuid,
    at: Instant,
) {
    let Some(&(sent, answered)) = expected.get(&message) else {
        return;
    };
    let times = got.entry(message).or_default();
    *times += 1;
    if *times > 1 {
        out.duplicated += 1;
        return;
    }
    out.received += 1;
    if at < answered {
        out.early += 1;
    }
    out.latency
        .record_micros(at.saturating_duration_since(answered).as_micros() as u64);
    out.from_start
        .record_micros(at.saturating_duration_since(sent).as_micros() as u64);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn probes_are_received_missing_repeated_or_early() {
        let t0 = Instant::now();
        let ids: Vec<Uuid> = (0..4).map(|_| Uuid::now_v7()).collect();
        let posted = vec![
            Posted {
                id: Some(ids[0]),
                sent: t0,
                answered: t0,
            },
            Posted {
                id: Some(ids[1]),
                sent: t0,
                answered: t0,
            },
            Posted {
                id: Some(ids[2]),
                sent: t0,
                answered: t0 + Duration::from_millis(5),
            },
            Posted {
                id: None,
                sent: t0,
                answered: t0,
            },
        ];
        let (tx, mut rx) = mpsc::unbounded_channel();
        let later = t0 + Duration::from_millis(20);
        for s in [
            (0, ids[0], later, 10),
            (0, ids[0], later, 10),
            (0, ids[2], t0, 10),
            (0, ids[3], later, 10),
        ] {
            tx.send(s).unwrap();
        }
        let d = tally(&posted, &mut rx, Duration::from_millis(50)).await;
        assert_eq!((d.sent, d.failed), (3, 1));
        assert_eq!((d.received, d.missing, d.duplicated), (2, 1, 1));
        assert_eq!(d.early, 1, "a frame before its answer");
        assert!((d.latency.max_ms() - 20.0).abs() < 0.1);
        assert!((d.from_start.max_ms() - 20.0).abs() < 0.1);
    }
}
