//! The at-least-once loop every stage runs:
//!
//! 1. take a batch of input messages (up to `--batch-size`, waiting `--batch-linger-ms`
//!    after the first);
//! 2. make the state match the assignment: restore newly assigned partitions from the
//!    changelog, drop revoked ones;
//! 3. let the stage handle the batch: it decodes (a malformed message becomes a
//!    dead-letter record with its reason), updates state and emits outputs;
//! 4. produce the outputs and the changelog records of every touched key, and wait until
//!    all are acknowledged;
//! 5. only then store the batch's offsets (committed in the background and on shutdown).
//!
//! A crash anywhere before step 5 replays the batch; stages make replays no-ops by
//! recording the last applied (url, period) per key. On shutdown the loop stops
//! consuming, lets the in-flight batch finish within `--drain-timeout-ms`, commits the
//! stored offsets and flushes the producer.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Display;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer, StreamConsumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{BorrowedMessage, Header, Headers, Message as _, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
use rdkafka::util::Timeout;
use rdkafka::{Offset, TopicPartitionList};
use recrawl_schemas::envelope::{
    check_kafka_headers, kafka_headers, CONTENT_TYPE_HEADER, SCHEMA_VERSION_HEADER,
};
use recrawl_schemas::{decode, encode, EnvelopeError, Message, TopicNames};
use thiserror::Error;
use tokio_util::sync::CancellationToken;

use crate::admin::{self, AdminError};
use crate::config::{ConfigError, KafkaArgs};
use crate::http::Health;
use crate::kafka::{consumer_config, producer_config, reader_config, StageConsumerContext};
use crate::metrics::StageMetrics;
use crate::state::StateStore;

const METADATA_TIMEOUT: Duration = Duration::from_secs(30);
const RESTORE_TIMEOUT: Duration = Duration::from_secs(120);
const FLUSH_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, Error)]
pub enum RuntimeError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("creating the Kafka {client}: {source}")]
    Client { client: &'static str, source: KafkaError },
    #[error(transparent)]
    Topics(#[from] AdminError),
    #[error("subscribing to {topics:?}: {source}")]
    Subscribe { topics: Vec<String>, source: KafkaError },
    #[error("consuming: {0}")]
    Consume(KafkaError),
    #[error("producing to {topic}: {source}")]
    Produce { topic: String, source: KafkaError },
    #[error("restoring partition {partition} of {topic}: {reason}")]
    Restore { topic: String, partition: i32, reason: String },
    #[error("reading {topic}: {reason}")]
    Tail { topic: String, reason: String },
    #[error("stage: {0}")]
    Stage(#[from] StageError),
    #[error("a blocking Kafka call panicked: {0}")]
    Join(#[from] tokio::task::JoinError),
}

/// An error a stage cannot turn into a dead letter: the loop stops without storing the
/// batch's offsets, so the batch is replayed after a restart.
#[derive(Debug, Error)]
pub enum StageError {
    #[error("encoding an output: {0}")]
    Encode(#[from] EnvelopeError),
    #[error("{0}")]
    Other(String),
}

/// An input message, owned so stages can hold it across awaits.
#[derive(Debug, Clone)]
pub struct InputRecord {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    pub key: Option<Vec<u8>>,
    pub payload: Option<Vec<u8>>,
    pub content_type: Option<Vec<u8>>,
    pub schema_version: Option<Vec<u8>>,
}

impl InputRecord {
    pub(crate) fn from_message(message: &BorrowedMessage<'_>) -> Self {
        let mut content_type = None;
        let mut schema_version = None;
        if let Some(headers) = message.headers() {
            for header in headers.iter() {
                match header.key {
                    CONTENT_TYPE_HEADER => content_type = header.value.map(<[u8]>::to_vec),
                    SCHEMA_VERSION_HEADER => schema_version = header.value.map(<[u8]>::to_vec),
                    _ => {}
                }
            }
        }
        Self {
            topic: message.topic().to_owned(),
            partition: message.partition(),
            offset: message.offset(),
            key: message.key().map(<[u8]>::to_vec),
            payload: message.payload().map(<[u8]>::to_vec),
            content_type,
            schema_version,
        }
    }

    /// Decodes the payload, checking the Kafka headers against the envelope; the error
    /// is the reason recorded with the dead letter.
    pub fn decode<M: Message>(&self) -> Result<M, String> {
        let payload = self.payload.as_deref().ok_or_else(|| "message has no payload".to_owned())?;
        check_kafka_headers(payload, self.content_type.as_deref(), self.schema_version.as_deref())
            .map_err(|e| e.to_string())?;
        decode(payload).map_err(|e| e.to_string())
    }

    pub fn key_str(&self) -> Option<&str> {
        self.key.as_deref().and_then(|k| std::str::from_utf8(k).ok())
    }
}

/// A message to produce.
#[derive(Debug, Clone)]
pub struct OutputRecord {
    pub topic: String,
    pub key: Vec<u8>,
    /// `None` is a tombstone (changelog deletes).
    pub payload: Option<Vec<u8>>,
    pub headers: Vec<(&'static str, Vec<u8>)>,
    /// Set for changelog records (partition p of the input); `None` lets the
    /// partitioner hash the key.
    pub partition: Option<i32>,
}

/// Collects a stage's outputs for one batch or tick.
#[derive(Debug)]
pub struct Emitter {
    topics: TopicNames,
    stage: &'static str,
    records: Vec<OutputRecord>,
}

impl Emitter {
    fn new(topics: TopicNames, stage: &'static str) -> Self {
        Self { topics, stage, records: Vec::new() }
    }

    pub fn topics(&self) -> &TopicNames {
        &self.topics
    }

    /// Encodes `message` for the topic `short_topic` (name without prefix).
    pub fn send<M: Message>(&mut self, short_topic: &str, key: &str, message: &M) -> Result<(), StageError> {
        let payload = encode(message)?;
        let headers = kafka_headers::<M>().map(|(name, value)| (name, value.into_bytes())).into();
        self.records.push(OutputRecord {
            topic: self.topics.name(short_topic),
            key: key.as_bytes().to_vec(),
            payload: Some(payload),
            headers,
            partition: None,
        });
        Ok(())
    }

    /// Sends the original key and bytes of `record` to the dead-letter topic, with the
    /// reason and origin in headers.
    pub fn dead_letter(&mut self, record: &InputRecord, reason: impl Display) {
        let reason = reason.to_string();
        tracing::warn!(topic = %record.topic, partition = record.partition, offset = record.offset, %reason, "dead-lettering input");
        self.records.push(OutputRecord {
            topic: self.topics.name(recrawl_schemas::topics::DEAD_LETTER),
            key: record.key.clone().unwrap_or_default(),
            payload: record.payload.clone(),
            headers: vec![
                ("recrawl-dlq-reason", reason.into_bytes()),
                ("recrawl-dlq-stage", self.stage.as_bytes().to_vec()),
                ("recrawl-dlq-topic", record.topic.clone().into_bytes()),
                ("recrawl-dlq-partition", record.partition.to_string().into_bytes()),
                ("recrawl-dlq-offset", record.offset.to_string().into_bytes()),
            ],
            partition: None,
        });
    }

    /// Decodes `record` as `M` and checks that its Kafka key is `key_of(&message)`
    /// (the field the producer keyed it by); otherwise dead-letters it with the reason.
    pub fn decode_keyed<M: Message>(
        &mut self,
        record: &InputRecord,
        key_of: impl Fn(&M) -> &str,
    ) -> Option<M> {
        match record.decode::<M>() {
            Ok(message) if record.key_str() == Some(key_of(&message)) => Some(message),
            Ok(message) => {
                let reason =
                    format!("key {:?} is not the {}'s {:?}", record.key_str(), M::NAME, key_of(&message));
                self.dead_letter(record, reason);
                None
            }
            Err(reason) => {
                self.dead_letter(record, reason);
                None
            }
        }
    }
}

/// The partitions of the input topics this instance owns.
#[derive(Debug, Clone, Default)]
pub struct Assignment {
    pub partitions: Vec<i32>,
    /// Partition count of the input topics (co-partitioned, so one number).
    pub total: i32,
}

/// What a stage provides to the loop. The algorithm itself lives in the stage's pure
/// modules; implementations only decode, call them and emit.
pub trait Stage: Send + 'static {
    /// Per-key state kept in the changelog.
    type State: Message + Send + Sync + 'static;

    fn name(&self) -> &'static str;

    /// Input topic names without prefix; all must be co-partitioned.
    fn input_topics(&self) -> Vec<&'static str>;

    /// Topics the stage writes to, without prefix, checked at start.
    fn output_topics(&self) -> Vec<&'static str>;

    /// Whether the stage keeps state in `state.<name>`.
    fn stateful(&self) -> bool;

    /// Handles one batch in offset order.
    fn handle(
        &mut self,
        batch: Vec<InputRecord>,
        state: &mut StateStore<Self::State>,
        out: &mut Emitter,
    ) -> impl Future<Output = Result<(), StageError>> + Send;

    /// When the stage next wants [`Stage::tick`] (the scheduler's period clock).
    fn next_tick(&self) -> Option<tokio::time::Instant> {
        None
    }

    fn tick(
        &mut self,
        _state: &mut StateStore<Self::State>,
        _assignment: &Assignment,
        _out: &mut Emitter,
    ) -> impl Future<Output = Result<(), StageError>> + Send {
        async { Ok(()) }
    }

    /// Called after the stage's state for `partition` was restored.
    fn on_restored(&mut self, _partition: i32, _state: &mut StateStore<Self::State>) {}

    /// Called before the state of a revoked `partition` is dropped.
    fn on_revoked(&mut self, _partition: i32, _state: &StateStore<Self::State>) {}

    /// Called after every change of the assignment, once its state is in place.
    fn on_assigned(&mut self, _assignment: &Assignment) {}

    /// Keys of state held, for the `state_keys` gauge; a stage that takes its partitions
    /// out of the store ([`StateStore::take_partition`]) counts its own.
    fn state_keys(&self, state: &StateStore<Self::State>) -> usize {
        state.len()
    }
}

/// What a stage run needs from its process: metrics, health flags, shutdown signal.
#[derive(Debug, Clone)]
pub struct StageContext {
    pub metrics: StageMetrics,
    pub health: Health,
    pub shutdown: CancellationToken,
}

impl StageContext {
    pub fn new(stage: &str) -> Self {
        Self {
            metrics: StageMetrics::new(stage),
            health: Health::default(),
            shutdown: CancellationToken::new(),
        }
    }
}

struct Loop<S: Stage> {
    stage: S,
    args: KafkaArgs,
    ctx: StageContext,
    topics: TopicNames,
    consumer: Arc<StreamConsumer<StageConsumerContext>>,
    producer: FutureProducer,
    store: StateStore<S::State>,
    input_topics: Vec<String>,
    assignment: Assignment,
}

/// Runs `stage` until `ctx.shutdown` is cancelled or an unrecoverable error occurs.
pub async fn run_stage<S: Stage>(stage: S, args: &KafkaArgs, ctx: StageContext) -> Result<(), RuntimeError> {
    args.validate()?;
    let name = stage.name();
    let topics = args.topics();
    let group = args.group_for(name);
    let consumer: StreamConsumer<StageConsumerContext> = consumer_config(args, &group)
        .create_with_context(StageConsumerContext::new(ctx.metrics.clone()))
        .map_err(|source| RuntimeError::Client { client: "consumer", source })?;
    let consumer = Arc::new(consumer);
    let producer: FutureProducer = producer_config(args)
        .create()
        .map_err(|source| RuntimeError::Client { client: "producer", source })?;

    let input_topics: Vec<String> = stage.input_topics().iter().map(|t| topics.name(t)).collect();
    let mut copartitioned = input_topics.clone();
    if stage.stateful() {
        copartitioned.push(topics.state(name));
    }
    let mut to_check = copartitioned.clone();
    to_check.extend(stage.output_topics().iter().map(|t| topics.name(t)));
    to_check.push(topics.name(recrawl_schemas::topics::DEAD_LETTER));
    let counts = {
        let consumer = consumer.clone();
        tokio::task::spawn_blocking(move || {
            let counts = admin::topic_partitions(consumer.client(), &to_check, METADATA_TIMEOUT)?;
            admin::check_copartitioned(&counts, &copartitioned)?;
            Ok::<_, AdminError>(counts)
        })
        .await??
    };
    let total = input_topics.first().and_then(|t| counts.get(t)).copied().unwrap_or(0);
    let topic_refs: Vec<&str> = input_topics.iter().map(String::as_str).collect();
    consumer
        .subscribe(&topic_refs)
        .map_err(|source| RuntimeError::Subscribe { topics: input_topics.clone(), source })?;
    tracing::info!(stage = name, %group, inputs = ?input_topics, "consuming");

    let mut event_loop = Loop {
        stage,
        args: args.clone(),
        ctx,
        topics,
        consumer,
        producer,
        store: StateStore::default(),
        input_topics,
        assignment: Assignment { partitions: Vec::new(), total },
    };
    let result = event_loop.run().await;
    if result.is_err() {
        event_loop.ctx.health.set_failed();
    }
    event_loop.ctx.health.set_ready(false);
    let closed = event_loop.close().await;
    // Destroying the Kafka clients waits on the brokers (leaving the group, the
    // producer's last requests): done off the async threads, and not waited on forever.
    let destroyed = tokio::task::spawn_blocking(move || drop(event_loop));
    if tokio::time::timeout(FLUSH_TIMEOUT, destroyed).await.is_err() {
        tracing::warn!(
            ?FLUSH_TIMEOUT,
            "Kafka clients still closing; leaving them to finish in the background"
        );
    }
    result.and(closed)
}

impl<S: Stage> Loop<S> {
    async fn run(&mut self) -> Result<(), RuntimeError> {
        let rebalanced = self.consumer.context().rebalanced();
        let drain = Duration::from_millis(self.args.drain_timeout_ms);
        loop {
            let next_tick = self.stage.next_tick();
            let shutdown = self.ctx.shutdown.clone();
            tokio::select! {
                biased;
                _ = shutdown.cancelled() => return Ok(()),
                _ = rebalanced.notified() => self.sync_assignment().await?,
                _ = sleep_until(next_tick) => {
                    self.sync_assignment().await?;
                    let work = self.tick();
                    match bounded(work, &shutdown, drain).await {
                        Some(result) => result?,
                        None => return Ok(()),
                    }
                }
                first = self.consumer.recv() => {
                    let first = first.map_err(RuntimeError::Consume)?;
                    let first = InputRecord::from_message(&first);
                    let batch = self.fill_batch(first).await?;
                    self.sync_assignment().await?;
                    let work = self.process(batch);
                    match bounded(work, &shutdown, drain).await {
                        Some(result) => result?,
                        None => {
                            tracing::warn!(?drain, "in-flight batch did not finish within the drain timeout; it will be replayed");
                            return Ok(());
                        }
                    }
                }
            }
        }
    }

    async fn fill_batch(&self, first: InputRecord) -> Result<Vec<InputRecord>, RuntimeError> {
        let mut batch = vec![first];
        let deadline = tokio::time::Instant::now() + Duration::from_millis(self.args.batch_linger_ms);
        while batch.len() < self.args.batch_size {
            match tokio::time::timeout_at(deadline, self.consumer.recv()).await {
                Ok(message) => {
                    batch.push(InputRecord::from_message(&message.map_err(RuntimeError::Consume)?))
                }
                Err(_) => break,
            }
        }
        Ok(batch)
    }

    async fn process(&mut self, batch: Vec<InputRecord>) -> Result<(), RuntimeError> {
        let started = Instant::now();
        let mut offsets: BTreeMap<(String, i32), i64> = BTreeMap::new();
        for record in &batch {
            self.ctx.metrics.messages_in.with_label_values(&[&record.topic]).inc();
            let next = offsets.entry((record.topic.clone(), record.partition)).or_insert(0);
            *next = (*next).max(record.offset + 1);
        }
        let mut out = Emitter::new(self.topics.clone(), self.stage.name());
        self.stage.handle(batch, &mut self.store, &mut out).await?;
        self.publish(out).await?;
        self.store_offsets(&offsets);
        self.ctx.metrics.batch_seconds.observe(started.elapsed().as_secs_f64());
        Ok(())
    }

    async fn tick(&mut self) -> Result<(), RuntimeError> {
        let mut out = Emitter::new(self.topics.clone(), self.stage.name());
        self.stage.tick(&mut self.store, &self.assignment, &mut out).await?;
        self.publish(out).await
    }

    /// Produces `out` plus the changelog records of every key the stage touched, and
    /// waits until every one is acknowledged.
    async fn publish(&mut self, mut out: Emitter) -> Result<(), RuntimeError> {
        if self.stage.stateful() {
            let changelog = self.topics.state(self.stage.name());
            let mut write = |partition: i32, key: String, value: Option<&S::State>| {
                let payload = value.map(encode).transpose().map_err(StageError::from)?;
                let headers =
                    kafka_headers::<S::State>().map(|(name, value)| (name, value.into_bytes())).into();
                out.records.push(OutputRecord {
                    topic: changelog.clone(),
                    key: key.into_bytes(),
                    payload,
                    headers,
                    partition: Some(partition),
                });
                Ok::<(), StageError>(())
            };
            for (partition, key, value) in self.store.take_dirty() {
                write(partition, key, value)?;
            }
            for (partition, key, value) in self.store.take_written() {
                write(partition, key, Some(&value))?;
            }
        }
        self.ctx.metrics.state_keys.set(self.stage.state_keys(&self.store) as i64);
        let dead_letter_topic = self.topics.name(recrawl_schemas::topics::DEAD_LETTER);
        let producer = &self.producer;
        let deliveries = out.records.iter().map(|record| async move {
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
            producer
                .send(future_record, Timeout::Never)
                .await
                .map(|_| record.topic.as_str())
                .map_err(|(source, _)| RuntimeError::Produce { topic: record.topic.clone(), source })
        });
        for delivered in futures::future::join_all(deliveries).await {
            let topic = delivered?;
            self.ctx.metrics.messages_out.with_label_values(&[topic]).inc();
            if topic == dead_letter_topic {
                self.ctx.metrics.dead_letters.with_label_values(&[topic]).inc();
            }
        }
        Ok(())
    }

    fn store_offsets(&self, offsets: &BTreeMap<(String, i32), i64>) {
        let mut list = TopicPartitionList::new();
        for ((topic, partition), next) in offsets {
            if let Err(error) = list.add_partition_offset(topic, *partition, Offset::Offset(*next)) {
                tracing::warn!(%error, topic, partition, "cannot record offset");
            }
        }
        // Fails only for partitions revoked while the batch ran; their new owner replays
        // the batch, which the stages' per-key idempotence makes harmless.
        if let Err(error) = self.consumer.store_offsets(&list) {
            self.ctx.metrics.errors.with_label_values(&["store_offsets"]).inc();
            tracing::info!(%error, "offsets not stored (partition revoked?)");
        }
    }

    /// Makes the state match the consumer's assignment.
    async fn sync_assignment(&mut self) -> Result<(), RuntimeError> {
        let assigned = self.consumer.assignment().map_err(RuntimeError::Consume)?;
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
                let started = Instant::now();
                let restored = self.restore(missing).await?;
                self.ctx.metrics.restore_seconds.observe(started.elapsed().as_secs_f64());
                for (partition, values) in restored {
                    tracing::info!(partition, keys = values.len(), elapsed = ?started.elapsed(), "state restored");
                    self.store.insert_partition(partition, values);
                    self.stage.on_restored(partition, &mut self.store);
                }
            }
            self.ctx.metrics.state_keys.set(self.stage.state_keys(&self.store) as i64);
        }
        self.ctx.metrics.assigned_partitions.set(sorted.len() as i64);
        self.assignment.partitions = sorted;
        self.stage.on_assigned(&self.assignment);
        if self.consumer.context().has_joined() {
            self.ctx.health.set_ready(true);
        }
        Ok(())
    }

    /// Reads changelog partitions `partitions` from the beginning to their high
    /// watermarks with one reader; the latest value of each key wins, a tombstone deletes.
    async fn restore(
        &self,
        partitions: Vec<i32>,
    ) -> Result<Vec<(i32, HashMap<String, S::State>)>, RuntimeError> {
        let topic = self.topics.state(self.stage.name());
        let config =
            reader_config(&self.args, &format!("{}-restore", self.args.group_for(self.stage.name())));
        let errors = self.ctx.metrics.errors.clone();
        let settle_ms = self.args.restore_settle_ms;
        tokio::task::spawn_blocking(move || {
            let restore_error = |partition: i32, reason: String| RuntimeError::Restore {
                topic: topic.clone(),
                partition,
                reason,
            };
            let first = partitions.first().copied().unwrap_or(0);
            let reader: BaseConsumer = config.create().map_err(|e| restore_error(first, e.to_string()))?;
            let mut restored: HashMap<i32, HashMap<String, S::State>> = HashMap::new();
            // Offset to read up to (exclusive), for the partitions that hold anything.
            let mut pending: HashMap<i32, i64> = HashMap::new();
            let mut list = TopicPartitionList::new();
            for &partition in &partitions {
                restored.insert(partition, HashMap::new());
                let (low, high) = reader
                    .fetch_watermarks(&topic, partition, METADATA_TIMEOUT)
                    .map_err(|e| restore_error(partition, e.to_string()))?;
                if high > low {
                    pending.insert(partition, high);
                    list.add_partition_offset(&topic, partition, Offset::Beginning)
                        .map_err(|e| restore_error(partition, e.to_string()))?;
                }
            }
            if !pending.is_empty() {
                reader.assign(&list).map_err(|e| restore_error(first, e.to_string()))?;
            }
            let deadline = Instant::now() + RESTORE_TIMEOUT;
            let settle = Duration::from_millis(settle_ms);
            let reading = !pending.is_empty();
            loop {
                let at_watermarks = pending.is_empty();
                if at_watermarks && (!reading || settle.is_zero()) {
                    break;
                }
                if Instant::now() > deadline {
                    let partition = pending.keys().next().copied().unwrap_or(first);
                    return Err(restore_error(
                        partition,
                        format!("changelog not read to its end within {RESTORE_TIMEOUT:?}"),
                    ));
                }
                let wait = if at_watermarks { settle } else { Duration::from_millis(200) };
                let Some(message) = reader.poll(wait) else {
                    if at_watermarks {
                        break;
                    }
                    continue;
                };
                let message = message.map_err(|e| restore_error(first, e.to_string()))?;
                let partition = message.partition();
                let Some(values) = restored.get_mut(&partition) else { continue };
                if let Some(key) = message.key().and_then(|k| std::str::from_utf8(k).ok()) {
                    match message.payload().map(decode::<S::State>) {
                        None => {
                            values.remove(key);
                        }
                        Some(Ok(value)) => {
                            values.insert(key.to_owned(), value);
                        }
                        Some(Err(error)) => {
                            // A record this build cannot read is skipped, not fatal: the
                            // key's state restarts and is rebuilt from new input.
                            errors.with_label_values(&["restore_decode"]).inc();
                            tracing::warn!(key, %error, "skipping unreadable changelog record");
                        }
                    }
                }
                if pending.get(&partition).is_some_and(|high| message.offset() + 1 >= *high) {
                    pending.remove(&partition);
                }
            }
            Ok(restored.into_iter().collect())
        })
        .await?
    }

    /// Commits stored offsets, flushes the producer and leaves the group.
    async fn close(&mut self) -> Result<(), RuntimeError> {
        let consumer = self.consumer.clone();
        let producer = self.producer.clone();
        tokio::task::spawn_blocking(move || {
            match consumer.commit_consumer_state(CommitMode::Sync) {
                Ok(()) => tracing::info!("offsets committed"),
                Err(KafkaError::ConsumerCommit(RDKafkaErrorCode::NoOffset)) => {}
                Err(error) => {
                    tracing::warn!(%error, "final commit failed; uncommitted input will be replayed")
                }
            }
            if let Err(error) = producer.flush(FLUSH_TIMEOUT) {
                tracing::warn!(%error, "producer flush incomplete");
            }
            consumer.unsubscribe();
        })
        .await?;
        Ok(())
    }
}

async fn sleep_until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

/// Runs `work` to completion, unless `shutdown` fires first, in which case it gets
/// `drain` more time; `None` means it was abandoned.
async fn bounded<F: Future>(work: F, shutdown: &CancellationToken, drain: Duration) -> Option<F::Output> {
    tokio::pin!(work);
    tokio::select! {
        result = &mut work => Some(result),
        _ = shutdown.cancelled() => tokio::time::timeout(drain, work).await.ok(),
    }
}
