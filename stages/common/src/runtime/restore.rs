//! Restoring the state of assigned partitions from the changelog.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message as _;
use recrawl_schemas::{decode, Message};

use crate::config::KafkaArgs;
use crate::kafka::{reader_config, ClusterContext};
use crate::metrics::StageMetrics;
use crate::tail::{read_to_end, EndOffsets, ReadToEndError};

use super::backoff::Backoff;
use super::errors::{ErrorKind, RuntimeError};
use super::record::RecordError;
use super::stage::{Stage, StageContext};

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
) -> Result<Vec<(i32, HashMap<String, S::State>)>, RuntimeError> {
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
/// watermarks with one reader; the latest value of each key wins, a tombstone deletes.
async fn restore<S: Stage>(
    stage: &S,
    args: &KafkaArgs,
    metrics: &StageMetrics,
    partitions: Vec<i32>,
) -> Result<Vec<(i32, HashMap<String, S::State>)>, RuntimeError> {
    let topic = args.cluster.topics().state(S::NAME);
    let config = reader_config(&args.cluster, &format!("{}-restore", args.group_for(S::NAME)));
    let errors = metrics.errors.clone();
    let records_read = metrics.restored_records.clone();
    let settle_ms = args.restore_settle_ms;
    let metadata_timeout = Duration::from_millis(args.cluster.startup_timeout_ms);
    let mut bound = stage.restored_record_bound();
    tokio::task::spawn_blocking(move || {
        let restore_error = |partition: i32, reason: String| RuntimeError::Restore {
            topic: topic.clone(),
            partition,
            reason,
        };
        let first = partitions.first().copied().unwrap_or(0);
        let reader: BaseConsumer<ClusterContext> =
            config.create_with_context(ClusterContext).map_err(|e| restore_error(first, e.to_string()))?;
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
            let read = message.payload().map(|payload| -> Result<S::State, RecordError> {
                let value = decode::<S::State>(payload)?;
                let name = <S::State as Message>::NAME;
                value.validate().map_err(|source| RecordError::Invalid { name, source })?;
                Ok(value)
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
