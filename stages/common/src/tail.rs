//! Reading a whole topic, outside any consumer group, from its beginning and then as it
//! grows: for data every instance of a stage needs in full (the estimator's shares of the
//! group distributions), unlike its input, which the group splits between instances.

use std::collections::HashMap;
use std::time::Duration;

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::{Offset, TopicPartitionList};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::admin;
use crate::config::KafkaArgs;
use crate::kafka::{brokers_unreachable, reader_config};
use crate::runtime::{InputRecord, RuntimeError};

const METADATA_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a poll may block, and so how late the reader notices shutdown.
const POLL: Duration = Duration::from_millis(100);

/// A running tail: records arrive on `records`; `caught_up` fires once everything the
/// topic held when the tail started has been sent.
#[derive(Debug)]
pub struct Tail {
    pub records: mpsc::Receiver<InputRecord>,
    pub caught_up: oneshot::Receiver<()>,
    pub task: tokio::task::JoinHandle<Result<(), RuntimeError>>,
}

/// Starts reading every partition of `topic` from the beginning until `shutdown`.
pub fn tail_topic(args: &KafkaArgs, topic: String, client_group: &str, shutdown: CancellationToken) -> Tail {
    let config = reader_config(&args.cluster, client_group);
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
        let mut list = TopicPartitionList::new();
        // Offsets to reach (exclusive) before the tail has caught up.
        let mut pending: HashMap<i32, i64> = HashMap::new();
        for partition in 0..partitions {
            let (low, high) = reader
                .fetch_watermarks(&topic, partition, METADATA_TIMEOUT)
                .map_err(|e| fail(e.to_string()))?;
            if high > low {
                pending.insert(partition, high);
            }
            list.add_partition_offset(&topic, partition, Offset::Beginning)
                .map_err(|e| fail(e.to_string()))?;
        }
        reader.assign(&list).map_err(|e| fail(e.to_string()))?;
        let mut caught_up_sender = Some(caught_up_sender);
        // Also ends when the records are no longer wanted, e.g. the stage was dropped
        // without a shutdown: a runtime waits for its blocking threads before it exits.
        while !shutdown.is_cancelled() && !sender.is_closed() {
            if pending.is_empty() {
                if let Some(sender) = caught_up_sender.take() {
                    let _ = sender.send(());
                }
            }
            let Some(message) = reader.poll(POLL) else { continue };
            let message = match message {
                Ok(message) => message,
                // librdkafka reconnects by itself: the tail goes on once the cluster is back.
                Err(error) if brokers_unreachable(&error) => continue,
                Err(error) => return Err(fail(error.to_string())),
            };
            let record = InputRecord::from_message(&message);
            if pending.get(&record.partition).is_some_and(|high| record.offset.saturating_add(1) >= *high) {
                pending.remove(&record.partition);
            }
            if sender.blocking_send(record).is_err() {
                break;
            }
        }
        Ok(())
    });
    Tail { records, caught_up, task }
}
