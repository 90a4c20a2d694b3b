//! The producer in use, and its replacement when librdkafka declares it
//! dead.
//!
//! An idempotent producer whose delivery timed out can enter a fatal state
//! (fenced, out-of-order sequence, unknown producer id): from then on every
//! send fails, for good. librdkafka's rule is that such a producer must be
//! destroyed and a new one created. The slot does that the first time any
//! send sees the fatal state, once per generation however many sends see
//! it at once, and counts it (`chatlab_event_producer_rebuilds_total`).
//! Nothing a mode promised depends on the old producer: the outbox relay
//! marks a row published only on an acknowledgement, so a row whose send
//! died with the old producer stays pending and goes out on the new one;
//! `in_tx_await` answered 503 and rolled back; `after_commit` and
//! `in_tx_enqueue` lose what they always lose when a send fails, and count
//! it.

use std::sync::{Arc, Mutex, PoisonError};

use prometheus_client::metrics::counter::Counter;
use rdkafka::ClientConfig;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{FutureProducer, Producer};
use tracing::{error, warn};

/// A producer and its generation (how many producers came before it).
#[derive(Clone)]
pub(crate) struct Generation {
    /// 0 for the first producer, then 1, 2, ...
    pub number: u64,
    /// The producer.
    pub producer: FutureProducer,
}

/// The current producer of a publisher.
pub(crate) struct ProducerSlot {
    config: ClientConfig,
    current: Mutex<Generation>,
    rebuilds: Counter,
}

impl ProducerSlot {
    /// A slot holding `producer`, made from `config`.
    pub fn new(config: ClientConfig, producer: FutureProducer, rebuilds: Counter) -> Arc<Self> {
        Arc::new(Self {
            config,
            current: Mutex::new(Generation {
                number: 0,
                producer,
            }),
            rebuilds,
        })
    }

    /// The producer to send with now.
    pub fn get(&self) -> Generation {
        self.current
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// After a failed send of `used`: replaces its producer when the failure
    /// or the producer's own state says it is dead, unless another send
    /// already did. Answers whether a producer was replaced.
    pub fn replace_if_dead(&self, used: &Generation, failure: Option<&KafkaError>) -> bool {
        let fatal = used.producer.client().fatal_error();
        let by_code = failure
            .and_then(KafkaError::rdkafka_error_code)
            .filter(|c| is_fatal_code(*c));
        if fatal.is_none() && by_code.is_none() {
            return false;
        }
        let mut current = self.current.lock().unwrap_or_else(PoisonError::into_inner);
        if current.number != used.number {
            return false;
        }
        match self.config.create::<FutureProducer>() {
            Ok(producer) => {
                warn!(
                    generation = current.number + 1,
                    fatal = ?fatal,
                    code = ?by_code,
                    "the event producer is dead (librdkafka fatal error); a new one replaces it"
                );
                let old = std::mem::replace(
                    &mut *current,
                    Generation {
                        number: used.number + 1,
                        producer,
                    },
                );
                self.rebuilds.inc();
                // Destroying a librdkafka client joins its threads: not on
                // an async worker.
                drop(current);
                std::thread::spawn(move || drop(old));
                true
            }
            Err(e) => {
                error!(error = %e, "the event producer is dead and a new one could not be created");
                false
            }
        }
    }
}

/// Error codes after which an idempotent producer cannot send again.
fn is_fatal_code(code: RDKafkaErrorCode) -> bool {
    matches!(
        code,
        RDKafkaErrorCode::Fatal
            | RDKafkaErrorCode::ProducerFenced
            | RDKafkaErrorCode::InvalidProducerEpoch
            | RDKafkaErrorCode::OutOfOrderSequenceNumber
            | RDKafkaErrorCode::UnknownProducerId
            | RDKafkaErrorCode::InvalidProducerIdMapping
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fencing_and_sequence_errors_are_fatal_timeouts_are_not() {
        assert!(is_fatal_code(RDKafkaErrorCode::ProducerFenced));
        assert!(is_fatal_code(RDKafkaErrorCode::OutOfOrderSequenceNumber));
        assert!(is_fatal_code(RDKafkaErrorCode::Fatal));
        assert!(!is_fatal_code(RDKafkaErrorCode::MessageTimedOut));
        assert!(!is_fatal_code(RDKafkaErrorCode::BrokerTransportFailure));
    }
}
