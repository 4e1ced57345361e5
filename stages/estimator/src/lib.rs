//! The estimator stage: keeps every page's request history and emits its download and
//! modification rates (`spec/estimator.md` §2) after each request.

pub mod history;

use std::collections::HashMap;

use clap::Args;
use recrawl_common::runtime::{run_stage, Emitter, RuntimeError, StageError};
use recrawl_common::service::run_service;
use recrawl_common::{InputRecord, KafkaArgs, ServiceArgs, Stage, StageContext, StateStore};
use recrawl_schemas::topics::{CHANGE_EVENTS, DEAD_LETTER, ESTIMATES};
use recrawl_schemas::{ChangeEvent, Format, LastRequest, Message, PageEstimate};
use serde::{Deserialize, Serialize};

use crate::history::{Observation, PageHistory};

pub const STAGE: &str = "estimator";

#[derive(Debug, Clone, Args)]
pub struct EstimatorArgs {
    #[command(flatten)]
    pub kafka: KafkaArgs,
    #[command(flatten)]
    pub service: ServiceArgs,
}

/// What the estimator keeps per URL (changelog `state.estimator`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EstimatorState {
    pub host: String,
    pub group: String,
    pub history: PageHistory,
}

impl Message for EstimatorState {
    const NAME: &'static str = "EstimatorState";
    const FORMAT: Format = Format::Bincode;
}

/// Per group, the first crawl any of this instance's URLs of the group was requested:
/// K counts from there. Derived from the per-URL state, so it is rebuilt after a restore
/// rather than stored.
#[derive(Debug, Default)]
struct GroupClock {
    first_crawl: HashMap<String, u64>,
}

impl GroupClock {
    fn observe(&mut self, group: &str, crawl: u64) -> u64 {
        let first = self.first_crawl.entry(group.to_owned()).or_insert(crawl);
        *first = (*first).min(crawl);
        *first
    }
}

#[derive(Debug, Default)]
pub struct Estimator {
    groups: GroupClock,
}

impl Estimator {
    fn apply(
        &mut self,
        event: &ChangeEvent,
        partition: i32,
        state: &mut StateStore<EstimatorState>,
    ) -> Option<PageEstimate> {
        let entry = state.get_or_insert_with(partition, &event.url, || EstimatorState {
            host: event.host.clone(),
            group: event.group.clone(),
            history: PageHistory::default(),
        });
        let observation = Observation { downloaded: event.downloaded, changed: event.changed };
        if !entry.history.record(event.period, observation) {
            return None;
        }
        let first_request = entry.history.first_request.unwrap_or(event.period);
        let group_first = self.groups.observe(&entry.group, first_request);
        // Periods come from input: saturate rather than overflow on a garbled one.
        let crawls = event.period.saturating_sub(group_first).saturating_add(1);
        let rates = entry.history.rates(crawls);
        let history = &entry.history;
        Some(PageEstimate {
            url: event.url.clone(),
            url_key: event.url_key.clone(),
            host: entry.host.clone(),
            group: entry.group.clone(),
            period: event.period,
            last_request: LastRequest {
                period: event.period,
                downloaded: event.downloaded,
                changed: event.changed,
                size_bytes: event.size_bytes,
                latency_ms: event.latency_ms,
            },
            crawls,
            first_request_period: first_request,
            requests: history.requests,
            successes: history.successes,
            failures: history.failures,
            changes: history.changes,
            request_rate: rates.request_rate,
            download_rate: rates.download_rate,
            download_recall: rates.download_recall,
            modification_rate: rates.modification_rate,
            change_recall: rates.change_recall,
        })
    }
}

impl Stage for Estimator {
    type State = EstimatorState;

    fn name(&self) -> &'static str {
        STAGE
    }

    fn input_topics(&self) -> Vec<&'static str> {
        vec![CHANGE_EVENTS]
    }

    fn output_topics(&self) -> Vec<&'static str> {
        vec![ESTIMATES, DEAD_LETTER]
    }

    fn stateful(&self) -> bool {
        true
    }

    async fn handle(
        &mut self,
        batch: Vec<InputRecord>,
        state: &mut StateStore<EstimatorState>,
        out: &mut Emitter,
    ) -> Result<(), StageError> {
        for record in batch {
            let Some(event) = out.decode_keyed(&record, |e: &ChangeEvent| &e.url) else { continue };
            if let Some(estimate) = self.apply(&event, record.partition, state) {
                out.send(ESTIMATES, &estimate.url, &estimate)?;
            }
        }
        Ok(())
    }

    fn on_restored(&mut self, _partition: i32, state: &StateStore<EstimatorState>) {
        for (_, _, page) in state.iter() {
            if let Some(first) = page.history.first_request {
                self.groups.observe(&page.group, first);
            }
        }
    }
}

/// Runs the estimator until `ctx.shutdown`.
pub async fn run(args: EstimatorArgs, ctx: StageContext) -> Result<(), RuntimeError> {
    run_stage(Estimator::default(), &args.kafka, ctx).await
}

/// The process entry point shared by `recrawl-estimator` and `recrawl stage estimator`.
pub async fn main(args: EstimatorArgs) -> anyhow::Result<()> {
    let service = args.service.clone();
    run_service(STAGE, &service, |ctx| run(args, ctx)).await
}

#[cfg(test)]
mod tests {
    use recrawl_schemas::FetchOutcome;

    use super::*;

    fn event(period: u64, downloaded: bool, changed: Option<bool>) -> ChangeEvent {
        ChangeEvent {
            url: "http://h/a".into(),
            url_key: recrawl_schemas::url_key("http://h/a"),
            host: "h".into(),
            group: "h".into(),
            period,
            downloaded,
            outcome: if downloaded { FetchOutcome::Downloaded } else { FetchOutcome::HttpError },
            http_status: Some(if downloaded { 200 } else { 500 }),
            latency_ms: 3.0,
            size_bytes: 10,
            previous_size_bytes: None,
            update_size: None,
            first_seen: false,
            changed,
            text_changed: changed,
            content_hash: None,
            previous_content_hash: None,
            text_hash: None,
            encoding: None,
            words: None,
            previous_words: None,
            degrees: None,
            fetched_at_ms: 0,
        }
    }

    #[test]
    fn estimates_follow_the_history_and_replays_emit_nothing() {
        let mut estimator = Estimator::default();
        let mut state = StateStore::default();
        let first = estimator.apply(&event(10, false, None), 0, &mut state).unwrap();
        assert_eq!((first.requests, first.crawls, first.download_rate), (1, 1, 0.0));
        let second = estimator.apply(&event(11, true, None), 0, &mut state).unwrap();
        assert_eq!((second.successes, second.crawls), (1, 2));
        assert_eq!(second.download_rate, 0.5);
        assert!(estimator.apply(&event(11, true, Some(true)), 0, &mut state).is_none());
        let third = estimator.apply(&event(12, true, Some(true)), 0, &mut state).unwrap();
        assert_eq!(third.modification_rate, Some(1.0));
        assert_eq!(third.change_recall, Some(0.5));
    }
}
