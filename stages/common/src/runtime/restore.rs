//! Restoring the state of assigned partitions from the changelog.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message as _;
use recrawl_schemas::{decode, Message};

use crate::config::KafkaArgs;
use crate::kafka::{reader_config, ClusterContext};
use crate::metrics::StageMetrics;
use crate::state::Keyed;
use crate::tail::{read_to_end, EndOffsets, ReadToEndError};

use super::backoff::Backoff;
use super::errors::{ErrorKind, RuntimeError};
use super::record::RecordError;
use super::stage::{Stage, StageContext};

/// Each restored partition's state, by key.
type Restored<State> = Vec<(i32, Keyed<State>)>;

/// A restore fails when its changelog yields no record for this long short of its end.
pub(super) const RESTORE_TIMEOUT: Duration = Duration::from_secs(120);

/// Restores changelog partitions `partitions` of `stage`; a restore that fails (the
/// cluster unreachable) is retried with back-off until the outage timeout has passed since
/// the consumer was `polled`, or the stage is stopping.
pub(super) async fn restore_with_retries<S: Stage>(
    stage: &S,
    args: &KafkaArgs,
    ctx: &StageContext,
    partitions: Vec<i32>,
    polled: Instant,
) -> Result<Restored<S::State>, RuntimeError> {
    let outage = Duration::from_millis(args.outage_timeout_ms);
    let mut backoff = Backoff::new();
    loop {
        match restore(stage, args, &ctx.metrics, partitions.clone()).await {
            Ok(restored) => return Ok(restored),
            Err(error) if polled.elapsed() < outage && !ctx.shutdown.is_cancelled() => {
                ctx.metrics.errors.with_label_values(&[ErrorKind::Restore.as_str()]).inc();
                tracing::warn!(%error, "restore failed; retrying");
                tokio::time::sleep(backoff.next()).await;
            }
            Err(error) => return Err(error),
        }
    }
}

/// Reads changelog partitions `partitions` from the beginning to their high
/// watermarks, shared out among `--restore-readers` readers; the latest value of each
/// key wins, a tombstone deletes.
async fn restore<S: Stage>(
    stage: &S,
    args: &KafkaArgs,
    metrics: &StageMetrics,
    partitions: Vec<i32>,
) -> Result<Restored<S::State>, RuntimeError> {
    // One bound for every reader: a stage's budget (diff's kept words) is the instance's.
    let bound = Arc::new(Mutex::new(stage.restored_record_bound()));
    let reads: Vec<_> = shares(partitions, args.restore_readers)
        .into_iter()
        .map(|share| {
            let reader = ChangelogReader {
                topic: args.cluster.topics().state(S::NAME),
                config: reader_config(&args.cluster, &format!("{}-restore", args.group_for(S::NAME))),
                metrics: metrics.clone(),
                settle: Duration::from_millis(args.restore_settle_ms),
                metadata_timeout: Duration::from_millis(args.cluster.startup_timeout_ms),
            };
            let bound = Arc::clone(&bound);
            tokio::task::spawn_blocking(move || reader.read::<S, _>(share, &bound))
        })
        .collect();
    // Every reader is awaited before an error is returned, so none outlives the restore.
    let mut restored = Vec::new();
    let mut failure = None;
    for read in reads {
        match read.await.map_err(RuntimeError::from).and_then(|result| result) {
            Ok(values) => restored.extend(values),
            Err(error) => failure = failure.or(Some(error)),
        }
    }
    match failure {
        Some(error) => Err(error),
        None => Ok(restored),
    }
}

/// `partitions` dealt out to at most `readers` readers, none empty.
fn shares(partitions: Vec<i32>, readers: usize) -> Vec<Vec<i32>> {
    let readers = readers.clamp(1, partitions.len().max(1));
    let mut shares = vec![Vec::new(); readers];
    for (partition, share) in partitions.into_iter().zip((0..readers).cycle()) {
        if let Some(share) = shares.get_mut(share) {
            share.push(partition);
        }
    }
    shares.retain(|share| !share.is_empty());
    shares
}

/// One reader of a restore: its own consumer, outside the group.
struct ChangelogReader {
    topic: String,
    config: ClientConfig,
    metrics: StageMetrics,
    settle: Duration,
    metadata_timeout: Duration,
}

impl ChangelogReader {
    fn read<S: Stage, B>(
        self,
        partitions: Vec<i32>,
        bound: &Mutex<B>,
    ) -> Result<Restored<S::State>, RuntimeError>
    where
        B: FnMut(Option<&mut S::State>, Option<&S::State>),
    {
        let Self { topic, config, metrics, settle, metadata_timeout } = self;
        let restore_error = |partition: i32, reason: String| RuntimeError::Restore {
            topic: topic.clone(),
            partition,
            reason,
        };
        let first = partitions.first().copied().unwrap_or(0);
        let reader: BaseConsumer<ClusterContext> =
            config.create_with_context(ClusterContext).map_err(|e| restore_error(first, e.to_string()))?;
        let mut restored: HashMap<i32, Keyed<S::State>> =
            partitions.iter().map(|&partition| (partition, Keyed::default())).collect();
        let (ends, assignment) =
            EndOffsets::fetch(&reader, &topic, partitions.iter().copied(), metadata_timeout, false)
                .map_err(|e| restore_error(first, e.to_string()))?;
        if assignment.count() > 0 {
            reader.assign(&assignment).map_err(|e| restore_error(first, e.to_string()))?;
        }
        let read = read_to_end(&reader, ends, settle, RESTORE_TIMEOUT, |message| {
            let Some(values) = restored.get_mut(&message.partition()) else { return };
            metrics.restored_records.inc();
            let Some(key) = message.key().and_then(|k| std::str::from_utf8(k).ok()) else { return };
            let read = message.payload().map(|payload| -> Result<S::State, RecordError> {
                let value = decode::<S::State>(payload)?;
                let name = <S::State as Message>::NAME;
                value.validate().map_err(|source| RecordError::Invalid { name, source })?;
                Ok(value)
            });
            // A panic elsewhere while holding the bound leaves it as usable as before.
            let held_bound = || bound.lock().unwrap_or_else(PoisonError::into_inner);
            match read {
                None => {
                    held_bound()(None, values.get(key));
                    values.remove(key);
                }
                Some(Ok(mut value)) => {
                    held_bound()(Some(&mut value), values.get(key));
                    values.insert(key.to_owned(), value);
                }
                Some(Err(error)) => {
                    // A record this build cannot read, or holding what no stage writes
                    // (corrupted, forged), is skipped, not fatal: the key's state
                    // restarts and is rebuilt from new input.
                    metrics.errors.with_label_values(&[ErrorKind::RestoreDecode.as_str()]).inc();
                    tracing::warn!(key, %error, "skipping unreadable changelog record");
                }
            }
        });
        read.map_err(|error| match error {
            ReadToEndError::Stalled { partition, .. } => restore_error(partition, error.to_string()),
            ReadToEndError::Kafka(_) => restore_error(first, error.to_string()),
        })?;
        Ok(restored.into_iter().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_partition_goes_to_one_reader_and_no_reader_goes_idle() {
        for (partitions, readers) in [(0, 4), (1, 4), (3, 4), (4, 4), (10, 4), (10, 1), (494, 4)] {
            let dealt = shares((0..partitions).collect(), readers);
            assert!(dealt.len() <= readers, "{partitions} partitions: {} readers", dealt.len());
            assert!(dealt.iter().all(|share| !share.is_empty()), "{partitions} partitions: {dealt:?}");
            let mut every: Vec<i32> = dealt.concat();
            every.sort_unstable();
            assert_eq!(every, (0..partitions).collect::<Vec<_>>());
            let (least, most) = (dealt.iter().map(Vec::len).min(), dealt.iter().map(Vec::len).max());
            assert!(most.zip(least).is_none_or(|(most, least)| most - least <= 1), "{dealt:?}");
        }
    }
}
