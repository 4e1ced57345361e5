//! Shutting down: the final commit, the producer's flush and the clients' teardown.

use std::sync::Arc;
use std::time::Duration;

use rdkafka::consumer::{CommitMode, Consumer, StreamConsumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{FutureProducer, Producer};
use tokio::sync::oneshot;

use crate::config::KafkaArgs;
use crate::kafka::{ClusterContext, StageConsumerContext};

use super::backoff::Backoff;
use super::errors::RuntimeError;

/// Each shutdown step (final commit, producer flush, leaving the group, client teardown)
/// gets this long.
pub(super) const CLOSE_TIMEOUT: Duration = Duration::from_secs(10);
/// Past the close's steps: stopping the side inputs' readers (one may be in a 5 s
/// watermark request) and the runtime's own shutdown (1 s, `service::block_on_main`).
pub(super) const STOP_MARGIN: Duration = Duration::from_secs(6);

/// The longest a running stage started with `args` takes to exit once asked to stop: the
/// drain, then each step of the close at most `CLOSE_TIMEOUT` (final commit, producer
/// flush, leaving the group unless the membership is static, the clients' teardown), then
/// `STOP_MARGIN`. A restore under way is waited for first (up to `restore::RESTORE_TIMEOUT`).
/// An orchestrator's grace period must be longer: killed mid-close, a stage loses nothing
/// (its uncommitted input is replayed) but ends as a crash, with the replay to redo.
pub fn stop_bound(args: &KafkaArgs) -> Duration {
    let steps = if args.instance_id.is_some() { 3 } else { 4 };
    Duration::from_millis(args.drain_timeout_ms)
        .saturating_add(CLOSE_TIMEOUT.saturating_mul(steps))
        .saturating_add(STOP_MARGIN)
}

/// Runs `work` on a detached thread of its own; its result comes on the receiver, which
/// errs if the thread could not start. Calls that wait on the brokers (destroying a
/// consumer, a synchronous commit) can wait without end (a consumer's close, librdkafka
/// issue 4884): on a detached thread they hold neither an async worker nor the runtime's
/// shutdown, which waits for its blocking pool's threads however long they take.
pub(super) fn run_detached<R: Send + 'static>(
    work: impl FnOnce() -> R + Send + 'static,
) -> oneshot::Receiver<R> {
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
pub(super) struct DestroyDetached<T: Send + 'static>(pub(super) Option<T>);

impl<T: Send + 'static> DestroyDetached<T> {
    /// The client, for the caller to destroy where it chooses.
    pub(super) fn take(&mut self) -> Option<T> {
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

/// Commits the stored offsets within [`CLOSE_TIMEOUT`]; what went wrong, if anything.
/// A commit made while the group's coordinator is still being found (right after an
/// outage) is tried again: failing then would exit non-zero with the commit one
/// lookup away.
async fn final_commit(consumer: &Arc<StreamConsumer<StageConsumerContext>>) -> Option<String> {
    let started = tokio::time::Instant::now();
    let deadline = started.checked_add(CLOSE_TIMEOUT).unwrap_or(started);
    let mut backoff = Backoff::new();
    // What the attempts so far were refused for, for a last one that times out.
    let mut refused = String::new();
    loop {
        let consumer = consumer.clone();
        let committed = run_detached(move || consumer.commit_consumer_state(CommitMode::Sync));
        let code = match tokio::time::timeout_at(deadline, committed).await {
            Ok(Ok(Ok(()))) => {
                tracing::info!("offsets committed");
                return None;
            }
            Ok(Ok(Err(KafkaError::ConsumerCommit(code)))) => code,
            Ok(Ok(Err(error))) => return Some(format!("final commit failed: {error}")),
            Ok(Err(_)) => return Some("final commit ended without an answer".to_owned()),
            Err(_) => return Some(format!("final commit not confirmed within {CLOSE_TIMEOUT:?}{refused}")),
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
pub(super) async fn close(
    consumer: &Arc<StreamConsumer<StageConsumerContext>>,
    producer: &FutureProducer<ClusterContext>,
) -> Result<(), RuntimeError> {
    let mut failures = Vec::new();
    failures.extend(final_commit(consumer).await);
    let producer = producer.clone();
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
