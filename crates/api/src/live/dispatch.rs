//! The task between the topic and the hub: for each event, who starts
//! receiving its chat with it, then the fan-out.

use std::sync::Arc;

use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use uuid::Uuid;

use chatlab_domain::{ChatId, EventPayload, UserId};
use chatlab_kafka::live_tail::Tailed;
use chatlab_persistence::PgStore;

use super::cursor::Cursor;
use super::hub::Hub;
use super::metrics::LiveMetrics;

/// Fans out what the tail reads until it stops.
pub fn spawn(
    mut events: mpsc::Receiver<Tailed>,
    hub: Arc<Hub>,
    store: PgStore,
    metrics: LiveMetrics,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        while let Some(tailed) = events.recv().await {
            let tailed = match tailed {
                Tailed::Following(starts) => {
                    hub.follow(&Cursor::of(&starts));
                    continue;
                }
                Tailed::Event(tailed) => tailed,
            };
            let event = &tailed.event;
            let joined = joined(&hub, &store, &event.payload).await;
            let done = hub.fan_out(event, tailed.partition, tailed.offset, &joined);
            metrics.events.inc();
            metrics.count(done);
            let delay = chrono::Utc::now() - event.occurred_at;
            metrics
                .delay
                .observe(delay.to_std().unwrap_or_default().as_secs_f64());
            metrics.connections.set(hub.connections() as i64);
        }
    })
}

/// The users connected here who receive the event's chat from this event
/// on: a new chat's members, or the users added.
async fn joined(hub: &Hub, store: &PgStore, payload: &EventPayload) -> Vec<Uuid> {
    match payload {
        EventPayload::ChatCreated { chat_id, .. } => {
            let connected = hub.connected_users();
            if connected.is_empty() {
                return Vec::new();
            }
            let users = connected.into_iter().map(UserId::from_uuid).collect();
            match store
                .members_among(ChatId::from_uuid(*chat_id), users)
                .await
            {
                Ok(members) => members.into_iter().map(|m| m.as_uuid()).collect(),
                Err(e) => {
                    tracing::warn!(chat_id = %chat_id, error = %e,
                        "live delivery: the new chat's members could not be read; its connected members will receive it from their next connection");
                    Vec::new()
                }
            }
        }
        EventPayload::MembersAdded { user_ids, .. } => hub.connected_among(user_ids),
        EventPayload::MessageSent { .. }
        | EventPayload::MemberRemoved { .. }
        | EventPayload::OwnerChanged { .. }
        | EventPayload::ReadMarkerMoved { .. } => Vec::new(),
    }
}
