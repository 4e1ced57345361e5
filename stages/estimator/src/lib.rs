//! The estimator stage: keeps every page's download and modification history, the
//! running DR/MR distributions of every group (shared by all instances through the
//! `distributions` topic), and after each request publishes the page's rates, forecasts
//! and refresh plan (`docs/algorithms/estimator.md`, `docs/algorithms/refresh-groups.md` §1–3).

#![deny(clippy::unwrap_used, clippy::expect_used, clippy::arithmetic_side_effects)]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used, clippy::arithmetic_side_effects))]

pub mod claims;
pub mod distribution;
pub mod estimate;
pub mod offline;

use std::time::Duration;

use clap::Args;
use prometheus::{Histogram, HistogramOpts, IntCounterVec, IntGaugeVec, Opts};
use recrawl_common::config::unit_interval;
use recrawl_common::metrics::registered;
use recrawl_common::runtime::{run_stage, DeadLetterKind, Emitter, RuntimeError, SetupError, StageError};
use recrawl_common::service::run_service;
use recrawl_common::{unix_ms, InputRecord, KafkaArgs, ServiceArgs, Stage, StageContext, StateStore};
use recrawl_schemas::topics::{
    ANNOUNCEMENTS, CHANGE_EVENTS, DEAD_LETTER, DISTRIBUTIONS, ESTIMATES, HOST_TRUST,
};
use recrawl_schemas::{bounds, ForecastPrior};

use crate::distribution::{DistributionBook, Filed};
use crate::estimate::Estimator;
pub use crate::estimate::{Applied, EstimatorState, GroupBy, LastResponse, Settings, DEFAULT_MAX_GROUPS};
use recrawl_model::page::RateSource;
use recrawl_model::prediction::{Eligibility, Model};
use recrawl_model::refresh::{CrawlTimeConfig, RefreshSettings};
use recrawl_model::{
    latest_read_ms, period_ahead, DEFAULT_EPOCH_UNIX_MS, DEFAULT_PERIOD_MS, MAX_PERIOD_MS, MIN_PERIOD_MS,
};

pub const STAGE: &str = "estimator";

/// How often an idle instance files the other instances' shares and refreshes its gauges.
const TICK: Duration = Duration::from_secs(1);

/// How the estimator groups, thresholds and predicts; shared by the stage and the tools.
#[derive(Debug, Clone, Args)]
pub struct EstimateArgs {
    /// What a URL's group is: its host, or its site (registered domain).
    #[arg(long, env = "RECRAWL_ESTIMATOR_GROUP_BY", value_enum, default_value_t = GroupBy::Host)]
    pub group_by: GroupBy,
    /// Prediction model: `paper` reproduces the paper's formula.
    #[arg(long, env = "RECRAWL_ESTIMATOR_MODEL", value_enum, default_value_t)]
    pub model: Model,
    /// Latest requests (and comparisons) a forecast conditions on.
    #[arg(long, env = "RECRAWL_ESTIMATOR_WINDOW", default_value_t = 5,
          value_parser = clap::value_parser!(u32).range(1..=63))]
    pub window: u32,
    /// Requests (and comparisons) a forecast covers: k.
    #[arg(long, env = "RECRAWL_ESTIMATOR_FUTURE", default_value_t = 5,
          value_parser = clap::value_parser!(u32).range(1..=64))]
    pub future: u32,
    /// A URL counts in its group's distributions from this request rate on (0: every URL;
    /// the paper's 0.9 assumes every URL is requested every crawl).
    #[arg(long, env = "RECRAWL_ESTIMATOR_MIN_REQUEST_RATE", default_value_t = Eligibility::default().min_request_rate, value_parser = unit_interval)]
    pub min_request_rate: f64,
    /// ... and from this download recall (DR) or change recall (MR) on (the paper: 0.2).
    #[arg(long, env = "RECRAWL_ESTIMATOR_MIN_RECALL", default_value_t = Eligibility::default().min_recall, value_parser = unit_interval)]
    pub min_recall: f64,
    /// Days of changes the weekly change rate is over.
    #[arg(long, env = "RECRAWL_ESTIMATOR_LEARNING_WINDOW_DAYS", default_value_t = 28,
          value_parser = clap::value_parser!(u16).range(1..=366))]
    pub learning_window_days: u16,
    /// Local time for weekdays and hours of changes, minutes east of UTC (540 for KST).
    #[arg(long, env = "RECRAWL_ESTIMATOR_UTC_OFFSET_MINUTES", default_value_t = 0,
          value_parser = clap::value_parser!(i32).range(-720..=840))]
    pub utc_offset_minutes: i32,
    /// Changes from this hour on (to --day-end-hour) are day changes, crawled at midnight.
    #[arg(long, env = "RECRAWL_ESTIMATOR_DAY_START_HOUR", default_value_t = 9,
          value_parser = clap::value_parser!(u8).range(0..=23))]
    pub day_start_hour: u8,
    /// The hour (local) at which day changes end, exclusive: changes from then until
    /// --day-start-hour are night changes.
    #[arg(long, env = "RECRAWL_ESTIMATOR_DAY_END_HOUR", default_value_t = 18,
          value_parser = clap::value_parser!(u8).range(1..=24))]
    pub day_end_hour: u8,
    /// Length of the scheduler's period, milliseconds (its --period-ms, read from the same
    /// variable): change rates are per period, and `Last-Modified` dates are times.
    #[arg(long, env = "RECRAWL_PERIOD_MS", default_value_t = DEFAULT_PERIOD_MS,
          value_parser = clap::value_parser!(u64).range(MIN_PERIOD_MS..=MAX_PERIOD_MS))]
    pub period_ms: u64,
    /// Most groups kept from other instances' distribution shares; past it, shares of new
    /// groups are refused (recrawl_estimator_distribution_records_total{result="full"}). Each
    /// group costs memory on every instance, and group names come from a topic.
    #[arg(long, env = "RECRAWL_ESTIMATOR_MAX_GROUPS", default_value_t = DEFAULT_MAX_GROUPS,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    pub max_groups: usize,
}

impl EstimateArgs {
    pub fn settings(&self) -> Settings {
        Settings {
            group_by: self.group_by,
            model: self.model,
            window: self.window,
            future: self.future,
            eligibility: Eligibility { min_request_rate: self.min_request_rate, min_recall: self.min_recall },
            refresh: RefreshSettings {
                window_days: self.learning_window_days,
                utc_offset_minutes: self.utc_offset_minutes,
                crawl_time: CrawlTimeConfig {
                    day_start_hour: self.day_start_hour,
                    day_end_hour: self.day_end_hour,
                    ..CrawlTimeConfig::default()
                },
            },
            period_ms: self.period_ms,
            max_groups: self.max_groups,
        }
    }
}

#[derive(Debug, Clone, Args)]
pub struct EstimatorArgs {
    #[command(flatten)]
    pub kafka: KafkaArgs,
    #[command(flatten)]
    pub service: ServiceArgs,
    #[command(flatten)]
    pub estimate: EstimateArgs,
    /// Groups whose distributions are exported as Prometheus gauges (comma-separated);
    /// a list rather than every group keeps the label set bounded.
    #[arg(long, env = "RECRAWL_ESTIMATOR_METRICS_GROUPS", value_delimiter = ',')]
    pub metrics_groups: Vec<String>,
    /// Start of the scheduler's period 0, Unix milliseconds (its --epoch-unix-ms, read
    /// from the same variable): a change event of a period that has not begun goes to the
    /// dead-letter topic.
    #[arg(long, env = "RECRAWL_EPOCH_UNIX_MS", default_value_t = DEFAULT_EPOCH_UNIX_MS,
          value_parser = clap::value_parser!(i64).range(0..=bounds::MAX_TIME_MS))]
    pub epoch_unix_ms: i64,
}

#[derive(Debug, Clone)]
struct EstimatorMetrics {
    events: IntCounterVec,
    forecast_priors: IntCounterVec,
    rate_sources: IntCounterVec,
    pace_disagreements: prometheus::IntCounter,
    revised: prometheus::IntCounter,
    shares: IntCounterVec,
    announcements: IntCounterVec,
    trust_records: IntCounterVec,
    group_partitions: IntGaugeVec,
    group_urls: IntGaugeVec,
    group_requests: IntGaugeVec,
    group_bins: IntGaugeVec,
    predicted_change: Histogram,
    groups: Vec<String>,
}

impl EstimatorMetrics {
    fn register(registry: &prometheus::Registry, groups: Vec<String>) -> Result<Self, prometheus::Error> {
        let counter = |name: &str, help: &str, labels: &[&str]| -> Result<IntCounterVec, prometheus::Error> {
            registered(registry, IntCounterVec::new(Opts::new(name, help), labels)?)
        };
        let gauge = |name: &str, help: &str, labels: &[&str]| -> Result<IntGaugeVec, prometheus::Error> {
            registered(registry, IntGaugeVec::new(Opts::new(name, help), labels)?)
        };
        let metrics = Self {
            events: counter(
                "estimator_events_total",
                "Change events by result: applied, repeated (the latest again), stale (older).",
                &["result"],
            )?,
            forecast_priors: counter(
                "estimator_forecasts_total",
                "Forecasts by kind (downloads, changes) and prior (group, uniform, none).",
                &["kind", "prior"],
            )?,
            rate_sources: counter(
                "estimator_rate_sources_total",
                "New estimates by what their change rate rests on: dates (believed Last-Modified), comparisons, prior (nothing yet).",
                &["source"],
            )?,
            pace_disagreements: registered(
                registry,
                prometheus::IntCounter::new(
                    "estimator_period_disagreements_total",
                    "Requests 4 periods or more after the URL's previous one whose spacing is under half or over twice what --period-ms gives: the estimator's period is not the scheduler's.",
                )?,
            )?,
            revised: registered(
                registry,
                prometheus::IntCounter::new(
                    "estimator_revised_estimates_total",
                    "Estimates sent again with a revised change rate because the verdict on their group's server (whether it dates changes truthfully) turned, so their proven Last-Modified dates came to count or stopped counting.",
                )?,
            )?,
            shares: counter(
                "estimator_distribution_records_total",
                "Distribution shares read from the topic: kept, stale, invalid (undecodable, inconsistent, from the future or of a partition the input topics lack), full (a new group past --max-groups).",
                &["result"],
            )?,
            announcements: counter(
                "estimator_announcements_total",
                "Announcements read by what became of their claim: counted (in the URL's claimed changes), not_counted (a feed's, a date within the day, an older document), undated, untracked (a URL never requested), implausible (read after its period or now).",
                &["result"],
            )?,
            trust_records: counter(
                "estimator_host_trust_records_total",
                "Host-trust records read: kept, dropped (a partition's share of no claims), full (a new host past --max-groups), invalid (undecodable or of a partition the input topics lack).",
                &["result"],
            )?,
            group_partitions: gauge(
                "estimator_group_partitions",
                "Partitions whose share of the group this instance holds.",
                &["group"],
            )?,
            group_urls: gauge("estimator_group_urls", "URLs of the group, over all partitions.", &["group"])?,
            group_requests: gauge(
                "estimator_group_requests",
                "Requests applied to the group's URLs, over all partitions.",
                &["group"],
            )?,
            group_bins: gauge(
                "estimator_group_distribution",
                "Eligible URLs of the group per bin of the paper's 12 (bin 0 = {0}, 11 = {1}), kind download or change.",
                &["group", "kind", "bin"],
            )?,
            predicted_change: registered(
                registry,
                Histogram::with_opts(
                HistogramOpts::new(
                    "estimator_predicted_change_ratio",
                    "Each new estimate's probability of a change at the URL's next comparison: its mean (_sum / _count) is the predicted change share.",
                )
                .buckets(prometheus::linear_buckets(0.1, 0.1, 10)?),
                )?,
            )?,
            groups,
        };
        // At 0 from the start, so an alert sees the first of each.
        for result in ["applied", "repeated", "stale", "not_a_request"] {
            metrics.events.with_label_values(&[result]).reset();
        }
        for kind in ["downloads", "changes"] {
            for prior in ["group", "uniform", "none"] {
                metrics.forecast_priors.with_label_values(&[kind, prior]).reset();
            }
        }
        for source in [RateSource::Claims, RateSource::Dates, RateSource::Comparisons, RateSource::Prior] {
            metrics.rate_sources.with_label_values(&[source.as_str()]).reset();
        }
        for result in ["kept", "stale", "invalid", "full"] {
            metrics.shares.with_label_values(&[result]).reset();
        }
        for result in ["counted", "not_counted", "undated", "untracked", "implausible"] {
            metrics.announcements.with_label_values(&[result]).reset();
        }
        for result in ["kept", "dropped", "full", "invalid"] {
            metrics.trust_records.with_label_values(&[result]).reset();
        }
        Ok(metrics)
    }

    fn record(&self, applied: &Applied) {
        let (result, estimate) = match applied {
            Applied::New(estimate, noted) => {
                // Repeats are left out: a replayed event must not count its forecast twice.
                self.predicted_change.observe(estimate.changes_forecast.next.clamp(0.0, 1.0));
                self.rate_sources.with_label_values(&[noted.rate_source.as_str()]).inc();
                if noted.pace_disagrees {
                    self.pace_disagreements.inc();
                }
                ("applied", Some(estimate))
            }
            Applied::Repeated(estimate) => ("repeated", Some(estimate)),
            Applied::Stale => ("stale", None),
            Applied::NotARequest => ("not_a_request", None),
        };
        self.events.with_label_values(&[result]).inc();
        if let Some(estimate) = estimate {
            for (kind, forecast) in
                [("downloads", &estimate.downloads), ("changes", &estimate.changes_forecast)]
            {
                let prior = match forecast.prior {
                    ForecastPrior::Group => "group",
                    ForecastPrior::Uniform => "uniform",
                    ForecastPrior::None => "none",
                };
                self.forecast_priors.with_label_values(&[kind, prior]).inc();
            }
        }
    }

    fn groups(&self, book: &DistributionBook) {
        for group in &self.groups {
            let Some(totals) = book.totals(group) else { continue };
            let labels = [group.as_str()];
            self.group_partitions.with_label_values(&labels).set(totals.partitions as i64);
            self.group_urls.with_label_values(&labels).set(totals.urls as i64);
            self.group_requests.with_label_values(&labels).set(totals.requests as i64);
            for (kind, bins) in [("download", totals.download), ("change", totals.change)] {
                for (bin, count) in bins.iter().enumerate() {
                    let bin = bin.to_string();
                    self.group_bins.with_label_values(&[group.as_str(), kind, &bin]).set(*count as i64);
                }
            }
        }
    }
}

/// The stage: [`Estimator`] fed from Kafka.
#[derive(Debug)]
pub struct EstimatorStage {
    estimator: Estimator,
    metrics: EstimatorMetrics,
    next_tick: tokio::time::Instant,
    epoch_unix_ms: i64,
    /// The input topics' partition count (`on_assigned`, told before any share is read).
    input_partitions: i32,
    /// Whether the book's refusing new groups was logged.
    said_full: bool,
}

impl EstimatorStage {
    fn file_share(&mut self, record: &InputRecord) {
        let period_ms = self.estimator.settings().period_ms;
        let epoch_unix_ms = self.epoch_unix_ms;
        // How far ahead of the clock the share's period is, read before the match: an
        // `if let` guard needs a newer Rust than the declared rust-version.
        let decoded = record.decode(DISTRIBUTIONS).map(|share| {
            let ahead = period_ahead(epoch_unix_ms, period_ms, share.period, unix_ms());
            (share, ahead)
        });
        let result = match decoded {
            // Filed, it would push the real shares of its group's partition out as stale.
            Ok((share, Some(ahead))) => {
                tracing::warn!(group = %share.group, partition = share.partition, %ahead, "ignoring a distribution share");
                "invalid"
            }
            // Every partition's share is kept: one the inputs lack would be kept for good.
            Ok((share, None)) if self.input_partitions > 0 && share.partition >= self.input_partitions => {
                tracing::warn!(group = %share.group, partition = share.partition, partitions = self.input_partitions, "ignoring a distribution share of a partition the input topics lack");
                "invalid"
            }
            Ok((share, None)) => match self.estimator.file(&share) {
                Ok(Filed::Kept) => "kept",
                Ok(Filed::Stale) => "stale",
                Ok(Filed::Full) => {
                    if !self.said_full {
                        tracing::warn!(group = %share.group, groups = self.estimator.book().groups(), "the distribution book holds --max-groups: shares of new groups are refused");
                        self.said_full = true;
                    }
                    "full"
                }
                Err(error) => {
                    tracing::warn!(group = %share.group, partition = share.partition, %error, "ignoring an inconsistent distribution share");
                    "invalid"
                }
            },
            // Every instance reads the whole topic, so a bad record is reported here
            // rather than dead-lettered once per instance.
            Err(error) => {
                tracing::warn!(offset = record.offset, %error, "ignoring an undecodable distribution share");
                "invalid"
            }
        };
        self.metrics.shares.with_label_values(&[result]).inc();
    }

    fn file_trust(&mut self, record: &InputRecord) {
        let result = match record.decode(HOST_TRUST) {
            // The scheduler's partitions are those of `announcements`, an input here too:
            // a share of another would stay for good, none replacing it.
            Ok(share) if self.input_partitions > 0 && share.partition >= self.input_partitions => {
                tracing::warn!(host = %share.host, partition = share.partition, partitions = self.input_partitions, "ignoring a host-trust share of a partition the input topics lack");
                "invalid"
            }
            Ok(share) => self.estimator.file_trust(&share).as_str(),
            // Every instance reads the whole topic: reported here, not dead-lettered.
            Err(error) => {
                tracing::warn!(offset = record.offset, %error, "ignoring an undecodable host-trust record");
                "invalid"
            }
        };
        self.metrics.trust_records.with_label_values(&[result]).inc();
    }

    /// Sends the estimates revised by an event, or by a restore (then first thing in the
    /// next batch or tick).
    fn send_revised(&mut self, out: &mut Emitter) -> Result<(), StageError> {
        for revised in self.estimator.take_revised() {
            out.send(ESTIMATES, &revised)?;
            self.metrics.revised.inc();
        }
        Ok(())
    }

    fn publish_shares(&mut self, out: &mut Emitter) -> Result<(), StageError> {
        for share in self.estimator.take_partials(unix_ms()) {
            out.send(DISTRIBUTIONS, &share)?;
        }
        self.metrics.groups(self.estimator.book());
        Ok(())
    }
}

impl Stage for EstimatorStage {
    type State = EstimatorState;

    const NAME: &'static str = STAGE;
    const INPUTS: &'static [&'static str] = &[CHANGE_EVENTS.name, ANNOUNCEMENTS.name];
    const OUTPUTS: &'static [&'static str] = &[ESTIMATES.name, DISTRIBUTIONS.name, DEAD_LETTER];
    const SIDE_INPUTS: &'static [&'static str] = &[DISTRIBUTIONS.name, HOST_TRUST.name];

    async fn handle(
        &mut self,
        batch: Vec<InputRecord>,
        state: &mut StateStore<EstimatorState>,
        out: &mut Emitter,
    ) -> Result<(), StageError> {
        let now_ms = unix_ms();
        let period_ms = self.estimator.settings().period_ms;
        // Those a restore queued go with this batch, whose changelog carries their flags.
        self.send_revised(out)?;
        for record in batch {
            if record.input == ANNOUNCEMENTS.name {
                let Some(announcement) = out.decode_keyed(&record, ANNOUNCEMENTS) else { continue };
                if let Some(ahead) = period_ahead(self.epoch_unix_ms, period_ms, announcement.period, now_ms)
                {
                    out.dead_letter(&record, DeadLetterKind::Invalid, ahead);
                    continue;
                }
                let latest_ms = latest_read_ms(self.epoch_unix_ms, period_ms, announcement.period, now_ms);
                let announced = self.estimator.announce(&announcement, record.partition, state, latest_ms);
                self.metrics.announcements.with_label_values(&[announced.as_str()]).inc();
                continue;
            }
            let Some(event) = out.decode_keyed(&record, CHANGE_EVENTS) else { continue };
            // Applied, it would make its URL's real events, and its group's, look stale.
            if let Some(ahead) = period_ahead(self.epoch_unix_ms, period_ms, event.period, now_ms) {
                out.dead_letter(&record, DeadLetterKind::Invalid, ahead);
                continue;
            }
            let applied = self.estimator.apply(&event, record.partition, state, now_ms);
            self.metrics.record(&applied);
            if let Applied::New(estimate, _) | Applied::Repeated(estimate) = applied {
                out.send(ESTIMATES, &*estimate)?;
            }
            self.send_revised(out)?;
        }
        self.publish_shares(out)
    }

    fn next_tick(&self) -> Option<tokio::time::Instant> {
        Some(self.next_tick)
    }

    async fn tick(
        &mut self,
        _state: &mut StateStore<EstimatorState>,
        _assignment: &recrawl_common::runtime::Assignment,
        out: &mut Emitter,
    ) -> Result<(), StageError> {
        self.next_tick = tokio::time::Instant::now().checked_add(TICK).unwrap_or(self.next_tick);
        self.send_revised(out)?;
        self.publish_shares(out)
    }

    /// Another instance's (or an earlier owner's) share of a group distribution, or a
    /// scheduler partition's share of a host's judged claims.
    fn on_side_input(&mut self, record: &InputRecord) {
        if record.input == HOST_TRUST.name {
            self.file_trust(record);
        } else {
            self.file_share(record);
        }
    }

    fn on_restored(&mut self, partition: i32, state: &mut StateStore<EstimatorState>) {
        self.estimator.restored(partition, state);
    }

    fn on_revoked(&mut self, partition: i32, _state: &StateStore<EstimatorState>) {
        self.estimator.revoked(partition);
    }

    fn on_assigned(&mut self, assignment: &recrawl_common::runtime::Assignment) {
        self.input_partitions = assignment.total;
    }
}

/// Runs the estimator until `ctx.shutdown`.
pub async fn run(args: EstimatorArgs, ctx: StageContext) -> Result<(), RuntimeError> {
    args.kafka.validate()?;
    let metrics = EstimatorMetrics::register(ctx.metrics.registry(), args.metrics_groups.clone())
        .map_err(|source| SetupError::Metrics { stage: STAGE, source })?;
    let stage = EstimatorStage {
        estimator: Estimator::new(args.estimate.settings()),
        epoch_unix_ms: args.epoch_unix_ms,
        metrics,
        next_tick: tokio::time::Instant::now(),
        input_partitions: 0,
        said_full: false,
    };
    run_stage(stage, &args.kafka, ctx).await
}

/// The process entry point shared by `recrawl-estimator` and `recrawl stage estimator`.
pub async fn main(args: EstimatorArgs) -> anyhow::Result<()> {
    let service = args.service.clone();
    run_service(STAGE, &service, |ctx| run(args, ctx)).await
}
