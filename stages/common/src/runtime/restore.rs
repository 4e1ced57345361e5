//! Restoring the state of assigned partitions from the changelog.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message as _;
use recrawl_schemas::{decode, Message};

use crate::kafka::{reader_config, ClusterContext};
use crate::tail::{read_to_end, EndOffsets, ReadToEndError};

use super::backoff::Backoff;
use super::errors::{ErrorKind, RuntimeError};
use super::event_loop::Loop;
use super::stage::Stage;

/// A restore fails when its changelog yields no record for this long short of its end.
pub(super) const RESTORE_TIMEOUT: Duration = Duration::from_secs(120);

impl<S: Stage> Loop<S> {
    /// Makes the state match the consumer's assignment. A restore that fails (the
    /// cluster unreachable) is retried until it succeeds or the outage timeout has passed
    /// since the consumer was `polled`.
    pub(super) async fn sync_assignment(&mut self, polled: Instant) -> Result<(), RuntimeError> {
        let assigned = match self.consumer.assignment() {
            Ok(assigned) => assigned,
            Err(error) => {
                self.ctx.metrics.errors.with_label_values(&[ErrorKind::Assignment.as_str()]).inc();
                tracing::warn!(%error, "cannot read the assignment; keeping the previous one");
                return Ok(());
            }
        };
        let partitions: HashSet<i32> = assigned
            .elements()
            .iter()
            .filter(|e| self.input_topics.iter().any(|t| t == e.topic()))
            .map(|e| e.partition())
            .collect();
        let mut sorted: Vec<i32> = partitions.iter().copied().collect();
        sorted.sort_unstable();
        if self.stage.stateful() {
            let revoked: Vec<i32> =
                self.store.loaded_partitions().filter(|p| !partitions.contains(p)).collect();
            for partition in revoked {
                self.stage.on_revoked(partition, &self.store);
                self.store.drop_partition(partition);
            }
            let missing: Vec<i32> = sorted.iter().copied().filter(|p| !self.store.is_loaded(*p)).collect();
            if !missing.is_empty() {
                self.ctx.health.set_ready(false);
                let started = Instant::now();
                self.ctx.metrics.restore_started.set(crate::unix_ms() / 1000);
                let restored = self.restore_with_retries(missing, polled).await;
                self.ctx.metrics.restore_started.set(0);
                let restored = restored?;
                let elapsed = started.elapsed();
                self.ctx.metrics.restore_seconds.observe(elapsed.as_secs_f64());
                for (partition, values) in restored {
                    tracing::info!(partition, keys = values.len(), ?elapsed, "state restored");
                    self.store.insert_partition(partition, values);
                    self.stage.on_restored(partition, &mut self.store);
                }
            }
            self.ctx.metrics.state_keys.set(self.stage.state_keys(&self.store) as i64);
        }
        // Per topic: a stage reading two co-partitioned topics owns twice as many
        // partitions as it keeps state for.
        for topic in &self.input_topics {
            let owned = assigned.elements().iter().filter(|e| e.topic() == topic).count();
            self.ctx.metrics.assigned_partitions.with_label_values(&[topic]).set(owned as i64);
        }
        self.assignment.partitions = sorted;
        // Partitions added to the input since the start (a single input's count may grow).
        let counts = self.consumer.context().input_partitions();
        if let Some(&now) = self.input_topics.first().and_then(|topic| counts.get(topic)) {
            self.assignment.total = self.assignment.total.max(now);
        }
        self.stage.on_assigned(&self.assignment);
        self.ctx.health.set_ready(self.consumer.context().has_joined());
        Ok(())
    }

    pub(super) async fn restore_with_retries(
        &self,
        partitions: Vec<i32>,
        polled: Instant,
    ) -> Result<Vec<(i32, HashMap<String, S::State>)>, RuntimeError> {
        let mut backoff = Backoff::new();
        loop {
            match self.restore(partitions.clone()).await {
                Ok(restored) => return Ok(restored),
                Err(error) if polled.elapsed() < self.outage && !self.ctx.shutdown.is_cancelled() => {
                    self.ctx.metrics.errors.with_label_values(&[ErrorKind::Restore.as_str()]).inc();
                    tracing::warn!(%error, "restore failed; retrying");
                    tokio::time::sleep(backoff.next()).await;
                }
                Err(error) => return Err(error),
            }
        }
    }

    /// Reads changelog partitions `partitions` from the beginning to their high
    /// watermarks with one reader; the latest value of each key wins, a tombstone deletes.
    pub(super) async fn restore(
        &self,
        partitions: Vec<i32>,
    ) -> Result<Vec<(i32, HashMap<String, S::State>)>, RuntimeError> {
        let topic = self.topics.state(S::NAME);
        let config = reader_config(&self.args.cluster, &format!("{}-restore", self.args.group_for(S::NAME)));
        let errors = self.ctx.metrics.errors.clone();
        let records_read = self.ctx.metrics.restored_records.clone();
        let settle_ms = self.args.restore_settle_ms;
        let metadata_timeout = Duration::from_millis(self.args.cluster.startup_timeout_ms);
        let mut bound = self.stage.restored_record_bound();
        tokio::task::spawn_blocking(move || {
            let restore_error = |partition: i32, reason: String| RuntimeError::Restore {
                topic: topic.clone(),
                partition,
                reason,
            };
            let first = partitions.first().copied().unwrap_or(0);
            let reader: BaseConsumer<ClusterContext> = config
                .create_with_context(ClusterContext)
                .map_err(|e| restore_error(first, e.to_string()))?;
            let mut restored: HashMap<i32, HashMap<String, S::State>> =
                partitions.iter().map(|&partition| (partition, HashMap::new())).collect();
            let (ends, assignment) =
                EndOffsets::fetch(&reader, &topic, partitions.iter().copied(), metadata_timeout, false)
                    .map_err(|e| restore_error(first, e.to_string()))?;
            if assignment.count() > 0 {
                reader.assign(&assignment).map_err(|e| restore_error(first, e.to_string()))?;
            }
            let settle = Duration::from_millis(settle_ms);
            let read = read_to_end(&reader, ends, settle, RESTORE_TIMEOUT, |message| {
                let Some(values) = restored.get_mut(&message.partition()) else { return };
                records_read.inc();
                let Some(key) = message.key().and_then(|k| std::str::from_utf8(k).ok()) else { return };
                let read = message.payload().map(|payload| {
                    let value = decode::<S::State>(payload).map_err(|error| error.to_string())?;
                    value.validate().map(|()| value)
                });
                match read {
                    None => {
                        bound(None, values.get(key));
                        values.remove(key);
                    }
                    Some(Ok(mut value)) => {
                        bound(Some(&mut value), values.get(key));
                        values.insert(key.to_owned(), value);
                    }
                    Some(Err(error)) => {
                        // A record this build cannot read, or holding what no stage writes
                        // (corrupted, forged), is skipped, not fatal: the key's state
                        // restarts and is rebuilt from new input.
                        errors.with_label_values(&[ErrorKind::RestoreDecode.as_str()]).inc();
                        tracing::warn!(key, %error, "skipping unreadable changelog record");
                    }
                }
            });
            read.map_err(|error| match error {
                ReadToEndError::Stalled { partition, .. } => restore_error(partition, error.to_string()),
                ReadToEndError::Kafka(_) => restore_error(first, error.to_string()),
            })?;
            Ok(restored.into_iter().collect())
        })
        .await?
    }
}
