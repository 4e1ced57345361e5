//! The loop itself: polling batches and ticks, handing them to the stage, storing offsets.

use std::collections::{BTreeMap, HashSet};
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rdkafka::consumer::{CommitMode, Consumer, StreamConsumer};
use rdkafka::error::KafkaError;
use rdkafka::message::Message as _;
use rdkafka::{Offset, TopicPartitionList};
use recrawl_schemas::TopicNames;
use tokio_util::sync::CancellationToken;

use crate::config::KafkaArgs;
use crate::kafka::{brokers_unreachable, StageConsumerContext};
use crate::state::StateStore;

use super::close::DestroyDetached;
use super::delivery::{changelog_records, Delivery};
use super::emitter::Emitter;
use super::errors::{ErrorKind, RuntimeError};
use super::inputs::{partition_counts, InputsApart};
use super::record::InputRecord;
use super::restore::restore_with_retries;
use super::side_inputs::SideInputs;
use super::stage::{Assignment, Stage, StageContext};

/// A batch also ends once its payloads reach this size, so batches of large records do
/// not hold `--batch-size` of them in memory.
pub(super) const BATCH_MAX_BYTES: usize = 64 << 20;

pub(super) struct Loop<S: Stage> {
    pub(super) stage: S,
    pub(super) args: KafkaArgs,
    pub(super) ctx: StageContext,
    pub(super) topics: TopicNames,
    pub(super) consumer: Arc<StreamConsumer<StageConsumerContext>>,
    pub(super) delivery: Delivery,
    pub(super) store: StateStore<S::State>,
    pub(super) input_topics: Vec<String>,
    pub(super) side_inputs: SideInputs,
    pub(super) assignment: Assignment,
    pub(super) outage: Duration,
    pub(super) inputs_apart: InputsApart,
    /// The last reference to the consumer, so that it is destroyed on a detached thread
    /// even when the loop is dropped mid-run. Declared last: fields drop in order.
    pub(super) last_consumer: DestroyDetached<Arc<StreamConsumer<StageConsumerContext>>>,
}

/// `polled` moved on by the time the stage's work, started at `work_started`, has taken.
pub(super) fn after_work(polled: Instant, work_started: Instant) -> Instant {
    polled.checked_add(work_started.elapsed()).unwrap_or(polled)
}

impl<S: Stage> Loop<S> {
    pub(super) async fn run(&mut self) -> Result<(), RuntimeError> {
        let rebalanced = self.consumer.context().rebalanced();
        let drain = Duration::from_millis(self.args.drain_timeout_ms);
        let mut watchdog = tokio::time::interval(Duration::from_secs(1));
        loop {
            // Ticks (the scheduler's periods) wait for the group: never an empty period
            // because the instance is still joining.
            let next_tick = self.consumer.context().has_joined().then(|| self.stage.next_tick()).flatten();
            let shutdown = self.ctx.shutdown.clone();
            tokio::select! {
                biased;
                _ = shutdown.cancelled() => return Ok(()),
                _ = watchdog.tick() => {
                    self.check_outage()?;
                    self.check_inputs_together().await?;
                    self.side_inputs.check_running().await?;
                }
                _ = rebalanced.notified() => self.sync_assignment(Instant::now()).await?,
                _ = sleep_until(next_tick) => {
                    let polled = Instant::now();
                    self.sync_assignment(polled).await?;
                    let work = self.tick(polled);
                    match bounded(work, &shutdown, drain).await {
                        Some(result) => result?,
                        None => return Err(RuntimeError::DrainTimeout(drain)),
                    }
                }
                first = self.consumer.recv() => {
                    let first = match first {
                        Ok(message) => InputRecord::from_message(&message, self.input_of(message.topic())),
                        // No pause after an error: librdkafka paces its own retries, and
                        // only polling serves the rebalances and statistics that end an
                        // outage. A pause per error queued during a long outage kept
                        // stages from rejoining for minutes after the brokers were back.
                        Err(error) => {
                            self.consume_failed(&error);
                            continue;
                        }
                    };
                    let batch = self.fill_batch(first).await;
                    let polled = Instant::now();
                    self.sync_assignment(polled).await?;
                    let work = self.process(batch, polled);
                    match bounded(work, &shutdown, drain).await {
                        Some(result) => result?,
                        None => return Err(RuntimeError::DrainTimeout(drain)),
                    }
                }
            }
        }
    }

    /// The stage's name of the input topic `topic` (which has the prefix).
    pub(super) fn input_of(&self, topic: &str) -> &'static str {
        S::INPUTS
            .iter()
            .zip(&self.input_topics)
            .find(|(_, full)| *full == topic)
            .map_or("", |(input, _)| input)
    }

    /// Past the outage timeout the stage gives up: liveness fails and it exits non-zero.
    pub(super) fn check_outage(&self) -> Result<(), RuntimeError> {
        match self.ctx.health.kafka_down_for() {
            Some(waited) if waited > self.outage => Err(RuntimeError::Outage {
                doing: "waiting for the brokers".to_owned(),
                waited,
                last_error: format!("no broker of {} reachable", self.args.cluster.brokers),
            }),
            _ => Ok(()),
        }
    }

    pub(super) async fn check_inputs_together(&mut self) -> Result<(), RuntimeError> {
        let now = Instant::now();
        let counts = self.consumer.context().input_partitions();
        if self.inputs_apart.observe(&counts, &self.input_topics, now).is_ok() {
            return Ok(());
        }
        // librdkafka refreshes a topic it holds no partition of only every few minutes
        // (`topic.metadata.refresh.interval.ms`): the brokers' counts decide. A failed
        // request is no evidence either way.
        let fresh =
            partition_counts(&self.consumer, &self.args, self.input_topics.clone()).await.unwrap_or_default();
        Ok(self.inputs_apart.observe(&fresh, &self.input_topics, now)?)
    }

    pub(super) fn consume_failed(&self, error: &KafkaError) {
        self.ctx.metrics.errors.with_label_values(&[ErrorKind::Consume.as_str()]).inc();
        if brokers_unreachable(error) {
            self.ctx.health.kafka_down(&error.to_string());
        } else {
            tracing::warn!(%error, "consumer error; retrying");
        }
    }

    /// The first record and those that follow within the linger, up to the batch size
    /// and [`BATCH_MAX_BYTES`]. A consumer error ends the batch; the loop sees it next.
    pub(super) async fn fill_batch(&self, first: InputRecord) -> Vec<InputRecord> {
        let mut bytes = first.payload_len();
        let mut batch = vec![first];
        let now = tokio::time::Instant::now();
        let deadline = now.checked_add(Duration::from_millis(self.args.batch_linger_ms)).unwrap_or(now);
        while batch.len() < self.args.batch_size && bytes < BATCH_MAX_BYTES {
            match tokio::time::timeout_at(deadline, self.consumer.recv()).await {
                Ok(Ok(message)) => {
                    let record = InputRecord::from_message(&message, self.input_of(message.topic()));
                    bytes = bytes.saturating_add(record.payload_len());
                    batch.push(record);
                }
                Ok(Err(error)) => {
                    self.consume_failed(&error);
                    break;
                }
                Err(_) => break,
            }
        }
        batch
    }

    /// Handles `batch`, read from the consumer at `polled`.
    pub(super) async fn process(
        &mut self,
        batch: Vec<InputRecord>,
        polled: Instant,
    ) -> Result<(), RuntimeError> {
        let started = Instant::now();
        let mut offsets: BTreeMap<(String, i32), i64> = BTreeMap::new();
        // Records of partitions revoked since they were fetched belong to their new owner.
        let batch: Vec<InputRecord> = batch
            .into_iter()
            .filter(|record| self.assignment.partitions.contains(&record.partition))
            .collect();
        for record in &batch {
            self.ctx.metrics.records_in.with_label_values(&[&record.topic]).inc();
            let next = offsets.entry((record.topic.clone(), record.partition)).or_insert(0);
            *next = (*next).max(record.offset.saturating_add(1));
        }
        if batch.is_empty() {
            return Ok(());
        }
        let mut out = self.emitter();
        self.side_inputs.drain(&mut self.stage);
        let handling = Instant::now();
        self.stage.handle(batch, &mut self.store, &mut out).await?;
        let dead_lettered = out.records.iter().any(|record| record.dead_letter.is_some());
        self.publish(out, after_work(polled, handling)).await?;
        if S::HOLDS_OFFSETS {
            self.store_durable();
        } else {
            self.store_offsets(&offsets);
        }
        if dead_lettered {
            // A replay of this batch (a crash, a lost session) would dead-letter the same
            // records again: commit now rather than within the next second.
            if let Err(error) = self.consumer.commit_consumer_state(CommitMode::Async) {
                tracing::debug!(%error, "early commit after dead letters not sent; the periodic one follows");
            }
        }
        self.ctx.metrics.batch_seconds.observe(started.elapsed().as_secs_f64());
        Ok(())
    }

    pub(super) fn emitter(&self) -> Emitter {
        Emitter::new(self.topics.clone(), S::NAME, self.args.cluster.max_record_bytes)
    }

    pub(super) async fn tick(&mut self, polled: Instant) -> Result<(), RuntimeError> {
        let mut out = self.emitter();
        self.side_inputs.drain(&mut self.stage);
        let ticking = Instant::now();
        self.stage.tick(&mut self.store, &self.assignment, &mut out).await?;
        self.publish(out, after_work(polled, ticking)).await?;
        if S::HOLDS_OFFSETS {
            self.store_durable();
        }
        Ok(())
    }

    /// Calls [`Stage::finish`] until it holds nothing more, publishing each call's outputs
    /// and storing the offsets it made durable.
    pub(super) async fn finish(&mut self) -> Result<(), RuntimeError> {
        loop {
            let mut out = self.emitter();
            let finishing = Instant::now();
            let done = self.stage.finish(&mut self.store, &mut out).await?;
            self.publish(out, finishing).await?;
            self.store_durable();
            if done {
                return Ok(());
            }
        }
    }

    /// Stores the offsets the stage made durable, and commits them at once: until the
    /// commit, a restart would write their outputs again.
    pub(super) fn store_durable(&mut self) {
        let durable = self.stage.take_durable();
        if durable.is_empty() {
            return;
        }
        let mut offsets = BTreeMap::new();
        for (topic, partition, next) in durable {
            let stored = offsets.entry((topic, partition)).or_insert(next);
            *stored = (*stored).max(next);
        }
        self.store_offsets(&offsets);
        if let Err(error) = self.consumer.commit_consumer_state(CommitMode::Async) {
            tracing::debug!(%error, "commit after durable outputs not sent; the periodic one follows");
        }
    }

    /// Produces `out`, then the changelog records of every key the stage touched, and
    /// waits until every one is acknowledged, dead-lettered or, for a refused dead
    /// letter, counted and skipped. The changelog goes only once the outputs are
    /// acknowledged: it is what makes a replay a no-op, so a changelog ahead of its
    /// outputs would, after a crash between the two, have the replay skip outputs the
    /// broker never took. Failures are retried until the outage timeout has passed since
    /// `polled`, the consumer's last poll with the stage's work since left out: the
    /// retries of a restore before count, so the loop polls again within the outage
    /// timeout and the work (max.poll.interval.ms, which the stages check their work's
    /// bounds against).
    pub(super) async fn publish(&mut self, out: Emitter, polled: Instant) -> Result<(), RuntimeError> {
        self.delivery.deliver_all(out.records, polled).await?;
        if self.stage.stateful() {
            let changelog = changelog_records(&mut self.store, &self.topics.state(S::NAME))?;
            self.delivery.deliver_all(changelog, polled).await?;
        }
        self.ctx.metrics.state_keys.set(self.stage.state_keys(&self.store) as i64);
        Ok(())
    }

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
                let restored =
                    restore_with_retries(&self.stage, &self.args, &self.ctx, missing, polled).await;
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

    pub(super) fn store_offsets(&self, offsets: &BTreeMap<(String, i32), i64>) {
        let mut list = TopicPartitionList::new();
        for ((topic, partition), next) in offsets {
            if let Err(error) = list.add_partition_offset(topic, *partition, Offset::Offset(*next)) {
                tracing::warn!(%error, topic, partition, "cannot record offset");
            }
        }
        // Fails only for partitions revoked while the batch ran; their new owner replays
        // the batch, which the stages' per-key idempotence makes harmless.
        if let Err(error) = self.consumer.store_offsets(&list) {
            self.ctx.metrics.errors.with_label_values(&[ErrorKind::StoreOffsets.as_str()]).inc();
            tracing::info!(%error, "offsets not stored (partition revoked?)");
        }
    }
}

pub(super) async fn sleep_until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

/// Runs `work` to completion, unless `shutdown` fires first, in which case it gets
/// `drain` more time; `None` means it was abandoned.
pub(super) async fn bounded<F: Future>(
    work: F,
    shutdown: &CancellationToken,
    drain: Duration,
) -> Option<F::Output> {
    tokio::pin!(work);
    tokio::select! {
        result = &mut work => Some(result),
        _ = shutdown.cancelled() => tokio::time::timeout(drain, work).await.ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The retries' clock leaves the stage's work out: a fetch batch's minute of requests
    /// does not use up the outage timeout of its outputs' retries.
    #[test]
    fn the_retries_clock_leaves_the_work_out() {
        let polled = Instant::now();
        let work_started = Instant::now().checked_sub(Duration::from_secs(1)).unwrap_or(polled);
        let since = after_work(polled, work_started);
        assert!(since.duration_since(polled) >= Duration::from_secs(1), "{:?}", since.duration_since(polled));
    }
}
