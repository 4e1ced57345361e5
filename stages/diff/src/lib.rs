//! The diff stage: keeps the previous version of every page and turns each fetch result
//! into a change event: content and text hashes, and how much the visible text changed
//! by IED and five baselines (`docs/algorithms/change-degree.md`).

#![deny(clippy::unwrap_used, clippy::expect_used, clippy::arithmetic_side_effects)]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used, clippy::arithmetic_side_effects))]

pub mod change;
pub mod criteria;
pub mod degree;
pub mod lcs;
pub mod offline;
pub mod sample;
pub mod text;

use std::time::Instant;

use clap::{Args, ValueEnum};
use prometheus::{Histogram, HistogramOpts, HistogramVec, IntCounterVec, IntGauge, Opts};
use recrawl_common::config::unit_interval;
use recrawl_common::metrics::registered;
use recrawl_common::runtime::{run_stage, DeadLetterKind, Emitter, RuntimeError, SetupError, StageError};
use recrawl_common::service::run_service;
use recrawl_common::{unix_ms, InputRecord, KafkaArgs, ServiceArgs, Stage, StageContext, StateStore};
use recrawl_model::PeriodClock;
use recrawl_schemas::envelope::{decode_as, EnvelopeError, Framed};
use recrawl_schemas::topics::{CHANGE_EVENTS, DEAD_LETTER, FETCH_RESULTS};
use recrawl_schemas::{bounds, ChangeEvent, FetchOutcome, FetchResult, Format, Message, ValidationError};
use serde::{Deserialize, Serialize};

use crate::change::{
    Baselines, DiffSettings, Differ, PageVersion, DEFAULT_MAX_KEPT_BYTES, DEFAULT_MAX_KEPT_WORDS,
};
use crate::degree::{IedCosts, DEFAULT_SKETCH_BYTES};
use crate::sample::NOTHING_KEPT;
use crate::text::CaseFold;

pub const STAGE: &str = "diff";

/// A baseline metric that can be switched on (IED and BW always run).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Baseline {
    Cos,
    Wd,
    Ed,
    Sh,
}

/// How versions are compared; shared by the stage and the offline commands.
#[derive(Debug, Clone, Args)]
pub struct CompareArgs {
    /// IED's copy and shrink cost s, in [0, 1].
    #[arg(long = "ied-s", visible_alias = "s", env = "RECRAWL_DIFF_IED_S", default_value_t = 0.75, value_parser = unit_interval)]
    pub s: f64,
    /// IED's move cost t, in [0, 1].
    #[arg(long = "ied-t", visible_alias = "t", env = "RECRAWL_DIFF_IED_T", default_value_t = 0.75, value_parser = unit_interval)]
    pub t: f64,
    /// k of k-word shingling.
    #[arg(long = "shingle-k", visible_alias = "k", env = "RECRAWL_DIFF_SHINGLE_K", default_value_t = 10,
          value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub k: u32,
    /// Case folding before words are hashed.
    #[arg(long, env = "RECRAWL_DIFF_CASE_FOLD", value_enum, default_value_t = CaseFold::None)]
    pub case_fold: CaseFold,
    /// Words of a page read and compared (the first ones): bounds the work a huge page costs.
    #[arg(long, env = "RECRAWL_DIFF_MAX_WORDS", default_value_t = 100_000,
          value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    pub max_words: u64,
    /// Words of a page kept for the next comparison: past it, a sample chosen by hash
    /// (the same words in every version), 8 bytes each.
    #[arg(long, env = "RECRAWL_DIFF_MAX_KEPT_WORDS", default_value_t = DEFAULT_MAX_KEPT_WORDS as u64,
          value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    pub max_kept_words: u64,
}

#[derive(Debug, Clone, Args)]
pub struct DiffArgs {
    #[command(flatten)]
    pub kafka: KafkaArgs,
    #[command(flatten)]
    pub service: ServiceArgs,
    #[command(flatten)]
    pub compare: CompareArgs,
    /// Baseline metrics computed besides IED and BW (comma-separated).
    #[arg(
        long,
        env = "RECRAWL_DIFF_METRICS",
        value_enum,
        value_delimiter = ',',
        default_value = "cos,wd,ed,sh"
    )]
    pub metrics: Vec<Baseline>,
    /// Bytes of words kept over every page the instance holds; past it a new version
    /// keeps fewer words, or none (its next comparison then says whether the page
    /// changed, without degrees).
    #[arg(long, env = "RECRAWL_DIFF_MAX_KEPT_BYTES", default_value_t = DEFAULT_MAX_KEPT_BYTES,
          value_parser = clap::value_parser!(u64).range(0..=1 << 44))]
    pub max_kept_bytes: u64,
    /// Bytes of COS's document frequencies (a count-min sketch of a fixed size).
    #[arg(long, env = "RECRAWL_DIFF_COS_SKETCH_BYTES", default_value_t = DEFAULT_SKETCH_BYTES as u64,
          value_parser = clap::value_parser!(u64).range(1024..=1 << 34))]
    pub cos_sketch_bytes: u64,
    #[command(flatten)]
    pub clock: PeriodClock,
}

impl DiffArgs {
    pub fn settings(&self) -> DiffSettings {
        let on = |b: Baseline| self.metrics.contains(&b);
        DiffSettings {
            baselines: Baselines {
                cos: on(Baseline::Cos),
                wd: on(Baseline::Wd),
                ed: on(Baseline::Ed),
                sh: on(Baseline::Sh),
            },
            max_kept_bytes: self.max_kept_bytes,
            cos_sketch_bytes: usize::try_from(self.cos_sketch_bytes).unwrap_or(usize::MAX),
            ..self.compare.settings()
        }
    }
}

impl CompareArgs {
    pub fn settings(&self) -> DiffSettings {
        DiffSettings {
            shingle_k: self.k,
            costs: IedCosts { s: self.s, t: self.t },
            case_fold: self.case_fold,
            max_words: usize::try_from(self.max_words).unwrap_or(usize::MAX),
            max_kept_words: usize::try_from(self.max_kept_words).unwrap_or(usize::MAX),
            ..DiffSettings::default()
        }
    }
}

/// What the diff stage keeps per URL (changelog `state.diff`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DiffState {
    /// The latest period applied.
    pub last_period: u64,
    /// The latest download, if any.
    pub version: Option<PageVersion>,
    /// Which of the 64 periods before `last_period` were applied: bit `i` is
    /// period `last_period − 1 − i`. Results can come out of period order (fetch requeues
    /// a pick it could not start behind the URL's later pick), so a result of an earlier
    /// period is a replay only if its period was applied. `None` in version-1 records,
    /// which took every earlier period as applied.
    pub applied_before: Option<u64>,
}

impl Message for DiffState {
    const NAME: &'static str = "DiffState";
    const FORMAT: Format = Format::Bincode;
    /// 2: `applied_before`, so late results are not taken for replays.
    const VERSION: u16 = 2;
    /// Version 1 ends before `applied_before`, the last field.
    const ADDED_TRAILING_OPTIONS: usize = 1;

    /// The periods and the size a change event repeats: out of range, every event of the
    /// URL would be refused downstream.
    fn validate(&self) -> Result<(), ValidationError> {
        bounds::period(self.last_period)?;
        if let Some(version) = &self.version {
            bounds::period(version.period)?;
            bounds::size_bytes("version.size_bytes", version.size_bytes)?;
        }
        Ok(())
    }

    fn read_earlier(framed: &Framed<'_>, bytes: &[u8]) -> Result<Self, EnvelopeError> {
        decode_as(framed, bytes)
    }
}

impl DiffState {
    /// The state of a URL whose first result is of `period`.
    fn starting_at(period: u64) -> Self {
        Self { last_period: period, version: None, applied_before: Some(0) }
    }

    /// Whether a result of `period` was applied already. One older than the 64 periods
    /// kept is taken as new: a duplicate event is better than a lost one.
    fn is_replay(&self, period: u64) -> bool {
        match self.last_period.checked_sub(period) {
            None => false,
            Some(0) => true,
            Some(back) => self.applied_before.is_none_or(|applied| applied & period_bit(back) != 0),
        }
    }

    fn mark_applied(&mut self, period: u64) {
        match period.checked_sub(self.last_period) {
            Some(0) => {}
            Some(ahead) => {
                let earlier = self.applied_before.unwrap_or(u64::MAX);
                self.applied_before = Some(shifted(earlier, ahead) | period_bit(ahead));
                self.last_period = period;
            }
            None => {
                let back = self.last_period.saturating_sub(period);
                if let Some(applied) = &mut self.applied_before {
                    *applied |= period_bit(back);
                }
            }
        }
    }
}

/// The bit of [`DiffState::applied_before`] for the period `back` periods before the
/// latest (`back` ≥ 1); 0 outside the window.
fn period_bit(back: u64) -> u64 {
    shifted(1, back.saturating_sub(1))
}

/// `bits` shifted left by `by`, 0 when everything is shifted out.
fn shifted(bits: u64, by: u64) -> u64 {
    u32::try_from(by).ok().and_then(|by| bits.checked_shl(by)).unwrap_or(0)
}

#[derive(Debug, Clone)]
struct DiffMetrics {
    events: IntCounterVec,
    degrees: HistogramVec,
    compare_seconds: Histogram,
    corpus_documents: IntGauge,
    corpus_words: IntGauge,
    kept_bytes: IntGauge,
    versions_kept: IntCounterVec,
    reset: prometheus::IntCounter,
}

impl DiffMetrics {
    fn register(registry: &prometheus::Registry, sketch: usize) -> Result<Self, prometheus::Error> {
        let events = registered(
            registry,
            IntCounterVec::new(
                Opts::new(
                    "diff_events_total",
                    "Change events by result: first_seen, changed, text_unchanged (markup only), unchanged, uncompared (a download of a type diff does not read, or late: a later one is kept), not_downloaded.",
                ),
                &["result"],
            )?,
        )?;
        let degrees = registered(
            registry,
            HistogramVec::new(
                HistogramOpts::new(
                    "diff_change_degree_ratio",
                    "Degree of change (0 to 1) of changed downloads, by metric.",
                )
                .buckets(vec![0.001, 0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0]),
                &["metric"],
            )?,
        )?;
        let compare_seconds = registered(
            registry,
            Histogram::with_opts(
                HistogramOpts::new(
                    "diff_compare_seconds",
                    "Time to decode, extract and compare one download.",
                )
                .buckets(prometheus::exponential_buckets(0.000_01, 4.0, 10)?),
            )?,
        )?;
        let corpus_documents = registered(
            registry,
            IntGauge::new("diff_corpus_documents", "Documents in COS's document frequencies.")?,
        )?;
        let corpus_words = registered(
            registry,
            IntGauge::new("diff_corpus_words", "Distinct words in COS's document frequencies.")?,
        )?;
        let kept_bytes = registered(
            registry,
            IntGauge::new(
                "diff_kept_word_bytes",
                "Bytes of word hashes the pages held keep (at most --max-kept-bytes).",
            )?,
        )?;
        let sketch_bytes = registered(
            registry,
            IntGauge::new(
                "diff_cos_sketch_bytes",
                "Bytes of COS's document frequencies (--cos-sketch-bytes).",
            )?,
        )?;
        let versions_kept = registered(
            registry,
            IntCounterVec::new(
                Opts::new(
                    "diff_versions_kept_total",
                    "Downloads kept as a page's version, by what was kept of its words: all, a sample (past --max-kept-words, or what --max-kept-bytes left), none (the budget spent: its next comparison has no degrees).",
                ),
                &["words"],
            )?,
        )?;
        let reset = registered(
            registry,
            prometheus::IntCounter::new(
                "diff_states_reset_total",
                "Pages whose kept state was of a period not yet begun (a record from the future before diff checked periods, or a wrong clock): dropped at the page's next result, which is then its first.",
            )?,
        )?;
        sketch_bytes.set(i64::try_from(sketch).unwrap_or(i64::MAX));
        // At 0 from the start, so an alert sees the first of each.
        for words in ["all", "sample", "none"] {
            versions_kept.with_label_values(&[words]).reset();
        }
        for result in ["first_seen", "changed", "text_unchanged", "unchanged", "uncompared", "not_downloaded"]
        {
            events.with_label_values(&[result]).reset();
        }
        for (name, _) in change::METRICS {
            let _empty = degrees.with_label_values(&[name]);
        }
        Ok(Self {
            events,
            degrees,
            compare_seconds,
            corpus_documents,
            corpus_words,
            kept_bytes,
            versions_kept,
            reset,
        })
    }

    fn record(&self, event: &ChangeEvent) {
        let result = match (event.downloaded, event.first_seen, event.changed, event.text_changed) {
            (false, ..) => "not_downloaded",
            (true, true, ..) => "first_seen",
            (true, false, Some(true), Some(false)) => "text_unchanged",
            (true, false, Some(true), _) => "changed",
            (true, false, Some(false), _) => "unchanged",
            (true, false, None, _) => "uncompared",
        };
        self.events.with_label_values(&[result]).inc();
        if let Some(degrees) = event.degrees.as_ref().filter(|_| event.changed == Some(true)) {
            for (name, read) in change::METRICS {
                if let Some(value) = read(degrees) {
                    self.degrees.with_label_values(&[name]).observe(value);
                }
            }
        }
    }

    fn corpus(&self, differ: &Differ) {
        self.corpus_documents.set(differ.corpus().documents() as i64);
        self.corpus_words.set(differ.corpus().vocabulary() as i64);
        self.kept_bytes.set(i64::try_from(differ.kept_bytes()).unwrap_or(i64::MAX));
    }

    /// Counts what was kept of a download now held as its page's version.
    fn kept(&self, version: &PageVersion) {
        let words = match version.words.level {
            0 => "all",
            NOTHING_KEPT => "none",
            _ => "sample",
        };
        self.versions_kept.with_label_values(&[words]).inc();
    }
}

#[derive(Debug)]
pub struct Diff {
    differ: Differ,
    metrics: DiffMetrics,
    clock: PeriodClock,
}

impl Diff {
    pub fn new(
        settings: DiffSettings,
        clock: PeriodClock,
        registry: &prometheus::Registry,
    ) -> Result<Self, prometheus::Error> {
        let metrics = DiffMetrics::register(registry, settings.cos_sketch_bytes)?;
        Ok(Self { differ: Differ::new(settings), metrics, clock })
    }
}

impl Diff {
    /// The change event of `result`, its URL's state updated; `None` for a replay. A URL
    /// with no state whose result made no request (robots.txt denied it, or it was
    /// deferred) gets none: it has no version to keep, its event repeated on a replay is
    /// one the estimator ignores (it counts requests only), and the scheduler does not
    /// track such a URL, so a state kept for each would grow with every URL a site denies.
    /// A URL whose host resolves to an address the fetcher refuses is forgotten, as the
    /// scheduler forgets it, for the same reason. Either result, replayed, finds no state
    /// and is answered again: the estimator and the scheduler take the repeat as they
    /// take any replay.
    fn apply(
        &mut self,
        state: &mut StateStore<DiffState>,
        partition: i32,
        result: &FetchResult,
        now_ms: i64,
    ) -> Option<ChangeEvent> {
        self.forget_if_from_the_future(state, partition, &result.url, now_ms);
        let known = state.get(partition, &result.url);
        if known.is_some_and(|page| page.is_replay(result.period)) {
            return None;
        }
        let started = Instant::now();
        // Only the URL's latest result: a late one is stale to the estimator, which then
        // sends the scheduler nothing, and the scheduler keeps the URL.
        let forgotten = result.outcome == FetchOutcome::BlockedAddress
            && known.is_none_or(|page| result.period >= page.last_period);
        let event = if known.is_none() && (forgotten || !result.outcome.is_request()) {
            self.differ.apply(&mut None, result)
        } else {
            let page =
                state.get_or_insert_with(partition, &result.url, || DiffState::starting_at(result.period));
            let event = self.differ.apply(&mut page.version, result);
            if let Some(version) = page
                .version
                .as_ref()
                .filter(|v| result.outcome == FetchOutcome::Downloaded && v.period == result.period)
            {
                self.metrics.kept(version);
            }
            page.mark_applied(result.period);
            event
        };
        if forgotten {
            if let Some(version) = state.remove(partition, &result.url).and_then(|page| page.version) {
                self.differ.release(&version);
            }
        }
        self.metrics.compare_seconds.observe(started.elapsed().as_secs_f64());
        self.metrics.record(&event);
        Some(event)
    }

    /// Drops the state of `url` if its latest period has not begun: a record from the
    /// future, kept before diff checked periods (or under a wrong clock), would take every
    /// real result of the URL for a late one, compared with nothing. Its next result is
    /// then its first.
    fn forget_if_from_the_future(
        &mut self,
        state: &mut StateStore<DiffState>,
        partition: i32,
        url: &str,
        now_ms: i64,
    ) {
        let Some(ahead) =
            state.get(partition, url).and_then(|page| self.clock.ahead(page.last_period, now_ms))
        else {
            return;
        };
        tracing::warn!(url, ahead, "a page's kept state is from the future: starting it afresh");
        if let Some(version) = state.remove(partition, url).and_then(|page| page.version) {
            self.differ.release(&version);
        }
        self.metrics.reset.inc();
    }
}

impl Stage for Diff {
    type State = DiffState;

    const NAME: &'static str = STAGE;
    const INPUTS: &'static [&'static str] = &[FETCH_RESULTS.name];
    const OUTPUTS: &'static [&'static str] = &[CHANGE_EVENTS.name, DEAD_LETTER];

    async fn handle(
        &mut self,
        batch: Vec<InputRecord>,
        state: &mut StateStore<DiffState>,
        out: &mut Emitter,
    ) -> Result<(), StageError> {
        let now_ms = unix_ms();
        for record in batch {
            let Some(result) = out.decode_keyed(&record, FETCH_RESULTS) else { continue };
            // Kept, it would make every real result of the URL look late: compared with
            // nothing, for good.
            if let Some(ahead) = self.clock.ahead(result.period, now_ms) {
                out.dead_letter(&record, DeadLetterKind::Invalid, ahead);
                continue;
            }
            if let Some(event) = self.apply(state, record.partition, &result, now_ms) {
                out.send(CHANGE_EVENTS, &event)?;
            }
        }
        self.metrics.corpus(&self.differ);
        Ok(())
    }

    fn on_restored(&mut self, partition: i32, state: &mut StateStore<DiffState>) {
        for (_, page) in state.partition(partition) {
            if let Some(version) = &page.version {
                self.differ.hold(version);
            }
        }
        self.metrics.corpus(&self.differ);
    }

    /// Each record as it is read: a version kept under larger caps (an earlier build,
    /// other flags) is sampled down to the page's cap and to what the budget has left, so
    /// a restore needs no more memory than the stage at work. A record replacing an
    /// earlier one of its key (a changelog not yet compacted) gives its words back first.
    fn restored_record_bound(
        &self,
    ) -> impl FnMut(Option<&mut DiffState>, Option<&DiffState>) + Send + 'static {
        let settings = self.differ.settings();
        let (per_page, budget) = (settings.max_kept_words, settings.max_kept_bytes);
        let mut held = self.differ.kept_bytes();
        let words = |page: &DiffState| page.version.as_ref().map_or(0, |version| version.words.bytes());
        move |page: Option<&mut DiffState>, replaced: Option<&DiffState>| {
            held = held.saturating_sub(replaced.map_or(0, words));
            if let Some(version) = page.and_then(|page| page.version.as_mut()) {
                let left = usize::try_from(budget.saturating_sub(held) / 8).unwrap_or(usize::MAX);
                Differ::fit(version, per_page.min(left));
                held = held.saturating_add(version.words.bytes());
            }
        }
    }

    fn on_revoked(&mut self, partition: i32, state: &StateStore<DiffState>) {
        for (_, page) in state.partition(partition) {
            if let Some(version) = &page.version {
                self.differ.release(version);
            }
        }
        self.metrics.corpus(&self.differ);
    }
}

/// Runs the diff stage until `ctx.shutdown`.
pub async fn run(args: DiffArgs, ctx: StageContext) -> Result<(), RuntimeError> {
    let diff = Diff::new(args.settings(), args.clock, ctx.metrics.registry())
        .map_err(|source| SetupError::Metrics { stage: STAGE, source })?;
    run_stage(diff, &args.kafka, ctx).await
}

/// The process entry point shared by `recrawl-diff` and `recrawl stage diff`.
pub async fn main(args: DiffArgs) -> anyhow::Result<()> {
    let service = args.service.clone();
    run_service(STAGE, &service, |ctx| run(args, ctx)).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::change::WordHashes;

    #[test]
    fn the_state_round_trips_through_the_envelope() {
        let state = DiffState {
            last_period: 4,
            version: Some(PageVersion {
                content_hash: u128::MAX - 1,
                text_hash: 8,
                size_bytes: 9,
                period: 4,
                word_count: 3,
                words: WordHashes::whole(vec![1, u64::MAX, 42]),
            }),
            applied_before: Some(0b101),
        };
        let bytes = recrawl_schemas::encode(&state).expect("encode");
        assert_eq!(recrawl_schemas::decode::<DiffState>(&bytes).expect("decode"), state);
        assert_eq!(state.validate(), Ok(()));
        // A sample's level rides after the hashes; a whole page's record is as before.
        let mut sampled = state.clone();
        if let Some(version) = &mut sampled.version {
            version.words.level = 3;
        }
        let sampled_bytes = recrawl_schemas::encode(&sampled).expect("encode");
        assert_eq!(sampled_bytes.len(), bytes.len() + 1);
        assert_eq!(recrawl_schemas::decode::<DiffState>(&sampled_bytes).expect("decode"), sampled);
        // A size past what a change event may carry would make every event of the URL
        // one its readers refuse.
        let forged = DiffState {
            version: state.version.clone().map(|version| PageVersion { size_bytes: u64::MAX, ..version }),
            ..state
        };
        assert!(forged.validate().is_err_and(|error| error.to_string().starts_with("version.size_bytes")));
    }

    #[test]
    fn a_state_from_the_future_is_forgotten_and_the_next_download_kept() {
        let registry = prometheus::Registry::new();
        let clock = PeriodClock { period_ms: 60_000, epoch_unix_ms: 0 };
        let mut diff = Diff::new(DiffSettings::default(), clock, &registry).unwrap();
        let url = "http://a.test/page.html";
        let now_ms = 10 * 60_000;
        let forged = FetchResult::html_page(url, "a.test", bounds::MAX_PERIOD, "<p>from the future</p>");
        let mut store = StateStore::default();
        let page = store.get_or_insert_with(0, url, || DiffState::starting_at(forged.period));
        diff.differ.apply(&mut page.version, &forged);
        page.mark_applied(forged.period);
        assert!(diff.differ.kept_bytes() > 0);
        // A URL whose state is of a period begun is left alone.
        diff.forget_if_from_the_future(&mut store, 0, "http://a.test/other.html", now_ms);
        let real = FetchResult::html_page(url, "a.test", 9, "<p>today</p>");
        assert!(!store.get(0, url).unwrap().is_replay(real.period), "taken as new, yet late:");
        diff.forget_if_from_the_future(&mut store, 0, url, now_ms);
        assert!(store.get(0, url).is_none());
        assert_eq!(diff.differ.kept_bytes(), 0, "its version let go");
        assert_eq!(diff.metrics.reset.get(), 1);
        let page = store.get_or_insert_with(0, url, || DiffState::starting_at(real.period));
        let event = diff.differ.apply(&mut page.version, &real);
        assert!(event.first_seen && page.version.as_ref().is_some_and(|v| v.period == 9));
    }

    #[test]
    fn only_the_urls_the_scheduler_tracks_keep_a_state() {
        let registry = prometheus::Registry::new();
        let clock = PeriodClock { period_ms: 60_000, epoch_unix_ms: 0 };
        let mut diff = Diff::new(DiffSettings::default(), clock, &registry).unwrap();
        let now_ms = 10 * 60_000;
        let mut store = StateStore::default();
        // A site denying every URL it links to: each denial is an event, none a state.
        for (index, outcome) in
            [FetchOutcome::RobotsDenied, FetchOutcome::Deferred].into_iter().cycle().take(100).enumerate()
        {
            let url = format!("http://denying.test/{index}.html");
            let result = FetchResult { outcome, ..FetchResult::html_page(&url, "denying.test", 5, "") };
            let event = diff.apply(&mut store, 0, &result, now_ms).expect("an event");
            assert_eq!(event.outcome, outcome);
        }
        assert_eq!(store.partition(0).count(), 0, "nothing kept of URLs never requested");
        // A request does keep one, and a later denial of a known URL is applied to it.
        let url = "http://a.test/page.html";
        let failed = FetchResult {
            outcome: FetchOutcome::HttpStatus,
            http_status: Some(503),
            ..FetchResult::html_page(url, "a.test", 5, "")
        };
        assert!(diff.apply(&mut store, 0, &failed, now_ms).is_some());
        assert_eq!(store.get(0, url).map(|page| page.last_period), Some(5));
        let denied = FetchResult {
            outcome: FetchOutcome::RobotsDenied,
            ..FetchResult::html_page(url, "a.test", 6, "")
        };
        assert!(diff.apply(&mut store, 0, &denied, now_ms).is_some());
        assert_eq!(store.get(0, url).map(|page| page.last_period), Some(6));
        assert!(diff.apply(&mut store, 0, &denied, now_ms).is_none(), "a replay");
        let downloaded = FetchResult::html_page(url, "a.test", 7, "<p>at last</p>");
        let event = diff.apply(&mut store, 0, &downloaded, now_ms).expect("an event");
        assert!(event.first_seen && store.get(0, url).is_some_and(|page| page.version.is_some()));
        // A refused address of an earlier period, come late, changes nothing: the
        // estimator takes it as stale and the scheduler keeps the URL.
        let late = FetchResult {
            outcome: FetchOutcome::BlockedAddress,
            ..FetchResult::html_page(url, "a.test", 6, "")
        };
        assert!(diff.apply(&mut store, 0, &late, now_ms).is_none(), "period 6 was applied");
        let late = FetchResult { period: 4, ..late };
        assert!(diff.apply(&mut store, 0, &late, now_ms).is_some());
        assert!(store.get(0, url).is_some_and(|page| page.version.as_ref().is_some_and(|v| v.period == 7)));
        // An address the fetcher refuses: the scheduler forgets the URL, and so does diff,
        // its kept words given back; a URL first seen so keeps nothing.
        assert!(diff.differ.kept_bytes() > 0);
        for (url, period) in [(url, 8), ("http://private.test/", 8)] {
            let blocked = FetchResult {
                outcome: FetchOutcome::BlockedAddress,
                ..FetchResult::html_page(url, "a.test", period, "")
            };
            let event = diff.apply(&mut store, 0, &blocked, now_ms).expect("an event");
            assert_eq!(event.outcome, FetchOutcome::BlockedAddress);
        }
        assert_eq!(store.partition(0).count(), 0);
        assert_eq!(diff.differ.kept_bytes(), 0);
    }

    #[test]
    fn results_out_of_period_order_are_applied_once_each() {
        let mut state = DiffState::starting_at(10);
        let mut applied = Vec::new();
        for period in [10, 12, 11, 11, 12, 10, 9, 9, 200, 199, 12, 12, 200] {
            if !state.is_replay(period) {
                state.mark_applied(period);
                applied.push(period);
            }
        }
        // 12 is 188 periods behind 200, out of the window: taken as new every time.
        assert_eq!(applied, [12, 11, 9, 200, 199, 12, 12]);
        assert_eq!((state.last_period, state.applied_before), (200, Some(1)));
    }

    #[test]
    fn a_version_1_record_reads_back_taking_earlier_periods_as_applied() {
        // As version 1 wrote it: this layout without the trailing `None` tag, under
        // version 1 in the envelope.
        let state = DiffState { last_period: 7, version: None, applied_before: None };
        let mut bytes = recrawl_schemas::encode(&state).expect("encode");
        assert_eq!(bytes.pop(), Some(0), "the None tag ends the record");
        bytes[2..4].copy_from_slice(&1u16.to_be_bytes());
        let mut old = recrawl_schemas::decode::<DiffState>(&bytes).expect("decode");
        assert_eq!(old, state);
        assert!((0..=7).all(|period| old.is_replay(period)), "as version 1 took them");
        old.mark_applied(9);
        assert!(!old.is_replay(8), "the gap after the version-1 record was never applied");
        assert!([9, 7, 6, 0].iter().all(|&period| old.is_replay(period)));
        assert_eq!(old.applied_before, Some(!0b01));
    }
}
