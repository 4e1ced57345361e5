//! Reading a whole topic (or some of its partitions) outside any consumer group, from its
//! beginning: to its end ([`read_to_end`]: a changelog restore, the dead letters) or on as
//! it grows (the runtime's side inputs, [`crate::runtime::tail_topic`]). Either knows
//! where the topic ended when reading began ([`EndOffsets`]).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::error::{KafkaError, KafkaResult};
use rdkafka::message::{BorrowedMessage, Message as _};
use rdkafka::{Offset, TopicPartitionList};
use thiserror::Error;

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
