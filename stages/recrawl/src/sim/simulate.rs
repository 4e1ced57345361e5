//! The policy simulator: every scheduler policy crawls the same simulated (or replayed)
//! web at the same budget, one process, no HTTP or Kafka, and is measured against the
//! ground truth (`freshness-limits.md`).
//!
//! The learned policies see only what they fetched: each request goes through the
//! estimator's history and forecast functions and the scheduler's book, and the next
//! period's picks come from the scheduler's [`choose`], the code the stages run. The
//! reference policies read the truth: the known-rate optimum (Cho & Garcia-Molina's
//! frequencies from the true rates, as a credit schedule), change-proportional crawling,
//! and the clairvoyant, which fetches only stale pages.
//!
//! A period's picks are fetched in their order, evenly spread over its fetch window (the
//! whole period unless [`SimConfig::fetch_window`] says less).

use std::sync::Mutex;
use std::time::Instant;

use recrawl_model::claims::Listing;
use recrawl_model::modified::DateTally;
use recrawl_model::page::{GroupTallies, PageState, Request, UpdateSettings};
use recrawl_model::prediction::{predict_next, Eligibility, Kind, Model, PreparedPrior, RateHistogram};
use recrawl_model::rate::{RateCounts, RatePrior, LOWEST_RATE};
use recrawl_model::refresh::RefreshSettings;
use recrawl_scheduler::book::{Book, BookSettings, Learned};
use recrawl_scheduler::groups::CrawlSchedule;
use recrawl_scheduler::hosts::Hosts;
use recrawl_scheduler::plan::{choose, PlanSettings};
use recrawl_scheduler::policy::{Horizon, Policy};
use recrawl_schemas::{FetchOutcome, LastRequest, UtcTime};
use serde::Serialize;

use super::measure::{optimal_frequencies_per_page, CopyTracker, CreditSchedule, Measures};
use super::sitemaps::SitemapReader;
use super::web::{feed_items, Truth, Web};

/// What the simulator needs of a web beyond its change times.
pub trait World: Sync {
    fn truth(&self) -> &Truth;
    /// The host of a page, numbered from 0.
    fn host(&self, page: u32) -> u32;
    /// The Table 1 group of a page's site, numbered from 0 (for the group priors).
    fn group(&self, page: u32) -> usize;
    fn bytes(&self, page: u32) -> u64;
    fn downloads(&self, page: u32, period: u64) -> bool;
    fn response_ms(&self, page: u32, t: f64) -> f64;
    /// The `Last-Modified` the page's server sends at `at` (periods; `None`: no header),
    /// given its latest change since time 0, if any. A world that does not model the
    /// header sends none.
    fn last_modified(&self, _page: u32, _latest_change: Option<f64>, _at: f64) -> Option<f64> {
        None
    }
    /// Whether the host has a sitemap or a feed ([`super::sitemaps`]).
    fn announces(&self, _host: u32) -> bool {
        false
    }
    /// What the host says of its `pages` when read at `at` (periods): its sitemap's
    /// entries, each page with its `<lastmod>` (`None`: no date); without a sitemap, its
    /// feed's items, the pages changed latest with their dates; nothing without either.
    fn read_announcements(&self, _host: u32, _pages: &[u32], _at: f64) -> Vec<(u32, Option<f64>)> {
        Vec::new()
    }
    /// What the host's document says of the pages it leaves out: a sitemap lists them all.
    fn listing(&self, _host: u32) -> Listing {
        Listing::Latest
    }
}

/// `world` with some of its requests refused where `refuses(page, period)` says (a page
/// robots.txt disallows, a test's failures); the rest of the world as it is.
#[derive(Debug)]
pub struct Refusing<W, F> {
    pub world: W,
    pub refuses: F,
}

impl<W: World, F: Fn(u32, u64) -> bool + Sync> World for Refusing<W, F> {
    fn truth(&self) -> &Truth {
        self.world.truth()
    }
    fn host(&self, page: u32) -> u32 {
        self.world.host(page)
    }
    fn group(&self, page: u32) -> usize {
        self.world.group(page)
    }
    fn bytes(&self, page: u32) -> u64 {
        self.world.bytes(page)
    }
    fn downloads(&self, page: u32, period: u64) -> bool {
        !(self.refuses)(page, period) && self.world.downloads(page, period)
    }
    fn response_ms(&self, page: u32, t: f64) -> f64 {
        self.world.response_ms(page, t)
    }
    fn last_modified(&self, page: u32, latest_change: Option<f64>, at: f64) -> Option<f64> {
        self.world.last_modified(page, latest_change, at)
    }
    fn announces(&self, host: u32) -> bool {
        self.world.announces(host)
    }
    fn read_announcements(&self, host: u32, pages: &[u32], at: f64) -> Vec<(u32, Option<f64>)> {
        self.world.read_announcements(host, pages, at)
    }
    fn listing(&self, host: u32) -> Listing {
        self.world.listing(host)
    }
}

/// A generated web and its truth over the simulated periods.
#[derive(Debug)]
pub struct SimulatedWeb<'a> {
    pub web: &'a Web,
    pub truth: Truth,
}

impl World for SimulatedWeb<'_> {
    fn truth(&self) -> &Truth {
        &self.truth
    }
    fn host(&self, page: u32) -> u32 {
        self.web.page(page).site
    }
    fn group(&self, page: u32) -> usize {
        self.web.site_of(page).group as usize
    }
    fn bytes(&self, page: u32) -> u64 {
        self.web.bytes(page)
    }
    fn downloads(&self, page: u32, period: u64) -> bool {
        self.web.downloads(page, period)
    }
    fn response_ms(&self, page: u32, t: f64) -> f64 {
        self.web.response_ms(self.web.site_of(page), t, self.web.bytes(page))
    }
    fn last_modified(&self, page: u32, latest_change: Option<f64>, at: f64) -> Option<f64> {
        self.web.last_modified(page, latest_change, at)
    }
    fn announces(&self, host: u32) -> bool {
        let sitemaps = self.web.sitemaps();
        sitemaps.has_sitemap(host) || sitemaps.has_feed(host)
    }
    fn listing(&self, host: u32) -> Listing {
        if self.web.sitemaps().has_sitemap(host) {
            Listing::Every
        } else {
            Listing::Latest
        }
    }
    fn read_announcements(&self, host: u32, pages: &[u32], at: f64) -> Vec<(u32, Option<f64>)> {
        let latest = |page: u32| {
            let changes = self.truth.changes(page);
            changes[..changes.partition_point(|&t| t < at)].last().copied()
        };
        let sitemaps = self.web.sitemaps();
        if sitemaps.has_sitemap(host) {
            pages.iter().map(|&page| (page, self.web.last_modified(page, latest(page), at))).collect()
        } else if sitemaps.has_feed(host) {
            // As simweb's: robots.txt disallows the private pages, so the feed leaves them out.
            let public = pages.iter().filter(|&&page| !self.web.page(page).private);
            feed_items(public.map(|&page| (page, latest(page))))
                .into_iter()
                .map(|(page, latest)| (page, self.web.last_modified(page, Some(latest), at)))
                .collect()
        } else {
            Vec::new()
        }
    }
}

/// A policy the simulator runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SimPolicy {
    /// Reference: the known-rate optimum.
    Optimum,
    /// Reference: fetches only pages that changed since their stored copy and will
    /// download.
    Clairvoyant,
    /// Reference floor: crawl frequency proportional to the true change rate.
    Proportional,
    /// A scheduler policy, learning online.
    Scheduler(Policy),
}

impl SimPolicy {
    /// The references, then every scheduler policy in [`Policy`]'s order: a policy added
    /// to the scheduler is run and listed here with nothing more to do.
    pub fn all() -> Vec<SimPolicy> {
        let references = [SimPolicy::Optimum, SimPolicy::Clairvoyant, SimPolicy::Proportional];
        references
            .into_iter()
            .chain(Policy::all().iter().map(|&policy| SimPolicy::Scheduler(policy)))
            .collect()
    }

    pub fn name(self) -> &'static str {
        match self {
            SimPolicy::Optimum => "optimum",
            SimPolicy::Clairvoyant => "clairvoyant",
            SimPolicy::Proportional => "proportional",
            SimPolicy::Scheduler(policy) => policy.as_str(),
        }
    }

    pub fn parse(name: &str) -> Option<SimPolicy> {
        SimPolicy::all().into_iter().find(|policy| policy.name() == name)
    }

    pub fn sees_truth(self) -> bool {
        !matches!(self, SimPolicy::Scheduler(_))
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct SimConfig {
    pub periods: u64,
    /// R: picks per period as a share of the pages.
    pub budget: f64,
    /// Wall minutes a period stands for (the `groups` policy crawls by the clock).
    pub period_minutes: f64,
    pub model: Model,
    /// The paper's horizon for its rule.
    pub horizon: Horizon,
    /// W of the paper's rule (weight of the download time), in periods.
    pub cost_weight: f64,
    pub threads: usize,
    /// Whether to sample freshness at the end of every period (a pass over every page).
    pub freshness_by_period: bool,
    /// Which URLs count in the estimator's group distributions (its `--min-request-rate`,
    /// `--min-recall`).
    pub eligibility: Eligibility,
    /// Whether the store starts empty (every page stale until its first download) rather
    /// than with a copy of every page taken at time 0.
    pub cold_start: bool,
    /// Whether the learned policies are told each page's true change rate instead of
    /// estimating it: what a policy's rule is worth apart from its estimates.
    pub known_rates: bool,
    /// The share of each period, from its start, over which its fetches are spread
    /// evenly. A fetch early in its period stores the page sooner, so comparing with a
    /// pipeline takes the share its fetches fell in.
    pub fetch_window: f64,
    /// Whether `freshness` scores the pages of hosts with a day profile by the index for
    /// a rate that follows the day (the scheduler's `--time-of-day`).
    pub time_of_day: bool,
}

impl Default for SimConfig {
    fn default() -> Self {
        Self {
            periods: 100,
            budget: 0.2,
            period_minutes: 60.0,
            model: Model::default(),
            horizon: Horizon::Rolling(10),
            cost_weight: 1.0,
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
            freshness_by_period: false,
            cold_start: false,
            known_rates: false,
            fetch_window: 1.0,
            time_of_day: true,
            eligibility: Eligibility::default(),
        }
    }
}

/// One policy's figures: time averages over pages and periods.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PolicyResult {
    pub name: &'static str,
    pub sees_truth: bool,
    pub freshness: f64,
    /// Mean age of the stored copies, periods.
    pub age: f64,
    pub harmonic_cost: f64,
    /// The scheduler paper's s_j(t), averaged over pages and periods.
    pub paper_staleness: f64,
    pub requests: u64,
    /// Requests for sitemaps, on top of `requests` (within the same budget).
    pub sitemap_requests: u64,
    pub wasted_requests: u64,
    pub unchanged_downloads: u64,
    pub failures: u64,
    pub ratio_to_optimum: Option<f64>,
    pub ratio_to_clairvoyant: Option<f64>,
    pub seconds: f64,
    /// Share of pages fresh at the end of each period, when asked for (for charts).
    #[serde(skip)]
    pub freshness_by_period: Vec<f64>,
}

/// Runs every policy of `policies` on `world`; results in the order asked.
pub fn simulate(world: &dyn World, policies: &[SimPolicy], config: &SimConfig) -> Vec<PolicyResult> {
    let queue = Mutex::new(policies.iter().copied().enumerate().collect::<Vec<_>>());
    let results = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..config.threads.clamp(1, policies.len().max(1)) {
            scope.spawn(|| loop {
                let next = queue.lock().map(|mut queue| queue.pop()).ok().flatten();
                let Some((index, policy)) = next else { break };
                let result = run_policy(world, policy, config);
                if let Ok(mut results) = results.lock() {
                    results.push((index, result));
                }
            });
        }
    });
    let mut results = results.into_inner().unwrap_or_default();
    results.sort_by_key(|(index, _)| *index);
    let mut results: Vec<PolicyResult> = results.into_iter().map(|(_, result)| result).collect();
    let reference = |name: &str| results.iter().find(|r| r.name == name).map(|r| r.freshness);
    let (optimum, clairvoyant) = (reference("optimum"), reference("clairvoyant"));
    for result in &mut results {
        result.ratio_to_optimum = optimum.filter(|&f| f > 0.0).map(|f| result.freshness / f);
        result.ratio_to_clairvoyant = clairvoyant.filter(|&f| f > 0.0).map(|f| result.freshness / f);
    }
    results
}

/// How a policy's picks come about.
enum Chooser {
    Credits(CreditSchedule),
    Clairvoyant,
    Learned(Box<Learner>),
}

impl Chooser {
    fn new(world: &dyn World, policy: SimPolicy, config: &SimConfig, m: usize) -> Self {
        let rates = world.truth().rates();
        match policy {
            SimPolicy::Optimum => Self::Credits(CreditSchedule::new(frequencies(rates, m, true))),
            SimPolicy::Proportional => Self::Credits(CreditSchedule::new(frequencies(rates, m, false))),
            SimPolicy::Clairvoyant => Self::Clairvoyant,
            SimPolicy::Scheduler(policy) => Self::Learned(Box::new(Learner::new(world, policy, config))),
        }
    }

    /// The `m` pages to fetch in `period`.
    fn picks(
        &mut self,
        world: &dyn World,
        store: &mut Store<'_>,
        period: u64,
        m: usize,
        horizon: f64,
    ) -> Vec<u32> {
        match self {
            Self::Credits(schedule) => schedule.next_period(m),
            Self::Clairvoyant => {
                for page in 0..store.trackers.len() as u32 {
                    store.advance(page, period as f64);
                }
                clairvoyant_picks(world, period, &store.trackers, &store.cursors, m, horizon)
            }
            Self::Learned(learner) => learner.choose(world, period, m),
        }
    }
}

/// The store's copies as a policy's fetches leave them, measured against the truth.
struct Store<'t> {
    truth: &'t Truth,
    trackers: Vec<CopyTracker>,
    /// The next change of each page not yet applied to its tracker.
    cursors: Vec<u32>,
    /// The period of each page's last download; the store starts with a copy of every
    /// page taken at time 0.
    last_download: Vec<u32>,
    measures: Measures,
    /// Σ_j d_j, the periods of the pages' last downloads, and how many were this period's.
    download_sum: f64,
    downloaded_now: u64,
    /// Σ over periods of Σ_j s_j(period), the paper's staleness.
    staleness_sum: f64,
}

impl<'t> Store<'t> {
    fn new(truth: &'t Truth, cold_start: bool) -> Self {
        let n = truth.len();
        let mut store = Self {
            truth,
            trackers: vec![CopyTracker::new(); n],
            cursors: vec![0; n],
            last_download: vec![0; n],
            measures: Measures::default(),
            download_sum: 0.0,
            downloaded_now: 0,
            staleness_sum: 0.0,
        };
        if cold_start {
            store.trackers.iter_mut().for_each(|tracker| tracker.changed(0.0, &mut store.measures));
        }
        store
    }

    /// Applies `page`'s changes up to `to` to its copy.
    fn advance(&mut self, page: u32, to: f64) {
        let changes = self.truth.changes(page);
        let cursor = &mut self.cursors[page as usize];
        while let Some(&t) = changes.get(*cursor as usize).filter(|&&t| t <= to) {
            self.trackers[page as usize].changed(t, &mut self.measures);
            *cursor += 1;
        }
    }

    /// The latest change of `page` applied to its copy, if any since time 0.
    fn latest_change(&self, page: u32) -> Option<f64> {
        let applied = self.cursors[page as usize].checked_sub(1)?;
        self.truth.changes(page).get(applied as usize).copied()
    }

    /// A fetch of `page` at `at` (its changes applied up to then): whether the copy had
    /// missed a change.
    fn fetched(&mut self, page: u32, period: u64, at: f64, downloaded: bool) -> bool {
        let tracker = &mut self.trackers[page as usize];
        let changed = tracker.missed() > 0;
        tracker.fetched(at, downloaded, &mut self.measures);
        if downloaded {
            let last = &mut self.last_download[page as usize];
            if u64::from(*last) != period {
                self.download_sum += (period - u64::from(*last)) as f64;
                self.downloaded_now += 1;
                *last = period as u32;
            }
        }
        changed
    }

    /// Σ_j s_j(period) = Σ over pages not downloaded this period of period − 1 − d_j,
    /// kept from the running sum of the d_j rather than a pass over every page.
    fn end_period(&mut self, period: u64) {
        if period > 0 {
            let current = self.downloaded_now as f64;
            let n = self.trackers.len() as f64;
            self.staleness_sum +=
                (n - current) * (period - 1) as f64 - (self.download_sum - current * period as f64);
        }
        self.downloaded_now = 0;
    }

    /// Every copy measured to `horizon`.
    fn finish(&mut self, horizon: f64) {
        for page in 0..self.trackers.len() as u32 {
            self.advance(page, horizon);
            self.trackers[page as usize].finish(horizon, &mut self.measures);
        }
    }
}

/// Crawls `world` with one policy for `config.periods` periods.
pub fn run_policy(world: &dyn World, policy: SimPolicy, config: &SimConfig) -> PolicyResult {
    let started = Instant::now();
    let truth = world.truth();
    let n = truth.len();
    let m = ((config.budget * n as f64).round() as usize).min(n);
    let horizon = truth.horizon().min(config.periods as f64);
    let mut chooser = Chooser::new(world, policy, config, m);
    let mut store = Store::new(truth, config.cold_start);
    let mut freshness_by_period = Vec::with_capacity(config.periods as usize);
    for period in 0..config.periods {
        let start = period as f64;
        let picks = chooser.picks(world, &mut store, period, m, horizon);
        let spacing = config.fetch_window / picks.len().max(1) as f64;
        let mut fetches: Vec<(u32, f64, u32)> = picks
            .iter()
            .enumerate()
            .map(|(k, &page)| (world.host(page), start + (k as f64 + 0.5) * spacing, page))
            .collect();
        // A fetch changes only its page's state and its host's, so taking the period's
        // fetches host by host, each host's in time order, gives the figures of time order
        // (up to the rounding of the measures' sums), and a learned policy's scattered picks
        // touch the per-page arrays site by site (a site's pages are adjacent) instead of
        // at random (BENCHMARKS.md, the simulator's section).
        fetches.sort_by_key(|&(host, _, _)| host);
        for (_, at, page) in fetches {
            store.advance(page, at);
            let downloaded = world.downloads(page, period);
            let changed = store.fetched(page, period, at, downloaded);
            if let Chooser::Learned(learner) = &mut chooser {
                let last_modified = world.last_modified(page, store.latest_change(page), at);
                learner.learn(world, page, Crawl::Pick { period, at }, downloaded, changed, last_modified);
            }
        }
        if let Chooser::Learned(learner) = &mut chooser {
            learner.end_period();
        }
        store.end_period(period);
        if config.freshness_by_period {
            freshness_by_period.push(period_freshness(truth, &store.trackers, &store.cursors, start + 1.0));
        }
    }
    store.finish(horizon);
    let sitemap_requests = match &chooser {
        Chooser::Learned(learner) => learner.sitemaps.as_ref().map_or(0, |reader| reader.polls),
        _ => 0,
    };
    let measures = &store.measures;
    PolicyResult {
        name: policy.name(),
        sees_truth: policy.sees_truth(),
        freshness: measures.freshness(),
        age: measures.age(),
        harmonic_cost: measures.harmonic_cost(),
        paper_staleness: store.staleness_sum / (n.max(1) as f64 * config.periods.max(1) as f64),
        requests: measures.requests,
        sitemap_requests,
        wasted_requests: measures.wasted_requests(),
        unchanged_downloads: measures.unchanged_downloads,
        failures: measures.failures,
        ratio_to_optimum: None,
        ratio_to_clairvoyant: None,
        seconds: started.elapsed().as_secs_f64(),
        freshness_by_period,
    }
}

/// Share of pages fresh at `at`, counting changes not yet applied to their trackers.
fn period_freshness(truth: &Truth, trackers: &[CopyTracker], cursors: &[u32], at: f64) -> f64 {
    let fresh = (0..trackers.len())
        .filter(|&page| {
            let pending = truth.changes(page as u32).get(cursors[page] as usize).is_some_and(|&t| t < at);
            trackers[page].is_fresh() && !pending
        })
        .count();
    fresh as f64 / trackers.len().max(1) as f64
}

/// Per-page crawl frequencies from the true rates: the optimum, or proportional to λ.
fn frequencies(rates: &[f64], m: usize, optimum: bool) -> Vec<f64> {
    if optimum {
        return optimal_frequencies_per_page(rates, m as f64);
    }
    let total: f64 = rates.iter().sum();
    rates.iter().map(|&rate| if total > 0.0 { m as f64 * rate / total } else { 0.0 }).collect()
}

/// The stale pages that will download whose next change comes latest: fetched now, they
/// stay fresh longest.
fn clairvoyant_picks(
    world: &dyn World,
    period: u64,
    trackers: &[CopyTracker],
    cursors: &[u32],
    m: usize,
    horizon: f64,
) -> Vec<u32> {
    let truth = world.truth();
    let mut stale: Vec<(f64, u32)> = (0..trackers.len() as u32)
        .filter(|&page| !trackers[page as usize].is_fresh() && world.downloads(page, period))
        .map(|page| {
            let next = truth.changes(page).get(cursors[page as usize] as usize).copied().unwrap_or(horizon);
            (next.min(horizon), page)
        })
        .collect();
    if stale.len() > m {
        stale.select_nth_unstable_by(m, |a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        stale.truncate(m);
    }
    stale.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    stale.into_iter().map(|(_, page)| page).collect()
}

/// What the book learns of a simulated request: a 200 or a 500, no validators.
pub fn simulated_request(
    period: u64,
    downloaded: bool,
    changed: Option<bool>,
    bytes: u64,
    latency_ms: f64,
) -> LastRequest {
    LastRequest {
        period,
        downloaded,
        outcome: if downloaded { FetchOutcome::Downloaded } else { FetchOutcome::HttpStatus },
        changed,
        size_bytes: bytes,
        size_change_bytes: None,
        latency_ms,
        fetched_at: UtcTime::from_ms(0),
        fetched_at_ms: 0,
        http_status: Some(if downloaded { 200 } else { 500 }),
        crawl_delay_ms: None,
        etag: None,
        last_modified: None,
    }
}

/// A learned policy: the estimator's per-URL history and group distributions, and the
/// scheduler's book, fed with each request as it happens.
struct Learner {
    policy: Policy,
    book: Book,
    hosts: Hosts,
    host_caps: Vec<u32>,
    plan: PlanSettings,
    book_settings: BookSettings,
    horizon: Horizon,
    /// Each page as the estimator keeps it, known from time 0.
    pages: Vec<PageState>,
    groups: Vec<GroupPriors>,
    page_groups: Vec<u8>,
    /// Each host's pages by what their dates showed: the estimator groups by host.
    host_dates: Vec<DateTally>,
    /// Each host's pages, whose estimates are revised when the verdict on the host turns.
    host_pages: Vec<Vec<u32>>,
    eligibility: Eligibility,
    refresh: RefreshSettings,
    period_ms: f64,
    known_rates: bool,
    /// Whether the estimator recorded the initial crawl, whose copies the store starts
    /// with, as crawl 0 (period p's fetches are then crawl p + 1).
    initial_crawl: bool,
    /// The sites' sitemaps, where any site has one.
    sitemaps: Option<SitemapReader>,
}

/// When a request the learner hears of was made.
#[derive(Debug, Clone, Copy)]
enum Crawl {
    /// The crawl at time 0 that the store's first copies come from.
    Initial,
    /// A pick of `period`, fetched at `at` (in periods).
    Pick { period: u64, at: f64 },
}

const WINDOW: u32 = 5;

/// Histories (yes, no) with yes, no ≤ the window, indexed yes × (window + 1) + no: a
/// square holding every history of the window (yes + no ≤ it) for simple indexing.
const WINDOW_HISTORIES: usize = (WINDOW as usize + 1) * (WINDOW as usize + 1);

/// The index of `kind` in a group's pairs of histograms, priors and chances.
fn kind_index(kind: Kind) -> usize {
    match kind {
        Kind::Dr => 0,
        Kind::Mr => 1,
    }
}

struct GroupPriors {
    /// The estimator's model of both forecasts.
    model: Model,
    histograms: [RateHistogram; 2],
    priors: [PreparedPrior; 2],
    /// The chance of a success (DR) and a change (MR) at the next request for every
    /// history of the window, under `priors`: they change only as a period ends, and
    /// every request asks one of these.
    next_chances: [[f64; WINDOW_HISTORIES]; 2],
    rate_counts: RateCounts,
    rate_prior: RatePrior,
}

impl GroupPriors {
    fn new(model: Model) -> Self {
        let histograms = [RateHistogram::new(), RateHistogram::new()];
        let (priors, next_chances) = Self::prepared(model, &histograms);
        Self {
            model,
            histograms,
            priors,
            next_chances,
            rate_counts: RateCounts::default(),
            rate_prior: RatePrior::default(),
        }
    }

    /// Prepares the priors from the histograms as they stand, and their chances.
    fn prepare(&mut self) {
        (self.priors, self.next_chances) = Self::prepared(self.model, &self.histograms);
    }

    fn prepared(
        model: Model,
        histograms: &[RateHistogram; 2],
    ) -> ([PreparedPrior; 2], [[f64; WINDOW_HISTORIES]; 2]) {
        let priors = histograms.each_ref().map(|histogram| PreparedPrior::new(histogram, 2 * WINDOW));
        let next_chances = [Kind::Dr, Kind::Mr].map(|kind| {
            let prior = &priors[kind_index(kind)];
            std::array::from_fn(|history| {
                let (yes, no) = (history / (WINDOW as usize + 1), history % (WINDOW as usize + 1));
                predict_next(model, kind, prior, yes as u32, no as u32)
            })
        });
        (priors, next_chances)
    }

    /// [`predict_next`] under the group's prior for `kind`.
    fn next_chance(&self, kind: Kind, (yes, no): (u32, u32)) -> f64 {
        let index = kind_index(kind);
        let window = WINDOW as usize + 1;
        match (yes as usize, no as usize) {
            (yes, no) if yes < window && no < window => self.next_chances[index][yes * window + no],
            _ => predict_next(self.model, kind, &self.priors[index], yes, no),
        }
    }
}

impl Learner {
    fn new(world: &dyn World, policy: Policy, config: &SimConfig) -> Self {
        let n = world.truth().len();
        let (mut book, mut hosts) = (Book::default(), Hosts::default());
        for page in 0..n as u32 {
            let host = format!("h{}", world.host(page));
            let url = format!("http://{host}/{page}");
            // Known from the initial crawl at time 0, nothing learned yet; on a cold start
            // known but never stored, as the pipeline's seeds are.
            let stored = (!config.cold_start).then_some(0);
            let added =
                book.add_tracked(&mut hosts, &url, &host, stored, world.bytes(page) as u32, 0.5, 1.0, None);
            debug_assert_eq!(added.ok(), Some(page));
        }
        let period_ms = config.period_minutes * 60_000.0;
        let plan = PlanSettings {
            policy,
            cost_weight: config.cost_weight,
            period_ms: period_ms as u64,
            discovery_share: 0.0,
            // Every pick is answered within its period.
            pending_periods: 0,
            time_of_day: config.time_of_day,
            ..PlanSettings::default()
        };
        let groups = (0..2).map(|_| GroupPriors::new(config.model)).collect();
        let hosts_count = (0..n as u32).map(|page| world.host(page) as usize + 1).max().unwrap_or(0);
        let mut host_pages = vec![Vec::new(); hosts_count];
        for page in 0..n as u32 {
            host_pages[world.host(page) as usize].push(page);
        }
        let learns_day = plan.scores_time_of_day();
        let sitemaps = (0..hosts_count as u32).any(|host| world.announces(host)).then(|| {
            // A host without pages has no slot to tell its book host by.
            let book_hosts = host_pages
                .iter()
                .map(|pages| pages.first().map_or(u32::MAX, |&page| book.page(page).host))
                .collect();
            SitemapReader::new(book_hosts, |host| world.announces(host), config.budget)
        });
        let mut learner = Self {
            policy,
            host_caps: vec![u32::MAX; hosts.len()],
            book,
            hosts,
            plan,
            // The simulated web's time 0 is period 0's start, as the plan's epoch.
            book_settings: BookSettings {
                period_ms: period_ms as u64,
                epoch_unix_ms: 0,
                learns_day,
                ..BookSettings::default()
            },
            horizon: config.horizon,
            pages: vec![PageState::new(0); n],
            groups,
            page_groups: (0..n as u32).map(|page| world.group(page).min(1) as u8).collect(),
            host_dates: vec![DateTally::default(); hosts_count],
            eligibility: config.eligibility,
            refresh: RefreshSettings::default(),
            period_ms,
            known_rates: config.known_rates,
            initial_crawl: !config.cold_start,
            sitemaps,
            host_pages,
        };
        // The estimator hears of the initial crawl as the stage would: a first request per
        // page, its download compared with nothing, failed where the page's period-0 request
        // fails (the store still holds a copy of it: every policy starts from the same store).
        if learner.initial_crawl {
            for page in 0..n as u32 {
                let last_modified = world.last_modified(page, None, 0.0);
                learner.learn(world, page, Crawl::Initial, world.downloads(page, 0), false, last_modified);
            }
            learner.end_period();
        }
        learner
    }

    /// The period's picks, after its sitemap polls, which take their share of the `m`.
    fn choose(&mut self, world: &dyn World, period: u64, m: usize) -> Vec<u32> {
        let mut polls = 0;
        if let Some(reader) = &mut self.sitemaps {
            for site in reader.due(&self.hosts, period).into_iter().take(m) {
                polls += 1;
                let entries = world.read_announcements(site, &self.host_pages[site as usize], period as f64);
                let settings = &self.book_settings;
                let listing = world.listing(site);
                reader.poll(
                    &mut self.book,
                    &mut self.hosts,
                    settings,
                    &entries,
                    listing,
                    site,
                    period,
                    period as f64,
                );
            }
        }
        let m = m - polls;
        let remaining = self.horizon.remaining(period);
        let choices = choose(&[&self.book], &self.hosts, period, remaining, m, &self.host_caps, &self.plan);
        choices
            .into_iter()
            .map(|choice| {
                self.book.picked(choice.slot, period);
                choice.slot
            })
            .collect()
    }

    /// Learns of a request of `page`; `changed` is whether the store's copy had missed a
    /// change, `last_modified` the server's header (periods).
    fn learn(
        &mut self,
        world: &dyn World,
        page: u32,
        when: Crawl,
        downloaded: bool,
        changed: bool,
        last_modified: Option<f64>,
    ) {
        let (period, at, crawl) = match when {
            Crawl::Initial => (0, 0.0, 0),
            Crawl::Pick { period, at } => (period, at, period + u64::from(self.initial_crawl)),
        };
        let slot = page as usize;
        let state = &mut self.pages[slot];
        // As the diff stage: a download is compared only with an earlier one the estimator
        // recorded, not with a copy the store holds from elsewhere.
        let compared = downloaded && state.history.successes > 0;
        let fetched_at_ms = (at * self.period_ms) as i64;
        let request = simulated_request(
            period,
            downloaded,
            compared.then_some(changed),
            world.bytes(page),
            world.response_ms(page, at),
        );
        let request = LastRequest { fetched_at: UtcTime::from_ms(fetched_at_ms), fetched_at_ms, ..request };
        let last_modified_ms = last_modified.map(|at| (at * self.period_ms) as i64);
        let observed = Request {
            period: crawl,
            fetched_at_ms,
            downloaded,
            changed: request.changed,
            size_bytes: request.size_bytes,
            update_size: request.size_change_bytes,
            latency_ms: request.latency_ms,
            last_modified_ms,
        };
        let settings = UpdateSettings {
            refresh: &self.refresh,
            eligibility: &self.eligibility,
            period_ms: self.period_ms as u64,
        };
        // The page's place in its group's DR and MR distributions, as the estimator keeps it.
        let group = &mut self.groups[usize::from(self.page_groups[slot])];
        let [download, change] = &mut group.histograms;
        let tallies = GroupTallies {
            download,
            change,
            rates: &mut group.rate_counts,
            dates: &mut self.host_dates[world.host(page) as usize],
        };
        let rate = state.update(&observed, settings, &group.rate_prior, true, crawl + 1, tallies);
        let p_download = group.next_chance(Kind::Dr, state.recent(Kind::Dr, WINDOW));
        let p_change = group.next_chance(Kind::Mr, state.recent(Kind::Mr, WINDOW));
        let schedule = (self.policy == Policy::Groups).then(|| {
            let plan = state.refresh(&self.refresh);
            CrawlSchedule::from_crawl_time(
                plan.group16,
                &plan.time,
                self.book_settings.hour_rule,
                &self.refresh.crawl_time,
                self.book_settings.classes,
            )
        });
        let (change_rate, low, high) = if self.known_rates {
            // A static page told its rate gets the grid's least, as the estimator would.
            let told = world.truth().rates()[slot].max(LOWEST_RATE);
            (told, told, told)
        } else {
            (rate.rate, rate.low, rate.high)
        };
        let learned = Learned {
            period,
            request: &request,
            p_change,
            p_download,
            change_rate: Some(change_rate),
            change_rate_low: Some(low),
            change_rate_high: Some(high),
            schedule,
            last_modified_ms,
        };
        self.book.learn(&mut self.hosts, page, &learned, &self.book_settings);
    }

    /// The estimator files its partitions' shares once per batch; here, once a period.
    fn end_period(&mut self) {
        for group in &mut self.groups {
            group.prepare();
            group.rate_prior = RatePrior::new(&group.rate_counts);
        }
        for (host, tally) in self.host_dates.iter_mut().enumerate() {
            let trusted_before = tally.trusted();
            tally.settle();
            let trusted = tally.trusted();
            if self.known_rates || trusted_before == trusted {
                continue;
            }
            // As the estimator revises its estimates when the verdict on a group's server
            // turns: the verdict holds from one turn to the next, so every page awaiting it
            // was estimated under the other.
            for &page in &self.host_pages[host] {
                let state = &self.pages[page as usize];
                if state.dates_await_trust() {
                    let prior = &self.groups[usize::from(self.page_groups[page as usize])].rate_prior;
                    let rate = state.change_rate(prior, self.period_ms as u64, trusted);
                    self.book.revise_rate(
                        page,
                        Some(rate.rate),
                        Some((rate.low, rate.high)),
                        &self.hosts,
                        &self.book_settings,
                    );
                }
            }
        }
        self.book.clear_dirty();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::measure::fixed_interval_freshness;
    use rand::{RngExt, SeedableRng};
    use rand_pcg::Pcg64;

    #[test]
    fn a_group_s_next_request_chances_are_the_model_s() {
        for model in [Model::BetaBinomial, Model::Paper, Model::Poisson] {
            let mut group = GroupPriors::new(model);
            [90, 90, 95, 100, 100, 100, 40, 3].into_iter().for_each(|fine| group.histograms[0].add(fine));
            [0, 0, 0, 5, 12, 50].into_iter().for_each(|fine| group.histograms[1].add(fine));
            group.prepare();
            // Every history of the window, and two beyond it.
            let histories = (0..=WINDOW).flat_map(|yes| (0..=WINDOW - yes).map(move |no| (yes, no)));
            for (yes, no) in histories.chain([(WINDOW + 1, 0), (3, 2 * WINDOW)]) {
                for (index, kind) in [Kind::Dr, Kind::Mr].into_iter().enumerate() {
                    let expected = predict_next(model, kind, &group.priors[index], yes, no);
                    let found = group.next_chance(kind, (yes, no));
                    assert_eq!(found.to_bits(), expected.to_bits(), "{model:?} {kind:?} ({yes}, {no})");
                }
            }
            // Prepared from the histograms, not the empty priors it started with (the
            // Poisson model has no prior).
            let empty = PreparedPrior::new(&RateHistogram::new(), 2 * WINDOW);
            if model != Model::Poisson {
                let (found, alone) =
                    (group.next_chance(Kind::Dr, (4, 0)), predict_next(model, Kind::Dr, &empty, 4, 0));
                assert_ne!(found, alone, "{model:?}");
            }
        }
    }

    /// Pages with Poisson changes of known rates; every request downloads.
    struct KnownRates(Truth);

    impl KnownRates {
        fn new(rates: &[f64], horizon: f64) -> Self {
            let mut rng = Pcg64::seed_from_u64(0x2545_F491_4F6C_DD1D);
            let changes = rates
                .iter()
                .map(|&rate| {
                    let mut times = Vec::new();
                    let mut t = 0.0;
                    if rate > 0.0 {
                        loop {
                            t += -(1.0 - rng.random::<f64>()).ln() / rate;
                            if t >= horizon {
                                break;
                            }
                            times.push(t);
                        }
                    }
                    times
                })
                .collect();
            Self(Truth::from_changes(horizon, changes, rates.to_vec()))
        }
    }

    impl World for KnownRates {
        fn truth(&self) -> &Truth {
            &self.0
        }
        fn host(&self, _page: u32) -> u32 {
            0
        }
        fn group(&self, _page: u32) -> usize {
            0
        }
        fn bytes(&self, _page: u32) -> u64 {
            1000
        }
        fn downloads(&self, _page: u32, _period: u64) -> bool {
            true
        }
        fn response_ms(&self, _page: u32, _t: f64) -> f64 {
            10.0
        }
    }

    fn config(periods: u64, budget: f64) -> SimConfig {
        SimConfig { periods, budget, threads: 1, ..SimConfig::default() }
    }

    #[test]
    fn the_known_rate_optimum_matches_the_closed_forms_on_two_pages() {
        let periods = 20_000;
        // λ = (1, 4), one pick a period. By hand: the marginal freshness of a crawl
        // frequency f is ∂F/∂f = (1 − e^{−λ/f})/λ − e^{−λ/f}/f, which tends to 1/λ as
        // f → 0. All the budget on page 0 (f = 1) leaves ∂F₀/∂f = 1 − 2/e ≈ 0.264 above
        // page 1's 1/4 at f = 0: page 1 is never crawled. Page 0 crawled every period has
        // F = 1 − e^{−1} (r = λ·I = 1); page 1 is stale from its first change on.
        let world = KnownRates::new(&[1.0, 4.0], periods as f64);
        let optimum = run_policy(&world, SimPolicy::Optimum, &config(periods, 0.5));
        let expected = fixed_interval_freshness(1.0, 1.0) / 2.0;
        assert!((optimum.freshness - expected).abs() < 0.006, "{} vs {expected}", optimum.freshness);
        assert_eq!(optimum.requests, periods);
        // Equal rates 0.5, one pick a period: each page every other period, r = 1.
        let world = KnownRates::new(&[0.5, 0.5], periods as f64);
        let optimum = run_policy(&world, SimPolicy::Optimum, &config(periods, 0.5));
        let expected = fixed_interval_freshness(0.5, 2.0);
        assert!((optimum.freshness - expected).abs() < 0.006, "{} vs {expected}", optimum.freshness);
    }

    #[test]
    fn fetches_land_within_the_fetch_window_of_their_period() {
        // One page that never changes, nothing stored at first: stale until its first
        // fetch, half the window into period 0.
        let world = KnownRates::new(&[0.0], 10.0);
        for window in [1.0, 0.2] {
            let config = SimConfig { cold_start: true, fetch_window: window, ..config(10, 1.0) };
            let result = run_policy(&world, SimPolicy::Scheduler(Policy::Uniform), &config);
            let expected = 1.0 - 0.5 * window / 10.0;
            assert!((result.freshness - expected).abs() < 1e-9, "window {window}: {}", result.freshness);
        }
    }

    #[test]
    fn told_the_rates_the_freshness_index_matches_the_known_rate_optimum() {
        // 2,000 pages, rates spread log-evenly from 0.002 to about 6 changes a period.
        let rates: Vec<f64> = (0..2000).map(|i| 0.002 * 1.004f64.powi(i)).collect();
        let periods = 400;
        let world = KnownRates::new(&rates, periods as f64);
        for budget in [0.05, 0.2] {
            let config = SimConfig { known_rates: true, ..config(periods, budget) };
            let optimum = run_policy(&world, SimPolicy::Optimum, &config);
            let index = run_policy(&world, SimPolicy::Scheduler(Policy::Freshness), &config);
            let ratio = index.freshness / optimum.freshness;
            assert!(
                (ratio - 1.0).abs() <= 0.01,
                "R = {budget}: {} vs {}",
                index.freshness,
                optimum.freshness
            );
            assert_eq!(index.requests, optimum.requests);
        }
    }

    /// A date that never moves is kept by every unchanged download, and believed it would
    /// say a page has not changed since it was made: a page that changes is then never
    /// fetched again. Its sites' dates never show that they follow their pages, so the
    /// learned policy does exactly as well as if they sent none (before, believed once
    /// kept: 0.976 against 0.995 of the optimum at R = 0.05 with a fifth of the sites so).
    #[test]
    fn dates_that_never_move_cost_a_learned_policy_nothing_against_no_dates() {
        use crate::sim::web::{ServerDates, WebParams};
        let web = |stuck_dates_share| {
            Web::generate(WebParams {
                seed: 5,
                sites: 40,
                pages_per_site: 50,
                stuck_dates_share,
                ..WebParams::default()
            })
        };
        let (stuck, undated) = (web(0.3), web(0.0));
        let sites = |web: &Web, dates| web.sites().iter().filter(|site| site.dates == dates).count();
        assert!(sites(&stuck, ServerDates::Stuck) >= 5, "some sites send dates that never move");
        assert_eq!(sites(&stuck, ServerDates::Truthful), sites(&undated, ServerDates::Truthful));
        let periods = 60;
        let freshness = |web: &Web| {
            let world = SimulatedWeb { truth: Truth::of_web(web, periods as f64), web };
            run_policy(&world, SimPolicy::Scheduler(Policy::Freshness), &config(periods, 0.05)).freshness
        };
        assert_eq!(freshness(&stuck), freshness(&undated));
    }

    #[test]
    fn the_clairvoyant_wastes_nothing_and_learned_policies_see_only_their_fetches() {
        let rates: Vec<f64> =
            (0..400).map(|i| if i % 4 == 0 { 0.0 } else { 0.01 * f64::from(i % 37) }).collect();
        let world = KnownRates::new(&rates, 60.0);
        let results = simulate(&world, &SimPolicy::all(), &config(60, 0.1));
        let clairvoyant = results.iter().find(|r| r.name == "clairvoyant").expect("clairvoyant");
        assert_eq!(clairvoyant.wasted_requests, 0);
        for result in &results {
            assert!(result.freshness <= clairvoyant.freshness + 1e-9, "{result:?}");
            assert_eq!(result.sees_truth, matches!(result.name, "optimum" | "clairvoyant" | "proportional"));
            assert!(result.requests <= 60 * 40, "{result:?}");
        }
        // Learning from its own fetches: Nutch's intervals stretch for the pages it found
        // unchanged, so it downloads fewer unchanged pages than uniform round robin,
        // which knows nothing of the rates.
        let of = |name: &str| results.iter().find(|r| r.name == name).expect(name);
        assert!(of("nutch-adaptive").unchanged_downloads < of("uniform").unchanged_downloads);
    }

    #[test]
    fn the_learner_hears_of_the_initial_crawl_and_compares_only_downloads_it_recorded() {
        // Odd pages fail their requests of period 0.
        let world = Refusing {
            world: KnownRates::new(&[0.5; 4], 10.0),
            refuses: |page: u32, period: u64| !page.is_multiple_of(2) && period == 0,
        };
        let policy = Policy::LambdaCrawl;
        let mut learner = Learner::new(&world, policy, &config(10, 0.5));
        for (page, state) in learner.pages.iter().enumerate() {
            let history = &state.history;
            assert_eq!((history.requests, history.first_request, history.comparisons), (1, 0, 0), "{page}");
            assert_eq!(history.successes, u32::from(page.is_multiple_of(2)), "{page}");
        }
        // A download at period 4 is crawl 5: compared with the initial crawl's download
        // over 5 periods, or, after a failed initial crawl, with nothing.
        for page in [0, 1] {
            learner.learn(&world, page, Crawl::Pick { period: 4, at: 4.5 }, true, true, None);
        }
        let history = &learner.pages[0].history;
        assert_eq!((history.comparisons, history.changes), (1, 1));
        assert_eq!(learner.pages[0].comparison_spacing(), Some(5.0));
        assert_eq!((learner.pages[1].history.successes, learner.pages[1].history.comparisons), (1, 0));

        // A store that starts empty was filled by no crawl the estimator heard of.
        let cold = SimConfig { cold_start: true, ..config(10, 0.5) };
        let mut learner = Learner::new(&world, policy, &cold);
        assert!(learner.pages.iter().all(|state| state.history.requests == 0));
        learner.learn(&world, 0, Crawl::Pick { period: 0, at: 0.5 }, true, true, None);
        learner.learn(&world, 0, Crawl::Pick { period: 3, at: 3.5 }, true, false, None);
        let history = &learner.pages[0].history;
        assert_eq!((history.successes, history.comparisons, history.changes), (2, 1, 0));
        assert_eq!((history.first_request, learner.pages[0].comparison_spacing()), (0, Some(3.0)));
    }

    #[test]
    fn a_cold_start_stores_every_page_before_refreshing_any() {
        // Eight pages that never change, two picks a period, a store that starts empty:
        // a page never stored is stale whatever its rate, so each policy stores all eight
        // in the first four periods, and the store is fresh from then on.
        let world = KnownRates::new(&[0.0; 8], 6.0);
        let cold = SimConfig { cold_start: true, freshness_by_period: true, ..config(6, 0.25) };
        for policy in [Policy::Uniform, Policy::Freshness, Policy::LambdaCrawl, Policy::ChangeAware] {
            let result = run_policy(&world, SimPolicy::Scheduler(policy), &cold);
            assert_eq!(result.freshness_by_period, [0.25, 0.5, 0.75, 1.0, 1.0, 1.0], "{policy:?}");
        }
    }

    #[test]
    fn paper_staleness_is_the_mean_periods_since_download() {
        // Four pages, one pick a period in turn (uniform). Measured at the end of each
        // period, a page's s_j is 0 in the period of its download and the one after, then
        // 1, then 2: a mean of 0.75.
        let world = KnownRates::new(&[0.0; 4], 400.0);
        let uniform = run_policy(&world, SimPolicy::Scheduler(Policy::Uniform), &config(400, 0.25));
        assert!((uniform.paper_staleness - 0.75).abs() < 0.02, "{}", uniform.paper_staleness);
        assert_eq!(uniform.freshness, 1.0);
        assert_eq!(uniform.unchanged_downloads, 400);
    }
}
