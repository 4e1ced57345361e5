//! The at-least-once loop every stage runs:
//!
//! 1. take a batch of input messages (up to `--batch-size` or 64 MiB, waiting
//!    `--batch-linger-ms` after the first);
//! 2. make the state match the assignment: restore newly assigned partitions from the
//!    changelog, drop revoked ones;
//! 3. let the stage handle the batch: it decodes and checks each message (one that fails
//!    becomes a dead letter with its reason), updates state and emits outputs;
//! 4. produce the outputs and wait until all are acknowledged, then the changelog records
//!    of every touched key, likewise (a changelog written first could, after a crash,
//!    mark a batch applied whose outputs the broker never took). Transient failures
//!    (broker down, leader moves, timeouts, a fenced or unknown producer id) are retried
//!    with back-off, re-creating the producer after a fatal error, for up to
//!    `--outage-timeout-ms`; an output the broker refuses for good goes to the dead-letter
//!    topic instead, and a dead letter it refuses is logged, counted and skipped, so no
//!    record can stop a stage;
//! 5. only then store the batch's offsets (committed every second and on shutdown).
//!
//! A crash anywhere before step 5 replays the batch; stages make replays no-ops by
//! recording the (url, period) pairs applied per key. On shutdown the loop stops
//! consuming, lets the in-flight batch finish within `--drain-timeout-ms`, commits the
//! stored offsets and flushes the producer, and reports failure if any of that did not
//! complete. While Kafka is unreachable `/readyz` answers 503; past the outage timeout
//! `/healthz` does too and the stage exits non-zero.

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
    check_kafka_headers, kafka_headers, EnvelopeError, CONTENT_TYPE_HEADER, SCHEMA_VERSION_HEADER,
};
use recrawl_schemas::topics::{dead_letter_headers, Topic, DEAD_LETTER, DEAD_LETTER_KINDS};
use recrawl_schemas::{decode, encode, Message, TopicNames};
use thiserror::Error;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use crate::admin::{self, AdminError};
use crate::config::{ConfigError, KafkaArgs};
use crate::http::Health;
use crate::kafka::{
    brokers_unreachable, consumer_config, leave_group, producer_config, reader_config, ClusterContext,
    StageConsumerContext,
};
use crate::metrics::StageMetrics;
use crate::state::StateStore;
use crate::tail::{read_to_end, tail_topic, EndOffsets, ReadToEndError, Tail};

/// A restore fails when its changelog yields no record for this long short of its end.
const RESTORE_TIMEOUT: Duration = Duration::from_secs(120);
/// How long a stage waits for its side inputs to be read before it starts anyway.
const SIDE_INPUT_CATCH_UP: Duration = Duration::from_secs(60);
/// Each shutdown step (final commit, producer flush, leaving the group, client teardown)
/// gets this long.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(10);
/// Past the close's steps: stopping the side inputs' readers (one may be in a 5 s
/// watermark request) and the runtime's own shutdown (1 s, `service::block_on_main`).
const STOP_MARGIN: Duration = Duration::from_secs(6);

/// The longest a running stage started with `args` takes to exit once asked to stop: the
/// drain, then each step of the close at most [`CLOSE_TIMEOUT`] (final commit, producer
/// flush, leaving the group unless the membership is static, the clients' teardown), then
/// [`STOP_MARGIN`]. A restore under way is waited for first (up to [`RESTORE_TIMEOUT`]).
/// An orchestrator's grace period must be longer: killed mid-close, a stage loses nothing
/// (its uncommitted input is replayed) but ends as a crash, with the replay to redo.
pub fn stop_bound(args: &KafkaArgs) -> Duration {
    let steps = if args.instance_id.is_some() { 3 } else { 4 };
    Duration::from_millis(args.drain_timeout_ms)
        .saturating_add(CLOSE_TIMEOUT.saturating_mul(steps))
        .saturating_add(STOP_MARGIN)
}

/// How long the inputs' partition counts may differ while running before the stage stops.
const INPUTS_APART_GRACE: Duration = Duration::from_secs(60);
const FIRST_BACKOFF: Duration = Duration::from_millis(200);
const MAX_BACKOFF: Duration = Duration::from_secs(5);
/// A batch also ends once its payloads reach this size, so batches of large records do
/// not hold `--batch-size` of them in memory.
const BATCH_MAX_BYTES: usize = 64 << 20;
/// Room a dead letter keeps within `--max-record-bytes` for its key and headers.
const DEAD_LETTER_HEADROOM: usize = 64 << 10;
/// How much of a value too large to dead-letter whole is kept.
const DEAD_LETTER_KEPT_BYTES: usize = 64 << 10;
/// Longest reason text a dead letter carries.
const MAX_REASON_BYTES: usize = 1024;

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
    #[error("Kafka unusable for {waited:?} (--outage-timeout-ms) while {doing}: {last_error}")]
    Outage { doing: String, waited: Duration, last_error: String },
    #[error("restoring partition {partition} of {topic}: {reason}")]
    Restore { topic: String, partition: i32, reason: String },
    #[error("reading {topic}: {reason}")]
    Tail { topic: String, reason: String },
    #[error("the in-flight batch did not finish within --drain-timeout-ms ({0:?}); it will be replayed")]
    DrainTimeout(Duration),
    #[error("shutting down: {0}")]
    Close(String),
    #[error("stage: {0}")]
    Stage(#[from] StageError),
    #[error(transparent)]
    Setup(#[from] SetupError),
    #[error("a blocking Kafka call panicked: {0}")]
    Join(#[from] tokio::task::JoinError),
}

/// An error a stage cannot turn into a dead letter. The loop stops without storing the
/// batch's offsets.
#[derive(Debug, Error)]
pub enum StageError {
    #[error("encoding an output: {0}")]
    Encode(#[from] EnvelopeError),
    /// Outputs that leave Kafka (the archive's files) could not be made durable in time.
    #[error("{0}")]
    Durability(String),
}

/// Why a stage could not start, before it reads a record.
#[derive(Debug, Error)]
pub enum SetupError {
    #[error("registering the {stage} stage's metrics: {source}")]
    Metrics { stage: &'static str, source: prometheus::Error },
    /// A setting, or a file one names, unusable; the error names it.
    #[error(transparent)]
    Settings(Box<dyn std::error::Error + Send + Sync>),
}

impl SetupError {
    pub fn settings(source: impl std::error::Error + Send + Sync + 'static) -> Self {
        SetupError::Settings(Box::new(source))
    }
}

/// Why a record went to the dead-letter topic; its name is the `recrawl-dlq-kind` header
/// and the `kind` label of `recrawl_dead_letters_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeadLetterKind {
    Undecodable,
    SchemaVersion,
    KeyMismatch,
    Invalid,
    Unproducible,
}

impl DeadLetterKind {
    pub const ALL: [Self; 5] =
        [Self::Undecodable, Self::SchemaVersion, Self::KeyMismatch, Self::Invalid, Self::Unproducible];

    pub fn as_str(self) -> &'static str {
        DEAD_LETTER_KINDS[self as usize]
    }

    fn of_decode_error(error: &EnvelopeError) -> Self {
        match error {
            EnvelopeError::UnknownVersion { .. } => Self::SchemaVersion,
            EnvelopeError::HeaderMismatch { header, .. } if *header == SCHEMA_VERSION_HEADER => {
                Self::SchemaVersion
            }
            _ => Self::Undecodable,
        }
    }
}

/// The kinds of `recrawl_errors_total`, all exported from the start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The consumer reported an error (broker unreachable, a partition's leader moving).
    Consume,
    /// A delivery failed and will be retried.
    Produce,
    /// The producer hit a fatal error (fenced, unknown producer id) and was re-created.
    ProducerRecreated,
    /// The broker refused a dead letter; it was logged and skipped.
    DeadLetterRefused,
    /// A changelog restore failed and will be retried.
    Restore,
    /// A changelog record this build cannot read, or whose values are out of range, was
    /// skipped.
    RestoreDecode,
    /// Offsets could not be stored (the partition was revoked meanwhile).
    StoreOffsets,
    /// The assignment could not be read.
    Assignment,
}

impl ErrorKind {
    pub const ALL: [Self; 8] = [
        Self::Consume,
        Self::Produce,
        Self::ProducerRecreated,
        Self::DeadLetterRefused,
        Self::Restore,
        Self::RestoreDecode,
        Self::StoreOffsets,
        Self::Assignment,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Consume => "consume",
            Self::Produce => "produce",
            Self::ProducerRecreated => "producer_recreated",
            Self::DeadLetterRefused => "dead_letter_refused",
            Self::Restore => "restore",
            Self::RestoreDecode => "restore_decode",
            Self::StoreOffsets => "store_offsets",
            Self::Assignment => "assignment",
        }
    }
}

/// An input message, owned so stages can hold it across awaits.
#[derive(Debug, Clone)]
pub struct InputRecord {
    /// The input it was read from, as the stage names it: without the topic prefix.
    pub input: &'static str,
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    pub key: Option<Vec<u8>>,
    pub payload: Option<Vec<u8>>,
    pub content_type: Option<Vec<u8>>,
    pub schema_version: Option<Vec<u8>>,
}

impl InputRecord {
    pub(crate) fn from_message(message: &BorrowedMessage<'_>, input: &'static str) -> Self {
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
            input,
            topic: message.topic().to_owned(),
            partition: message.partition(),
            offset: message.offset(),
            key: message.key().map(<[u8]>::to_vec),
            payload: message.payload().map(<[u8]>::to_vec),
            content_type,
            schema_version,
        }
    }

    /// Decodes the payload as `topic`'s message, checking the Kafka headers against what
    /// the payload says of itself; the error is the reason recorded with the dead letter.
    pub fn decode<M: Message>(&self, _topic: Topic<M>) -> Result<M, String> {
        self.decode_classified().map_err(|(_, reason)| reason)
    }

    fn decode_classified<M: Message>(&self) -> Result<M, (DeadLetterKind, String)> {
        let undecodable = |error: EnvelopeError| (DeadLetterKind::of_decode_error(&error), error.to_string());
        let payload = match self.payload.as_deref() {
            Some(payload) if !payload.is_empty() => payload,
            _ => return Err((DeadLetterKind::Undecodable, "the message has no payload".to_owned())),
        };
        check_kafka_headers(payload, self.content_type.as_deref(), self.schema_version.as_deref())
            .map_err(undecodable)?;
        let message: M = decode(payload).map_err(undecodable)?;
        message.validate().map_err(|reason| (DeadLetterKind::Invalid, format!("{}: {reason}", M::NAME)))?;
        Ok(message)
    }

    pub fn key_str(&self) -> Option<&str> {
        self.key.as_deref().and_then(|k| std::str::from_utf8(k).ok())
    }

    fn payload_len(&self) -> usize {
        self.payload.as_ref().map_or(0, Vec::len)
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
    /// For a dead letter: its kind and the topic it belongs on.
    dead_letter: Option<(DeadLetterKind, String)>,
}

impl OutputRecord {
    /// A dead letter of `key` and `value` that belong on `topic` (read from `at`, the
    /// partition and offset, for inputs). A value that would not fit in a record of
    /// `max_record_bytes` keeps only its first bytes; the size header says how large it was.
    #[allow(clippy::too_many_arguments)]
    fn dead_letter(
        names: &TopicNames,
        stage: &str,
        topic: &str,
        at: Option<(i32, i64)>,
        key: &[u8],
        value: Option<&[u8]>,
        kind: DeadLetterKind,
        reason: &str,
        max_record_bytes: usize,
    ) -> Self {
        let room = max_record_bytes.saturating_sub(DEAD_LETTER_HEADROOM);
        let value = value.unwrap_or_default();
        let mut headers = vec![
            (dead_letter_headers::REASON, truncate_text(reason, MAX_REASON_BYTES).into_bytes()),
            (dead_letter_headers::KIND, kind.as_str().as_bytes().to_vec()),
            (dead_letter_headers::STAGE, stage.as_bytes().to_vec()),
            (dead_letter_headers::TOPIC, topic.as_bytes().to_vec()),
            (dead_letter_headers::ORIGINAL_BYTES, value.len().to_string().into_bytes()),
        ];
        if let Some((partition, offset)) = at {
            headers.push((dead_letter_headers::PARTITION, partition.to_string().into_bytes()));
            headers.push((dead_letter_headers::OFFSET, offset.to_string().into_bytes()));
        }
        let kept = |bytes: &[u8]| bytes[..bytes.len().min(room)].to_vec();
        let mut letter = Self {
            topic: names.name(DEAD_LETTER),
            key: kept(key),
            payload: Some(kept(value)),
            headers,
            partition: None,
            dead_letter: Some((kind, topic.to_owned())),
        };
        if value.len().saturating_add(key.len()) > room {
            letter.shorten();
        }
        letter
    }

    /// Keeps only the first [`DEAD_LETTER_KEPT_BYTES`] of this dead letter's key and value
    /// and says so in a header; false if it had no more than that.
    fn shorten(&mut self) -> bool {
        let payload_len = self.payload.as_ref().map_or(0, Vec::len);
        if self.key.len().max(payload_len) <= DEAD_LETTER_KEPT_BYTES {
            return false;
        }
        self.key.truncate(DEAD_LETTER_KEPT_BYTES);
        if let Some(payload) = &mut self.payload {
            payload.truncate(DEAD_LETTER_KEPT_BYTES);
        }
        self.headers.push((dead_letter_headers::TRUNCATED, b"true".to_vec()));
        true
    }

    fn size(&self) -> usize {
        let headers = self
            .headers
            .iter()
            .fold(0usize, |sum, (name, value)| sum.saturating_add(name.len()).saturating_add(value.len()));
        self.key.len().saturating_add(self.payload.as_ref().map_or(0, Vec::len)).saturating_add(headers)
    }
}

/// `text` cut to at most `max` bytes on a character boundary.
fn truncate_text(text: &str, max: usize) -> String {
    let mut end = text.len().min(max);
    // Index 0 is always a boundary, so this stops there at the latest.
    while !text.is_char_boundary(end) {
        end = end.saturating_sub(1);
    }
    text[..end].to_owned()
}

/// Collects a stage's outputs for one batch or tick.
#[derive(Debug)]
pub struct Emitter {
    topics: TopicNames,
    stage: &'static str,
    max_record_bytes: usize,
    records: Vec<OutputRecord>,
}

impl Emitter {
    fn new(topics: TopicNames, stage: &'static str, max_record_bytes: usize) -> Self {
        Self { topics, stage, max_record_bytes, records: Vec::new() }
    }

    pub fn topics(&self) -> &TopicNames {
        &self.topics
    }

    /// Encodes `message` for `topic`, keyed as the topic keys it. A message its readers
    /// would refuse ([`Message::validate`]) goes to the dead-letter topic instead, as
    /// `unproducible` with the reason: once, from the stage that made it, and never to
    /// the analysts who read the topic with their own tools.
    pub fn send<M: Message>(&mut self, topic: Topic<M>, message: &M) -> Result<(), StageError> {
        let payload = encode(message)?;
        let topic_name = self.topics.name(topic.name);
        let key = topic.key(message).into_owned().into_bytes();
        if let Err(reason) = message.validate() {
            let reason = format!("an output no reader takes: {reason}");
            tracing::warn!(topic = %topic_name, %reason, "dead-lettering an output");
            self.records.push(OutputRecord::dead_letter(
                &self.topics,
                self.stage,
                &topic_name,
                None,
                &key,
                Some(&payload),
                DeadLetterKind::Unproducible,
                &reason,
                self.max_record_bytes,
            ));
            return Ok(());
        }
        let headers = kafka_headers::<M>().map(|(name, value)| (name, value.into_bytes())).into();
        self.records.push(OutputRecord {
            topic: topic_name,
            key,
            payload: Some(payload),
            headers,
            partition: None,
            dead_letter: None,
        });
        Ok(())
    }

    /// Sends `record`'s key and bytes (its first bytes, if too large) to the dead-letter
    /// topic, with the reason and origin in headers.
    pub fn dead_letter(&mut self, record: &InputRecord, kind: DeadLetterKind, reason: impl Display) {
        let reason = reason.to_string();
        tracing::warn!(
            topic = %record.topic,
            partition = record.partition,
            offset = record.offset,
            bytes = record.payload_len(),
            kind = kind.as_str(),
            reason = %truncate_text(&reason, MAX_REASON_BYTES),
            "dead-lettering input"
        );
        self.records.push(OutputRecord::dead_letter(
            &self.topics,
            self.stage,
            &record.topic,
            Some((record.partition, record.offset)),
            record.key.as_deref().unwrap_or_default(),
            record.payload.as_deref(),
            kind,
            &reason,
            self.max_record_bytes,
        ));
    }

    /// Decodes `record` as `topic`'s message and checks that its Kafka key is the one the
    /// topic gives that message; otherwise dead-letters it with the reason.
    pub fn decode_keyed<M: Message>(&mut self, record: &InputRecord, topic: Topic<M>) -> Option<M> {
        match record.decode_classified::<M>() {
            Ok(message) if record.key_str() == Some(&*topic.key(&message)) => Some(message),
            Ok(message) => {
                let key = record.key_str().map(|key| truncate_text(key, 200));
                let reason = format!(
                    "key {key:?} is not the {}'s {:?}",
                    M::NAME,
                    truncate_text(&topic.key(&message), 200)
                );
                self.dead_letter(record, DeadLetterKind::KeyMismatch, reason);
                None
            }
            Err((kind, reason)) => {
                self.dead_letter(record, kind, reason);
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
    /// Per-key state kept in the changelog; `()` for a stage that keeps none.
    type State: Message + Send + Sync + 'static;

    /// The stage's name: its consumer group, its changelog `state.<name>`, its label.
    const NAME: &'static str;

    /// Input topic names without prefix; all must be co-partitioned.
    const INPUTS: &'static [&'static str];

    /// Topics the stage writes to, without prefix, checked at start.
    const OUTPUTS: &'static [&'static str];

    /// Topics every instance reads in full, outside the consumer group (the stage tails
    /// them itself), without prefix.
    const SIDE_INPUTS: &'static [&'static str] = &[];

    /// Whether the stage's outputs outlast its batches: the archive's files, published
    /// after many of them. The loop then stores only the offsets [`Stage::take_durable`]
    /// hands it, and on shutdown lets the stage [`Stage::finish`] what it holds.
    const HOLDS_OFFSETS: bool = false;

    /// Whether the stage keeps state in `state.<name>`: unless its state is `()`.
    fn stateful(&self) -> bool {
        std::any::TypeId::of::<Self::State>() != std::any::TypeId::of::<()>()
    }

    /// Handles one batch in offset order.
    fn handle(
        &mut self,
        batch: Vec<InputRecord>,
        state: &mut StateStore<Self::State>,
        out: &mut Emitter,
    ) -> impl Future<Output = Result<(), StageError>> + Send;

    /// When the stage next wants [`Stage::tick`] (the scheduler's period clock). Ticks
    /// wait until the instance has joined its group and restored its partitions.
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

    /// A record of one of [`Stage::SIDE_INPUTS`]. Before the stage's first batch the
    /// runtime hands over each side input to where it ended at start; after that, before
    /// each batch and tick, whatever arrived since.
    fn on_side_input(&mut self, _record: &InputRecord) {}

    /// For a stage that [holds its offsets](Stage::HOLDS_OFFSETS): the input offsets whose
    /// every output is durable since the last call, as (topic with its prefix, partition,
    /// next offset to read). Asked after each batch and tick, once its changelog is written.
    fn take_durable(&mut self) -> Vec<(String, i32, i64)> {
        Vec::new()
    }

    /// On shutdown, for a stage that [holds its offsets](Stage::HOLDS_OFFSETS): makes what
    /// it holds durable. The loop writes the outputs and changelog of each call, stores
    /// [`Stage::take_durable`]'s offsets and calls again until it answers true (nothing
    /// is held) or `--drain-timeout-ms` has passed.
    fn finish(
        &mut self,
        _state: &mut StateStore<Self::State>,
        _out: &mut Emitter,
    ) -> impl Future<Output = Result<bool, StageError>> + Send {
        async { Ok(true) }
    }

    /// Called after the stage's state for `partition` was restored.
    fn on_restored(&mut self, _partition: i32, _state: &mut StateStore<Self::State>) {}

    /// What a restore does with each record it reads, once it decoded and validated,
    /// before the next is read: given the new value (`None` for a tombstone) and the one
    /// it replaces, a stage whose bounds are flags brings a record written under larger
    /// ones within its own, so a restore never holds more than the stage would.
    fn restored_record_bound(
        &self,
    ) -> impl FnMut(Option<&mut Self::State>, Option<&Self::State>) + Send + 'static {
        |_: Option<&mut Self::State>, _: Option<&Self::State>| {}
    }

    /// Called before the state of a revoked `partition` is dropped.
    fn on_revoked(&mut self, _partition: i32, _state: &StateStore<Self::State>) {}

    /// Called after every change of the assignment, once its state is in place, and once
    /// at the start with no partition, before the side inputs are read: the input topics'
    /// partition count is known from then on.
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
    producer: FutureProducer<ClusterContext>,
    store: StateStore<S::State>,
    input_topics: Vec<String>,
    side_inputs: SideInputs,
    assignment: Assignment,
    outage: Duration,
    inputs_apart: InputsApart,
    /// The last reference to the consumer, so that it is destroyed on a detached thread
    /// even when the loop is dropped mid-run. Declared last: fields drop in order.
    last_consumer: DestroyDetached<Arc<StreamConsumer<StageConsumerContext>>>,
}

/// Runs `work` on a detached thread of its own; its result comes on the receiver, which
/// errs if the thread could not start. Calls that wait on the brokers (destroying a
/// consumer, a synchronous commit) can wait without end (a consumer's close, librdkafka
/// issue 4884): on a detached thread they hold neither an async worker nor the runtime's
/// shutdown, which waits for its blocking pool's threads however long they take.
fn run_detached<R: Send + 'static>(work: impl FnOnce() -> R + Send + 'static) -> oneshot::Receiver<R> {
    let (answer, answered) = oneshot::channel();
    let spawned = std::thread::Builder::new().name("kafka-wait".to_owned()).spawn(move || {
        let _unwanted = answer.send(work());
    });
    if let Err(error) = spawned {
        tracing::error!(%error, "no thread for a Kafka call: not made, and what it held is dropped here");
    }
    answered
}

/// Holds a Kafka client whose destruction, wherever it comes (a stage's future dropped
/// mid-run, a test unwinding), runs on a detached thread: see [`run_detached`].
#[derive(Debug)]
struct DestroyDetached<T: Send + 'static>(Option<T>);

impl<T: Send + 'static> DestroyDetached<T> {
    /// The client, for the caller to destroy where it chooses.
    fn take(&mut self) -> Option<T> {
        self.0.take()
    }
}

impl<T: Send + 'static> Drop for DestroyDetached<T> {
    fn drop(&mut self) {
        if let Some(client) = self.0.take() {
            drop(run_detached(move || drop(client)));
        }
    }
}

/// Partitions added to one input while running (start-up checks the counts) would leave
/// partition p of another input unread wherever that input has fewer. Once the counts
/// have differed for [`INPUTS_APART_GRACE`], time to grow every input, and the brokers'
/// metadata confirms it, the stage stops with the start-up check's error, which it then
/// gives at each start until they match. The changelog is checked at start only.
#[derive(Debug, Default)]
struct InputsApart {
    since: Option<Instant>,
}

impl InputsApart {
    /// `counts`: the inputs' partition counts as the consumer knows them at `now`.
    fn observe(
        &mut self,
        counts: &HashMap<String, i32>,
        inputs: &[String],
        now: Instant,
    ) -> Result<(), AdminError> {
        let apart = match admin::check_copartitioned(counts, inputs) {
            Err(error @ AdminError::NotCopartitioned { .. }) => error,
            // A topic without metadata yet is no evidence either way.
            Ok(()) | Err(_) => {
                self.since = None;
                return Ok(());
            }
        };
        let since = *self.since.get_or_insert_with(|| {
            tracing::warn!(%apart, grace = ?INPUTS_APART_GRACE, "input partition counts differ; stopping unless they match again");
            now
        });
        if now.saturating_duration_since(since) < INPUTS_APART_GRACE {
            return Ok(());
        }
        Err(apart)
    }
}

/// The tails of a stage's side inputs, read in full by every instance outside the group.
#[derive(Debug, Default)]
struct SideInputs {
    tails: Vec<(&'static str, Tail)>,
    stop: CancellationToken,
}

impl SideInputs {
    fn start<S: Stage>(args: &KafkaArgs, shutdown: &CancellationToken) -> Self {
        let stop = shutdown.child_token();
        let group = args.group_for(S::NAME);
        let tails = S::SIDE_INPUTS
            .iter()
            .map(|&input| (input, tail_topic(args, input, &format!("{group}-{input}"), stop.clone())))
            .collect();
        Self { tails, stop }
    }

    /// Hands `stage` each side input up to where it ended at start, or what arrived within
    /// [`SIDE_INPUT_CATCH_UP`]: work done before would see a part of it. Records are
    /// handed over as they arrive, so the channel never fills while catching up.
    async fn catch_up<S: Stage>(
        &mut self,
        stage: &mut S,
        shutdown: &CancellationToken,
    ) -> Result<(), RuntimeError> {
        for (input, tail) in &mut self.tails {
            let give_up = tokio::time::sleep(SIDE_INPUT_CATCH_UP);
            tokio::pin!(give_up);
            loop {
                tokio::select! {
                    Some(record) = tail.records.recv() => stage.on_side_input(&record),
                    read = &mut tail.caught_up => {
                        if read.is_err() {
                            // The tail stopped before catching up: its error is the run's.
                            return (&mut tail.task).await?;
                        }
                        tracing::info!(topic = *input, "side input read");
                        break;
                    }
                    _ = &mut give_up => {
                        tracing::warn!(topic = *input, ?SIDE_INPUT_CATCH_UP, "side input not read in time; starting with what has arrived");
                        break;
                    }
                    _ = shutdown.cancelled() => return Ok(()),
                }
            }
        }
        Ok(())
    }

    /// Hands `stage` what arrived since the last call.
    fn drain<S: Stage>(&mut self, stage: &mut S) {
        for (_, tail) in &mut self.tails {
            while let Ok(record) = tail.records.try_recv() {
                stage.on_side_input(&record);
            }
        }
    }

    /// The error of a tail that stopped while the stage runs: a side input that no longer
    /// arrives leaves the stage with a stale view and no sign of it.
    async fn check_running(&mut self) -> Result<(), RuntimeError> {
        let Some(index) = self.tails.iter().position(|(_, tail)| tail.task.is_finished()) else {
            return Ok(());
        };
        let (input, tail) = self.tails.remove(index);
        tail.task.await??;
        Err(RuntimeError::Tail { topic: input.to_owned(), reason: "the reader stopped".to_owned() })
    }

    /// Stops the tails; the first one's error, if any, is returned.
    async fn stop(self) -> Result<(), RuntimeError> {
        self.stop.cancel();
        let mut result = Ok(());
        for (_, Tail { records, task, .. }) in self.tails {
            // A reader blocked on its full channel sees the cancel only once the channel
            // closes.
            drop(records);
            result = result.and(task.await?);
        }
        result
    }
}

/// `polled` moved on by the time the stage's work, started at `work_started`, has taken.
fn after_work(polled: Instant, work_started: Instant) -> Instant {
    polled.checked_add(work_started.elapsed()).unwrap_or(polled)
}

/// Runs `stage` until `ctx.shutdown` is cancelled or an unrecoverable error occurs.
pub async fn run_stage<S: Stage>(
    mut stage: S,
    args: &KafkaArgs,
    ctx: StageContext,
) -> Result<(), RuntimeError> {
    args.validate()?;
    let name = S::NAME;
    let topics = args.cluster.topics();
    let group = args.group_for(name);
    let input_topics: Vec<String> = S::INPUTS.iter().map(|t| topics.name(t)).collect();
    let consumer: StreamConsumer<StageConsumerContext> = consumer_config(args, &group)
        .create_with_context(StageConsumerContext::new(
            ctx.metrics.clone(),
            ctx.health.clone(),
            &input_topics,
        ))
        .map_err(|source| RuntimeError::Client { client: "consumer", source })?;
    let consumer = Arc::new(consumer);
    let producer = create_producer(args)?;

    let output_topics: Vec<String> = S::OUTPUTS.iter().map(|t| topics.name(t)).collect();
    let mut copartitioned = input_topics.clone();
    if stage.stateful() {
        copartitioned.push(topics.state(name));
    }
    let mut to_check = copartitioned.clone();
    to_check.extend(output_topics.iter().cloned());
    to_check.extend(S::SIDE_INPUTS.iter().map(|t| topics.name(t)));
    to_check.push(topics.name(DEAD_LETTER));
    let counts = partition_counts(&consumer, args, to_check).await?;
    admin::check_copartitioned(&counts, &copartitioned)?;
    let total = input_topics.first().and_then(|t| counts.get(t)).copied().unwrap_or(0);
    // The partition count before any side input is read: what those records may name.
    stage.on_assigned(&Assignment { partitions: Vec::new(), total });
    let mut side_inputs = SideInputs::start::<S>(args, &ctx.shutdown);
    if let Err(error) = side_inputs.catch_up(&mut stage, &ctx.shutdown).await {
        side_inputs.stop.cancel();
        return Err(error);
    }
    export_zeros(&ctx.metrics, &input_topics, &output_topics, stage.stateful().then(|| topics.state(name)));
    // The first input only: the others follow its partitions (`StageConsumerContext`).
    let led: Vec<&str> = input_topics.iter().take(1).map(String::as_str).collect();
    consumer
        .subscribe(&led)
        .map_err(|source| RuntimeError::Subscribe { topics: input_topics.clone(), source })?;
    tracing::info!(stage = name, %group, instance = ?args.instance_id, inputs = ?input_topics, "consuming");

    let mut event_loop = Loop {
        stage,
        args: args.clone(),
        ctx,
        topics,
        consumer: consumer.clone(),
        producer,
        store: StateStore::default(),
        input_topics,
        side_inputs,
        assignment: Assignment { partitions: Vec::new(), total },
        outage: Duration::from_millis(args.outage_timeout_ms),
        inputs_apart: InputsApart::default(),
        last_consumer: DestroyDetached(Some(consumer)),
    };
    let mut result = event_loop.run().await;
    if result.is_ok() && S::HOLDS_OFFSETS {
        let drain = Duration::from_millis(args.drain_timeout_ms);
        result = match tokio::time::timeout(drain, event_loop.finish()).await {
            Ok(finished) => finished,
            Err(_) => Err(RuntimeError::DrainTimeout(drain)),
        };
    }
    if result.is_err() {
        event_loop.ctx.health.set_failed();
    }
    event_loop.ctx.health.set_ready(false);
    let closed = event_loop.close().await;
    // A static member keeps its place in the group across a restart: it does not leave.
    if args.instance_id.is_none() && !leave_group(&event_loop.consumer, CLOSE_TIMEOUT).await {
        tracing::warn!(?CLOSE_TIMEOUT, "partitions not given up in time; closing the consumer with them");
    }
    let tailed = std::mem::take(&mut event_loop.side_inputs).stop().await;
    // Destroying the Kafka clients waits on the brokers (leaving the group, the
    // producer's last requests): not waited on past the close timeout, since an
    // unreachable broker can hold it for minutes. The consumer goes last, since its
    // close may never end (see `leave_group`) and nothing after it would be destroyed.
    let consumer = event_loop.last_consumer.take();
    let destroyed = run_detached(move || drop((event_loop, consumer)));
    if tokio::time::timeout(CLOSE_TIMEOUT, destroyed).await.is_err() {
        tracing::warn!(?CLOSE_TIMEOUT, "Kafka clients still closing; leaving them behind");
    }
    result.and(closed).and(tailed)
}

/// The partition count of each of `topics`, from the brokers' metadata, within the
/// start-up timeout; the request blocks, so it runs off the async threads.
async fn partition_counts(
    consumer: &Arc<StreamConsumer<StageConsumerContext>>,
    args: &KafkaArgs,
    topics: Vec<String>,
) -> Result<HashMap<String, i32>, RuntimeError> {
    let consumer = consumer.clone();
    let brokers = args.cluster.brokers.clone();
    let timeout = Duration::from_millis(args.cluster.startup_timeout_ms);
    let asked = tokio::task::spawn_blocking(move || {
        admin::topic_partitions(consumer.client(), &brokers, &topics, timeout)
    });
    Ok(asked.await??)
}

fn create_producer(args: &KafkaArgs) -> Result<FutureProducer<ClusterContext>, RuntimeError> {
    producer_config(args)
        .create_with_context(ClusterContext)
        .map_err(|source| RuntimeError::Client { client: "producer", source })
}

/// Every counter's series the loop can move, at 0 from the start, so that an alert on
/// the first increment sees it.
fn export_zeros(metrics: &StageMetrics, inputs: &[String], outputs: &[String], changelog: Option<String>) {
    for topic in inputs {
        metrics.records_in.with_label_values(&[topic]).reset();
        metrics.assigned_partitions.with_label_values(&[topic]).set(0);
        for kind in DeadLetterKind::ALL {
            metrics.dead_letters.with_label_values(&[topic, kind.as_str()]).reset();
        }
    }
    for topic in outputs.iter().chain(&changelog) {
        metrics.records_out.with_label_values(&[topic]).reset();
        metrics.dead_letters.with_label_values(&[topic, DeadLetterKind::Unproducible.as_str()]).reset();
    }
    for kind in ErrorKind::ALL {
        metrics.errors.with_label_values(&[kind.as_str()]).reset();
    }
}

/// Whether the broker refuses this record whatever happens, so retrying cannot help.
fn refused_for_good(error: &KafkaError) -> bool {
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
fn producer_identity_lost(error: &KafkaError) -> bool {
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

/// Doubling back-off between retries, from [`FIRST_BACKOFF`] to [`MAX_BACKOFF`].
#[derive(Debug)]
struct Backoff(Duration);

impl Backoff {
    fn new() -> Self {
        Self(FIRST_BACKOFF)
    }

    fn next(&mut self) -> Duration {
        let wait = self.0;
        self.0 = self.0.saturating_mul(2).min(MAX_BACKOFF);
        wait
    }
}

impl<S: Stage> Loop<S> {
    async fn run(&mut self) -> Result<(), RuntimeError> {
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
    fn input_of(&self, topic: &str) -> &'static str {
        S::INPUTS
            .iter()
            .zip(&self.input_topics)
            .find(|(_, full)| *full == topic)
            .map_or("", |(input, _)| input)
    }

    /// Past the outage timeout the stage gives up: liveness fails and it exits non-zero.
    fn check_outage(&self) -> Result<(), RuntimeError> {
        match self.ctx.health.kafka_down_for() {
            Some(waited) if waited > self.outage => Err(RuntimeError::Outage {
                doing: "waiting for the brokers".to_owned(),
                waited,
                last_error: format!("no broker of {} reachable", self.args.cluster.brokers),
            }),
            _ => Ok(()),
        }
    }

    async fn check_inputs_together(&mut self) -> Result<(), RuntimeError> {
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

    fn consume_failed(&self, error: &KafkaError) {
        self.ctx.metrics.errors.with_label_values(&[ErrorKind::Consume.as_str()]).inc();
        if brokers_unreachable(error) {
            self.ctx.health.kafka_down(&error.to_string());
        } else {
            tracing::warn!(%error, "consumer error; retrying");
        }
    }

    /// The first record and those that follow within the linger, up to the batch size
    /// and [`BATCH_MAX_BYTES`]. A consumer error ends the batch; the loop sees it next.
    async fn fill_batch(&self, first: InputRecord) -> Vec<InputRecord> {
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
    async fn process(&mut self, batch: Vec<InputRecord>, polled: Instant) -> Result<(), RuntimeError> {
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

    fn emitter(&self) -> Emitter {
        Emitter::new(self.topics.clone(), S::NAME, self.args.cluster.max_record_bytes)
    }

    async fn tick(&mut self, polled: Instant) -> Result<(), RuntimeError> {
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
    async fn finish(&mut self) -> Result<(), RuntimeError> {
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
    fn store_durable(&mut self) {
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
    async fn publish(&mut self, out: Emitter, polled: Instant) -> Result<(), RuntimeError> {
        self.deliver_all(out.records, polled).await?;
        if self.stage.stateful() {
            let changelog = self.changelog_records()?;
            self.deliver_all(changelog, polled).await?;
        }
        self.ctx.metrics.state_keys.set(self.stage.state_keys(&self.store) as i64);
        Ok(())
    }

    /// The changelog records of every key the stage touched since the last call.
    fn changelog_records(&mut self) -> Result<Vec<OutputRecord>, StageError> {
        let changelog = self.topics.state(S::NAME);
        let record =
            |partition: i32, key: String, value: Option<&S::State>| -> Result<OutputRecord, StageError> {
                let headers =
                    kafka_headers::<S::State>().map(|(name, value)| (name, value.into_bytes())).into();
                Ok(OutputRecord {
                    topic: changelog.clone(),
                    key: key.into_bytes(),
                    payload: value.map(encode).transpose()?,
                    headers,
                    partition: Some(partition),
                    dead_letter: None,
                })
            };
        let mut records = Vec::new();
        for (partition, key, value) in self.store.take_dirty() {
            records.push(record(partition, key, value)?);
        }
        for (partition, key, value) in self.store.take_written() {
            records.push(record(partition, key, Some(&value))?);
        }
        for (partition, key) in self.store.take_removed() {
            records.push(record(partition, key, None)?);
        }
        Ok(records)
    }

    /// Produces `records` and waits until each is acknowledged, dead-lettered or, for a
    /// refused dead letter, counted and skipped; transient failures are retried with
    /// back-off until the outage timeout has passed since `polled`.
    async fn deliver_all(&mut self, records: Vec<OutputRecord>, polled: Instant) -> Result<(), RuntimeError> {
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
                        self.ctx.metrics.errors.with_label_values(&[ErrorKind::Produce.as_str()]).inc();
                        last_error = Some((record.topic.clone(), error));
                        retry.push(record);
                    }
                }
            }
            if retry.is_empty() {
                if retried {
                    // Deliveries went through after failing: the cluster is back.
                    self.ctx.health.kafka_up();
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
                self.ctx.health.kafka_down(&format!("producing to {topic}: {error}"));
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
        self.ctx.metrics.records_out.with_label_values(&[&record.topic]).inc();
        if let Some((kind, topic)) = &record.dead_letter {
            self.ctx.metrics.dead_letters.with_label_values(&[topic, kind.as_str()]).inc();
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
            self.ctx.metrics.errors.with_label_values(&[ErrorKind::DeadLetterRefused.as_str()]).inc();
            tracing::error!(%error, bytes = record.size(), "the broker refused a dead letter; skipping it");
            return None;
        }
        let reason = format!("the broker refused the output ({} bytes): {error}", record.size());
        tracing::warn!(topic = %record.topic, %reason, "dead-lettering an output");
        Some(OutputRecord::dead_letter(
            &self.topics,
            S::NAME,
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
            self.ctx.metrics.errors.with_label_values(&[ErrorKind::ProducerRecreated.as_str()]).inc();
            self.producer = create_producer(&self.args)?;
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
            self.ctx.metrics.errors.with_label_values(&[ErrorKind::StoreOffsets.as_str()]).inc();
            tracing::info!(%error, "offsets not stored (partition revoked?)");
        }
    }

    /// Makes the state match the consumer's assignment. A restore that fails (the
    /// cluster unreachable) is retried until it succeeds or the outage timeout has passed
    /// since the consumer was `polled`.
    async fn sync_assignment(&mut self, polled: Instant) -> Result<(), RuntimeError> {
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

    async fn restore_with_retries(
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
    async fn restore(
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

    /// Commits the stored offsets within [`CLOSE_TIMEOUT`]; what went wrong, if anything.
    /// A commit made while the group's coordinator is still being found (right after an
    /// outage) is tried again: failing then would exit non-zero with the commit one
    /// lookup away.
    async fn final_commit(&self) -> Option<String> {
        let started = tokio::time::Instant::now();
        let deadline = started.checked_add(CLOSE_TIMEOUT).unwrap_or(started);
        let mut backoff = Backoff::new();
        // What the attempts so far were refused for, for a last one that times out.
        let mut refused = String::new();
        loop {
            let consumer = self.consumer.clone();
            let committed = run_detached(move || consumer.commit_consumer_state(CommitMode::Sync));
            let code = match tokio::time::timeout_at(deadline, committed).await {
                Ok(Ok(Ok(()))) => {
                    tracing::info!("offsets committed");
                    return None;
                }
                Ok(Ok(Err(KafkaError::ConsumerCommit(code)))) => code,
                Ok(Ok(Err(error))) => return Some(format!("final commit failed: {error}")),
                Ok(Err(_)) => return Some("final commit ended without an answer".to_owned()),
                Err(_) => {
                    return Some(format!("final commit not confirmed within {CLOSE_TIMEOUT:?}{refused}"))
                }
            };
            match code {
                RDKafkaErrorCode::NoOffset => return None,
                // The partitions are moving to another instance, which replays what was
                // not committed: nothing is left unconfirmed that a restart would need.
                RDKafkaErrorCode::RebalanceInProgress
                | RDKafkaErrorCode::IllegalGeneration
                | RDKafkaErrorCode::UnknownMemberId => {
                    tracing::info!("final commit skipped: the group is rebalancing; the new owner replays");
                    return None;
                }
                RDKafkaErrorCode::WaitingForCoordinator
                | RDKafkaErrorCode::CoordinatorLoadInProgress
                | RDKafkaErrorCode::CoordinatorNotAvailable
                | RDKafkaErrorCode::NotCoordinator => {
                    let wait = backoff.next();
                    if deadline.saturating_duration_since(tokio::time::Instant::now()) <= wait {
                        return Some(format!("final commit failed within {CLOSE_TIMEOUT:?}: {code}"));
                    }
                    tracing::info!(%code, ?wait, "final commit waits for the group coordinator");
                    refused = format!(" (refused before: {code})");
                    tokio::time::sleep(wait).await;
                }
                code => return Some(format!("final commit failed: {code}")),
            }
        }
    }

    /// Commits stored offsets and flushes the producer, each within [`CLOSE_TIMEOUT`];
    /// either failing is an error, so the process does not exit 0 with work unconfirmed.
    async fn close(&mut self) -> Result<(), RuntimeError> {
        let mut failures = Vec::new();
        failures.extend(self.final_commit().await);
        let producer = self.producer.clone();
        let flushed = tokio::task::spawn_blocking(move || producer.flush(CLOSE_TIMEOUT));
        match flushed.await {
            Ok(Ok(())) => {}
            Ok(Err(error)) => failures.push(format!("producer flush incomplete: {error}")),
            Err(error) => failures.push(format!("producer flush panicked: {error}")),
        }
        if failures.is_empty() {
            Ok(())
        } else {
            let failures = failures.join("; ");
            tracing::error!(%failures, "uncommitted input will be replayed");
            Err(RuntimeError::Close(failures))
        }
    }
}

/// Produces one record; resolves when the broker acknowledged it or it failed.
async fn deliver(producer: &FutureProducer<ClusterContext>, record: &OutputRecord) -> Result<(), KafkaError> {
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

#[cfg(test)]
mod tests {
    use recrawl_schemas::topics::FETCH;
    use recrawl_schemas::PagePick;
    use tokio::sync::mpsc;

    use super::*;

    /// A side input whose reader stops while the stage runs ends the run with its error.
    #[tokio::test]
    async fn a_stopped_side_input_ends_the_run() {
        let (_sender, records) = mpsc::channel(1);
        let (_caught_up_sender, caught_up) = oneshot::channel();
        let (fail, failed) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let _ = failed.await;
            Err(RuntimeError::Tail { topic: "p.distributions".into(), reason: "fatal".into() })
        });
        let mut side_inputs = SideInputs {
            tails: vec![("distributions", Tail { records, caught_up, task })],
            stop: CancellationToken::new(),
        };
        assert!(side_inputs.check_running().await.is_ok(), "running");
        fail.send(()).expect("the reader waits");
        let ended = tokio::time::timeout(Duration::from_secs(10), async {
            loop {
                match side_inputs.check_running().await {
                    Ok(()) => tokio::task::yield_now().await,
                    Err(error) => return error,
                }
            }
        });
        let error = ended.await.expect("the stopped reader is noticed");
        assert!(matches!(&error, RuntimeError::Tail { reason, .. } if reason == "fatal"), "{error}");
        assert!(side_inputs.tails.is_empty());
        assert!(side_inputs.stop().await.is_ok(), "a noticed reader is not awaited again");
    }

    /// A client held for destruction elsewhere is destroyed on a thread of its own, not
    /// on the one dropping it; a client taken out is destroyed where its taker drops it.
    #[test]
    fn a_held_client_is_destroyed_on_a_detached_thread() {
        struct Client(std::sync::mpsc::Sender<Option<String>>);
        impl Drop for Client {
            fn drop(&mut self) {
                let _ = self.0.send(std::thread::current().name().map(str::to_owned));
            }
        }
        let (sender, destroyed_on) = std::sync::mpsc::channel();
        let wait = Duration::from_secs(10);
        drop(DestroyDetached(Some(Client(sender.clone()))));
        assert_eq!(destroyed_on.recv_timeout(wait), Ok(Some("kafka-wait".to_owned())));
        let mut held = DestroyDetached(Some(Client(sender)));
        let taken = held.take();
        drop(held);
        drop(taken);
        assert_eq!(destroyed_on.recv_timeout(wait), Ok(std::thread::current().name().map(str::to_owned)));
    }

    /// Inputs whose partition counts differ stop the stage only once they have differed
    /// for the grace; counts that match again, or a topic not known yet, reset it.
    #[test]
    fn inputs_apart_past_the_grace_stop_the_stage() {
        let inputs = ["estimates".to_owned(), "links".to_owned()];
        let counts = |links: Option<i32>| {
            let mut counts = HashMap::from([(inputs[0].clone(), 6)]);
            counts.extend(links.map(|n| (inputs[1].clone(), n)));
            counts
        };
        let start = Instant::now();
        let at = |seconds: u64| start + Duration::from_secs(seconds);
        let mut apart = InputsApart::default();
        assert!(apart.observe(&counts(Some(6)), &inputs, at(0)).is_ok());
        assert!(apart.observe(&counts(Some(8)), &inputs, at(1)).is_ok(), "the grace starts");
        assert!(apart.observe(&counts(Some(8)), &inputs, at(60)).is_ok());
        let error = apart.observe(&counts(Some(8)), &inputs, at(61)).expect_err("past the grace");
        assert!(error.to_string().contains("links has 8 partitions but estimates has 6"), "{error}");
        assert!(apart.observe(&counts(None), &inputs, at(62)).is_ok(), "links unknown: no evidence");
        assert!(apart.observe(&counts(Some(8)), &inputs, at(63)).is_ok(), "the grace starts again");
        assert!(apart.observe(&counts(Some(6)), &inputs, at(200)).is_ok(), "matching again");
        assert!(apart.observe(&counts(Some(8)), &inputs, at(201)).is_ok(), "and again");
        assert!(apart.observe(&counts(Some(8)), &inputs, at(262)).is_err());
    }

    /// The retries' clock leaves the stage's work out: a fetch batch's minute of requests
    /// does not use up the outage timeout of its outputs' retries.
    #[test]
    fn the_retries_clock_leaves_the_work_out() {
        let polled = Instant::now();
        let work_started = Instant::now().checked_sub(Duration::from_secs(1)).unwrap_or(polled);
        let since = after_work(polled, work_started);
        assert!(since.duration_since(polled) >= Duration::from_secs(1), "{:?}", since.duration_since(polled));
    }

    /// Stopping does not wait forever on a reader blocked on its full channel.
    #[tokio::test]
    async fn stopping_releases_a_reader_blocked_on_its_full_channel() {
        let (sender, records) = mpsc::channel(1);
        let (_caught_up_sender, caught_up) = oneshot::channel();
        let stop = CancellationToken::new();
        let (full, filled) = oneshot::channel();
        // As the tail's thread: it sends until the channel is closed, blind to the cancel
        // while a send blocks.
        let task = tokio::task::spawn_blocking(move || {
            let mut full = Some(full);
            loop {
                if sender.capacity() == 0 {
                    full.take().map(|full| full.send(()));
                }
                if sender.blocking_send(input(None)).is_err() {
                    return Ok(());
                }
            }
        });
        let side_inputs =
            SideInputs { tails: vec![("distributions", Tail { records, caught_up, task })], stop };
        filled.await.expect("the channel fills");
        let stopped = tokio::time::timeout(Duration::from_secs(30), side_inputs.stop()).await;
        assert!(matches!(stopped, Ok(Ok(()))), "{stopped:?}");
    }

    fn input(payload: Option<Vec<u8>>) -> InputRecord {
        InputRecord {
            input: "fetch",
            topic: "p.fetch".into(),
            partition: 2,
            offset: 41,
            key: Some(b"host.example".to_vec()),
            payload,
            content_type: None,
            schema_version: None,
        }
    }

    fn header<'a>(record: &'a OutputRecord, name: &str) -> Option<&'a str> {
        record.headers.iter().find(|(n, _)| *n == name).and_then(|(_, v)| std::str::from_utf8(v).ok())
    }

    #[test]
    fn dead_letter_kinds_are_the_catalogue_s() {
        let names: Vec<&str> = DeadLetterKind::ALL.iter().map(|k| k.as_str()).collect();
        assert_eq!(names, DEAD_LETTER_KINDS);
    }

    #[test]
    fn every_bad_input_is_dead_lettered_with_its_kind_and_origin() {
        let mut out = Emitter::new(TopicNames::new("p."), "fetch", 1 << 20);
        let pick = PagePick::discovery("http://example.com/a.html", 42).unwrap();
        let good = encode(&pick).unwrap();
        let mut future = good.clone();
        future[3] = 9;
        let mut long_url = pick.clone();
        long_url.url = format!("http://h/{}", "a".repeat(9000));
        let cases = [
            (None, DeadLetterKind::Undecodable),
            (Some(Vec::new()), DeadLetterKind::Undecodable),
            (Some(b"random bytes".to_vec()), DeadLetterKind::Undecodable),
            (Some(good[..good.len() - 2].to_vec()), DeadLetterKind::Undecodable),
            (Some(future), DeadLetterKind::SchemaVersion),
            (Some(encode(&long_url).unwrap()), DeadLetterKind::Invalid),
            (Some(good), DeadLetterKind::KeyMismatch),
        ];
        for (payload, kind) in cases {
            let decoded = out.decode_keyed(&input(payload), FETCH);
            assert!(decoded.is_none());
            let letter = out.records.last().unwrap();
            assert_eq!(header(letter, dead_letter_headers::KIND), Some(kind.as_str()));
            assert_eq!(header(letter, dead_letter_headers::TOPIC), Some("p.fetch"));
            assert_eq!(header(letter, dead_letter_headers::OFFSET), Some("41"));
            assert_eq!(letter.topic, "p.dead-letter");
        }
        assert_eq!(out.records.len(), 7);
    }

    #[test]
    fn an_output_its_readers_would_refuse_is_dead_lettered_by_its_maker() {
        let mut out = Emitter::new(TopicNames::new("p."), "scheduler", 1 << 20);
        let pick = PagePick::discovery("http://example.com/a.html", 42).unwrap();
        out.send(FETCH, &pick).unwrap();
        let forged = PagePick { score: f64::NAN, ..pick };
        out.send(FETCH, &forged).unwrap();
        assert_eq!(out.records.len(), 2);
        assert_eq!((out.records[0].topic.as_str(), out.records[0].dead_letter.is_none()), ("p.fetch", true));
        let letter = &out.records[1];
        assert_eq!(letter.topic, "p.dead-letter");
        assert_eq!(header(letter, dead_letter_headers::KIND), Some("unproducible"));
        assert_eq!(header(letter, dead_letter_headers::TOPIC), Some("p.fetch"));
        assert_eq!(header(letter, dead_letter_headers::STAGE), Some("scheduler"));
        assert!(header(letter, dead_letter_headers::REASON).is_some_and(|reason| reason.contains("score")));
        assert_eq!(letter.payload, Some(encode(&forged).unwrap()));
    }

    #[test]
    fn a_value_too_large_keeps_its_first_bytes_and_its_size() {
        let mut out = Emitter::new(TopicNames::new("p."), "diff", 1 << 20);
        let huge = vec![7u8; 5 << 20];
        out.dead_letter(&input(Some(huge)), DeadLetterKind::Undecodable, "x".repeat(5000));
        let letter = &out.records[0];
        assert_eq!(letter.payload.as_ref().map(Vec::len), Some(DEAD_LETTER_KEPT_BYTES));
        assert_eq!(header(letter, dead_letter_headers::ORIGINAL_BYTES), Some("5242880"));
        assert_eq!(header(letter, dead_letter_headers::TRUNCATED), Some("true"));
        assert_eq!(header(letter, dead_letter_headers::REASON).map(str::len), Some(MAX_REASON_BYTES));
        assert!(letter.size() < (1 << 20) - DEAD_LETTER_HEADROOM);
        // One that fits is kept whole.
        out.dead_letter(&input(Some(vec![1; 1000])), DeadLetterKind::Invalid, "bad");
        assert_eq!(out.records[1].payload.as_ref().map(Vec::len), Some(1000));
        assert_eq!(header(&out.records[1], dead_letter_headers::TRUNCATED), None);
        assert!(!out.records[1].shorten(), "nothing to cut");
        // One that fits the stage's records but that the dead-letter topic refuses is
        // tried again with its first bytes, once.
        out.dead_letter(&input(Some(vec![2; 200 << 10])), DeadLetterKind::Invalid, "bad");
        let letter = &mut out.records[2];
        assert_eq!(header(letter, dead_letter_headers::TRUNCATED), None);
        assert!(letter.shorten());
        assert_eq!(letter.payload.as_ref().map(Vec::len), Some(DEAD_LETTER_KEPT_BYTES));
        assert_eq!(header(letter, dead_letter_headers::ORIGINAL_BYTES), Some("204800"));
        assert_eq!(header(letter, dead_letter_headers::TRUNCATED), Some("true"));
        assert!(!letter.shorten(), "once");
    }

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
