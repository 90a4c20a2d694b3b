//! The task between the topic and the hub: each event, as the tail reads
//! it, fanned out to this instance's connections.
//!
//! It asks nothing of the database: who starts receiving a chat is in the
//! event itself (a new chat's members, the users added), so a slow,
//! distant or dead database delays no frame.

use std::sync::Arc;

use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use chatlab_kafka::live_tail::Tailed;

use super::cursor::Cursor;
use super::hub::Hub;
use super::metrics::LiveMetrics;

/// Fans out what the tail reads until it stops.
pub fn spawn(
    mut events: mpsc::Receiver<Tailed>,
    hub: Arc<Hub>,
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
            let written = tailed.event.occurred_at;
            let done = hub.fan_out(Arc::new(tailed.event), tailed.partition, tailed.offset);
            metrics.events.inc();
            metrics.count(done);
            let delay = chrono::Utc::now() - written;
            metrics
                .delay
                .observe(delay.to_std().unwrap_or_default().as_secs_f64());
            metrics.connections.set(hub.connections() as i64);
        }
    })
}
