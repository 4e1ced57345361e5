//! Reading the pipeline from the outside: a consumer outside every group that reads the
//! topics from the beginning and decodes each message. The demo's progress lines,
//! `recrawl tail` and the end-to-end tests all watch the pipeline through this.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use rdkafka::consumer::{Consumer, StreamConsumer};
use rdkafka::error::KafkaError;
use rdkafka::message::{Headers, Message as _};
use rdkafka::{Offset, TopicPartitionList};
use recrawl_common::admin::{self, AdminError};
use recrawl_common::config::ClusterArgs;
use recrawl_common::kafka::{reader_config, ReadErrors, ReadOn};
use recrawl_schemas::topics::{
    dead_letter_headers, ANNOUNCEMENTS, CHANGE_EVENTS, DEAD_LETTER, DISTRIBUTIONS, ESTIMATES, FETCH,
    FETCH_RESULTS, HOST_TRUST, LINKS,
};
use recrawl_schemas::{
    ChangeEvent, DiscoveredLinks, FetchResult, GroupDistribution, HostTrust, PageAnnouncement, PageEstimate,
    PagePick,
};
use thiserror::Error;

#[derive(Debug, Error)]
pub enum ObserveError {
    #[error("creating the observer: {0}")]
    Client(KafkaError),
    #[error(transparent)]
    Topics(#[from] AdminError),
    #[error("assigning partitions: {0}")]
    Assign(KafkaError),
    #[error("consuming: {0}")]
    Consume(KafkaError),
    #[error("no record read in {limit:?} of read errors; the last: {last}")]
    Unreadable { limit: Duration, last: String },
    #[error("metadata probe: {0}")]
    Join(#[from] tokio::task::JoinError),
    #[error("unknown topic {0:?}: expected one of fetch, fetch-results, links, announcements, change-events, estimates, distributions, host-trust, dead-letter")]
    UnknownTopic(String),
}

/// One decoded message of a pipeline topic.
#[derive(Debug, Clone)]
pub enum Observed {
    Pick(PagePick),
    Result(FetchResult),
    Link(DiscoveredLinks),
    Announcement(PageAnnouncement),
    Change(ChangeEvent),
    Estimate(PageEstimate),
    Distribution(GroupDistribution),
    Trust(HostTrust),
    DeadLetter(DeadLetter),
    /// A message that does not decode as its topic's payload.
    Undecodable {
        topic: String,
        error: String,
    },
}

impl Observed {
    /// The message as one line of JSON, for `recrawl tail`: for the topics people read,
    /// exactly the value the topic carries (its `schema` tag first), so a file of these lines
    /// reads as the topic does; for the others, their fields.
    pub fn json_line(&self) -> String {
        let plain = match self {
            Self::Link(m) => recrawl_schemas::encode(m),
            Self::Announcement(m) => recrawl_schemas::encode(m),
            Self::Change(m) => recrawl_schemas::encode(m),
            Self::Estimate(m) => recrawl_schemas::encode(m),
            Self::Distribution(m) => recrawl_schemas::encode(m),
            Self::Trust(m) => recrawl_schemas::encode(m),
            _ => return self.fields().to_string(),
        };
        match plain.map(String::from_utf8) {
            Ok(Ok(line)) => line,
            _ => self.fields().to_string(),
        }
    }

    fn fields(&self) -> serde_json::Value {
        let value = match self {
            Self::Pick(m) => serde_json::to_value(m),
            Self::Result(m) => {
                // Bodies are large and binary; tail shows their size instead.
                let mut m = m.clone();
                m.body.clear();
                serde_json::to_value(m)
            }
            Self::Link(m) => serde_json::to_value(m),
            Self::Announcement(m) => serde_json::to_value(m),
            Self::Change(m) => serde_json::to_value(m),
            Self::Estimate(m) => serde_json::to_value(m),
            Self::Distribution(m) => serde_json::to_value(m),
            Self::Trust(m) => serde_json::to_value(m),
            Self::DeadLetter(letter) => Ok(letter.to_json()),
            Self::Undecodable { topic, error } => {
                Ok(serde_json::json!({ "undecodable": topic, "error": error }))
            }
        };
        value.unwrap_or_else(|e| serde_json::json!({ "error": e.to_string() }))
    }
}

/// Topic names (without prefix) an [`Observer`] can watch.
pub const OBSERVABLE: [&str; 9] = [
    FETCH.name,
    FETCH_RESULTS.name,
    LINKS.name,
    ANNOUNCEMENTS.name,
    CHANGE_EVENTS.name,
    ESTIMATES.name,
    DISTRIBUTIONS.name,
    HOST_TRUST.name,
    DEAD_LETTER,
];

pub struct Observer {
    consumer: StreamConsumer,
    prefix: String,
    ends: HashMap<(String, i32), i64>,
    errors: std::sync::Mutex<ErrorsSinceRecord>,
    error_limit: Duration,
}

/// How long an observer reads on through errors with no record between them before it
/// gives up: errors that do not end (a topic deleted, a permission never granted) must
/// not leave `recrawl tail` waiting for good.
pub const ERROR_LIMIT: Duration = Duration::from_secs(300);

/// The read errors since the last record.
#[derive(Debug, Default)]
struct ErrorsSinceRecord {
    said: ReadErrors,
    /// When the first read through came.
    since: Option<std::time::Instant>,
}

/// Where a message was read, and when its producer wrote it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Position {
    /// The full topic name, with the prefix.
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    /// The record's timestamp, Unix milliseconds, when it has one.
    pub timestamp_ms: Option<i64>,
}

impl std::fmt::Debug for Observer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Observer").field("prefix", &self.prefix).finish_non_exhaustive()
    }
}

impl Observer {
    /// Watches `short_topics` (names without prefix) from their beginning.
    pub async fn new(args: &ClusterArgs, short_topics: &[&str]) -> Result<Self, ObserveError> {
        for topic in short_topics {
            if !OBSERVABLE.contains(topic) {
                return Err(ObserveError::UnknownTopic((*topic).to_owned()));
            }
        }
        let consumer: StreamConsumer =
            reader_config(args, "recrawl-observer").create().map_err(ObserveError::Client)?;
        let names = args.topics();
        let full: Vec<String> = short_topics.iter().map(|t| names.name(t)).collect();
        let (counts, ends) = {
            let client_config = reader_config(args, "recrawl-observer-metadata");
            let full = full.clone();
            let brokers = args.brokers.clone();
            let timeout = Duration::from_millis(args.startup_timeout_ms);
            tokio::task::spawn_blocking(move || {
                let probe: rdkafka::consumer::BaseConsumer =
                    client_config.create().map_err(ObserveError::Client)?;
                let counts = admin::topic_partitions(probe.client(), &brokers, &full, timeout)?;
                let mut ends = HashMap::new();
                for topic in &full {
                    for partition in 0..counts.get(topic).copied().unwrap_or(0) {
                        let (low, high) = probe
                            .fetch_watermarks(topic, partition, timeout)
                            .map_err(ObserveError::Client)?;
                        if high > low {
                            ends.insert((topic.clone(), partition), high);
                        }
                    }
                }
                Ok::<_, ObserveError>((counts, ends))
            })
            .await??
        };
        let mut list = TopicPartitionList::new();
        for topic in &full {
            for partition in 0..counts.get(topic).copied().unwrap_or(0) {
                list.add_partition_offset(topic, partition, Offset::Beginning)
                    .map_err(ObserveError::Assign)?;
            }
        }
        consumer.assign(&list).map_err(ObserveError::Assign)?;
        Ok(Self {
            consumer,
            prefix: names.prefix().to_owned(),
            ends,
            errors: Default::default(),
            error_limit: ERROR_LIMIT,
        })
    }

    /// The observer, giving up after `limit` of errors with no record rather than
    /// [`ERROR_LIMIT`].
    pub fn with_error_limit(mut self, limit: Duration) -> Self {
        self.error_limit = limit;
        self
    }

    /// Where each partition holding records ended when the observer started, (topic,
    /// partition) → the offset after its last record: read that far, it has seen the
    /// topics as they were.
    pub fn ends_at_start(&self) -> &HashMap<(String, i32), i64> {
        &self.ends
    }

    /// The next message, decoded. Brokers out of reach are waited for: librdkafka
    /// reconnects, and reading goes on once they are back. Other errors are read through
    /// until they have lasted the error limit with no record between them; a fatal one
    /// ends the reading at once.
    pub async fn next(&self) -> Result<Observed, ObserveError> {
        Ok(self.next_at().await?.0)
    }

    /// [`Observer::next`], with where the message was read.
    pub async fn next_at(&self) -> Result<(Observed, Position), ObserveError> {
        let message = loop {
            let since = self.errors.lock().unwrap_or_else(std::sync::PoisonError::into_inner).since;
            let received = match since {
                // Errors without a record since: the limit is waited for, not only checked
                // at the next error, which librdkafka's back-off can put far off.
                Some(since) => {
                    let left = self.error_limit.saturating_sub(since.elapsed());
                    match tokio::time::timeout(left, self.consumer.recv()).await {
                        Ok(received) => received,
                        Err(_) => {
                            let errors =
                                self.errors.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                            return Err(ObserveError::Unreadable {
                                limit: self.error_limit,
                                last: errors.said.last().to_owned(),
                            });
                        }
                    }
                }
                None => self.consumer.recv().await,
            };
            match received {
                Ok(message) => {
                    self.errors.lock().unwrap_or_else(std::sync::PoisonError::into_inner).since = None;
                    break message;
                }
                Err(error) => {
                    let mut errors = self.errors.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                    match errors.said.read_on(error, "recrawl-observer") {
                        Ok(ReadOn::Waiting) => {}
                        Ok(ReadOn::Through) => {
                            errors.since.get_or_insert_with(std::time::Instant::now);
                        }
                        Err(fatal) => return Err(ObserveError::Consume(fatal)),
                    }
                }
            }
        };
        let topic = message.topic();
        let position = Position {
            topic: topic.to_owned(),
            partition: message.partition(),
            offset: message.offset(),
            timestamp_ms: message.timestamp().to_millis(),
        };
        let short = topic.strip_prefix(self.prefix.as_str()).unwrap_or(topic);
        let payload = message.payload().unwrap_or_default();
        let decoded = match short {
            name if name == FETCH.name => FETCH.decode(payload).map(Observed::Pick),
            name if name == FETCH_RESULTS.name => FETCH_RESULTS.decode(payload).map(Observed::Result),
            name if name == LINKS.name => LINKS.decode(payload).map(Observed::Link),
            name if name == ANNOUNCEMENTS.name => ANNOUNCEMENTS.decode(payload).map(Observed::Announcement),
            name if name == CHANGE_EVENTS.name => CHANGE_EVENTS.decode(payload).map(Observed::Change),
            name if name == ESTIMATES.name => ESTIMATES.decode(payload).map(Observed::Estimate),
            name if name == DISTRIBUTIONS.name => DISTRIBUTIONS.decode(payload).map(Observed::Distribution),
            name if name == HOST_TRUST.name => HOST_TRUST.decode(payload).map(Observed::Trust),
            _ => return Ok((Observed::DeadLetter(DeadLetter::from_message(&message)), position)),
        };
        let observed = decoded.unwrap_or_else(|error| Observed::Undecodable {
            topic: topic.to_owned(),
            error: error.to_string(),
        });
        Ok((observed, position))
    }
}

/// A record of the dead-letter topic: the original key and (first) bytes, and what its
/// `recrawl-dlq-*` headers say about why and where it was rejected.
#[derive(Debug, Clone, PartialEq)]
pub struct DeadLetter {
    /// Where the dead letter itself is, on the dead-letter topic.
    pub partition: i32,
    pub offset: i64,
    pub key: Vec<u8>,
    /// The original value, or its first bytes when `truncated`.
    pub value: Vec<u8>,
    pub reason: String,
    pub kind: String,
    pub stage: String,
    /// The topic the original belongs on: read from, or meant for (kind `unproducible`).
    pub source_topic: String,
    /// Where the original was read from (inputs only).
    pub source_partition: Option<i32>,
    pub source_offset: Option<i64>,
    /// The original value's size in bytes.
    pub original_bytes: usize,
    pub truncated: bool,
}

impl DeadLetter {
    /// Reads a dead letter's headers; a missing or malformed header reads as empty.
    pub fn from_message(message: &impl rdkafka::Message) -> Self {
        let header = |name: &str| {
            message
                .headers()
                .and_then(|h| h.iter().find(|x| x.key == name).and_then(|x| x.value))
                .map(|v| String::from_utf8_lossy(v).into_owned())
                .unwrap_or_default()
        };
        let value = message.payload().unwrap_or_default().to_vec();
        Self {
            partition: message.partition(),
            offset: message.offset(),
            key: message.key().unwrap_or_default().to_vec(),
            reason: header(dead_letter_headers::REASON),
            kind: header(dead_letter_headers::KIND),
            stage: header(dead_letter_headers::STAGE),
            source_topic: header(dead_letter_headers::TOPIC),
            source_partition: header(dead_letter_headers::PARTITION).parse().ok(),
            source_offset: header(dead_letter_headers::OFFSET).parse().ok(),
            original_bytes: header(dead_letter_headers::ORIGINAL_BYTES).parse().unwrap_or(value.len()),
            truncated: header(dead_letter_headers::TRUNCATED) == "true",
            value,
        }
    }

    /// The dead letter as JSON, without its value (`kept_bytes` says how long it is).
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "dlq_partition": self.partition, "dlq_offset": self.offset,
            "key": String::from_utf8_lossy(&self.key), "reason": self.reason, "kind": self.kind,
            "stage": self.stage, "topic": self.source_topic, "partition": self.source_partition,
            "offset": self.source_offset, "original_bytes": self.original_bytes,
            "kept_bytes": self.value.len(), "truncated": self.truncated,
        })
    }
}

/// Per-period counts for the demo's progress lines.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PeriodTally {
    pub picks: u64,
    pub fetched: u64,
    pub failed: u64,
    pub changes: u64,
    pub compared: u64,
    pub degree_sum: f64,
}

impl PeriodTally {
    /// Adds `other`'s counts: a run's totals from the periods shown.
    pub fn add(&mut self, other: &PeriodTally) {
        self.picks += other.picks;
        self.fetched += other.fetched;
        self.failed += other.failed;
        self.changes += other.changes;
        self.compared += other.compared;
        self.degree_sum += other.degree_sum;
    }

    /// Every pick of the period has its change event.
    pub fn is_complete(&self) -> bool {
        self.picks > 0 && self.fetched >= self.picks
    }

    /// Mean improved-edit-distance degree over the downloads that had a previous version.
    pub fn mean_degree(&self) -> Option<f64> {
        (self.compared > 0).then(|| self.degree_sum / self.compared as f64)
    }
}

/// Folds observed messages into per-period tallies.
#[derive(Debug, Default)]
pub struct Tally {
    pub periods: BTreeMap<u64, PeriodTally>,
    pub dead_letters: u64,
}

impl Tally {
    pub fn record(&mut self, observed: &Observed) {
        match observed {
            Observed::Pick(pick) => self.periods.entry(pick.period).or_default().picks += 1,
            Observed::Change(event) => {
                let period = self.periods.entry(event.period).or_default();
                period.fetched += 1;
                if !event.downloaded {
                    period.failed += 1;
                }
                if let Some(changed) = event.changed {
                    period.compared += 1;
                    period.changes += u64::from(changed);
                    period.degree_sum += event.degrees.as_ref().map_or(0.0, |d| d.ied);
                }
            }
            Observed::DeadLetter(_) | Observed::Undecodable { .. } => self.dead_letters += 1,
            _ => {}
        }
    }
}
