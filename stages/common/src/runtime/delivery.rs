//! Producing outputs and changelog records until each is acknowledged.

use std::time::{Duration, Instant};

use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
use rdkafka::util::Timeout;
use recrawl_schemas::envelope::kafka_headers;
use recrawl_schemas::{encode, Message, TopicNames};

use crate::config::KafkaArgs;
use crate::http::Health;
use crate::kafka::{producer_config, ClusterContext};
use crate::metrics::StageMetrics;
use crate::state::StateStore;

use super::backoff::Backoff;
use super::errors::{DeadLetterKind, ErrorKind, RuntimeError, StageError};
use super::record::OutputRecord;
use super::stage::StageContext;

/// The stage's producer, and what a delivery that fails needs: its retries' limit, the
/// dead-letter topic, the metrics and health it moves.
pub(super) struct Delivery {
    producer: FutureProducer<ClusterContext>,
    args: KafkaArgs,
    topics: TopicNames,
    stage: &'static str,
    metrics: StageMetrics,
    health: Health,
    /// `--outage-timeout-ms`: how long failed deliveries are retried.
    outage: Duration,
}

impl Delivery {
    pub(super) fn new(
        args: &KafkaArgs,
        stage: &'static str,
        ctx: &StageContext,
    ) -> Result<Self, RuntimeError> {
        Ok(Self {
            producer: create_producer(args)?,
            args: args.clone(),
            topics: args.cluster.topics(),
            stage,
            metrics: ctx.metrics.clone(),
            health: ctx.health.clone(),
            outage: Duration::from_millis(args.outage_timeout_ms),
        })
    }

    /// The producer as it is now (it is re-created after a fatal error).
    pub(super) fn producer(&self) -> &FutureProducer<ClusterContext> {
        &self.producer
    }

    /// Produces `records` and waits until each is acknowledged, dead-lettered or, for a
    /// refused dead letter, counted and skipped; transient failures are retried with
    /// back-off until the outage timeout has passed since `polled`.
    pub(super) async fn deliver_all(
        &mut self,
        records: Vec<OutputRecord>,
        polled: Instant,
    ) -> Result<(), RuntimeError> {
        let mut backoff = Backoff::new();
        let mut retried = false;
        let mut said = String::new();
        let mut pending = records;
        loop {
            let producer = &self.producer;
            let deliveries = pending.iter().map(|record| deliver(producer, record));
            let results = futures::future::join_all(deliveries).await;
            let mut retry = Vec::new();
            let mut last_error = None;
            for (record, result) in pending.into_iter().zip(results) {
                match result {
                    Ok(()) => self.delivered(&record),
                    Err(error) if refused_for_good(&error) => {
                        if let Some(dead_letter) = self.refused(record, &error) {
                            retry.push(dead_letter);
                        }
                    }
                    Err(error) => {
                        self.metrics.errors.with_label_values(&[ErrorKind::Produce.as_str()]).inc();
                        last_error = Some((record.topic.clone(), error));
                        retry.push(record);
                    }
                }
            }
            if retry.is_empty() {
                if retried {
                    // Deliveries went through after failing: the cluster is back.
                    self.health.kafka_up();
                }
                return Ok(());
            }
            if let Some((topic, error)) = last_error {
                if polled.elapsed() > self.outage {
                    return Err(RuntimeError::Outage {
                        doing: format!("producing to {topic}"),
                        waited: polled.elapsed(),
                        last_error: error.to_string(),
                    });
                }
                self.health.kafka_down(&format!("producing to {topic}: {error}"));
                // Once per kind of failure, not once per retry: an outage is one line.
                let failure = error.to_string();
                if failure != said {
                    tracing::warn!(%topic, error = %failure, records = retry.len(), "deliveries failed; retrying them");
                    said = failure;
                }
                retried = true;
                self.recreate_producer_if_done(&error)?;
                tokio::time::sleep(backoff.next()).await;
            }
            pending = retry;
        }
    }

    fn delivered(&self, record: &OutputRecord) {
        self.metrics.records_out.with_label_values(&[&record.topic]).inc();
        if let Some((kind, topic)) = &record.dead_letter {
            self.metrics.dead_letters.with_label_values(&[topic.as_str(), kind.as_str()]).inc();
        }
    }

    /// An output the broker will never take becomes a dead letter (its first bytes, if
    /// too large); a dead letter it will never take is tried once more with its first
    /// bytes only (the dead-letter topic may take smaller records than the others), then
    /// logged, counted and dropped.
    fn refused(&self, mut record: OutputRecord, error: &KafkaError) -> Option<OutputRecord> {
        if record.dead_letter.is_some() {
            if record.shorten() {
                tracing::warn!(%error, bytes = record.size(), "the broker refused a dead letter; retrying it with its first bytes");
                return Some(record);
            }
            self.metrics.errors.with_label_values(&[ErrorKind::DeadLetterRefused.as_str()]).inc();
            tracing::error!(%error, bytes = record.size(), "the broker refused a dead letter; skipping it");
            return None;
        }
        let reason = format!("the broker refused the output ({} bytes): {error}", record.size());
        tracing::warn!(topic = %record.topic, %reason, "dead-lettering an output");
        Some(OutputRecord::dead_letter(
            &self.topics,
            self.stage,
            &record.topic,
            None,
            &record.key,
            record.payload.as_deref(),
            DeadLetterKind::Unproducible,
            &reason,
            self.args.cluster.max_record_bytes,
        ))
    }

    /// After a fatal error the producer accepts nothing more: replace it. Its
    /// unacknowledged records are what the caller retries. A broker can also end an
    /// idempotent producer's identity without librdkafka calling it fatal (tansu answers
    /// a producer that outlived its restart with ProducerFenced, for ever): the same.
    fn recreate_producer_if_done(&mut self, error: &KafkaError) -> Result<(), RuntimeError> {
        let done = self.producer.client().fatal_error().or_else(|| {
            producer_identity_lost(error)
                .then(|| (error.rdkafka_error_code().unwrap_or(RDKafkaErrorCode::Fail), error.to_string()))
        });
        if let Some((code, reason)) = done {
            tracing::warn!(?code, reason, "the producer can send no more; re-creating it");
            self.metrics.errors.with_label_values(&[ErrorKind::ProducerRecreated.as_str()]).inc();
            self.producer = create_producer(&self.args)?;
        }
        Ok(())
    }
}

/// The changelog records, for `changelog`, of every key of `store` touched since the last
/// call.
pub(super) fn changelog_records<T: Message>(
    store: &mut StateStore<T>,
    changelog: &str,
) -> Result<Vec<OutputRecord>, StageError> {
    let record = |partition: i32, key: String, value: Option<&T>| -> Result<OutputRecord, StageError> {
        let headers = kafka_headers::<T>().map(|(name, value)| (name, value.into_bytes())).into();
        Ok(OutputRecord {
            topic: changelog.to_owned(),
            key: key.into_bytes(),
            payload: value.map(encode).transpose()?,
            headers,
            partition: Some(partition),
            dead_letter: None,
        })
    };
    let mut records = Vec::new();
    for (partition, key, value) in store.take_dirty() {
        records.push(record(partition, key, value)?);
    }
    for (partition, key, value) in store.take_written() {
        records.push(record(partition, key, Some(&value))?);
    }
    for (partition, key) in store.take_removed() {
        records.push(record(partition, key, None)?);
    }
    Ok(records)
}

pub(super) fn create_producer(args: &KafkaArgs) -> Result<FutureProducer<ClusterContext>, RuntimeError> {
    producer_config(args)
        .create_with_context(ClusterContext)
        .map_err(|source| RuntimeError::Client { client: "producer", source })
}

/// Whether the broker refuses this record whatever happens, so retrying cannot help.
pub(super) fn refused_for_good(error: &KafkaError) -> bool {
    matches!(
        error.rdkafka_error_code(),
        Some(
            RDKafkaErrorCode::MessageSizeTooLarge
                | RDKafkaErrorCode::InvalidMessageSize
                | RDKafkaErrorCode::InvalidMessage
                | RDKafkaErrorCode::MessageBatchTooLarge
                | RDKafkaErrorCode::InvalidRecord
                | RDKafkaErrorCode::InvalidTimestamp
                | RDKafkaErrorCode::PolicyViolation
        )
    )
}

/// Whether the broker no longer knows this producer's id or epoch: retrying with the
/// same producer cannot succeed.
pub(super) fn producer_identity_lost(error: &KafkaError) -> bool {
    matches!(
        error.rdkafka_error_code(),
        Some(
            RDKafkaErrorCode::ProducerFenced
                | RDKafkaErrorCode::InvalidProducerEpoch
                | RDKafkaErrorCode::UnknownProducerId
                | RDKafkaErrorCode::InvalidProducerIdMapping
                | RDKafkaErrorCode::OutOfOrderSequenceNumber
        )
    )
}

/// Produces one record; resolves when the broker acknowledged it or it failed.
pub(super) async fn deliver(
    producer: &FutureProducer<ClusterContext>,
    record: &OutputRecord,
) -> Result<(), KafkaError> {
    let mut headers = OwnedHeaders::new_with_capacity(record.headers.len());
    for (name, value) in &record.headers {
        headers = headers.insert(Header { key: name, value: Some(value) });
    }
    let mut future_record = FutureRecord::to(&record.topic).key(&record.key).headers(headers);
    if let Some(payload) = &record.payload {
        future_record = future_record.payload(payload);
    }
    if let Some(partition) = record.partition {
        future_record = future_record.partition(partition);
    }
    producer.send(future_record, Timeout::Never).await.map(|_| ()).map_err(|(error, _)| error)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::runtime::backoff::{FIRST_BACKOFF, MAX_BACKOFF};

    #[test]
    fn only_size_and_validity_refusals_are_final() {
        let refused = KafkaError::MessageProduction(RDKafkaErrorCode::MessageSizeTooLarge);
        assert!(refused_for_good(&refused));
        for transient in [
            RDKafkaErrorCode::MessageTimedOut,
            RDKafkaErrorCode::AllBrokersDown,
            RDKafkaErrorCode::NotLeaderForPartition,
            RDKafkaErrorCode::UnknownProducerId,
            RDKafkaErrorCode::UnknownTopicOrPartition,
        ] {
            assert!(!refused_for_good(&KafkaError::MessageProduction(transient)), "{transient:?}");
        }
        let mut backoff = Backoff::new();
        let waits: Vec<Duration> = (0..8).map(|_| backoff.next()).collect();
        assert_eq!(waits[0], FIRST_BACKOFF);
        assert_eq!(waits[7], MAX_BACKOFF);
    }
}
