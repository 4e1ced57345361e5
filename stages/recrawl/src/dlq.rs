//! `recrawl dlq list` and `recrawl dlq replay`: the dead-letter topic read to its end, the
//! dead letters an operator chooses, and, after a fix, their original records put back on
//! the topic they belong on.

use std::time::Duration;

use clap::Args;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord};
use recrawl_common::admin::{self, AdminError};
use recrawl_common::kafka::{producer_config, reader_config};
use recrawl_common::tail::{read_to_end, EndOffsets, ReadToEndError};
use recrawl_common::KafkaArgs;
use recrawl_schemas::envelope::inspect;
use recrawl_schemas::topics::DEAD_LETTER;
use thiserror::Error;

use crate::observe::DeadLetter;

/// The header a replayed record carries: the dead letter it came from.
pub const REPLAYED_FROM_HEADER: &str = "recrawl-replayed-from";

#[derive(Debug, Error)]
pub enum DlqError {
    #[error("reading {topic}: {source}")]
    Read { topic: String, source: KafkaError },
    #[error(transparent)]
    Topics(#[from] AdminError),
    #[error("{topic} partition {partition}: no record for {waited:?} before its end (offset {high})")]
    Stalled { topic: String, partition: i32, high: i64, waited: Duration },
    #[error("creating the producer: {0}")]
    Producer(KafkaError),
    #[error("re-publishing the dead letter at {dlq_partition}/{dlq_offset} to {topic}: {source}")]
    Publish { topic: String, dlq_partition: i32, dlq_offset: i64, source: KafkaError },
    #[error("replay needs a selection: --topic, --partition, --offset, --key, --kind or --stage")]
    NoSelection,
    #[error("{0}")]
    Join(#[from] tokio::task::JoinError),
}

/// Which dead letters a command applies to; every condition given must hold.
#[derive(Debug, Clone, Default, Args)]
pub struct Selection {
    /// The topic the original belongs on, with or without the topic prefix (`fetch-results`).
    #[arg(long, env = "RECRAWL_DLQ_TOPIC")]
    pub topic: Option<String>,
    /// The partition the original was read from.
    #[arg(long, env = "RECRAWL_DLQ_PARTITION")]
    pub partition: Option<i32>,
    /// The offset the original was read from.
    #[arg(long, env = "RECRAWL_DLQ_OFFSET")]
    pub offset: Option<i64>,
    /// The original record's key.
    #[arg(long, env = "RECRAWL_DLQ_KEY")]
    pub key: Option<String>,
    /// The kind of rejection: undecodable, schema_version, key_mismatch, invalid, unproducible.
    #[arg(long, env = "RECRAWL_DLQ_KIND", value_parser = clap::builder::PossibleValuesParser::new(recrawl_schemas::topics::DEAD_LETTER_KINDS))]
    pub kind: Option<String>,
    /// The stage that rejected it.
    #[arg(long, env = "RECRAWL_DLQ_STAGE")]
    pub stage: Option<String>,
}

impl Selection {
    fn is_empty(&self) -> bool {
        self.topic.is_none()
            && self.partition.is_none()
            && self.offset.is_none()
            && self.key.is_none()
            && self.kind.is_none()
            && self.stage.is_none()
    }

    /// Whether `letter` is chosen; `prefix` completes a topic given without it.
    pub fn matches(&self, letter: &DeadLetter, prefix: &str) -> bool {
        let topic_ok = self
            .topic
            .as_ref()
            .is_none_or(|t| letter.source_topic == *t || letter.source_topic == format!("{prefix}{t}"));
        topic_ok
            && self.partition.is_none_or(|p| letter.source_partition == Some(p))
            && self.offset.is_none_or(|o| letter.source_offset == Some(o))
            && self.key.as_ref().is_none_or(|k| letter.key == k.as_bytes())
            && self.kind.as_ref().is_none_or(|k| letter.kind == *k)
            && self.stage.as_ref().is_none_or(|s| letter.stage == *s)
    }
}

/// Every dead letter the topic holds now, read from its beginning to its end, in
/// partition and offset order.
pub async fn read_all(args: &KafkaArgs) -> Result<Vec<DeadLetter>, DlqError> {
    let topic = args.cluster.topics().name(DEAD_LETTER);
    let config = reader_config(&args.cluster, "recrawl-dlq");
    let brokers = args.cluster.brokers.clone();
    let timeout = Duration::from_millis(args.cluster.startup_timeout_ms);
    let settle_ms = args.restore_settle_ms;
    tokio::task::spawn_blocking(move || {
        let read_error = |source| DlqError::Read { topic: topic.clone(), source };
        let reader: BaseConsumer = config.create().map_err(read_error)?;
        let partitions =
            admin::topic_partitions(reader.client(), &brokers, std::slice::from_ref(&topic), timeout)?
                .get(&topic)
                .copied()
                .unwrap_or(0);
        let (ends, assignment) =
            EndOffsets::fetch(&reader, &topic, 0..partitions, timeout, false).map_err(read_error)?;
        let mut letters = Vec::new();
        if assignment.count() > 0 {
            reader.assign(&assignment).map_err(read_error)?;
        }
        let settle = Duration::from_millis(settle_ms);
        read_to_end(&reader, ends, settle, timeout, |message| {
            letters.push(DeadLetter::from_message(message))
        })
        .map_err(|error| match error {
            ReadToEndError::Kafka(source) => DlqError::Read { topic: topic.clone(), source },
            ReadToEndError::Stalled { partition, end, waited } => {
                DlqError::Stalled { topic: topic.clone(), partition, high: end, waited }
            }
        })?;
        letters.sort_by_key(|l| (l.partition, l.offset));
        Ok(letters)
    })
    .await?
}

/// Why a chosen dead letter cannot be replayed, if it cannot.
pub fn unreplayable(letter: &DeadLetter) -> Option<&'static str> {
    if letter.truncated {
        Some("only the first bytes of the original were kept")
    } else if letter.source_topic.is_empty() {
        Some("no recrawl-dlq-topic header: the original topic is unknown")
    } else {
        None
    }
}

/// Publishes each letter's original key and value to its original topic, with the
/// headers that go with the value when it says what it is, and waits for every acknowledgement.
pub async fn republish(args: &KafkaArgs, letters: &[DeadLetter]) -> Result<(), DlqError> {
    let producer: FutureProducer = producer_config(args).create().map_err(DlqError::Producer)?;
    for letter in letters {
        let origin =
            format!("{}/{}/{}", args.cluster.topics().name(DEAD_LETTER), letter.partition, letter.offset);
        let mut headers =
            OwnedHeaders::new().insert(Header { key: REPLAYED_FROM_HEADER, value: Some(&origin) });
        // A value that never decoded says nothing of itself; the stage dead-letters it again.
        if let Ok(framed) = inspect(&letter.value) {
            for (key, value) in framed.kafka_headers() {
                headers = headers.insert(Header { key, value: Some(&value) });
            }
        }
        let record =
            FutureRecord::to(&letter.source_topic).key(&letter.key).payload(&letter.value).headers(headers);
        producer.send(record, Duration::from_secs(30)).await.map_err(|(source, _)| DlqError::Publish {
            topic: letter.source_topic.clone(),
            dlq_partition: letter.partition,
            dlq_offset: letter.offset,
            source,
        })?;
    }
    Ok(())
}

/// `recrawl dlq replay`: the chosen dead letters, re-published only with `confirm`.
/// Returns the letters chosen and, for each, why it cannot be replayed (if so).
pub async fn replay(
    args: &KafkaArgs,
    selection: &Selection,
    confirm: bool,
) -> Result<Vec<(DeadLetter, Option<&'static str>)>, DlqError> {
    if selection.is_empty() {
        return Err(DlqError::NoSelection);
    }
    let prefix = args.cluster.topics().prefix().to_owned();
    let chosen: Vec<(DeadLetter, Option<&'static str>)> = read_all(args)
        .await?
        .into_iter()
        .filter(|l| selection.matches(l, &prefix))
        .map(|l| {
            let why = unreplayable(&l);
            (l, why)
        })
        .collect();
    if confirm {
        let replayable: Vec<DeadLetter> =
            chosen.iter().filter(|(_, why)| why.is_none()).map(|(l, _)| l.clone()).collect();
        republish(args, &replayable).await?;
    }
    Ok(chosen)
}
