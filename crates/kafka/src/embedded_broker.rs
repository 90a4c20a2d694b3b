//! librdkafka's mock cluster, run in-process.
//!
//! `MockCluster` holds a raw librdkafka handle and is neither `Send` nor
//! `Sync`, so it lives on a thread of its own; [`EmbeddedBroker`] is a
//! handle that sends it commands (outages, round-trip time) and stops it on
//! drop. It speaks the Kafka protocol on a loopback port, so the producer
//! and the audit's consumer use it exactly like a real broker.
//!
//! Its topic lives as long as the process: a restarted server's starts
//! again at offset 0. [`EmbeddedBroker::life`] tells one life from
//! another, so that a position in an earlier one is not taken for one in
//! this one.

use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

use rdkafka::mocking::MockCluster;
use tracing::{info, warn};

use crate::KafkaSetupError;

enum Command {
    Down,
    Up,
    Stop,
}

/// A running mock cluster of one broker (id 1).
pub struct EmbeddedBroker {
    bootstrap: String,
    life: u64,
    commands: mpsc::Sender<(Command, mpsc::Sender<Result<(), String>>)>,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for EmbeddedBroker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmbeddedBroker")
            .field("bootstrap", &self.bootstrap)
            .field("life", &self.life)
            .finish_non_exhaustive()
    }
}

const BROKER_ID: i32 = 1;

impl EmbeddedBroker {
    /// Starts the cluster with `topic` created and `rtt` injected.
    pub fn start(topic: &str, partitions: i32, rtt: Duration) -> Result<Self, KafkaSetupError> {
        let (ready_tx, ready_rx) = mpsc::channel::<Result<String, String>>();
        let (commands, command_rx) = mpsc::channel::<(Command, mpsc::Sender<Result<(), String>>)>();
        let topic = topic.to_owned();
        let thread = std::thread::Builder::new()
            .name("kafka-mock-cluster".into())
            .spawn(move || {
                let cluster = match MockCluster::new(1).and_then(|c| {
                    c.create_topic(&topic, partitions, 1)?;
                    if !rtt.is_zero() {
                        c.broker_round_trip_time(-1, rtt)?;
                    }
                    Ok(c)
                }) {
                    Ok(c) => c,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e.to_string()));
                        return;
                    }
                };
                let _ = ready_tx.send(Ok(cluster.bootstrap_servers()));
                while let Ok((command, reply)) = command_rx.recv() {
                    let result = match command {
                        Command::Down => cluster.broker_down(BROKER_ID),
                        Command::Up => cluster.broker_up(BROKER_ID),
                        Command::Stop => break,
                    };
                    let _ = reply.send(result.map_err(|e| e.to_string()));
                }
            })
            .map_err(|e| KafkaSetupError::Broker(e.to_string()))?;
        let bootstrap = ready_rx
            .recv_timeout(Duration::from_secs(10))
            .map_err(|e| KafkaSetupError::Broker(format!("did not start: {e}")))?
            .map_err(KafkaSetupError::Broker)?;
        info!(
            %bootstrap,
            rtt_ms = rtt.as_millis() as u64,
            "KAFKA_BROKERS is not set: started librdkafka's in-process mock cluster (events live only as long as this process)"
        );
        // Milliseconds since the epoch, at the start: a restart is a later
        // millisecond.
        let life = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        Ok(Self {
            bootstrap,
            life,
            commands,
            thread: Some(thread),
        })
    }

    /// The `bootstrap.servers` of the cluster.
    pub fn bootstrap_servers(&self) -> &str {
        &self.bootstrap
    }

    /// Which life of its topic this is: when the cluster started, in
    /// milliseconds since the Unix epoch. The topic's offsets mean
    /// something only within one life.
    pub fn life(&self) -> u64 {
        self.life
    }

    fn command(&self, command: Command) -> Result<(), String> {
        let (reply_tx, reply_rx) = mpsc::channel();
        self.commands
            .send((command, reply_tx))
            .map_err(|_| "the mock cluster thread has stopped".to_owned())?;
        reply_rx
            .recv_timeout(Duration::from_secs(5))
            .map_err(|_| "the mock cluster did not answer".to_owned())?
    }

    /// Takes the broker down: connections drop, sends time out.
    pub fn broker_down(&self) -> Result<(), String> {
        self.command(Command::Down)
    }

    /// Brings the broker back.
    pub fn broker_up(&self) -> Result<(), String> {
        self.command(Command::Up)
    }
}

impl Drop for EmbeddedBroker {
    fn drop(&mut self) {
        let (reply_tx, _reply_rx) = mpsc::channel();
        let _ = self.commands.send((Command::Stop, reply_tx));
        if let Some(thread) = self.thread.take()
            && thread.join().is_err()
        {
            warn!("the mock cluster thread panicked");
        }
    }
}
