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

mod backoff;
mod close;
mod dead_letters;
mod delivery;
mod emitter;
mod errors;
mod event_loop;
mod inputs;
mod record;
mod restore;
mod side_inputs;
mod stage;

pub use close::stop_bound;
pub use emitter::Emitter;
pub use errors::{DeadLetterKind, ErrorKind, RuntimeError, SetupError, StageError};
pub use record::{InputRecord, OutputRecord, RecordError};
pub use side_inputs::{tail_topic, Tail};
pub use stage::{Assignment, Stage, StageContext};

use std::sync::Arc;
use std::time::Duration;

use rdkafka::consumer::{Consumer, StreamConsumer};
use recrawl_schemas::topics::DEAD_LETTER;

use crate::admin;
use crate::config::KafkaArgs;
use crate::kafka::{consumer_config, leave_group, StageConsumerContext};
use crate::metrics::StageMetrics;
use crate::state::StateStore;

use close::{run_detached, DestroyDetached, CLOSE_TIMEOUT};
use delivery::Delivery;
use event_loop::Loop;
use inputs::{partition_counts, InputsApart};
use side_inputs::SideInputs;

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
    let delivery = Delivery::new(args, S::NAME, &ctx)?;

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
        delivery,
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
    let closed = close::close(&event_loop.consumer, event_loop.delivery.producer()).await;
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

/// Every counter's series the loop can move, at 0 from the start, so that an alert on
/// the first increment sees it.
fn export_zeros(metrics: &StageMetrics, inputs: &[String], outputs: &[String], changelog: Option<String>) {
    for topic in inputs {
        metrics.records_in.with_label_values(&[topic]).reset();
        metrics.assigned_partitions.with_label_values(&[topic]).set(0);
        for kind in DeadLetterKind::ALL {
            metrics.dead_letters.with_label_values(&[topic.as_str(), kind.as_str()]).reset();
        }
    }
    for topic in outputs.iter().chain(&changelog) {
        metrics.records_out.with_label_values(&[topic]).reset();
        metrics
            .dead_letters
            .with_label_values(&[topic.as_str(), DeadLetterKind::Unproducible.as_str()])
            .reset();
    }
    for kind in ErrorKind::ALL {
        metrics.errors.with_label_values(&[kind.as_str()]).reset();
    }
}
