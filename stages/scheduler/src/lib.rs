//! The scheduler: keeps every known URL's staleness inputs (downloads, size, the
//! estimator's predictions, refresh plan), every host's response time and back-off, and
//! the frontier of linked, never-fetched URLs with their in-degrees. At the start of each
//! period it publishes the picks of its policy to the fetch topic. It is the pipeline's
//! clock: period t starts at `epoch + t·period`.

#![deny(clippy::unwrap_used, clippy::expect_used, clippy::arithmetic_side_effects)]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used, clippy::arithmetic_side_effects))]

mod announced;
pub mod book;
pub mod coarse;
pub mod documents;
pub mod frontier_caps;
pub mod groups;
pub mod groups_report;
pub mod hosts;
pub mod offline;
pub mod plan;
pub mod policy;
mod trust;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::PoisonError;
use std::time::{Duration, Instant};

use clap::builder::TypedValueParser;
use clap::Args;
use prometheus::{Histogram, HistogramOpts, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts};
use recrawl_common::config::{non_negative, unit_interval};
use recrawl_common::metrics::registered;
use recrawl_common::runtime::{
    run_stage, Assignment, DeadLetterKind, Emitter, RuntimeError, SetupError, StageError,
};
use recrawl_common::service::run_service;
use recrawl_common::{unix_ms, InputRecord, KafkaArgs, ServiceArgs, Stage, StageContext, StateStore};
use recrawl_model::claims::{ClaimTally, ClaimTrust};
use recrawl_model::{DEFAULT_EPOCH_UNIX_MS, DEFAULT_PERIOD_MS, MAX_PERIOD_MS, MIN_PERIOD_MS};
use recrawl_schemas::messages::bounds;
use recrawl_schemas::topics::{ANNOUNCEMENTS, DEAD_LETTER, ESTIMATES, FETCH, HOST_TRUST, LINKS};
use recrawl_schemas::{
    normalise_url, url_key, DiscoveredLinks, FetchOutcome, HostTrust, PageEstimate, PagePick, PageRef,
    PickReason,
};
use thiserror::Error;

use crate::book::{Applied, Book, BookFull, BookSettings, Linked, SchedulerState, NONE};
use crate::frontier_caps::{Capped, FrontierArgs, FrontierCaps};
use crate::groups::{GroupClasses, HourRule};
use crate::hosts::Hosts;
use crate::plan::{choose, PlanSettings};
use crate::policy::{quota, Discovery, Horizon, Policy, DEFAULT_POLICY};
use crate::trust::{TrustPublisher, MAX_TRUST_RECORDS_PER_PERIOD};
use recrawl_common::links::LinkRules;

pub const STAGE: &str = "scheduler";
/// Most picks one period may publish: each is a record produced before the period's
/// picks count as published, so m bounds the tick's memory and time.
const MAX_PICKS_PER_PERIOD: u64 = 1_000_000;

#[derive(Debug, Clone, Args)]
pub struct SchedulerArgs {
    #[command(flatten)]
    pub kafka: KafkaArgs,
    #[command(flatten)]
    pub service: ServiceArgs,
    /// m: picks per period across all scheduler instances (each instance takes the share
    /// of the partitions it owns).
    #[arg(long, env = "RECRAWL_PICKS_PER_PERIOD", default_value_t = 100,
          value_parser = clap::value_parser!(u64).range(1..=MAX_PICKS_PER_PERIOD).map(|m| m as usize))]
    pub picks_per_period: usize,
    /// Length of a period, milliseconds.
    #[arg(long, env = "RECRAWL_PERIOD_MS", default_value_t = DEFAULT_PERIOD_MS,
          value_parser = clap::value_parser!(u64).range(MIN_PERIOD_MS..=MAX_PERIOD_MS))]
    pub period_ms: u64,
    /// Start of period 0, Unix milliseconds; every instance must use the same value.
    #[arg(long, env = "RECRAWL_EPOCH_UNIX_MS", default_value_t = DEFAULT_EPOCH_UNIX_MS,
          value_parser = clap::value_parser!(i64).range(0..=bounds::MAX_TIME_MS))]
    pub epoch_unix_ms: i64,
    /// How known pages are ranked for refresh.
    #[arg(long, env = "RECRAWL_POLICY", value_enum, default_value_t = DEFAULT_POLICY)]
    pub policy: Policy,
    /// `freshness`: score the pages of a host whose changes show busy hours (from its
    /// comparisons and `Last-Modified` dates) by the index for a rate that follows the
    /// day, so fetches land after the busy hours.
    #[arg(long, env = "RECRAWL_TIME_OF_DAY", default_value_t = true, action = clap::ArgAction::Set)]
    pub time_of_day: bool,
    #[arg(long, env = "RECRAWL_HORIZON", default_value = "rolling:10", help = crate::policy::HORIZON_HELP)]
    pub horizon: Horizon,
    /// Weight of the download-time term p·g (in periods) against staleness.
    #[arg(long, env = "RECRAWL_COST_WEIGHT", default_value_t = 1.0, value_parser = non_negative)]
    pub cost_weight: f64,
    /// How the frontier is ordered: in-degree first or breadth first.
    #[arg(long, env = "RECRAWL_DISCOVERY", value_enum, default_value_t = Discovery::Ifs)]
    pub discovery: Discovery,
    /// Share of each period's picks for never-fetched URLs (unused shares flow over).
    #[arg(long, env = "RECRAWL_DISCOVERY_SHARE", default_value_t = 0.2, value_parser = unit_interval)]
    pub discovery_share: f64,
    /// The least time between requests to a host that the fetch stage keeps (its
    /// `--min-host-delay-ms`, read from the same variable): with each host's Crawl-delay
    /// and response time it caps the host's picks at what fetch can serve in a period,
    /// so that none is deferred for want of a slot.
    #[arg(long, env = "RECRAWL_FETCH_MIN_HOST_DELAY_MS", default_value_t = 1000,
          value_parser = clap::value_parser!(u64).range(0..=86_400_000))]
    pub min_host_delay_ms: u64,
    /// At most this many picks per host per period, across all instances.
    #[arg(long, env = "RECRAWL_MAX_PICKS_PER_HOST", default_value_t = 60,
          value_parser = clap::value_parser!(u64).range(1..=MAX_PICKS_PER_PERIOD).map(|m| m as usize))]
    pub max_picks_per_host: usize,
    /// `change-aware`: no picks for URLs whose next request is predicted to download with
    /// less than this probability; `lambda-crawl`, `freshness`: only a probe share, spaced
    /// from their last visit.
    #[arg(long, env = "RECRAWL_MIN_DOWNLOAD_PROBABILITY", default_value_t = 0.1, value_parser = unit_interval)]
    pub min_download_probability: f64,
    /// Periods a pick waits for its estimate before the URL may be picked again.
    #[arg(long, env = "RECRAWL_PENDING_PERIODS", default_value_t = 2,
          value_parser = clap::value_parser!(u32).range(0..=10_000))]
    pub pending_periods: u32,
    /// The longest back-off of a host answering 429 or 503, periods (it doubles per answer).
    #[arg(long, env = "RECRAWL_MAX_BACKOFF_PERIODS", default_value_t = 64,
          value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub max_backoff_periods: u64,
    /// Weight of the newest sample in a host's moving-average response time.
    #[arg(long, env = "RECRAWL_RESPONSE_TIME_SMOOTHING", default_value_t = 0.2, value_parser = unit_interval)]
    pub response_time_smoothing: f64,
    /// `groups`: crawl at the paper's hour or at the hour that least delays changes.
    #[arg(long, env = "RECRAWL_GROUPS_HOUR", value_enum, default_value_t = HourRule::Paper)]
    pub groups_hour: HourRule,
    /// `groups`: crawl by the paper's 6 deployed groups or by the 16 of its first table.
    #[arg(long, env = "RECRAWL_GROUPS_CLASSES", value_enum, default_value_t = GroupClasses::Six)]
    pub groups_classes: GroupClasses,
    /// Local time for the `groups` policy's weekdays and hours, minutes east of UTC.
    #[arg(long, env = "RECRAWL_UTC_OFFSET_MINUTES", default_value_t = 0, allow_negative_numbers = true,
          value_parser = clap::value_parser!(i32).range(-720..=840))]
    pub utc_offset_minutes: i32,
    /// `nutch-adaptive`: a new page's fetch interval, in periods.
    #[arg(long, env = "RECRAWL_NUTCH_INITIAL_INTERVAL", default_value_t = 5.0)]
    pub nutch_initial_interval: f64,
    /// `nutch-adaptive`: the shortest fetch interval, in periods.
    #[arg(long, env = "RECRAWL_NUTCH_MIN_INTERVAL", default_value_t = 1.0)]
    pub nutch_min_interval: f64,
    /// `nutch-adaptive`: the longest fetch interval, in periods.
    #[arg(long, env = "RECRAWL_NUTCH_MAX_INTERVAL", default_value_t = 1000.0)]
    pub nutch_max_interval: f64,
    #[command(flatten)]
    pub links: LinkRules,
    /// At most this many URLs tracked per host (the estimator paper: 3,000); split
    /// evenly over the partitions, since each instance sees only its own.
    #[arg(long = "link-max-per-site", env = "RECRAWL_LINK_MAX_PER_SITE", default_value_t = 3000,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub link_max_per_site: u32,
    #[command(flatten)]
    pub frontier: FrontierArgs,
    /// Seed URLs, one per line (# starts a comment); published to the links topic at
    /// start, so each lands on the instance that owns it.
    #[arg(long, env = "RECRAWL_SEEDS")]
    pub seeds: Option<PathBuf>,
}

#[derive(Debug, Error)]
pub enum SchedulerError {
    #[error("--seeds {path}: {source}")]
    SeedRead { path: String, source: std::io::Error },
    #[error("--seeds {path} line {line}: {reason}")]
    SeedUrl { path: String, line: usize, reason: String },
    #[error("--nutch-*-interval: expected 0 < min ≤ initial ≤ max, got {min}, {initial}, {max}")]
    NutchIntervals { min: f64, initial: f64, max: f64 },
    #[error(
        "--period-ms {period_ms} from --epoch-unix-ms {epoch_unix_ms}: the periods of the next ten years \
         pass {}, the last the scheduler's state can store; use a later epoch or longer periods",
        NONE - 2
    )]
    PeriodsTooMany { period_ms: u64, epoch_unix_ms: i64 },
}

/// Reads a seed file into normalised URLs; a bad line is an error naming it.
pub fn read_seeds(path: &std::path::Path) -> Result<Vec<String>, SchedulerError> {
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(path)
        .map_err(|source| SchedulerError::SeedRead { path: shown.clone(), source })?;
    let mut seeds = Vec::new();
    for (number, line) in (1..).zip(text.lines()) {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let bad_line = |reason: String| SchedulerError::SeedUrl { path: shown.clone(), line: number, reason };
        let url = normalise_url(line).map_err(|e| bad_line(e.to_string()))?;
        // A seed is sent as a links record: one no reader takes (a URL or host past the
        // records' limits) is refused here rather than dead-lettered at every start.
        PageRef::of_url(&url)
            .map_err(|e| bad_line(e.to_string()))?
            .validate("seed")
            .map_err(|e| bad_line(e.to_string()))?;
        seeds.push(url);
    }
    Ok(seeds)
}

impl SchedulerArgs {
    fn book_settings(&self) -> Result<BookSettings, SchedulerError> {
        let (min, initial, max) =
            (self.nutch_min_interval, self.nutch_initial_interval, self.nutch_max_interval);
        if !(min > 0.0 && min <= initial && initial <= max && max.is_finite()) {
            return Err(SchedulerError::NutchIntervals { min, initial, max });
        }
        Ok(BookSettings {
            response_time_smoothing: self.response_time_smoothing,
            max_backoff_periods: self.max_backoff_periods,
            nutch_initial_interval: initial,
            nutch_min_interval: min,
            nutch_max_interval: max,
            hour_rule: self.groups_hour,
            classes: self.groups_classes,
            period_ms: self.period_ms,
            epoch_unix_ms: self.epoch_unix_ms,
            learns_day: self.plan_settings().scores_time_of_day(),
        })
    }

    /// Refuses an epoch and period length whose periods pass what a [`Page`](book::Page)
    /// stores within ten years of `now_ms`: past it every period would read as one, so
    /// picks would not stay pending and estimates would all look replayed.
    fn check_period_range(&self, now_ms: i64) -> Result<(), SchedulerError> {
        const TEN_YEARS_MS: i64 = 10 * 366 * 86_400_000;
        let elapsed = now_ms.saturating_add(TEN_YEARS_MS).saturating_sub(self.epoch_unix_ms).max(0);
        match (elapsed as u64).checked_div(self.period_ms) {
            Some(period) if period < u64::from(NONE - 1) => Ok(()),
            _ => Err(SchedulerError::PeriodsTooMany {
                period_ms: self.period_ms,
                epoch_unix_ms: self.epoch_unix_ms,
            }),
        }
    }

    fn plan_settings(&self) -> PlanSettings {
        PlanSettings {
            policy: self.policy,
            cost_weight: self.cost_weight,
            period_ms: self.period_ms,
            epoch_unix_ms: self.epoch_unix_ms,
            utc_offset_minutes: self.utc_offset_minutes,
            discovery: self.discovery,
            discovery_share: self.discovery_share,
            discovery_open: true,
            min_download_probability: self.min_download_probability,
            pending_periods: self.pending_periods,
            time_of_day: self.time_of_day,
        }
    }
}

#[derive(Debug)]
struct SchedulerMetrics {
    picks: IntCounterVec,
    unfilled: prometheus::IntCounter,
    last_period: IntGauge,
    last_period_picks: IntGauge,
    last_period_time: IntGauge,
    period_seconds: prometheus::Gauge,
    tracked: IntGauge,
    discovery_held: IntGauge,
    frontier: IntGauge,
    hosts: IntGauge,
    hosts_backed_off: IntGauge,
    hosts_with_day_profile: IntGauge,
    day_tables: IntGauge,
    estimates: IntCounterVec,
    links: IntCounterVec,
    announcements: IntCounterVec,
    claims: IntCounterVec,
    document_reads: IntCounterVec,
    claim_hosts: IntGaugeVec,
    trust_records: IntCounter,
    choose_seconds: Histogram,
    frontier_dropped: IntCounterVec,
    sites: IntGauge,
    state_bytes: IntGauge,
}

impl SchedulerMetrics {
    fn register(registry: &prometheus::Registry) -> Result<Self, prometheus::Error> {
        let metrics = Self {
            picks: registered(registry, IntCounterVec::new(
                Opts::new("scheduler_picks_total", "Picks published, by reason."),
                &["reason"],
            )?)?,
            unfilled: registered(registry, IntCounter::new(
                "scheduler_unfilled_picks_total",
                "Picks of the budget left unused: no candidate, or host caps and back-offs.",
            )?)?,
            last_period: registered(registry, IntGauge::new(
                "scheduler_last_period",
                "The latest period picks were published for.",
            )?)?,
            last_period_picks: registered(registry, IntGauge::new(
                "scheduler_last_period_picks",
                "Picks this instance published for the latest period.",
            )?)?,
            last_period_time: registered(registry, IntGauge::new(
                "scheduler_last_period_timestamp_seconds",
                "Unix time this instance last handled a period (published its picks, or had no partitions to pick for); 0 before the first.",
            )?)?,
            period_seconds: registered(registry, prometheus::Gauge::new(
                "scheduler_period_seconds",
                "The length of a period (--period-ms), for alerts on missed periods.",
            )?)?,
            tracked: registered(registry, IntGauge::new("scheduler_tracked_urls", "URLs with at least one estimate.")?)?,
            discovery_held: registered(registry, IntGauge::new(
                "scheduler_discovery_held",
                "1 while this instance tracks its cap of URLs (--max-tracked-urls) and picks no new ones but seeds.",
            )?)?,
            frontier: registered(registry, IntGauge::new("scheduler_frontier_urls", "Linked URLs never fetched.")?)?,
            hosts: registered(registry, IntGauge::new("scheduler_hosts", "Hosts known to this instance.")?)?,
            hosts_backed_off: registered(registry, IntGauge::new(
                "scheduler_hosts_backed_off",
                "Hosts given no picks this period after answering 429 or 503.",
            )?)?,
            hosts_with_day_profile: registered(registry, IntGauge::new(
                "scheduler_hosts_with_day_profile",
                "Hosts whose changes show busy hours: with --time-of-day, freshness scores their pages by the index for a rate that follows the day.",
            )?)?,
            day_tables: registered(registry, IntGauge::new(
                "scheduler_day_tables",
                "Tables of the index for a rate that follows the day this instance keeps.",
            )?)?,
            estimates: registered(registry, IntCounterVec::new(
                Opts::new("scheduler_estimates_total", "Estimates applied, by result."),
                &["result"],
            )?)?,
            links: registered(registry, IntCounterVec::new(
                Opts::new("scheduler_links_total", "Links received, by what they did to the frontier."),
                &["outcome"],
            )?)?,
            announcements: registered(registry, IntCounterVec::new(
                Opts::new(
                    "scheduler_announcements_total",
                    "Pages announced by sitemaps, feeds and robots.txt, by the document that named them; each counts as a link from it (scheduler_links_total).",
                ),
                &["document"],
            )?)?,
            claims: registered(registry, IntCounterVec::new(
                Opts::new(
                    "scheduler_claims_total",
                    "Dated claims of sitemaps and feeds about tracked URLs, by what they did: stale or current (a trusted host's claim marked the copy so), judged (judged and tallied, not taken), untracked (a URL not tracked here), implausible (read after its period or the clock: not judged).",
                ),
                &["result"],
            )?)?,
            document_reads: registered(registry, IntCounterVec::new(
                Opts::new(
                    "scheduler_document_reads_total",
                    "Picks of sitemaps and feeds, by what scheduled them: rule (their own, by what their host announces and its standing) or page (their change rate, as any page: a host found out, or whose documents date nothing).",
                ),
                &["by"],
            )?)?,
            claim_hosts: registered(registry, IntGaugeVec::new(
                Opts::new(
                    "scheduler_claim_hosts",
                    "Hosts whose sitemap and feed claims were judged, by standing: trusted (taken as complete observations), distrusted, unknown.",
                ),
                &["trust"],
            )?)?,
            trust_records: registered(registry, IntCounter::new(
                "scheduler_host_trust_records_total",
                "Records published on host-trust: a host's share of judged claims in an owned partition, and the standing this instance holds, each time either changed.",
            )?)?,
            choose_seconds: registered(registry, Histogram::with_opts(
                HistogramOpts::new("scheduler_choose_seconds", "Time to choose one period's picks.")
                    .buckets(prometheus::exponential_buckets(0.0005, 4.0, 10)?),
            )?)?,
            frontier_dropped: registered(registry, IntCounterVec::new(
                Opts::new(
                    "scheduler_frontier_dropped_total",
                    "Frontier URLs dropped to bring the frontier back within a cap (site: --frontier-max-urls-per-site; total: --frontier-max-urls): fewest in-links, then deepest, then latest first.",
                ),
                &["cap"],
            )?)?,
            sites: registered(registry, IntGauge::new("scheduler_sites", "Sites (registered domains) of the hosts this instance knows.")?)?,
            state_bytes: registered(registry, IntGauge::new(
                "scheduler_state_bytes",
                "Bytes of the URL tables (URL text, index, pages, in-links, validators, claims, each partition's shares of its hosts' day profiles and claim tallies), the host table (names, statistics) and the frontier's counts.",
            )?)?,
        };
        for cap in ["site", "total"] {
            metrics.frontier_dropped.with_label_values(&[cap]).reset();
        }
        for document in recrawl_schemas::AnnouncingDocument::ALL {
            metrics.announcements.with_label_values(&[document.as_str()]).reset();
        }
        for result in ["stale", "current", "judged", "untracked", "implausible"] {
            metrics.claims.with_label_values(&[result]).reset();
        }
        // At 0 from the start, so an alert sees the first of each.
        for reason in ["refresh", "discovery"] {
            metrics.picks.with_label_values(&[reason]).reset();
        }
        for result in ["new", "updated", "revised", "replayed", "refused_address", "moved"] {
            metrics.estimates.with_label_values(&[result]).reset();
        }
        let rejections = recrawl_common::links::Rejection::ALL.map(|r| r.as_str());
        let capped = Capped::ALL.map(Capped::as_str);
        for outcome in ["discovered", "in_degree", "duplicate", "tracked", "saturated"]
            .iter()
            .chain(&rejections)
            .chain(&capped)
        {
            metrics.links.with_label_values(&[outcome]).reset();
        }
        Ok(metrics)
    }
}

#[derive(Debug)]
pub struct Scheduler {
    picks_per_period: usize,
    max_picks_per_host: usize,
    min_host_delay_ms: u64,
    horizon: Horizon,
    plan: PlanSettings,
    book_settings: BookSettings,
    link_rules: LinkRules,
    /// `link_rules` for the sitemaps and feeds sites name.
    document_rules: LinkRules,
    max_per_site: u32,
    caps: FrontierCaps,
    pending_seeds: Vec<String>,
    next_period: u64,
    hosts: Hosts,
    /// One book per owned partition.
    books: BTreeMap<i32, Book>,
    trust: TrustPublisher,
    assignment: Assignment,
    metrics: SchedulerMetrics,
}

impl Scheduler {
    /// The period running at Unix time `now_ms`, `None` before the epoch (or with periods
    /// of no length).
    fn period_at(&self, now_ms: i64) -> Option<u64> {
        let epoch = self.plan.epoch_unix_ms;
        // `abs_diff` is the elapsed time even where the i64 difference would overflow.
        (now_ms >= epoch)
            .then(|| now_ms.abs_diff(epoch))
            .and_then(|elapsed| elapsed.checked_div(self.plan.period_ms))
    }

    /// This instance's share of the per-site URL cap: the cap split over the partitions.
    fn site_cap(&self) -> u32 {
        self.share(self.max_per_site)
    }

    /// This instance's share of `cap`, split over the partitions.
    fn share(&self, cap: u32) -> u32 {
        let total = self.assignment.total.max(1) as u64;
        let owned = self.assignment.partitions.len().max(1) as u64;
        u32::try_from(u64::from(cap).saturating_mul(owned).div_ceil(total)).unwrap_or(u32::MAX)
    }

    /// This instance's share of the per-site frontier cap.
    fn frontier_site_share(&self) -> u32 {
        self.share(self.caps.args().frontier_max_urls_per_site)
    }

    fn frontier_len(&self) -> usize {
        self.books.values().map(Book::frontier_len).sum()
    }

    /// URLs fetched at least once and not dropped.
    fn tracked_len(&self) -> usize {
        self.books.values().map(|b| b.len().saturating_sub(b.frontier_len()).saturating_sub(b.gone())).sum()
    }

    /// Each host's picks this period: its share of the per-host cap, lowered to what the
    /// fetch stage can serve in a period (its delay between requests, the host's
    /// Crawl-delay and response time), and none while it is backed off.
    fn host_caps(&self, period: u64) -> (Vec<u32>, usize) {
        let (partitions, total) = (&self.assignment.partitions, self.assignment.total);
        let cap = quota(self.max_picks_per_host, partitions, total, period);
        let mut backed_off = 0usize;
        let caps = self
            .hosts
            .stats
            .iter()
            .map(|stats| {
                if stats.backoff_until > period {
                    backed_off = backed_off.saturating_add(1);
                    return 0;
                }
                let per_period = stats.requests_per_period(self.plan.period_ms, self.min_host_delay_ms);
                let per_period = usize::try_from(per_period).unwrap_or(usize::MAX);
                let host_cap = cap.min(quota(per_period, partitions, total, period));
                u32::try_from(host_cap).unwrap_or(u32::MAX)
            })
            .collect();
        (caps, backed_off)
    }

    fn apply_link(&mut self, link: &DiscoveredLinks, partition: i32) -> Result<(), BookFull> {
        self.apply_link_as(link, partition, false)
    }

    /// Counts a link into the frontier, under the link rules for documents (sitemaps and
    /// feeds) or for pages.
    fn apply_link_as(
        &mut self,
        link: &DiscoveredLinks,
        partition: i32,
        document: bool,
    ) -> Result<(), BookFull> {
        let rules = if document { &self.document_rules } else { &self.link_rules };
        let (site_cap, site_share) = (self.site_cap(), self.frontier_site_share());
        // A URL new to the instance, from a page (seeds are the operator's), that the
        // link rules would take: the frontier's caps decide.
        let new = link.source.is_some()
            && self.books.get(&partition).is_none_or(|book| book.find(&link.page.url).is_none())
            && rules.check(&link.page.url, link.depth).is_ok();
        if new {
            let admits = |s: &Self| s.caps.admits(&s.hosts, &link.page.host, s.frontier_len(), site_share);
            let mut verdict = admits(self);
            // At a cap's margin: prune now (priorities decide what goes), rather than
            // turn away a link that may outrank what the frontier holds.
            if matches!(verdict, Err(Capped::Frontier | Capped::SiteFrontier)) {
                self.prune_frontier_now();
                verdict = admits(self);
            }
            if let Err(capped) = verdict {
                self.metrics.links.with_label_values(&[capped.as_str()]).inc();
                return Ok(());
            }
        }
        let frontier = self.frontier_len();
        let Self { books, hosts, link_rules, document_rules, book_settings, caps, .. } = self;
        let rules = if document { document_rules } else { link_rules };
        let book = books.entry(partition).or_default();
        let linked = book.apply_link(hosts, link, rules, site_cap, book_settings);
        if let (Ok(Linked::Discovered), Some(host)) = (&linked, hosts.find(&link.page.host)) {
            caps.entered(hosts, host, frontier.saturating_add(1), site_share);
        }
        let label = match linked? {
            Linked::Discovered => "discovered",
            Linked::InDegree => "in_degree",
            Linked::Duplicate => "duplicate",
            Linked::Tracked => "tracked",
            Linked::Saturated => "saturated",
            Linked::Rejected(rejection) => rejection.as_str(),
        };
        self.metrics.links.with_label_values(&[label]).inc();
        Ok(())
    }

    fn apply_estimate(&mut self, estimate: &PageEstimate, partition: i32) -> Result<(), BookFull> {
        let Self { books, hosts, book_settings, caps, .. } = self;
        let book = books.entry(partition).or_default();
        let was_frontier =
            book.find(&estimate.page.url).map(|slot| *book.page(slot)).filter(|page| page.is_frontier());
        let applied = book.apply_estimate(hosts, estimate, book_settings);
        if let (Some(page), Ok(_)) = (was_frontier, &applied) {
            caps.left(page.host);
        }
        let mut label = match applied? {
            Applied::New => "new",
            Applied::Updated => "updated",
            Applied::Revised => "revised",
            Applied::Replayed => "replayed",
        };
        // The book set the page's flag from this request when it applied it.
        if matches!(label, "new" | "updated")
            && book.find(&estimate.page.url).is_some_and(|slot| book.page(slot).is_moved())
        {
            label = "moved";
        }
        // A URL whose host resolves to an address the fetcher refuses is refused at every
        // request: it leaves the book (a tombstone) rather than be picked again.
        if estimate.last_request.outcome == FetchOutcome::BlockedAddress {
            if let Some(slot) = book.find(&estimate.page.url) {
                if book.forget(hosts, slot) {
                    label = "refused_address";
                }
            }
        }
        self.metrics.estimates.with_label_values(&[label]).inc();
        Ok(())
    }

    /// Queues the changelog records of every URL changed since the last call, and the
    /// tombstones of those dropped; a book then an eighth dropped is compacted.
    fn write_changes(&mut self, state: &mut StateStore<SchedulerState>) {
        for (&partition, book) in &mut self.books {
            for (url, record) in book.take_dirty() {
                state.write(partition, url, record);
            }
            for url in book.take_removed() {
                state.write_removal(partition, url);
            }
            book.compact();
        }
    }

    /// Brings the frontier back within its caps if a count went past one.
    fn prune_frontier(&mut self) {
        if self.caps.needs_pruning() {
            self.prune_frontier_now();
        }
    }

    fn prune_frontier_now(&mut self) {
        let site_share = self.frontier_site_share();
        let pruned = self.caps.prune(&mut self.books, &mut self.hosts, site_share);
        if pruned.site > 0 || pruned.total > 0 {
            tracing::info!(
                site = pruned.site,
                total = pruned.total,
                "frontier URLs dropped to keep within the caps"
            );
        }
        self.metrics.frontier_dropped.with_label_values(&["site"]).inc_by(pruned.site as u64);
        self.metrics.frontier_dropped.with_label_values(&["total"]).inc_by(pruned.total as u64);
    }

    fn update_gauges(&self) {
        let tracked = self.tracked_len();
        let frontier: usize = self.books.values().map(Book::frontier_len).sum();
        self.metrics.tracked.set(tracked as i64);
        self.metrics.frontier.set(frontier as i64);
        self.metrics.hosts.set(self.hosts.len() as i64);
        self.metrics.sites.set(self.caps.sites() as i64);
        let mut standing = [0_i64; 3];
        for stats in &self.hosts.stats {
            let judged = stats.claims != ClaimTally::default();
            let index = match stats.claims.trust() {
                ClaimTrust::Trusted => 0,
                ClaimTrust::Distrusted => 1,
                ClaimTrust::Unknown => 2,
            };
            standing[index] = standing[index].saturating_add(i64::from(judged));
        }
        for (trust, hosts) in
            [ClaimTrust::Trusted, ClaimTrust::Distrusted, ClaimTrust::Unknown].iter().zip(standing)
        {
            self.metrics.claim_hosts.with_label_values(&[trust.as_str()]).set(hosts);
        }
        let books: usize = self.books.values().map(|book| book.memory().total()).sum();
        let tables = books.saturating_add(self.caps.bytes()).saturating_add(self.hosts.bytes());
        self.metrics.state_bytes.set(i64::try_from(tables).unwrap_or(i64::MAX));
    }

    /// The `host-trust` records due ([`TrustPublisher::records`]).
    fn trust_records(&mut self, period: u64, published_at_ms: i64, max_records: usize) -> Vec<HostTrust> {
        let records =
            self.trust.records(&mut self.hosts, &mut self.books, period, published_at_ms, max_records);
        self.metrics.trust_records.inc_by(records.len() as u64);
        records
    }

    /// The `host-trust` records of the shares dropped since the last call
    /// ([`trust::dropped_records`]), as of `now_ms`.
    fn dropped_trust_records(&mut self, now_ms: i64) -> Vec<HostTrust> {
        let period = self.period_at(now_ms).unwrap_or(0);
        let records = trust::dropped_records(&self.hosts, &mut self.books, period, now_ms);
        self.metrics.trust_records.inc_by(records.len() as u64);
        records
    }

    /// The picks for `period` among the URLs of the owned partitions.
    fn picks(&mut self, period: u64) -> Vec<PagePick> {
        let m = quota(self.picks_per_period, &self.assignment.partitions, self.assignment.total, period);
        let (host_caps, backed_off) = self.host_caps(period);
        self.metrics.hosts_backed_off.set(backed_off as i64);
        // At the tracked cap, new URLs would grow this instance's book and the
        // estimator's state without end: the frontier waits, seeds aside.
        let tracked = self.tracked_len();
        let discovery_open = tracked < self.caps.args().max_tracked_urls;
        if discovery_open != self.plan.discovery_open {
            if discovery_open {
                tracing::info!(tracked, "below the tracked cap again: frontier URLs are picked");
            } else {
                tracing::warn!(
                    tracked,
                    cap = self.caps.args().max_tracked_urls,
                    "tracked URLs at --max-tracked-urls: no new URLs are picked but seeds"
                );
            }
            self.plan.discovery_open = discovery_open;
        }
        self.metrics.discovery_held.set(i64::from(!discovery_open));
        let partitions: Vec<i32> = self.books.keys().copied().collect();
        let started = Instant::now();
        let choices = {
            let books: Vec<&Book> = self.books.values().collect();
            choose(&books, &self.hosts, period, self.horizon.remaining(period), m, &host_caps, &self.plan)
        };
        self.metrics.choose_seconds.observe(started.elapsed().as_secs_f64());
        // Once a period, as the profiles are read: not with every batch's gauges.
        self.metrics.hosts_with_day_profile.set(self.hosts.with_day_profile() as i64);
        let tables = self.hosts.day.lock().unwrap_or_else(PoisonError::into_inner).tables.len();
        self.metrics.day_tables.set(tables as i64);
        self.metrics.unfilled.inc_by(m.saturating_sub(choices.len()) as u64);
        let mut picks = Vec::with_capacity(choices.len());
        for choice in choices {
            let Some(book) = self.books.get_mut(&partitions[choice.book]) else { continue };
            let page = *book.page(choice.slot);
            let url = book.url(choice.slot);
            book.picked(choice.slot, period);
            let document = book.document(choice.slot).is_some();
            let host = self.hosts.name(page.host).to_owned();
            let validators = book.validators(choice.slot);
            let text = |value: Option<&str>| value.map(str::to_owned);
            picks.push(PagePick {
                etag: text(validators.and_then(|v| v.etag.as_deref())),
                last_modified: text(validators.and_then(|v| v.last_modified.as_deref())),
                deadline_ms: Some(self.plan.period_start_ms(period.saturating_add(1))),
                url_key: url_key(&url),
                url,
                // Unused since schema 2 (the estimator groups by page.host or page.site);
                // kept while the internal messages stay at schema 1.
                group: host.clone(),
                host,
                period,
                reason: choice.reason,
                depth: u32::from(page.depth),
                score: choice.score,
            });
            if document {
                self.read_document(page.host, period);
            }
        }
        picks
    }
}

impl Stage for Scheduler {
    type State = SchedulerState;

    const NAME: &'static str = STAGE;
    const INPUTS: &'static [&'static str] = &[ESTIMATES.name, LINKS.name, ANNOUNCEMENTS.name];
    const OUTPUTS: &'static [&'static str] = &[FETCH.name, LINKS.name, HOST_TRUST.name, DEAD_LETTER];

    async fn handle(
        &mut self,
        batch: Vec<InputRecord>,
        state: &mut StateStore<SchedulerState>,
        out: &mut Emitter,
    ) -> Result<(), StageError> {
        let now_ms = unix_ms();
        for record in batch {
            let plan = &self.plan;
            // A record ahead of the clock would make the real ones of its URL look stale.
            let in_time = |out: &mut Emitter, period: u64| match plan.period_ahead(period, now_ms) {
                Some(ahead) => {
                    out.dead_letter(&record, DeadLetterKind::Invalid, ahead);
                    false
                }
                None => true,
            };
            let applied = if record.input == LINKS.name {
                out.decode_keyed(&record, LINKS)
                    .filter(|link| in_time(out, link.period))
                    .map(|link| self.apply_link(&link, record.partition))
            } else if record.input == ANNOUNCEMENTS.name {
                out.decode_keyed(&record, ANNOUNCEMENTS)
                    .filter(|announcement| in_time(out, announcement.period))
                    .map(|announcement| self.apply_announcement(&announcement, record.partition, now_ms))
            } else {
                out.decode_keyed(&record, ESTIMATES)
                    .filter(|estimate| in_time(out, estimate.period.max(estimate.last_request.period)))
                    .map(|estimate| self.apply_estimate(&estimate, record.partition))
            };
            // A full partition book refuses the record; it is kept on the dead-letter topic.
            if let Some(Err(full)) = applied {
                out.dead_letter(&record, DeadLetterKind::Invalid, full);
            }
        }
        for trust in self.dropped_trust_records(now_ms) {
            out.send(HOST_TRUST, &trust)?;
        }
        self.prune_frontier();
        self.write_changes(state);
        self.update_gauges();
        Ok(())
    }

    fn next_tick(&self) -> Option<tokio::time::Instant> {
        if !self.pending_seeds.is_empty() {
            return Some(tokio::time::Instant::now());
        }
        let start_ms = self.plan.period_start_ms(self.next_period);
        let wait = Duration::from_millis(start_ms.saturating_sub(unix_ms()).max(0) as u64);
        // `None` (no tick) only for a wait past what an `Instant` can hold.
        tokio::time::Instant::now().checked_add(wait)
    }

    async fn tick(
        &mut self,
        state: &mut StateStore<SchedulerState>,
        _assignment: &Assignment,
        out: &mut Emitter,
    ) -> Result<(), StageError> {
        if !self.pending_seeds.is_empty() {
            let period = self.period_at(unix_ms()).unwrap_or(0);
            for url in std::mem::take(&mut self.pending_seeds) {
                let Ok(page) = PageRef::of_url(&url) else { continue };
                let seed = DiscoveredLinks { page, source: None, occurrences: 1, period, depth: 0 };
                out.send(LINKS, &seed)?;
            }
            return Ok(());
        }
        let Some(period) = self.period_at(unix_ms()) else { return Ok(()) };
        if period < self.next_period {
            return Ok(());
        }
        if self.assignment.partitions.is_empty() {
            // No partitions yet (a cooperative join assigns in a second round) or none to
            // own: nothing to pick, and nothing to announce.
            self.metrics.last_period_time.set(unix_ms() / 1000);
            self.next_period = period.saturating_add(1);
            return Ok(());
        }
        let picks = self.picks(period);
        for pick in &picks {
            out.send(FETCH, pick)?;
            let reason = match pick.reason {
                PickReason::Refresh => "refresh",
                PickReason::Discovery => "discovery",
            };
            self.metrics.picks.with_label_values(&[reason]).inc();
        }
        for trust in self.trust_records(period, unix_ms(), MAX_TRUST_RECORDS_PER_PERIOD) {
            out.send(HOST_TRUST, &trust)?;
        }
        self.write_changes(state);
        tracing::info!(period, picks = picks.len(), known = self.state_keys(state), "period picks published");
        self.metrics.last_period.set(period as i64);
        self.metrics.last_period_picks.set(picks.len() as i64);
        self.metrics.last_period_time.set(unix_ms() / 1000);
        self.next_period = period.saturating_add(1);
        Ok(())
    }

    fn on_restored(&mut self, partition: i32, state: &mut StateStore<SchedulerState>) {
        let records = state.take_partition(partition);
        match Book::restore(records, &mut self.hosts, &self.book_settings) {
            Ok((book, skipped)) => {
                if skipped > 0 {
                    tracing::warn!(partition, skipped, "changelog records without a host skipped");
                }
                if let Some(replaced) = self.books.insert(partition, book) {
                    replaced.release(&mut self.hosts);
                    self.caps.recount(&self.hosts, self.books.values());
                } else if let Some(book) = self.books.get(&partition) {
                    self.caps.count(&self.hosts, book);
                }
            }
            Err(error) => tracing::error!(partition, %error, "partition not restored"),
        }
        self.update_gauges();
    }

    fn on_revoked(&mut self, partition: i32, _state: &StateStore<SchedulerState>) {
        if let Some(book) = self.books.remove(&partition) {
            book.release(&mut self.hosts);
        }
        self.caps.recount(&self.hosts, self.books.values());
        self.update_gauges();
    }

    fn on_assigned(&mut self, assignment: &Assignment) {
        self.assignment = assignment.clone();
    }

    fn state_keys(&self, _state: &StateStore<SchedulerState>) -> usize {
        self.books.values().map(Book::len).sum()
    }
}

/// Runs the scheduler until `ctx.shutdown`.
pub async fn run(args: SchedulerArgs, ctx: StageContext) -> Result<(), RuntimeError> {
    let pending_seeds = match &args.seeds {
        Some(path) => read_seeds(path).map_err(SetupError::settings)?,
        None => Vec::new(),
    };
    let metrics = SchedulerMetrics::register(ctx.metrics.registry())
        .map_err(|source| SetupError::Metrics { stage: STAGE, source })?;
    let plan = args.plan_settings();
    metrics.period_seconds.set(plan.period_ms as f64 / 1000.0);
    // The policy decides every pick: say which runs, since its default can change.
    tracing::info!(
        policy = plan.policy.as_str(),
        picks_per_period = args.picks_per_period,
        period_ms = plan.period_ms,
        "scheduling"
    );
    let mut scheduler = Scheduler {
        picks_per_period: args.picks_per_period,
        max_picks_per_host: args.max_picks_per_host,
        min_host_delay_ms: args.min_host_delay_ms,
        horizon: args.horizon,
        plan,
        book_settings: args
            .check_period_range(unix_ms())
            .and_then(|()| args.book_settings())
            .map_err(SetupError::settings)?,
        link_rules: args.links.clone(),
        document_rules: args.links.for_documents(),
        max_per_site: args.link_max_per_site,
        caps: FrontierCaps::new(args.frontier),
        pending_seeds,
        next_period: 0,
        hosts: Hosts::default(),
        books: BTreeMap::new(),
        trust: TrustPublisher::default(),
        assignment: Assignment::default(),
        metrics,
    };
    // A restarted instance starts with the next period: the running one's picks were
    // already published.
    scheduler.next_period = scheduler.period_at(unix_ms()).map_or(0, |p| p.saturating_add(1));
    run_stage(scheduler, &args.kafka, ctx).await
}

/// The process entry point shared by `recrawl-scheduler` and `recrawl stage scheduler`.
pub async fn main(args: SchedulerArgs) -> anyhow::Result<()> {
    let service = args.service.clone();
    run_service(STAGE, &service, |ctx| run(args, ctx)).await
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::book::tests::{estimate, link};
    use recrawl_schemas::{AnnouncingDocument, PageAnnouncement, UtcTime};

    pub(crate) fn scheduler() -> Scheduler {
        Scheduler {
            picks_per_period: 4,
            max_picks_per_host: 60,
            // Periods of a second: ten requests a host at most.
            min_host_delay_ms: 100,
            horizon: Horizon::Rolling(10),
            plan: PlanSettings { period_ms: 1000, ..PlanSettings::default() },
            book_settings: BookSettings::default(),
            link_rules: LinkRules::default(),
            document_rules: LinkRules::default().for_documents(),
            max_per_site: 3000,
            caps: FrontierCaps::default(),
            pending_seeds: Vec::new(),
            next_period: 0,
            hosts: Hosts::default(),
            books: BTreeMap::new(),
            trust: TrustPublisher::default(),
            assignment: Assignment { partitions: vec![0, 1], total: 2 },
            metrics: SchedulerMetrics::register(&prometheus::Registry::new()).unwrap(),
        }
    }

    #[test]
    fn a_host_gets_no_more_picks_than_fetch_can_serve_in_a_period() {
        let mut scheduler = scheduler();
        scheduler.picks_per_period = 40;
        for i in 0..40 {
            let url = format!("http://{}/{i}.html", if i % 2 == 0 { "quick" } else { "slow" });
            scheduler.apply_link(&link(&url, Some("http://src/"), 1, 2), 0).unwrap();
            let mut e = estimate(&url, 2, true, Some(true));
            e.last_request.latency_ms = if i % 2 == 0 { 10.0 } else { 450.0 };
            scheduler.apply_estimate(&e, 0).unwrap();
        }
        let (caps, _) = scheduler.host_caps(5);
        let cap_of = |host: &str| caps[scheduler.hosts.find(host).unwrap() as usize];
        // A second a period, 100 ms between requests: 1 + (1000 − 10) / 110 = 10 for the
        // quick host; 1 + (1000 − 450) / 550 = 2 for the slow one.
        assert_eq!((cap_of("quick"), cap_of("slow")), (10, 2), "{caps:?}");
        let picks = scheduler.picks(5);
        let slow_picks = picks.iter().filter(|pick| pick.host == "slow").count();
        assert_eq!((picks.len(), slow_picks), (12, 2));
        // A Crawl-delay longer than the stage's delay wins.
        let slow = scheduler.hosts.find("slow").unwrap() as usize;
        scheduler.hosts.stats[slow].crawl_delay_ms = 2_000;
        assert_eq!(scheduler.hosts.stats[slow].requests_per_period(1000, 100), 1);
        assert_eq!(scheduler.hosts.stats[slow].requests_per_period(10_000, 100), 1 + 9_550 / 2_450);
    }

    /// A URL answered by a permanent redirect is counted as moved, its changelog record
    /// says so (a restored partition keeps not picking it), and it is not picked again.
    #[test]
    fn a_url_that_moved_for_good_is_counted_kept_in_the_changelog_and_not_picked() {
        let mut scheduler = scheduler();
        let mut store = StateStore::default();
        let mut moved = estimate("http://site/old.html", 2, false, None);
        (moved.last_request.outcome, moved.last_request.http_status) = (FetchOutcome::HttpStatus, Some(308));
        scheduler.apply_estimate(&moved, 0).unwrap();
        scheduler.apply_estimate(&estimate("http://site/new.html", 2, true, None), 0).unwrap();
        assert_eq!(scheduler.metrics.estimates.with_label_values(&["moved"]).get(), 1);
        scheduler.write_changes(&mut store);
        let written = store.take_written();
        let record =
            written.iter().find(|(_, url, _)| url == "http://site/old.html").map(|(_, _, record)| record);
        assert_eq!(record.and_then(|record| record.moved), Some(true), "{written:?}");
        for period in 3..20 {
            let picks = scheduler.picks(period);
            assert!(picks.iter().all(|pick| !pick.url.contains("old")), "{picks:?}");
        }
    }

    #[test]
    fn a_url_refused_for_its_address_leaves_the_book_and_is_not_picked_again() {
        let mut scheduler = scheduler();
        let mut store = StateStore::default();
        for url in ["http://intranet/a.html", "http://public/a.html"] {
            scheduler.apply_link(&link(url, Some("http://src/"), 1, 2), 0).unwrap();
        }
        let mut refused = estimate("http://intranet/a.html", 2, false, None);
        refused.last_request.outcome = FetchOutcome::BlockedAddress;
        scheduler.apply_estimate(&refused, 0).unwrap();
        scheduler.apply_estimate(&estimate("http://public/a.html", 2, true, None), 0).unwrap();
        let refused_count = |scheduler: &Scheduler| {
            let counter = scheduler.metrics.estimates.with_label_values(&["refused_address"]);
            counter.get()
        };
        assert_eq!(refused_count(&scheduler), 1);
        scheduler.write_changes(&mut store);
        let removed: Vec<String> = store.take_removed().into_iter().map(|(_, url)| url).collect();
        assert_eq!(removed, ["http://intranet/a.html"], "a tombstone");
        for period in 10..20 {
            let picks = scheduler.picks(period);
            assert!(picks.iter().all(|pick| !pick.url.contains("intranet")), "{picks:?}");
        }
        // Linked again, it comes back as new and may be tried once more.
        scheduler.apply_link(&link("http://intranet/a.html", Some("http://src/"), 21, 2), 0).unwrap();
        assert!(scheduler.books[&0].find("http://intranet/a.html").is_some());
    }

    #[test]
    fn at_the_tracked_cap_only_seeds_are_picked_from_the_frontier() {
        let mut scheduler = scheduler();
        scheduler.caps = FrontierCaps::new(FrontierArgs { max_tracked_urls: 2, ..FrontierArgs::default() });
        for (index, url) in ["http://a/1", "http://b/1"].into_iter().enumerate() {
            scheduler.apply_link(&link(url, None, 1, 0), 0).unwrap();
            scheduler.apply_estimate(&estimate(url, 2 + index as u64, true, None), 0).unwrap();
        }
        for host in ["c", "d", "e"] {
            scheduler.apply_link(&link(&format!("http://{host}/1"), Some("http://a/1"), 3, 1), 0).unwrap();
        }
        scheduler.apply_link(&link("http://seed/", None, 3, 0), 0).unwrap();
        let frontier_picked = |picks: &[PagePick]| {
            let mut urls: Vec<&str> =
                picks.iter().filter(|p| p.reason == PickReason::Discovery).map(|p| p.url.as_str()).collect();
            urls.sort_unstable();
            urls.into_iter().map(str::to_owned).collect::<Vec<_>>()
        };
        let held = scheduler.picks(10);
        assert_eq!(frontier_picked(&held), ["http://seed/"], "{held:?}");
        assert_eq!(scheduler.metrics.discovery_held.get(), 1);
        assert!(held.len() >= 3, "the budget went to refreshes: {held:?}");

        // A tracked URL that leaves the book makes room for one more: the seed takes it.
        let mut refused = estimate("http://a/1", 11, false, None);
        refused.last_request.outcome = FetchOutcome::BlockedAddress;
        scheduler.apply_estimate(&refused, 0).unwrap();
        scheduler.apply_estimate(&estimate("http://seed/", 11, true, None), 0).unwrap();
        assert_eq!(scheduler.tracked_len(), 2);
        assert!(frontier_picked(&scheduler.picks(20)).is_empty());
        let mut gone = estimate("http://b/1", 21, false, None);
        gone.last_request.outcome = FetchOutcome::BlockedAddress;
        scheduler.apply_estimate(&gone, 0).unwrap();
        let open = scheduler.picks(30);
        assert_eq!(scheduler.metrics.discovery_held.get(), 0);
        assert!(!frontier_picked(&open).is_empty(), "below the cap the frontier is picked: {open:?}");
    }

    #[test]
    fn picks_survive_a_move_to_another_instance_through_the_changelog() {
        let mut first = scheduler();
        let mut store = StateStore::default();
        for i in 0..6 {
            let url = format!("http://h{}/{i}.html", i % 2);
            first.apply_link(&link(&url, Some("http://src/"), 1, 2), i % 2).unwrap();
            if i < 3 {
                first.apply_estimate(&estimate(&url, 2, true, Some(true)), i % 2).unwrap();
            }
        }
        let picks = first.picks(5);
        assert_eq!(picks.len(), 4);
        first.write_changes(&mut store);
        // The changelog as a restoring instance reads it: the latest record per key.
        let mut changelog: BTreeMap<i32, recrawl_common::state::Keyed<SchedulerState>> = BTreeMap::new();
        for (partition, url, record) in store.take_written() {
            changelog.entry(partition).or_default().insert(url, record);
        }
        let mut second = scheduler();
        let mut restored = StateStore::default();
        for (partition, records) in changelog {
            restored.insert_partition(partition, records);
            second.on_restored(partition, &mut restored);
        }
        assert_eq!(second.state_keys(&restored), 6);
        assert!(restored.is_empty(), "the books hold the records, not the store");
        for (partition, book) in &first.books {
            let other = &second.books[partition];
            for slot in 0..book.len() as u32 {
                assert_eq!(other.url(slot), book.url(slot));
                assert_eq!(other.record(slot), book.record(slot));
            }
        }
        // The period's picks are pending on the new owner too: the next period takes the
        // other two URLs.
        let next: Vec<String> = second.picks(6).into_iter().map(|p| p.url).collect();
        assert_eq!(next.len(), 2, "{next:?}");
        assert!(next.iter().all(|url| picks.iter().all(|p| &p.url != url)), "{next:?}");
        second.on_revoked(0, &restored);
        assert_eq!(second.state_keys(&restored), 3);
        assert!(second.hosts.stats.iter().all(|s| s.urls <= 3));
    }

    /// What an instance learned of its hosts' days reaches the next owner of its
    /// partitions through the changelog's bytes, before any new estimate.
    #[test]
    fn hosts_days_survive_a_move_through_the_changelog_bytes() {
        const HOUR_MS: u64 = 3_600_000;
        let settings = BookSettings { period_ms: HOUR_MS, ..BookSettings::default() };
        let mut first = Scheduler { book_settings: settings, ..scheduler() };
        let mut store = StateStore::default();
        for i in 0..12u64 {
            let url = format!("http://h{}/{i}.html", i % 2);
            // Each page downloaded three times a day apart, its changes dated at 09:00 or 10:00.
            for (day, changed) in [(0, None), (1, Some(true)), (2, Some(true))] {
                let period = 24 * (day + 10 * i);
                let mut e = estimate(&url, period, true, changed);
                e.last_request.fetched_at_ms = (period * HOUR_MS + HOUR_MS / 2) as i64;
                let at = (period * HOUR_MS) as i64 - ((14 + i % 2) * HOUR_MS) as i64;
                e.last_request.last_modified = recrawl_common::format_http_date(at);
                first.apply_estimate(&e, (i % 3 % 2) as i32).unwrap();
            }
        }
        assert_eq!(first.hosts.with_day_profile(), 2);
        first.write_changes(&mut store);
        let mut changelog: BTreeMap<i32, recrawl_common::state::Keyed<SchedulerState>> = BTreeMap::new();
        for (partition, url, record) in store.take_written() {
            let bytes = recrawl_schemas::encode(&record).unwrap();
            let read = recrawl_schemas::decode::<SchedulerState>(&bytes).unwrap();
            changelog.entry(partition).or_default().insert(url, read);
        }
        let mut second = Scheduler { book_settings: settings, ..scheduler() };
        let mut restored = StateStore::default();
        for (partition, records) in changelog {
            restored.insert_partition(partition, records);
            second.on_restored(partition, &mut restored);
        }
        assert_eq!(second.hosts.with_day_profile(), 2);
        for host in ["h0", "h1"] {
            let day = |s: &Scheduler| s.hosts.stats[s.hosts.find(host).unwrap() as usize].day;
            let (learned, moved) = (day(&first), day(&second));
            let ((x, y), (moved_x, moved_y)) = (learned.harmonic(), moved.harmonic());
            assert_eq!(learned.observations(), moved.observations());
            assert!((x - moved_x).abs() < 1e-9 && (y - moved_y).abs() < 1e-9, "{learned:?} {moved:?}");
        }
    }

    #[test]
    fn periods_the_state_cannot_store_are_refused_at_start() {
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            args: SchedulerArgs,
        }
        let args = |flags: &[&str]| {
            let argv = ["recrawl-scheduler", "--brokers", "127.0.0.1:9"].iter().chain(flags);
            <Cli as clap::Parser>::parse_from(argv).args
        };
        let now = 1_795_900_000_000;
        assert!(args(&[]).check_period_range(now).is_ok());
        assert!(args(&["--period-ms", "100"]).check_period_range(now).is_ok());
        let error =
            args(&["--period-ms", "100", "--epoch-unix-ms", "0"]).check_period_range(now).unwrap_err();
        assert!(error.to_string().contains("--period-ms 100 from --epoch-unix-ms 0"), "{error}");
        assert!(args(&["--period-ms", "1000", "--epoch-unix-ms", "0"]).check_period_range(now).is_ok());
    }

    #[test]
    fn seed_files_are_normalised_and_bad_lines_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("seeds.txt");
        std::fs::write(&path, "# comment\nHTTP://Example.com:80/a#x\n\n  https://b.example/  # trailing\n")
            .unwrap();
        assert_eq!(read_seeds(&path).unwrap(), ["http://example.com/a", "https://b.example/"]);
        std::fs::write(&path, "http://ok.example/\nftp://nope.example/\n").unwrap();
        let error = read_seeds(&path).unwrap_err().to_string();
        assert!(error.contains("line 2") && error.contains("ftp"), "{error}");
        let host = format!("{}.{}.{}.{}", "a".repeat(63), "b".repeat(63), "c".repeat(63), "d".repeat(61));
        std::fs::write(&path, format!("http://{host}/\nhttp://{host}:8080/\n")).unwrap();
        let error = read_seeds(&path).unwrap_err().to_string();
        assert!(error.contains("line 2") && error.contains("seed.host"), "{error}");
        // Refused at start, naming the line but not repeating the secret.
        std::fs::write(&path, "http://ok.example/\nhttp://user:SECRETPW@ok.example/a\n").unwrap();
        let error = read_seeds(&path).unwrap_err().to_string();
        assert!(error.contains("line 2: URL carries a user name or password"), "{error}");
        assert!(!error.contains("SECRETPW"), "{error}");
    }

    const HOUR: i64 = 3_600_000;

    /// A scheduler of hour-long periods whose pages `0..pages` of each of `hosts` (in
    /// partition `page % 2`) were downloaded at 1:30 and 4:30, with a change at 2:30
    /// claimed by their sitemap read at 3:00 and found by the second download.
    fn judged_claims(hosts: &[&str], pages: i32) -> Scheduler {
        let mut scheduler = scheduler();
        scheduler.plan = PlanSettings { period_ms: HOUR as u64, epoch_unix_ms: 0, ..PlanSettings::default() };
        scheduler.book_settings =
            BookSettings { period_ms: HOUR as u64, epoch_unix_ms: 0, ..BookSettings::default() };
        let download = |url: &str, period: u64, changed: Option<bool>| {
            let mut downloaded = estimate(url, period, true, changed);
            let fetched_at_ms = period as i64 * HOUR + HOUR / 2;
            downloaded.last_request.fetched_at_ms = fetched_at_ms;
            downloaded.last_request.fetched_at = UtcTime::from_ms(fetched_at_ms);
            downloaded
        };
        for host in hosts {
            for page in 0..pages {
                let url = format!("http://{host}/{page}.html");
                scheduler.apply_estimate(&download(&url, 1, None), page % 2).unwrap();
            }
        }
        assert!(scheduler.trust_records(1, 10 * HOUR, 100).is_empty(), "nothing judged yet");
        for host in hosts {
            for page in 0..pages {
                let url = format!("http://{host}/{page}.html");
                let announcement = PageAnnouncement {
                    page: PageRef::of_url(&url).unwrap(),
                    source: PageRef::of_url(&format!("http://{host}/sitemap.xml")).unwrap(),
                    document: AnnouncingDocument::Sitemap,
                    period: 3,
                    fetched_at: UtcTime::from_ms(3 * HOUR),
                    fetched_at_ms: 3 * HOUR,
                    claimed_modified: Some(UtcTime::from_ms(2 * HOUR + HOUR / 2)),
                    claimed_modified_ms: Some(2 * HOUR + HOUR / 2),
                    change_frequency: None,
                    priority: None,
                    depth: 1,
                };
                scheduler.apply_announcement(&announcement, page % 2, 10 * HOUR).unwrap();
                scheduler.apply_estimate(&download(&url, 4, Some(true)), page % 2).unwrap();
            }
        }
        scheduler
    }

    /// Each record's (partition, confirmed, standing).
    fn shares(records: &[HostTrust]) -> Vec<(i32, u64, ClaimTrust)> {
        records.iter().map(|record| (record.partition, record.confirmed, record.trust)).collect()
    }

    /// A host's claims judged in two owned partitions are published once per partition,
    /// with the standing the instance holds, and again only when a share or the partitions
    /// owned change: the partition of three confirmed revoked, the other's two leave the
    /// host unknown.
    #[test]
    fn each_partition_s_share_of_a_host_s_judged_claims_is_published_when_it_changes() {
        let now_ms = 10 * HOUR;
        let mut scheduler = judged_claims(&["truthful.example"], 5);
        let records = scheduler.trust_records(5, now_ms, 100);
        assert_eq!(shares(&records), [(0, 3, ClaimTrust::Trusted), (1, 2, ClaimTrust::Trusted)]);
        for record in &records {
            assert_eq!(record.host, "truthful.example");
            assert_eq!((record.refuted, record.period, record.published_at_ms), (0, 5, now_ms));
            assert_eq!(HOST_TRUST.key(record), format!("truthful.example/{}", record.partition));
            assert_eq!(recrawl_schemas::Message::validate(record), Ok(()));
        }
        assert!(scheduler.trust_records(6, now_ms, 100).is_empty(), "nothing changed");
        scheduler.on_revoked(0, &StateStore::default());
        assert_eq!(shares(&scheduler.trust_records(7, now_ms, 100)), [(1, 2, ClaimTrust::Unknown)]);
        assert_eq!(scheduler.metrics.trust_records.get(), 3);
    }

    /// Past the limit, the hosts left wait for the next periods, none skipped or repeated.
    #[test]
    fn hosts_past_a_period_s_limit_of_trust_records_come_in_the_next() {
        let hosts = ["a.example", "b.example", "c.example", "d.example", "e.example"];
        let mut scheduler = judged_claims(&hosts, 1);
        let mut published = Vec::new();
        for period in 5..10 {
            let records = scheduler.trust_records(period, 10 * HOUR, 2);
            assert!(records.len() <= 2, "{records:?}");
            published.extend(records.into_iter().map(|record| record.host));
        }
        published.sort_unstable();
        assert_eq!(published, hosts);
    }

    /// A host's last tracked URL of a partition dropped (its address refused) takes the
    /// partition's share of its judged claims with it, as a restore would: its record on
    /// `host-trust` is replaced by one of none, and the instance's standing follows.
    #[test]
    fn a_share_gone_with_its_last_url_is_published_as_none() {
        let mut scheduler = judged_claims(&["truthful.example"], 5);
        scheduler.trust_records(5, 10 * HOUR, 100);
        for page in [0, 2, 4] {
            let mut refused = estimate(&format!("http://truthful.example/{page}.html"), 6, false, None);
            refused.last_request.outcome = FetchOutcome::BlockedAddress;
            scheduler.apply_estimate(&refused, 0).unwrap();
            // The share's record of no claims goes with the batch that dropped it, the
            // other partition's (its standing moved) at the next tick.
            let with_the_batch = shares(&scheduler.dropped_trust_records(10 * HOUR));
            let at_the_tick = shares(&scheduler.trust_records(6, 10 * HOUR, 100));
            let (expected_now, expected_later): (&[_], &[_]) = match page {
                4 => (&[(0, 0, ClaimTrust::Unknown)], &[(1, 2, ClaimTrust::Unknown)]),
                _ => (&[], &[]),
            };
            assert_eq!(
                (&with_the_batch[..], &at_the_tick[..]),
                (expected_now, expected_later),
                "page {page} refused"
            );
        }
        let mut store = StateStore::default();
        scheduler.write_changes(&mut store);
        let restored =
            Book::restore(store.take_partition(0), &mut Hosts::default(), &scheduler.book_settings);
        assert_eq!(restored.unwrap().0.host_claims(0), None, "a restore finds no share either");
    }
}
