//! What a stage provides to the loop, and what it is given.

use std::future::Future;

use recrawl_schemas::Message;
use tokio_util::sync::CancellationToken;

use crate::http::Health;
use crate::metrics::StageMetrics;
use crate::state::StateStore;

use super::emitter::Emitter;
use super::errors::StageError;
use super::record::InputRecord;

/// The partitions of the input topics this instance owns.
#[derive(Debug, Clone, Default)]
pub struct Assignment {
    pub partitions: Vec<i32>,
    /// Partition count of the input topics (co-partitioned, so one number).
    pub total: i32,
}

/// What a stage provides to the loop. The algorithm itself lives in the stage's pure
/// modules; implementations only decode, call them and emit.
pub trait Stage: Send + 'static {
    /// Per-key state kept in the changelog; `()` for a stage that keeps none.
    type State: Message + Send + Sync + 'static;

    /// The stage's name: its consumer group, its changelog `state.<name>`, its label.
    const NAME: &'static str;

    /// Input topic names without prefix; all must be co-partitioned.
    const INPUTS: &'static [&'static str];

    /// Topics the stage writes to, without prefix, checked at start.
    const OUTPUTS: &'static [&'static str];

    /// Topics every instance reads in full, outside the consumer group (the stage tails
    /// them itself), without prefix.
    const SIDE_INPUTS: &'static [&'static str] = &[];

    /// Whether the stage's outputs outlast its batches: the archive's files, published
    /// after many of them. The loop then stores only the offsets [`Stage::take_durable`]
    /// hands it, and on shutdown lets the stage [`Stage::finish`] what it holds.
    const HOLDS_OFFSETS: bool = false;

    /// Whether the stage keeps state in `state.<name>`: unless its state is `()`.
    fn stateful(&self) -> bool {
        std::any::TypeId::of::<Self::State>() != std::any::TypeId::of::<()>()
    }

    /// Handles one batch in offset order.
    fn handle(
        &mut self,
        batch: Vec<InputRecord>,
        state: &mut StateStore<Self::State>,
        out: &mut Emitter,
    ) -> impl Future<Output = Result<(), StageError>> + Send;

    /// When the stage next wants [`Stage::tick`] (the scheduler's period clock). Ticks
    /// wait until the instance has joined its group and restored its partitions.
    fn next_tick(&self) -> Option<tokio::time::Instant> {
        None
    }

    fn tick(
        &mut self,
        _state: &mut StateStore<Self::State>,
        _assignment: &Assignment,
        _out: &mut Emitter,
    ) -> impl Future<Output = Result<(), StageError>> + Send {
        async { Ok(()) }
    }

    /// A record of one of [`Stage::SIDE_INPUTS`]. Before the stage's first batch the
    /// runtime hands over each side input to where it ended at start; after that, before
    /// each batch and tick, whatever arrived since.
    fn on_side_input(&mut self, _record: &InputRecord) {}

    /// For a stage that [holds its offsets](Stage::HOLDS_OFFSETS): the input offsets whose
    /// every output is durable since the last call, as (topic with its prefix, partition,
    /// next offset to read). Asked after each batch and tick, once its changelog is written.
    fn take_durable(&mut self) -> Vec<(String, i32, i64)> {
        Vec::new()
    }

    /// On shutdown, for a stage that [holds its offsets](Stage::HOLDS_OFFSETS): makes what
    /// it holds durable. The loop writes the outputs and changelog of each call, stores
    /// [`Stage::take_durable`]'s offsets and calls again until it answers true (nothing
    /// is held) or `--drain-timeout-ms` has passed.
    fn finish(
        &mut self,
        _state: &mut StateStore<Self::State>,
        _out: &mut Emitter,
    ) -> impl Future<Output = Result<bool, StageError>> + Send {
        async { Ok(true) }
    }

    /// Called after the stage's state for `partition` was restored.
    fn on_restored(&mut self, _partition: i32, _state: &mut StateStore<Self::State>) {}

    /// What a restore does with each record it reads, once it decoded and validated,
    /// before the next is read: given the new value (`None` for a tombstone) and the one
    /// it replaces, a stage whose bounds are flags brings a record written under larger
    /// ones within its own, so a restore never holds more than the stage would.
    fn restored_record_bound(
        &self,
    ) -> impl FnMut(Option<&mut Self::State>, Option<&Self::State>) + Send + 'static {
        |_: Option<&mut Self::State>, _: Option<&Self::State>| {}
    }

    /// Called before the state of a revoked `partition` is dropped.
    fn on_revoked(&mut self, _partition: i32, _state: &StateStore<Self::State>) {}

    /// Called after every change of the assignment, once its state is in place, and once
    /// at the start with no partition, before the side inputs are read: the input topics'
    /// partition count is known from then on.
    fn on_assigned(&mut self, _assignment: &Assignment) {}

    /// Keys of state held, for the `state_keys` gauge; a stage that takes its partitions
    /// out of the store ([`StateStore::take_partition`]) counts its own.
    fn state_keys(&self, state: &StateStore<Self::State>) -> usize {
        state.len()
    }
}

/// What a stage run needs from its process: metrics, health flags, shutdown signal.
#[derive(Debug, Clone)]
pub struct StageContext {
    pub metrics: StageMetrics,
    pub health: Health,
    pub shutdown: CancellationToken,
}

impl StageContext {
    pub fn new(stage: &str) -> Self {
        Self {
            metrics: StageMetrics::new(stage),
            health: Health::default(),
            shutdown: CancellationToken::new(),
        }
    }
}
