//! Side inputs: topics every instance reads in full, outside the group.

use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::admin;
use crate::config::KafkaArgs;
use crate::kafka::{reader_config, ReadErrors};
use crate::tail::EndOffsets;

use super::errors::RuntimeError;
use super::record::InputRecord;
use super::stage::Stage;

const METADATA_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a poll may block, and so how late the reader notices shutdown.
const POLL: Duration = Duration::from_millis(100);
/// How often a tail asks for its topic's end offsets, to learn whether it can still read
/// it: an idle topic sends no records, and librdkafka reports a deleted topic or a revoked
/// permission rarely, if at all.
const READABLE_CHECK: Duration = Duration::from_secs(30);
/// How long that ask may take: the reader does not poll, nor see shutdown, meanwhile.
const READABLE_CHECK_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a stage waits for its side inputs to be read before it starts anyway.
pub(super) const SIDE_INPUT_CATCH_UP: Duration = Duration::from_secs(60);

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

/// The tails of a stage's side inputs, read in full by every instance outside the group.
#[derive(Debug, Default)]
pub(super) struct SideInputs {
    pub(super) tails: Vec<(&'static str, Tail)>,
    pub(super) stop: CancellationToken,
}

impl SideInputs {
    pub(super) fn start<S: Stage>(args: &KafkaArgs, shutdown: &CancellationToken) -> Self {
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
    pub(super) async fn catch_up<S: Stage>(
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
                        // The tail sent every record up to the end before it said so, but
                        // the select may take the word while some wait in the channel.
                        while let Ok(record) = tail.records.try_recv() {
                            stage.on_side_input(&record);
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
    pub(super) fn drain<S: Stage>(&mut self, stage: &mut S) {
        for (_, tail) in &mut self.tails {
            while let Ok(record) = tail.records.try_recv() {
                stage.on_side_input(&record);
            }
        }
    }

    /// The error of a tail that stopped while the stage runs: a side input that no longer
    /// arrives leaves the stage with a stale view and no sign of it.
    pub(super) async fn check_running(&mut self) -> Result<(), RuntimeError> {
        let Some(index) = self.tails.iter().position(|(_, tail)| tail.task.is_finished()) else {
            return Ok(());
        };
        let (input, tail) = self.tails.remove(index);
        tail.task.await??;
        Err(RuntimeError::Tail { topic: input.to_owned(), reason: "the reader stopped".to_owned() })
    }

    /// Stops the tails; the first one's error, if any, is returned.
    pub(super) async fn stop(self) -> Result<(), RuntimeError> {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Counts the side-input records it is handed.
    #[derive(Debug, Default)]
    struct Counting(usize);

    impl Stage for Counting {
        type State = ();
        const NAME: &'static str = "counting";
        const INPUTS: &'static [&'static str] = &[];
        const OUTPUTS: &'static [&'static str] = &[];

        async fn handle(
            &mut self,
            _batch: Vec<InputRecord>,
            _state: &mut crate::StateStore<()>,
            _out: &mut super::super::Emitter,
        ) -> Result<(), crate::runtime::StageError> {
            Ok(())
        }

        fn on_side_input(&mut self, _record: &InputRecord) {
            self.0 += 1;
        }
    }

    /// Catching up hands over every record the tail sent before it said it caught up,
    /// though the word may be taken while records wait in the channel.
    #[tokio::test]
    async fn catching_up_hands_over_every_record_sent_before_the_end() {
        const RECORDS: usize = 500;
        let (sender, records) = mpsc::channel(RECORDS);
        let (caught_up_sender, caught_up) = oneshot::channel();
        for _ in 0..RECORDS {
            sender.try_send(InputRecord::sample(None)).expect("room");
        }
        caught_up_sender.send(()).expect("the receiver waits");
        let task = tokio::spawn(async move {
            // Holds the channel open, as a running tail does.
            let _sender = sender;
            std::future::pending::<()>().await;
            Ok(())
        });
        let mut side_inputs = SideInputs {
            tails: vec![("distributions", Tail { records, caught_up, task })],
            stop: CancellationToken::new(),
        };
        let mut stage = Counting::default();
        side_inputs.catch_up(&mut stage, &CancellationToken::new()).await.expect("caught up");
        assert_eq!(stage.0, RECORDS);
    }

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
                if sender.blocking_send(InputRecord::sample(None)).is_err() {
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
}
