//! `chatlab-load broker-check`: does the broker keep what it acknowledges?
//!
//! Produces events to a fresh topic through chatlab's own publisher
//! (idempotent, `acks=all`), from several producers at once, optionally
//! beside busy threads that take the CPU from the broker, keeps the receipt
//! (partition, offset) of every acknowledged event, then reads the topic
//! back and reconciles the two with the audit's own logic. A broker that
//! loses acknowledged records shows up as acknowledged offsets past the
//! high watermark, offsets acknowledged twice, or acknowledged offsets the
//! topic does not serve; a reader that skips records as acknowledged
//! offsets inside the watermarks that were not read.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use clap::Args;
use futures_util::stream::{self, StreamExt};
use uuid::Uuid;

use chatlab_domain::audit::{AuditInput, AuditReport, CommittedWrite, SeenEvent, reconcile};
use chatlab_domain::{AckedEvent, Event, EventPayload, EventPublisher, PublishMode, Receipt};
use chatlab_kafka::topic_reader::{self, TopicSnapshot};
use chatlab_kafka::{EventMetrics, KafkaConfig, KafkaPublisher};

use crate::error::LoadError;
use crate::load::schedule::parse_duration;

/// Flags of `broker-check`.
#[derive(Debug, Args)]
pub struct BrokerCheckArgs {
    /// The broker (host:port,...). Only loopback brokers are checked.
    #[arg(long, env = "KAFKA_TEST_BROKERS", default_value = "127.0.0.1:9092")]
    brokers: String,
    /// Events to send in all.
    #[arg(long, default_value_t = 5000)]
    events: usize,
    /// Producers sending at once (each its own librdkafka client, as
    /// several chatlab servers are).
    #[arg(long, default_value_t = 4)]
    producers: usize,
    /// Sends in flight per producer.
    #[arg(long, default_value_t = 32)]
    in_flight: usize,
    /// Partitions of the fresh topic.
    #[arg(long, default_value_t = 3)]
    partitions: i32,
    /// Threads that spin on the CPU while the events are sent and read.
    #[arg(long, default_value_t = 0)]
    busy_threads: usize,
    /// Rounds, each on a fresh topic.
    #[arg(long, default_value_t = 1)]
    rounds: usize,
    /// Print the first N events with a finding of each round (receipt,
    /// position read, verdict).
    #[arg(long, default_value_t = 0)]
    show: usize,
    /// Bound on one round's sending.
    #[arg(long, default_value = "120s", value_parser = parse_duration)]
    max_duration: Duration,
}

/// What one round found.
#[derive(Debug, Default)]
struct Round {
    sent: usize,
    acked: usize,
    failed: usize,
    on_topic: usize,
    acked_not_served: usize,
    acked_past_end: usize,
    offsets_acked_twice: usize,
    acked_unread: usize,
    acked_without_offset: usize,
    gaps: usize,
    seconds: f64,
}

impl Round {
    fn broker_lost(&self) -> bool {
        self.acked_not_served
            + self.acked_past_end
            + self.offsets_acked_twice
            + self.acked_unread
            + self.gaps
            > 0
    }
}

/// Runs the check; answers whether the broker kept everything it
/// acknowledged in every round.
pub async fn run(args: BrokerCheckArgs) -> Result<bool, LoadError> {
    let loopback = args.brokers.split(',').all(|b| {
        let host = b.rsplit_once(':').map_or(b, |(h, _)| h);
        matches!(host, "127.0.0.1" | "localhost" | "[::1]") || host.starts_with("127.")
    });
    if !loopback {
        return Err(LoadError::Usage(format!(
            "{} is not a loopback address: broker-check only loads brokers on this machine",
            args.brokers
        )));
    }
    let spin = Arc::new(AtomicBool::new(true));
    let busy: Vec<_> = (0..args.busy_threads)
        .map(|_| {
            let spin = spin.clone();
            std::thread::spawn(move || {
                let mut x: u64 = 1;
                while spin.load(Ordering::Relaxed) {
                    x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
                    std::hint::black_box(x);
                }
            })
        })
        .collect();
    let mut rounds = Vec::new();
    for round in 0..args.rounds {
        let r = one_round(&args).await;
        match &r {
            Ok(r) => eprintln!(
                "round {}: {} sent, {} acked, {} on the topic, broker lost: {}",
                round + 1,
                r.sent,
                r.acked,
                r.on_topic,
                r.broker_lost()
            ),
            Err(e) => eprintln!("round {}: {e}", round + 1),
        }
        rounds.push(r);
    }
    spin.store(false, Ordering::Relaxed);
    for t in busy {
        let _ = t.join();
    }
    println!(
        "broker {}: {} producers x {} in flight, {} busy threads, {} events a round\n",
        args.brokers, args.producers, args.in_flight, args.busy_threads, args.events
    );
    println!(
        "| round | sent | acked | failed | on the topic | acked, not served | acked past the high watermark | offsets acked twice | acked, unread inside the watermarks | acked without offset | gaps | seconds |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|");
    let mut clean = true;
    for (i, r) in rounds.iter().enumerate() {
        match r {
            Ok(r) => {
                clean &= !r.broker_lost();
                println!(
                    "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.1} |",
                    i + 1,
                    r.sent,
                    r.acked,
                    r.failed,
                    r.on_topic,
                    r.acked_not_served,
                    r.acked_past_end,
                    r.offsets_acked_twice,
                    r.acked_unread,
                    r.acked_without_offset,
                    r.gaps,
                    r.seconds
                );
            }
            Err(e) => {
                clean = false;
                println!("| {} | error: {e} |||||||||||", i + 1);
            }
        }
    }
    let failed = rounds
        .iter()
        .filter(|r| r.as_ref().map_or(true, Round::broker_lost))
        .count();
    println!(
        "\nrounds where the broker lost or misplaced acknowledged events: {failed} of {}",
        rounds.len()
    );
    Ok(clean)
}

fn event(chat: Uuid) -> Event {
    Event {
        event_id: Uuid::now_v7(),
        occurred_at: chrono::Utc::now(),
        schema_version: chatlab_domain::events::EVENT_SCHEMA_VERSION,
        publish_mode: PublishMode::AfterCommit.as_str().to_owned(),
        payload: EventPayload::MessageSent {
            chat_id: chat,
            message_id: Uuid::now_v7(),
            sender_id: Uuid::nil(),
            body_length: 1,
            body: None,
        },
        trace_parent: None,
    }
}

/// `args.producers` publishers of chatlab's own, each with a connection of
/// its own to the broker, all writing to `topic`.
async fn connect_producers(
    args: &BrokerCheckArgs,
    topic: &str,
) -> Result<Vec<KafkaPublisher>, LoadError> {
    let config = KafkaConfig {
        brokers: Some(args.brokers.clone()),
        topic: topic.to_owned(),
        partitions: args.partitions,
        send_timeout: Duration::from_secs(30),
        linger: Duration::ZERO,
        mock_broker_rtt: Duration::ZERO,
    };
    let mut publishers = Vec::new();
    for _ in 0..args.producers.max(1) {
        let mut registry = prometheus_client::registry::Registry::default();
        publishers.push(
            KafkaPublisher::connect(
                &args.brokers,
                &config,
                EventMetrics::register(&mut registry),
                false,
            )
            .await
            .map_err(|e| LoadError::Broker(e.to_string()))?,
        );
    }
    Ok(publishers)
}

/// Prints the topic's watermarks and the first `show` findings of the
/// reconciliation.
fn show_findings(topic: &str, snapshot: &TopicSnapshot, report: &AuditReport, show: usize) {
    let ends: Vec<String> = snapshot
        .ends
        .iter()
        .map(|e| format!("{}:[{},{})", e.partition, e.low, e.high))
        .collect();
    eprintln!("{topic}: watermarks {}", ends.join(" "));
    for line in report.findings().take(show) {
        let acked: Vec<String> = line.acked_at.iter().map(Receipt::to_string).collect();
        let seen: Vec<String> = line.seen_at.iter().map(Receipt::to_string).collect();
        eprintln!(
            "  {} acked at [{}] read at [{}]: {}",
            line.subject_id,
            acked.join(" "),
            seen.join(" "),
            line.verdict.as_str()
        );
    }
}

async fn one_round(args: &BrokerCheckArgs) -> Result<Round, LoadError> {
    let topic = format!("chatlab-broker-check-{}", Uuid::now_v7().simple());
    chatlab_kafka::publisher::ensure_topic(&args.brokers, &topic, args.partitions)
        .await
        .map_err(|e| LoadError::Broker(e.to_string()))?;
    let publishers = connect_producers(args, &topic).await?;
    let events = round_events(args);
    let started = Instant::now();
    let outcomes = send_all(args, &publishers, &events).await;
    let seconds = started.elapsed().as_secs_f64();
    let receipts: Vec<AckedEvent> = outcomes
        .iter()
        .filter_map(|(e, r)| r.map(|r| AckedEvent::of(e, r)))
        .collect();
    let snapshot = read_back(args, &topic).await?;
    let report = reconcile_round(&receipts, &snapshot);
    if args.show > 0 {
        show_findings(&topic, &snapshot, &report, args.show);
    }
    let mode = report.mode(PublishMode::AfterCommit);
    Ok(Round {
        sent: outcomes.len(),
        acked: receipts.len(),
        failed: outcomes.len() - receipts.len(),
        on_topic: snapshot.records.len(),
        acked_not_served: mode.map_or(0, |m| m.lost_after_ack),
        acked_past_end: report.broker.acked_past_end,
        offsets_acked_twice: report.broker.offsets_acked_twice,
        acked_unread: report.broker.acked_unread,
        acked_without_offset: report.broker.acked_without_offset,
        gaps: snapshot.gaps.len(),
        seconds,
    })
}

/// The round's events: a few chats per producer, so every partition gets
/// concurrent writers.
fn round_events(args: &BrokerCheckArgs) -> Vec<Event> {
    let chats: Vec<Uuid> = (0..args.producers.max(1) * 8)
        .map(|_| Uuid::now_v7())
        .collect();
    (0..args.events)
        .map(|i| event(chats[i % chats.len()]))
        .collect()
}

/// Sends `events` through the round's producers, each its share with up to
/// `in_flight` awaiting their acknowledgement; an event not yet sent when
/// the round's time is up is not sent. Answers each event's receipt, if
/// the broker acknowledged it.
async fn send_all<'a>(
    args: &BrokerCheckArgs,
    publishers: &[KafkaPublisher],
    events: &'a [Event],
) -> Vec<(&'a Event, Option<Receipt>)> {
    let deadline = Instant::now() + args.max_duration;
    let per_producer = events.len().div_ceil(publishers.len());
    let sends = publishers
        .iter()
        .zip(events.chunks(per_producer.max(1)))
        .map(|(publisher, chunk)| async move {
            stream::iter(chunk)
                .map(|e| async move {
                    if Instant::now() > deadline {
                        return (e, None);
                    }
                    let r = publisher.publish(e, PublishMode::AfterCommit).await;
                    (e, r.ok())
                })
                .buffer_unordered(args.in_flight.max(1))
                .collect::<Vec<(&Event, Option<Receipt>)>>()
                .await
        });
    futures_util::future::join_all(sends)
        .await
        .into_iter()
        .flatten()
        .collect()
}

/// Reads the whole topic back. Reading is slower than writing on some
/// engines: it gets time in proportion to what was written.
async fn read_back(args: &BrokerCheckArgs, topic: &str) -> Result<TopicSnapshot, LoadError> {
    let (bootstrap, topic) = (args.brokers.clone(), topic.to_owned());
    let read_timeout = Duration::from_secs(60) + Duration::from_millis(50) * args.events as u32;
    tokio::task::spawn_blocking(move || topic_reader::read_all(&bootstrap, &topic, read_timeout))
        .await?
        .map_err(|e| LoadError::Broker(e.to_string()))
}

/// The audit of what was acknowledged (`receipts`) against what the topic
/// serves (`snapshot`), as the server's audit reconciles a run.
fn reconcile_round(receipts: &[AckedEvent], snapshot: &TopicSnapshot) -> AuditReport {
    let writes: Vec<CommittedWrite> = receipts
        .iter()
        .map(|a| CommittedWrite {
            subject_id: a.subject_id,
            mode: a.mode,
        })
        .collect();
    let read_positions: Vec<Receipt> = snapshot.records.iter().map(|r| r.position()).collect();
    let seen: Vec<SeenEvent> = snapshot
        .records
        .iter()
        .filter_map(|r| {
            let e = r.event.as_ref().ok()?;
            Some(SeenEvent {
                event_id: e.event_id,
                subject_id: e.subject_id(),
                mode: PublishMode::AfterCommit,
                at: r.position(),
            })
        })
        .collect();
    reconcile(&AuditInput {
        writes: &writes,
        events: &seen,
        read_positions: &read_positions,
        receipts,
        ends: &snapshot.ends,
        unreadable: 0,
    })
}
