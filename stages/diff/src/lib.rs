//! The diff stage: keeps the previous version of every page and turns each fetch result
//! into a change event (content hash, changed or not, degree of change).

pub mod change;
pub mod text;

use clap::Args;
use recrawl_common::runtime::{run_stage, Emitter, RuntimeError, StageError};
use recrawl_common::service::run_service;
use recrawl_common::{InputRecord, KafkaArgs, ServiceArgs, Stage, StageContext, StateStore};
use recrawl_schemas::topics::{CHANGE_EVENTS, DEAD_LETTER, FETCH_RESULTS};
use recrawl_schemas::{FetchResult, Format, Message};
use serde::{Deserialize, Serialize};

use crate::change::{compare, PageVersion};

pub const STAGE: &str = "diff";

#[derive(Debug, Clone, Args)]
pub struct DiffArgs {
    #[command(flatten)]
    pub kafka: KafkaArgs,
    #[command(flatten)]
    pub service: ServiceArgs,
}

/// What the diff stage keeps per URL (changelog `state.diff`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DiffState {
    /// The last period applied; a result for this period or an earlier one is a replay.
    pub last_period: u64,
    /// The latest download, if any.
    pub version: Option<PageVersion>,
}

impl Message for DiffState {
    const NAME: &'static str = "DiffState";
    const FORMAT: Format = Format::Bincode;
}

#[derive(Debug, Default)]
pub struct Diff;

impl Stage for Diff {
    type State = DiffState;

    fn name(&self) -> &'static str {
        STAGE
    }

    fn input_topics(&self) -> Vec<&'static str> {
        vec![FETCH_RESULTS]
    }

    fn output_topics(&self) -> Vec<&'static str> {
        vec![CHANGE_EVENTS, DEAD_LETTER]
    }

    fn stateful(&self) -> bool {
        true
    }

    async fn handle(
        &mut self,
        batch: Vec<InputRecord>,
        state: &mut StateStore<DiffState>,
        out: &mut Emitter,
    ) -> Result<(), StageError> {
        for record in batch {
            let Some(result) = out.decode_keyed(&record, |r: &FetchResult| &r.url) else { continue };
            if state.get(record.partition, &result.url).is_some_and(|s| result.period <= s.last_period) {
                continue;
            }
            let page = state.get_or_insert_with(record.partition, &result.url, || DiffState {
                last_period: 0,
                version: None,
            });
            let (event, kept) = compare(page.version.as_ref(), &result);
            page.last_period = result.period;
            page.version = kept;
            out.send(CHANGE_EVENTS, &event.url, &event)?;
        }
        Ok(())
    }
}

/// Runs the diff stage until `ctx.shutdown`.
pub async fn run(args: DiffArgs, ctx: StageContext) -> Result<(), RuntimeError> {
    run_stage(Diff, &args.kafka, ctx).await
}

/// The process entry point shared by `recrawl-diff` and `recrawl stage diff`.
pub async fn main(args: DiffArgs) -> anyhow::Result<()> {
    let service = args.service.clone();
    run_service(STAGE, &service, |ctx| run(args, ctx)).await
}
