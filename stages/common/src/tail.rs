//! Reading a whole topic (or some of its partitions) outside any consumer group, from its
//! beginning: to its end ([`read_to_end`]: a changelog restore, the dead letters) or on as
//! it grows ([`tail_topic`]: data every instance of a stage needs in full, such as the
//! estimator's shares of the group distributions). Either knows where the topic ended when
//! reading began ([`EndOffsets`]).

use std::collections::HashMap;
use std::time::Duration;

use std::time::Instant;

use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::error::{KafkaError, KafkaResult};
use rdkafka::message::{BorrowedMessage, Message as _};
use rdkafka::{Offset, TopicPartitionList};
use thiserror::Error;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::admin;
use crate::config::KafkaArgs;
use crate::kafka::{reader_config, ReadErrors};
use crate::runtime::{InputRecord, RuntimeError};

const METADATA_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a poll may block, and so how late the reader notices shutdown.
const POLL: Duration = Duration::from_millis(100);
/// How often a tail asks for its topic's end offsets, to learn whether it can still read
/// it: an idle topic sends no records, and librdkafka reports a deleted topic or a revoked
/// permission rarely, if at all.
const READABLE_CHECK: Duration = Duration::from_secs(30);
/// How long that ask may take: the reader does not poll, nor see shutdown, meanwhile.
const READABLE_CHECK_TIMEOUT: Duration = Duration::from_secs(5);

/// Where each partition of a topic ended when reading began: a reader from the beginning
/// has caught up once it has passed every one.
#[derive(Debug, Default)]
pub struct EndOffsets {
    /// Partitions holding records, with the offset to pass (exclusive).
    pending: HashMap<i32, i64>,
}

impl EndOffsets {
    /// Fetches the high watermark of each of `partitions` of `topic`, and returns an
    /// assignment of them from the beginning: only those holding records unless
    /// `assign_empty` (a tail wants the empty ones too, for what arrives later).
    pub fn fetch<C: ConsumerContext>(
        reader: &BaseConsumer<C>,
        topic: &str,
        partitions: impl IntoIterator<Item = i32>,
        timeout: Duration,
        assign_empty: bool,
    ) -> KafkaResult<(EndOffsets, TopicPartitionList)> {
        let mut ends = EndOffsets::default();
        let mut assignment = TopicPartitionList::new();
        for partition in partitions {
            let (low, high) = reader.fetch_watermarks(topic, partition, timeout)?;
            if high > low {
                ends.pending.insert(partition, high);
            }
            if high > low || assign_empty {
                assignment.add_partition_offset(topic, partition, Offset::Beginning)?;
            }
        }
        Ok((ends, assignment))
    }

    /// Notes that the record at `offset` of `partition` has been read.
    pub fn passed(&mut self, partition: i32, offset: i64) {
        if self.pending.get(&partition).is_some_and(|end| offset.saturating_add(1) >= *end) {
            self.pending.remove(&partition);
        }
    }

    /// Every partition has been read to where it ended.
    pub fn reached(&self) -> bool {
        self.pending.is_empty()
    }
}

/// Why a topic could not be read to its end.
#[derive(Debug, Error)]
pub enum ReadToEndError {
    #[error(transparent)]
    Kafka(#[from] KafkaError),
    #[error("partition {partition} stopped short of offset {end}: no record for {waited:?}")]
    Stalled { partition: i32, end: i64, waited: Duration },
}

/// Reads `reader`'s assignment until every partition has passed `ends`, then on while
/// records keep coming within `settle` (a broker's high watermark can trail what it
/// serves); `on_record` sees each record. Fails when no record comes for `stall` while a
/// partition is short of its end.
pub fn read_to_end<C: ConsumerContext>(
    reader: &BaseConsumer<C>,
    mut ends: EndOffsets,
    settle: Duration,
    stall: Duration,
    mut on_record: impl FnMut(&BorrowedMessage<'_>),
) -> Result<(), ReadToEndError> {
    if ends.reached() {
        return Ok(());
    }
    let mut last_record = Instant::now();
    loop {
        let caught_up = ends.reached();
        if caught_up && settle.is_zero() {
            return Ok(());
        }
        let wait = if caught_up { settle } else { Duration::from_millis(200) };
        let Some(message) = reader.poll(wait) else {
            if caught_up {
                return Ok(());
            }
            if last_record.elapsed() > stall {
                let (&partition, &end) = ends.pending.iter().next().unwrap_or((&0, &0));
                return Err(ReadToEndError::Stalled { partition, end, waited: stall });
            }
            continue;
        };
        last_record = Instant::now();
        let message = message?;
        ends.passed(message.partition(), message.offset());
        on_record(&message);
    }
}

/// A running tail: records arrive on `records`; `caught_up` fires once everything the
/// topic held when the tail started has been sent.
#[derive(Debug)]
pub struct Tail {
    pub records: mpsc::Receiver<InputRecord>,
    pub caught_up: oneshot::Receiver<()>,
    pub task: tokio::task::JoinHandle<Result<(), RuntimeError>>,
}

/// Starts reading every partition of `input` (a catalogue name, without prefix) from the
/// beginning until `shutdown`.
pub fn tail_topic(
    args: &KafkaArgs,
    input: &'static str,
    client_group: &str,
    shutdown: CancellationToken,
) -> Tail {
    let topic = args.cluster.topics().name(input);
    let config = reader_config(&args.cluster, client_group);
    let outage = Duration::from_millis(args.outage_timeout_ms);
    let check_every = READABLE_CHECK.min(outage.checked_div(4).unwrap_or(outage));
    let brokers = args.cluster.brokers.clone();
    let (sender, records) = mpsc::channel(1024);
    let (caught_up_sender, caught_up) = oneshot::channel();
    let task = tokio::task::spawn_blocking(move || {
        let fail = |reason: String| RuntimeError::Tail { topic: topic.clone(), reason };
        let reader: BaseConsumer = config.create().map_err(|e| fail(e.to_string()))?;
        let counts = admin::topic_partitions(
            reader.client(),
            &brokers,
            std::slice::from_ref(&topic),
            METADATA_TIMEOUT,
        )?;
        let partitions = counts.get(&topic).copied().unwrap_or(0);
        let (mut ends, list) = EndOffsets::fetch(&reader, &topic, 0..partitions, METADATA_TIMEOUT, true)
            .map_err(|e| fail(e.to_string()))?;
        reader.assign(&list).map_err(|e| fail(e.to_string()))?;
        let mut caught_up_sender = Some(caught_up_sender);
        let mut read_errors = ReadErrors::default();
        let mut last_check = Instant::now();
        let mut unreadable_since: Option<Instant> = None;
        // Also ends when the records are no longer wanted, e.g. the stage was dropped
        // without a shutdown: a runtime waits for its blocking threads before it exits.
        while !shutdown.is_cancelled() && !sender.is_closed() {
            if ends.reached() {
                if let Some(sender) = caught_up_sender.take() {
                    let _ = sender.send(());
                }
            }
            // Past the outage timeout of not reaching the topic, the tail ends with an error
            // and the stage with it, as when its own topics are out of reach.
            if last_check.elapsed() >= check_every {
                last_check = Instant::now();
                match reader.fetch_watermarks(&topic, 0, READABLE_CHECK_TIMEOUT) {
                    Ok(_) => unreadable_since = None,
                    Err(error) => {
                        let since = *unreadable_since.get_or_insert(last_check);
                        if since.elapsed() > outage {
                            let waited = since.elapsed();
                            return Err(fail(format!(
                                "not readable for {waited:?} (--outage-timeout-ms): {error}"
                            )));
                        }
                    }
                }
            }
            let Some(message) = reader.poll(POLL) else { continue };
            let message = match message {
                // A record read is the topic reached: however long the stage then takes
                // to take it, a check failing after is not an outage that began before.
                Ok(message) => {
                    unreadable_since = None;
                    message
                }
                Err(error) => match read_errors.read_on(error, &topic) {
                    Ok(_) => continue,
                    Err(fatal) => return Err(fail(fatal.to_string())),
                },
            };
            let record = InputRecord::from_message(&message, input);
            ends.passed(record.partition, record.offset);
            if sender.blocking_send(record).is_err() {
                break;
            }
        }
        Ok(())
    });
    Tail { records, caught_up, task }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_end_is_reached_once_every_partition_passes_its_watermark() {
        let mut ends = EndOffsets { pending: HashMap::from([(0, 3), (2, 1)]) };
        ends.passed(0, 1);
        ends.passed(1, 100);
        assert!(!ends.reached(), "partition 0 is short of offset 3 and 2 of 1");
        ends.passed(2, 0);
        ends.passed(0, 2);
        assert!(ends.reached());
        assert!(EndOffsets::default().reached(), "an empty topic has nothing to read");
    }
}
