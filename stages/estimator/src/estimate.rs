//! The estimator's per-event work over one instance's partitions: the URL's own step
//! (`recrawl_model::page`, which the simulator runs too), its partition's share of the
//! group distributions, and the published estimate. No Kafka: the stage and the benches
//! run this code.

use std::collections::HashSet;
use std::sync::Arc;

use recrawl_common::state::{KeyHashState, PartitionKey};
use recrawl_common::{http_date_ms, StateStore};
use recrawl_schemas::envelope::{decode_as, EnvelopeError, Framed};
use recrawl_schemas::{
    bounds, ChangeEvent, FetchOutcome, Forecast, ForecastModel, ForecastPrior, Format, GroupDistribution,
    HostTrust, LastRequest, Message, PageAnnouncement, PageEstimate, PageRef, RefreshPlan, UtcTime,
    ValidationError,
};
use serde::{Deserialize, Serialize};

use crate::claims::{claimed_rate, take_claim, Announced, HostTrustBook, KeptClaims, TrustFiled};
use crate::distribution::{DistributionBook, DistributionError, Filed, GroupView, Partial};
use recrawl_model::claims::Span;
use recrawl_model::modified::DateTally;
use recrawl_model::page::{BinMove, GroupTallies, PageRate, PageState, RateSource, Request, UpdateSettings};
use recrawl_model::prediction::{forecast, Eligibility, Kind, Model, PreparedPrior, Prior, FINE_BINS};
use recrawl_model::rate::{RateCounts, RatePrior};
use recrawl_model::refresh::RefreshSettings;
use recrawl_model::DEFAULT_PERIOD_MS;

/// What a URL's group is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum GroupBy {
    /// The URL's host. `label` is schema 1's name for it: the seed label the picks carried
    /// was always the host.
    #[default]
    #[value(alias = "label")]
    Host,
    /// The URL's site, its registered domain (public suffix + 1): `news.example.co.kr` →
    /// `example.co.kr`.
    #[value(alias = "domain")]
    Site,
}

impl GroupBy {
    pub fn group_of(self, event: &ChangeEvent) -> &str {
        match self {
            Self::Host => &event.page.host,
            Self::Site => &event.page.site,
        }
    }
}

/// Everything the per-event work is configured by.
#[derive(Debug, Clone)]
pub struct Settings {
    pub group_by: GroupBy,
    pub model: Model,
    /// Latest requests (comparisons) a forecast conditions on.
    pub window: u32,
    /// Requests (comparisons) a forecast covers.
    pub future: u32,
    pub eligibility: Eligibility,
    pub refresh: RefreshSettings,
    /// The scheduler's period, ms: what turns the time a `Last-Modified` date gives into
    /// periods, the unit of the change rates.
    pub period_ms: u64,
    /// Most groups filed from other instances' shares.
    pub max_groups: usize,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            group_by: GroupBy::Host,
            model: Model::default(),
            window: 5,
            future: 5,
            eligibility: Eligibility::default(),
            refresh: RefreshSettings::default(),
            period_ms: DEFAULT_PERIOD_MS,
            max_groups: DEFAULT_MAX_GROUPS,
        }
    }
}

/// Default of [`Settings::max_groups`]: a crawl of a million hosts (sites).
pub const DEFAULT_MAX_GROUPS: usize = 1_000_000;

/// What the estimator keeps per URL (changelog `state.estimator`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EstimatorState {
    pub host: String,
    /// One allocation per group and partition, shared by its URLs (`Estimator::apply`,
    /// `Estimator::restored`) rather than a copy per URL.
    pub group: Arc<str>,
    /// The step's own state; its bins are those of the partition's share of the group.
    pub page: PageState,
    /// What the URL's latest estimate repeated of its request, kept while its rate rests
    /// on its group's trust (`PageState::dates_await_trust`), so that the estimate can be
    /// sent again with a revised rate without the event; `None` otherwise, and in a state
    /// written before version 4 until the URL's next request.
    pub last_response: Option<Box<LastResponse>>,
    /// What its site's sitemaps and feeds claimed of it (`crate::claims`): boxed, as most
    /// URLs have none; `None` also in a state written before version 5.
    pub claims: Option<Box<KeptClaims>>,
}

/// What an estimate repeats of the change event of its request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LastResponse {
    pub page: PageRef,
    pub downloaded: bool,
    pub changed: Option<bool>,
    pub http_status: Option<u16>,
    pub crawl_delay_ms: Option<u64>,
    pub etag: Option<String>,
    pub last_modified: Option<String>,
    /// Whether the URL's latest estimate took its group's server as trusted: a restored
    /// partition revises the URLs whose verdict has turned since, however a revision was
    /// lost (a crash, a rebalance before the turn's period began).
    pub estimated_trusted: bool,
}

/// What an estimate repeats of its request, borrowed from the event or from what a URL
/// keeps for a revision: cloned once, into the estimate.
#[derive(Debug, Clone, Copy)]
struct Echo<'a> {
    page: &'a PageRef,
    downloaded: bool,
    outcome: FetchOutcome,
    changed: Option<bool>,
    http_status: Option<u16>,
    crawl_delay_ms: Option<u64>,
    etag: Option<&'a String>,
    last_modified: Option<&'a String>,
}

impl<'a> From<&'a ChangeEvent> for Echo<'a> {
    fn from(event: &'a ChangeEvent) -> Self {
        Self {
            page: &event.page,
            downloaded: event.downloaded,
            outcome: event.outcome,
            changed: event.changed,
            http_status: event.http_status,
            crawl_delay_ms: event.crawl_delay_ms,
            etag: event.etag.as_ref(),
            last_modified: event.last_modified.as_ref(),
        }
    }
}

impl<'a> From<&'a LastResponse> for Echo<'a> {
    fn from(kept: &'a LastResponse) -> Self {
        Self {
            page: &kept.page,
            downloaded: kept.downloaded,
            // Not kept: a revision's request was a download, or failed with its status.
            outcome: FetchOutcome::inferred(kept.downloaded, kept.http_status),
            changed: kept.changed,
            http_status: kept.http_status,
            crawl_delay_ms: kept.crawl_delay_ms,
            etag: kept.etag.as_ref(),
            last_modified: kept.last_modified.as_ref(),
        }
    }
}

impl LastResponse {
    pub fn of(event: &ChangeEvent, estimated_trusted: bool) -> Self {
        Self {
            estimated_trusted,
            page: event.page.clone(),
            downloaded: event.downloaded,
            changed: event.changed,
            http_status: event.http_status,
            crawl_delay_ms: event.crawl_delay_ms,
            etag: event.etag.clone(),
            last_modified: event.last_modified.clone(),
        }
    }
}

impl Message for EstimatorState {
    const NAME: &'static str = "EstimatorState";
    const FORMAT: Format = Format::Bincode;
    /// 2: `page.compared`, the periods the URL's comparisons span. 3: `page.dated`, what
    /// its `Last-Modified` headers said. 4: `last_response`. 5: `claims`.
    const VERSION: u16 = 5;
    /// Version 1 ends before `page.compared`, version 2 before `page.dated`, version 3
    /// before `last_response`, version 4 before `claims`, the last fields.
    const ADDED_TRAILING_OPTIONS: usize = 4;

    /// What an estimate repeats, and the fine bins the URL is counted in: out of range, a
    /// bin would index past its group's histogram and every estimate of the URL would be
    /// refused downstream.
    fn validate(&self) -> Result<(), ValidationError> {
        bounds::text("host", &self.host, bounds::MAX_HOST_BYTES)?;
        bounds::text("group", &self.group, bounds::MAX_HOST_BYTES)?;
        let page = &self.page;
        for (name, bin) in [("page.download_bin", page.download_bin), ("page.change_bin", page.change_bin)] {
            if let Some(bin) = bin.filter(|&bin| usize::from(bin) >= FINE_BINS) {
                return Err(ValidationError::FineBin { field: name.to_owned(), bin, bins: FINE_BINS });
            }
        }
        bounds::period(page.history.first_request)?;
        bounds::period(page.history.last_request)?;
        bounds::time_ms("page.first_seen_ms", page.first_seen_ms)?;
        bounds::time_ms("page.last_fetched_at_ms", page.last_fetched_at_ms)?;
        bounds::size_bytes("page.last_size_bytes", page.last_size_bytes)?;
        bounds::duration_ms("page.last_latency_ms", f64::from(page.last_latency_ms))?;
        if let Some(last) = &self.last_response {
            last.page.validate("last_response.page")?;
            // Revisions republish it as the estimate's last request, which must hold.
            if last.changed.is_some() && !last.downloaded {
                return Err(ValidationError::Contradiction(
                    "last_response.changed is set on a request that did not download",
                ));
            }
            bounds::header("last_response.etag", last.etag.as_deref())?;
            bounds::header("last_response.last_modified", last.last_modified.as_deref())?;
        }
        if let Some(claims) = &self.claims {
            let claimed = &claims.url.claimed;
            bounds::time_ms("claims.url.claimed.latest.changed_ms", claimed.latest.changed_ms)?;
            bounds::time_ms("claims.url.claimed.latest.seen_ms", claimed.latest.seen_ms)?;
        }
        Ok(())
    }

    /// Versions 1 to 4 read with the fields they lack absent; the state then estimates
    /// as it did, dates count from the next download, and the URL's estimate is revised
    /// only after its next request.
    fn read_earlier(framed: &Framed<'_>, bytes: &[u8]) -> Result<Self, EnvelopeError> {
        decode_as(framed, bytes)
    }
}

/// The rate `entry`'s claimed changes give it while its host's claims are trusted.
fn rate_from_claims(entry: &EstimatorState, trust: &HostTrustBook, period_ms: u64) -> Option<PageRate> {
    claimed_rate(entry.claims.as_deref(), &entry.host, trust, period_ms)
}

/// The result of applying one event.
#[derive(Debug)]
pub enum Applied {
    /// A new request: the state changed.
    New(Box<PageEstimate>, Noted),
    /// The URL's latest request again (a replay after a crash): nothing changed; the
    /// estimate is sent again, as the first run sent it.
    Repeated(Box<PageEstimate>),
    /// An older request than the latest applied: ignored.
    Stale,
    /// A pick that made no request (robots-denied, deferred): not part of the history
    /// (`docs/algorithms/estimator.md` §1), so nothing is recorded or predicted.
    NotARequest,
}

/// What a new request tells the metrics besides its estimate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Noted {
    /// What its change rate rests on.
    pub rate_source: RateSource,
    /// The time since the URL's previous request disagrees with `--period-ms`
    /// ([`pace_disagrees`]).
    pub pace_disagrees: bool,
}

/// Whether `elapsed_ms` between two requests `periods` apart is under half or over twice
/// what `period_ms` gives. A request is made within its period, so over 4 periods or more
/// the spacing stays within a quarter of that even when each fetch is late in its period;
/// outside the factor of 2 the estimator's period is not the scheduler's, and the rates it
/// learns from `Last-Modified` dates are off by the same factor. Fewer periods: `false`.
pub fn pace_disagrees(periods: u64, elapsed_ms: i64, period_ms: u64) -> bool {
    if periods < 4 || period_ms == 0 {
        return false;
    }
    let ratio = elapsed_ms as f64 / (periods as f64 * period_ms as f64);
    !(0.5..=2.0).contains(&ratio)
}

/// This instance's share of a group in one partition, as it changes.
#[derive(Debug, Default)]
struct LivePartial {
    partial: Partial,
    /// Changed since it was last filed and published.
    unpublished: bool,
    /// The partition's URLs of the group by their rate evidence, and the prior fitted to
    /// them for its rate estimates, rebuilt as a period begins
    /// ([`LivePartial::begin_period`]). Local: each partition holds enough of a group's
    /// URLs for its own prior.
    rates: RateCounts,
    rate_prior: RatePrior,
    /// The partition's URLs of the group by what their dates showed; settled with the
    /// prior.
    dates: DateTally,
    /// The partition's URLs of the group whose rate rests on whether `dates` is trusted
    /// (`PageState::dates_await_trust`): their estimates are revised when its verdict
    /// turns.
    awaiting_trust: HashSet<String>,
}

impl LivePartial {
    /// Fits the rate prior and settles the date tally to the URLs as they stand: done when
    /// the partition moves to a later period, and on restore from every restored URL, so
    /// a period's estimates come from the URLs as the earlier periods left them, however
    /// the events were batched or the partitions shared out.
    /// Returns whether the verdict on the group's server turned, either way.
    fn begin_period(&mut self) -> bool {
        let trusted_before = self.dates.trusted();
        self.rate_prior = RatePrior::new(&self.rates);
        self.dates.settle();
        trusted_before != self.dates.trusted()
    }

    /// Notes whether `url`'s rate rests on the group's trust, `before` and now that its
    /// state is `page`: the set is touched only when that changes, which is rare.
    fn track_trust(&mut self, url: &str, before: bool, page: &PageState) {
        match (before, page.dates_await_trust()) {
            (false, true) => {
                self.awaiting_trust.insert(url.to_owned());
            }
            (true, false) => {
                self.awaiting_trust.remove(url);
            }
            _ => {}
        }
    }
}

/// The per-event work of the estimator.
#[derive(Debug)]
pub struct Estimator {
    settings: Settings,
    book: DistributionBook,
    /// Keyed by the group name its URLs share.
    live: hashbrown::HashMap<(i32, Arc<str>), LivePartial, KeyHashState>,
    /// Partials filed in the book and waiting to be published.
    outbox: Vec<GroupDistribution>,
    /// Estimates sent again with a revised rate, waiting to be published, with the
    /// partition of their URL: a revoked partition's are dropped, as its state is.
    revised: Vec<(i32, PageEstimate)>,
    /// Each host's claim tally, as `host-trust` says.
    host_trust: HostTrustBook,
}

impl Estimator {
    pub fn new(settings: Settings) -> Self {
        let book =
            DistributionBook::new(settings.window.saturating_add(settings.future), settings.max_groups);
        // A host is at most a group: the same bound.
        let host_trust = HostTrustBook::new(settings.max_groups);
        Self {
            settings,
            book,
            live: hashbrown::HashMap::default(),
            outbox: Vec::new(),
            revised: Vec::new(),
            host_trust,
        }
    }

    /// Files a share of a host's claim tally read from `host-trust`.
    pub fn file_trust(&mut self, record: &HostTrust) -> TrustFiled {
        self.host_trust.file(record)
    }

    pub fn host_trust(&self) -> &HostTrustBook {
        &self.host_trust
    }

    /// Counts what `announcement`, read from `partition`, claims of its URL's changes;
    /// `latest_ms` is the latest time its document can have been read. The URL's next
    /// estimate is rated by its claimed changes once its host is trusted.
    pub fn announce(
        &mut self,
        announcement: &PageAnnouncement,
        partition: i32,
        state: &mut StateStore<EstimatorState>,
        latest_ms: i64,
    ) -> Announced {
        let url = &announcement.page.url;
        let kept = state.get(partition, url).map(|entry| {
            // Its downloads were timed before its first claim: the latest request's, if it
            // downloaded, is the next comparison's start.
            let downloaded = entry.page.history.recent_requests.counts(1).0 == 1;
            let last_download = downloaded.then(|| Span::at(entry.page.last_fetched_at_ms));
            entry.claims.as_deref().copied().unwrap_or_else(|| KeptClaims::new(last_download))
        });
        let (announced, changed) = take_claim(announcement, kept, latest_ms);
        // Only then: `get_mut` writes the URL to the changelog.
        if let Some(after) = changed {
            if let Some(entry) = state.get_mut(partition, url) {
                match entry.claims.as_deref_mut() {
                    Some(claims) => *claims = after,
                    None => entry.claims = Some(Box::new(after)),
                }
            }
        }
        announced
    }

    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    pub fn book(&self) -> &DistributionBook {
        &self.book
    }

    /// Applies `event`, read from `partition`, and predicts for its URL.
    pub fn apply(
        &mut self,
        event: &ChangeEvent,
        partition: i32,
        state: &mut StateStore<EstimatorState>,
        now_ms: i64,
    ) -> Applied {
        if !event.outcome.is_request() {
            return Applied::NotARequest;
        }
        let group = self.settings.group_by.group_of(event);
        // One lookup: the slot is marked for the changelog only once the event counts.
        let slot = state.slot_or_insert_with(partition, &event.page.url, || EstimatorState {
            host: event.page.host.clone(),
            group: shared_group(&self.live, partition, group),
            page: PageState::new(event.fetched_at_ms),
            last_response: None,
            claims: None,
        });
        let history = &slot.peek().page.history;
        if history.requests > 0 && event.period <= history.last_request {
            if event.period < history.last_request {
                return Applied::Stale;
            }
            let entry = slot.peek();
            let view = self.book.view(&entry.group, event.period);
            let live = self.live.get(&PartitionKey(partition, &entry.group));
            let crawls = crawls(event.period, &view, live, history.first_request);
            let flat = RatePrior::default();
            let (prior, trusted) =
                live.map_or((&flat, false), |live| (&live.rate_prior, live.dates.trusted()));
            let rate = entry.page.change_rate(prior, self.settings.period_ms, trusted);
            let rate = rate_from_claims(entry, &self.host_trust, self.settings.period_ms).unwrap_or(rate);
            return Applied::Repeated(Box::new(self.estimate(event.into(), entry, &view, crawls, rate)));
        }
        let entry = slot.touch();
        let new_url = entry.page.history.requests == 0;
        let moved = *entry.group != *group;
        if moved {
            // The group key changed (a new --group-by): move the URL.
            if let Some(old) = self.live.get_mut(&PartitionKey(partition, &entry.group)) {
                BinMove { from: entry.page.download_bin.take(), to: None }.apply(&mut old.partial.download);
                BinMove { from: entry.page.change_bin.take(), to: None }.apply(&mut old.partial.change);
                old.rates.replace(entry.page.rate_evidence(self.settings.period_ms), None);
                old.dates.replace(entry.page.date_verdict(), None);
                if entry.page.dates_await_trust() {
                    old.awaiting_trust.remove(&event.page.url);
                }
                old.partial.urls = old.partial.urls.saturating_sub(1);
                old.unpublished = true;
            }
            entry.group = shared_group(&self.live, partition, group);
        }
        let awaited_trust = !moved && entry.page.dates_await_trust();
        let off_pace = entry.page.history.first_and_last().is_some_and(|(_, last)| {
            let elapsed_ms = event.fetched_at_ms.saturating_sub(entry.page.last_fetched_at_ms);
            pace_disagrees(event.period.saturating_sub(last), elapsed_ms, self.settings.period_ms)
        });
        entry.host.clone_from(&event.page.host);

        let key = PartitionKey(partition, group);
        // Inserted on the group's first event, keyed by the name its URLs share.
        let live = match self.live.get_mut(&key) {
            Some(live) => live,
            None => self.live.entry((partition, Arc::clone(&entry.group))).or_default(),
        };
        let turned = live.partial.period < event.period && live.begin_period();
        let trusted = live.dates.trusted();
        if live.unpublished && live.partial.period < event.period {
            // The partition moves to a later period: what it holds now covers only the
            // earlier ones, which is what other instances predict the new period from.
            self.book.insert(group, partition, live.partial.clone());
            self.outbox.push(live.partial.to_message(group, partition, now_ms));
            live.unpublished = false;
        }
        let view = self.book.view(group, event.period);
        let first_request = entry.page.history.first_request_with(event.period);
        let crawls = crawls(event.period, &view, Some(&*live), first_request);
        let settings = UpdateSettings {
            refresh: &self.settings.refresh,
            eligibility: &self.settings.eligibility,
            period_ms: self.settings.period_ms,
        };
        let tallies = GroupTallies {
            download: &mut live.partial.download,
            change: &mut live.partial.change,
            rates: &mut live.rates,
            dates: &mut live.dates,
        };
        // A URL that just moved group is not yet counted in the new one's tallies.
        let rate = entry.page.update(&request_of(event), settings, &live.rate_prior, !moved, crawls, tallies);
        if let (Some(claims), true) = (entry.claims.as_deref_mut(), event.downloaded) {
            claims.observe_download(event.fetched_at_ms, event.changed);
        }
        let rate = rate_from_claims(entry, &self.host_trust, self.settings.period_ms).unwrap_or(rate);
        live.track_trust(&event.page.url, awaited_trust, &entry.page);
        entry.last_response =
            entry.page.dates_await_trust().then(|| Box::new(LastResponse::of(event, trusted)));
        let partial = &mut live.partial;
        partial.urls = partial.urls.saturating_add(u64::from(new_url || moved));
        partial.requests = partial.requests.saturating_add(1);
        partial.period = partial.period.max(event.period);
        partial.first_period = partial.first_period.min(entry.page.history.first_request);
        live.unpublished = true;
        let noted = Noted { rate_source: rate.source, pace_disagrees: off_pace };
        let estimate = self.estimate(event.into(), entry, &view, crawls, rate);
        if turned {
            self.revise(key, &view, state);
        }
        Applied::New(Box::new(estimate), noted)
    }

    /// Queues the estimates of the URLs of `key` (partition, group) whose rate rests on the
    /// verdict on the group's server and whose latest estimate took the other verdict:
    /// their proven dates now count, or no longer do, and without a revision their
    /// estimates would wait for their next request, which a rate from comparisons alone,
    /// or from dates no longer believed, can put far off.
    fn revise(&mut self, key: PartitionKey<'_>, view: &GroupView, state: &mut StateStore<EstimatorState>) {
        let Some(live) = self.live.get(&key) else { return };
        let trusted = live.dates.trusted();
        let mut revised = Vec::new();
        for url in &live.awaiting_trust {
            let Some(entry) = state.get(key.0, url) else { continue };
            // Absent in a state from before version 4: revised after its next request.
            let Some(response) = entry.last_response.as_deref() else { continue };
            if response.estimated_trusted == trusted {
                continue;
            }
            let history = &entry.page.history;
            let crawls = crawls(history.last_request, view, Some(live), history.first_request);
            let rate = entry.page.change_rate(&live.rate_prior, self.settings.period_ms, trusted);
            let rate = rate_from_claims(entry, &self.host_trust, self.settings.period_ms).unwrap_or(rate);
            revised.push((key.0, self.estimate(response.into(), entry, view, crawls, rate)));
            if let Some(response) = state.get_mut(key.0, url).and_then(|entry| entry.last_response.as_mut()) {
                response.estimated_trusted = trusted;
            }
        }
        self.revised.append(&mut revised);
    }

    /// The estimates revised since the last call: to publish after the estimate of the
    /// event that revised them, or after a restore before anything else of the next batch
    /// or tick, whose changelog carries the flags they flipped.
    pub fn take_revised(&mut self) -> Vec<PageEstimate> {
        std::mem::take(&mut self.revised).into_iter().map(|(_, estimate)| estimate).collect()
    }

    fn estimate(
        &self,
        response: Echo<'_>,
        entry: &EstimatorState,
        view: &GroupView,
        crawls: u64,
        change_rate: PageRate,
    ) -> PageEstimate {
        let settings = &self.settings;
        let page = &entry.page;
        let history = &page.history;
        let rates = history.rates(crawls);
        let forecast = |kind: Kind, prior: &PreparedPrior, (yes, no): (u32, u32)| {
            let (over, next) = forecast(settings.model, kind, prior, yes, no, settings.future);
            Forecast { yes, no, next, probabilities: over.probabilities, prior: forecast_prior(over.prior) }
        };
        let downloads = forecast(Kind::Dr, &view.download_prior, page.recent(Kind::Dr, settings.window));
        let changes_forecast = forecast(Kind::Mr, &view.change_prior, page.recent(Kind::Mr, settings.window));
        let plan = page.refresh(&settings.refresh);
        let time = plan.time;
        PageEstimate {
            page: response.page.clone(),
            group: String::from(&*entry.group),
            period: history.last_request,
            last_request: LastRequest {
                period: history.last_request,
                downloaded: response.downloaded,
                outcome: response.outcome,
                changed: response.changed,
                size_bytes: page.last_size_bytes,
                size_change_bytes: page.last_update_size,
                latency_ms: f64::from(page.last_latency_ms),
                fetched_at: UtcTime::from_ms(page.last_fetched_at_ms),
                fetched_at_ms: page.last_fetched_at_ms,
                http_status: response.http_status,
                crawl_delay_ms: response.crawl_delay_ms,
                etag: response.etag.cloned(),
                last_modified: response.last_modified.cloned(),
            },
            crawls,
            first_request_period: history.first_request,
            requests: history.requests.into(),
            successes: history.successes.into(),
            failures: history.failures.into(),
            comparisons: history.comparisons.into(),
            changes: history.changes.into(),
            request_rate: rates.request_rate,
            download_rate: rates.download_rate,
            download_recall: rates.download_recall,
            modification_rate: rates.modification_rate,
            change_recall: rates.change_recall,
            download_eligible: page.download_bin.is_some(),
            change_eligible: page.change_bin.is_some(),
            model: forecast_model(settings.model),
            downloads,
            changes_forecast,
            change_rate: Some(change_rate.rate),
            change_rate_low: Some(change_rate.low),
            change_rate_high: Some(change_rate.high),
            change_rate_prior_mean: Some(change_rate.prior_mean),
            change_rate_prior_urls: Some(change_rate.prior_pages),
            change_rate_source: change_rate.source,
            refresh: RefreshPlan {
                weekly_change_rate: plan.weekly_change_rate,
                group16: plan.group16,
                group6: plan.group6,
                crawls_per_week: plan.group6.crawls_per_week(),
                paper_hour: time.paper_hour,
                weekdays: time.weekdays,
                min_wait_hour: time.min_wait_hour,
                min_wait_slot: time.min_wait_slot,
            },
        }
    }

    /// Files and queues for publishing every share changed since the last call; returns
    /// the records to publish.
    pub fn take_partials(&mut self, now_ms: i64) -> Vec<GroupDistribution> {
        for ((partition, group), live) in &mut self.live {
            if live.unpublished {
                self.book.insert(group, *partition, live.partial.clone());
                self.outbox.push(live.partial.to_message(group, *partition, now_ms));
                live.unpublished = false;
            }
        }
        std::mem::take(&mut self.outbox)
    }

    /// Files another instance's (or an earlier owner's) published share.
    pub fn file(&mut self, record: &GroupDistribution) -> Result<Filed, DistributionError> {
        let partial = Partial::from_message(record)?;
        Ok(self.book.insert_shared(&record.group, record.partition, partial))
    }

    /// Rebuilds this partition's shares from its restored URLs; they are republished,
    /// since a crash may have lost the last publication. Queues the revisions the
    /// restored verdicts call for (`Self::revise`).
    pub fn restored(&mut self, partition: i32, state: &mut StateStore<EstimatorState>) {
        // Taken out to share each group's name among its URLs, which the decoder cannot.
        let loaded = state.is_loaded(partition);
        let mut urls = state.take_partition(partition);
        for (url, entry) in &mut urls {
            let live = match self.live.get_key_value_mut(&PartitionKey(partition, &entry.group)) {
                Some(((_, group), live)) => {
                    entry.group = Arc::clone(group);
                    live
                }
                None => self.live.entry((partition, Arc::clone(&entry.group))).or_default(),
            };
            live.track_trust(url, false, &entry.page);
            let partial = &mut live.partial;
            let page = &entry.page;
            BinMove { from: None, to: page.download_bin }.apply(&mut partial.download);
            BinMove { from: None, to: page.change_bin }.apply(&mut partial.change);
            live.rates.replace(None, page.rate_evidence(self.settings.period_ms));
            live.dates.replace(None, page.date_verdict());
            partial.urls = partial.urls.saturating_add(1);
            partial.requests = partial.requests.saturating_add(u64::from(page.history.requests));
            partial.period = partial.period.max(page.history.last_request);
            partial.first_period = partial.first_period.min(page.history.first_request);
            live.unpublished = true;
        }
        if loaded {
            state.insert_partition(partition, urls);
        }
        let mut groups = Vec::new();
        for (key, live) in self.live.iter_mut().filter(|((p, _), _)| *p == partition) {
            live.begin_period();
            // Only URLs waiting on their group's verdict can be revised.
            if !live.awaiting_trust.is_empty() {
                groups.push((key.clone(), live.partial.period));
            }
        }
        for (key, period) in groups {
            let view = self.book.view(&key.1, period);
            self.revise(PartitionKey(key.0, &key.1), &view, state);
        }
    }

    /// Forgets a revoked partition's shares; the book keeps their last publication until
    /// the new owner publishes.
    pub fn revoked(&mut self, partition: i32) {
        self.live.retain(|(p, _), _| *p != partition);
        // The new owner revises them from its changelog, which lacks their flags' flips; sent
        // from here, one could arrive after the new owner's.
        self.revised.retain(|(p, _)| *p != partition);
    }
}

/// The name `group`'s URLs in `partition` share, once the group has a share here.
fn shared_group(
    live: &hashbrown::HashMap<(i32, Arc<str>), LivePartial, KeyHashState>,
    partition: i32,
    group: &str,
) -> Arc<str> {
    live.get_key_value(&PartitionKey(partition, group))
        .map_or_else(|| Arc::from(group), |((_, name), _)| Arc::clone(name))
}

/// K for a request in `period`: crawls since the group's first request, as far as this
/// instance knows it.
fn crawls(period: u64, view: &GroupView, live: Option<&LivePartial>, first_request: u64) -> u64 {
    let first = [view.first_period, live.map(|l| l.partial.first_period), Some(first_request)]
        .into_iter()
        .flatten()
        .min()
        .unwrap_or(period)
        .min(period);
    period.saturating_sub(first).saturating_add(1)
}

/// The step's view of an event.
fn request_of(event: &ChangeEvent) -> Request {
    Request {
        period: event.period,
        fetched_at_ms: event.fetched_at_ms,
        downloaded: event.downloaded,
        changed: event.changed,
        size_bytes: event.size_bytes,
        update_size: event.size_change_bytes,
        latency_ms: event.latency_ms,
        // A header that is not an HTTP date is taken as no header.
        last_modified_ms: event.last_modified.as_deref().and_then(http_date_ms),
    }
}

fn forecast_prior(prior: Prior) -> ForecastPrior {
    match prior {
        Prior::Group => ForecastPrior::Group,
        Prior::Uniform => ForecastPrior::Uniform,
        Prior::None => ForecastPrior::None,
    }
}

fn forecast_model(model: Model) -> ForecastModel {
    match model {
        Model::Paper => ForecastModel::Paper,
        Model::BetaBinomial => ForecastModel::BetaBinomial,
        Model::Poisson => ForecastModel::Poisson,
    }
}

#[cfg(test)]
mod tests {
    use recrawl_common::format_http_date;
    use recrawl_model::modified::DateVerdict;
    use recrawl_schemas::{FetchOutcome, FrequencyGroup, RequestOutcome};

    use super::*;

    fn event(url: &str, period: u64, downloaded: bool, changed: Option<bool>) -> ChangeEvent {
        // 2026-11-20 (a Friday) 10:00 UTC plus a day per period.
        let fetched_at_ms = 1_795_687_200_000 + period as i64 * 86_400_000;
        let outcome = RequestOutcome { period, downloaded, changed, fetched_at_ms };
        ChangeEvent {
            size_change_bytes: changed.map(|_| 2),
            ..ChangeEvent::request(url, "news.example.co.kr:8080", outcome)
        }
    }

    fn new_estimate(applied: Applied) -> PageEstimate {
        match applied {
            Applied::New(estimate, _) => *estimate,
            other => panic!("expected a new estimate, got {other:?}"),
        }
    }

    fn assert_sums_to_one(forecast: &Forecast) {
        let sum: f64 = forecast.probabilities.iter().sum();
        assert!((sum - 1.0).abs() < 1e-9, "{forecast:?}");
    }

    #[test]
    fn a_first_request_in_an_empty_group_falls_back_to_uniform_and_says_so() {
        let first = |model| {
            let mut estimator = Estimator::new(Settings { model, ..Settings::default() });
            let mut state = StateStore::default();
            new_estimate(estimator.apply(&event("http://a/1", 1, true, None), 0, &mut state, 0))
        };
        let paper = first(Model::Paper);
        assert_eq!(paper.downloads.prior, ForecastPrior::Uniform);
        assert_eq!(paper.downloads.probabilities, vec![1.0 / 6.0; 6], "the uniform share of each count");
        assert_eq!((paper.requests, paper.crawls, paper.download_rate), (1, 1, Some(1.0)));
        assert!(paper.download_eligible, "the default counts every URL in its group's DR distribution");
        // The default, beta-binomial: a uniform prior on the rate, updated by the success.
        let default = first(Model::default());
        assert_eq!(default.downloads.prior, ForecastPrior::Uniform);
        assert_sums_to_one(&default.downloads);
        let p = &default.downloads.probabilities;
        assert!(p.windows(2).all(|w| w[0] < w[1]), "after a success, more successes are likelier: {p:?}");
    }

    #[test]
    fn a_last_modified_date_that_holds_sets_the_rate_where_its_server_dates_changes() {
        // Daily periods, as the events' times are a day apart; three unchanged downloads
        // of a/1. With `neighbour`, a/2 of the same host changes by period 2 and its date
        // moves to an hour before that download: the host's server dates changes.
        let settings = Settings { period_ms: 86_400_000, ..Settings::default() };
        let rate_after = |last_modified: &dyn Fn(u64) -> Option<String>, neighbour: bool| {
            let mut estimator = Estimator::new(settings.clone());
            let mut state = StateStore::default();
            let mut rate = (None, RateSource::Prior);
            for period in 1..=3u64 {
                if neighbour && period <= 2 {
                    let changed = (period == 2).then_some(true);
                    let at = event("x", period, true, None).fetched_at_ms;
                    let event = ChangeEvent {
                        last_modified: format_http_date(at - 3_600_000 * if period == 1 { 100 } else { 1 }),
                        ..event("http://a/2", period, true, changed)
                    };
                    estimator.apply(&event, 0, &mut state, 0);
                }
                let changed = (period > 1).then_some(false);
                let event = ChangeEvent {
                    last_modified: last_modified(period),
                    ..event("http://a/1", period, true, changed)
                };
                let Applied::New(estimate, noted) = estimator.apply(&event, 0, &mut state, 0) else {
                    panic!("a new request")
                };
                rate = (estimate.change_rate, noted.rate_source);
            }
            (rate.0.expect("a rate"), rate.1)
        };
        let (undated, source) = rate_after(&|_| None, true);
        assert_eq!(source, RateSource::Comparisons);
        // Dated two years before the first download, the date kept: quiet for two years,
        // where the server has shown it dates changes.
        let two_years = |_| Some("Sun, 20 Nov 2022 10:00:00 GMT".to_owned());
        let (dated, source) = rate_after(&two_years, true);
        assert_eq!(source, RateSource::Dates);
        assert!(dated < 0.01 && dated * 10.0 < undated, "{dated} against {undated}");
        // Alone, the kept date could be one that never moves: not used.
        assert_eq!(rate_after(&two_years, false).1, RateSource::Comparisons);
        // The time of each response: the date moves without a change, so it is not used.
        let response_time = |period: u64| format_http_date(event("x", period, true, None).fetched_at_ms);
        assert_eq!(rate_after(&response_time, true), (undated, RateSource::Comparisons));
        // Nor is a header that is not an HTTP date.
        assert_eq!(rate_after(&|_| Some("yesterday".to_owned()), true), (undated, RateSource::Comparisons));
    }

    #[test]
    fn a_url_s_estimate_is_revised_when_its_host_comes_to_be_trusted() {
        // Daily periods. a/1 keeps a date two years old over two downloads (proven, not
        // confirmed); a/2 confirms its server in period 2; the tally is settled as
        // period 3 begins, with a/3's event.
        let settings = Settings { period_ms: 86_400_000, ..Settings::default() };
        let mut estimator = Estimator::new(settings);
        let mut state = StateStore::default();
        let two_years = Some("Sun, 20 Nov 2022 10:00:00 GMT".to_owned());
        let mut first_estimates = Vec::new();
        for period in 1..=2u64 {
            let a1 = ChangeEvent {
                last_modified: two_years.clone(),
                etag: Some("\"a1\"".to_owned()),
                ..event("http://a/1", period, true, (period == 2).then_some(false))
            };
            first_estimates.push(new_estimate(estimator.apply(&a1, 0, &mut state, 0)));
            let at = a1.fetched_at_ms;
            let a2 = ChangeEvent {
                last_modified: format_http_date(at - 3_600_000 * if period == 1 { 100 } else { 1 }),
                ..event("http://a/2", period, true, (period == 2).then_some(true))
            };
            estimator.apply(&a2, 0, &mut state, 0);
        }
        assert!(estimator.take_revised().is_empty(), "nothing is revised before the tally settles");
        let before = first_estimates.pop().expect("a/1's estimate of period 2");
        let a3 = event("http://a/3", 3, true, None);
        new_estimate(estimator.apply(&a3, 0, &mut state, 0));
        let revised = estimator.take_revised();
        assert_eq!(revised.len(), 1, "a/1 only: a/2 confirmed its own dates, a/3 has none");
        let after = &revised[0];
        let (rate_before, rate_after) =
            (before.change_rate.expect("a rate"), after.change_rate.expect("a rate"));
        assert!(rate_after < 0.01 && rate_after * 10.0 < rate_before, "{rate_after} against {rate_before}");
        // The same request's estimate: only what the rate rests on moved.
        assert_eq!(after.page, before.page);
        assert_eq!(after.period, 2);
        assert_eq!(after.last_request, before.last_request);
        // Neither a replay nor a restore revises again ...
        assert!(matches!(estimator.apply(&a3, 0, &mut state, 0), Applied::Repeated(_)));
        estimator.revoked(0);
        estimator.restored(0, &mut state);
        assert!(estimator.take_revised().is_empty());
        // ... but a restore does send a revision that was lost.
        let lose = |state: &mut StateStore<EstimatorState>| {
            let lost = state.get_mut(0, "http://a/1").and_then(|entry| entry.last_response.as_mut());
            lost.expect("a/1 awaits its host's trust").estimated_trusted = false;
        };
        lose(&mut state);
        estimator.revoked(0);
        estimator.restored(0, &mut state);
        // Revoked again before it was sent: the next owner sends it.
        estimator.revoked(0);
        assert!(estimator.take_revised().is_empty());
        lose(&mut state);
        estimator.restored(0, &mut state);
        let again = estimator.take_revised();
        assert_eq!(again.len(), 1);
        assert_eq!(again[0].change_rate, after.change_rate);
        // a/4's date moves without a change: refuted, and with one URL confirmed and one
        // refuted the host is no longer trusted as period 5 begins; a/1 is revised back.
        for period in 3..=4u64 {
            let a4 = ChangeEvent {
                last_modified: format_http_date(event("x", period, true, None).fetched_at_ms - 3_600_000),
                ..event("http://a/4", period, true, (period == 4).then_some(false))
            };
            estimator.apply(&a4, 0, &mut state, 0);
        }
        assert!(estimator.take_revised().is_empty());
        new_estimate(estimator.apply(&event("http://a/3", 5, true, Some(false)), 0, &mut state, 0));
        let back = estimator.take_revised();
        assert_eq!(back.len(), 1, "a/1 again");
        assert_eq!(back[0].page.url, "http://a/1");
        let rate_back = back[0].change_rate.expect("a rate");
        assert!(
            rate_back > 10.0 * rate_after,
            "from its comparisons again: {rate_back} against {rate_after}"
        );
    }

    #[test]
    fn requests_spaced_unlike_the_period_are_noted() {
        // The events are a day apart per period.
        let noted = |period_ms: u64, step: u64| {
            let mut estimator = Estimator::new(Settings { period_ms, ..Settings::default() });
            let mut state = StateStore::default();
            estimator.apply(&event("http://a/1", 1, true, None), 0, &mut state, 0);
            match estimator.apply(&event("http://a/1", 1 + step, true, Some(false)), 0, &mut state, 0) {
                Applied::New(_, noted) => noted.pace_disagrees,
                other => panic!("{other:?}"),
            }
        };
        assert!(!noted(86_400_000, 4), "the period the events keep");
        assert!(noted(60_000, 4) && noted(7 * 86_400_000, 4), "a minute, a week");
        assert!(!noted(60_000, 3), "too few periods apart to tell");
        // Within a period's slack either way, over 4 periods or more.
        assert!(!pace_disagrees(4, 3 * 3_600_000, 3_600_000) && !pace_disagrees(4, 5 * 3_600_000, 3_600_000));
        assert!(pace_disagrees(4, 1_000, 3_600_000) && pace_disagrees(4, -5, 3_600_000));
        // Values from a topic at their extremes: a verdict, not an overflow.
        assert!(pace_disagrees(u64::MAX, i64::MAX, u64::MAX) && !pace_disagrees(9, 1, 0));
    }

    #[test]
    fn later_periods_predict_from_the_group_and_forecasts_sum_to_one() {
        let mut estimator = Estimator::new(Settings::default());
        let mut state = StateStore::default();
        for period in 1..=6u64 {
            for (index, partition) in [(0, 0), (1, 1), (2, 0)] {
                let url = format!("http://a/{index}");
                let downloaded = !(index == 2 && period.is_multiple_of(2));
                let changed = (period > 1 && downloaded).then_some(index == 0);
                let estimate = new_estimate(estimator.apply(
                    &event(&url, period, downloaded, changed),
                    partition,
                    &mut state,
                    0,
                ));
                assert_sums_to_one(&estimate.downloads);
                assert_sums_to_one(&estimate.changes_forecast);
                assert!((0.0..=1.0).contains(&estimate.downloads.next));
            }
            estimator.take_partials(0);
        }
        let view = estimator.book.view("news.example.co.kr:8080", 7);
        assert_eq!((view.partitions, view.urls, view.requests), (2, 3, 18));
        assert_eq!(view.download.counts()[100], 2, "two URLs always download");
        assert_eq!(view.download.counts()[50], 1, "one downloads every other time");
        let always = state.get(0, "http://a/0").unwrap();
        assert_eq!((always.page.history.changes, always.page.change_bin), (5, Some(100)));
    }

    #[test]
    fn robots_denied_and_deferred_picks_are_not_requests() {
        let mut estimator = Estimator::new(Settings::default());
        let mut state = StateStore::default();
        new_estimate(estimator.apply(&event("http://a/1", 1, true, None), 0, &mut state, 0));
        for outcome in [FetchOutcome::RobotsDenied, FetchOutcome::Deferred] {
            let skipped = ChangeEvent { outcome, ..event("http://a/1", 2, false, None) };
            assert!(matches!(estimator.apply(&skipped, 0, &mut state, 0), Applied::NotARequest));
        }
        let page = state.get(0, "http://a/1").cloned().unwrap();
        assert_eq!(
            (page.page.history.requests, page.page.history.failures, page.page.history.last_request),
            (1, 0, 1)
        );
        let blocked =
            ChangeEvent { outcome: FetchOutcome::BlockedAddress, ..event("http://a/1", 2, false, None) };
        let estimate = new_estimate(estimator.apply(&blocked, 0, &mut state, 0));
        assert_eq!((estimate.requests, estimate.failures), (2, 1), "a refused address is a failed request");
    }

    #[test]
    fn replaying_events_leaves_the_state_unchanged() {
        let mut estimator = Estimator::new(Settings::default());
        let mut state = StateStore::default();
        let events: Vec<ChangeEvent> =
            (1..=4).map(|p| event("http://a/1", p, true, (p > 1).then_some(p == 3))).collect();
        for e in &events {
            new_estimate(estimator.apply(e, 0, &mut state, 0));
        }
        let shares = estimator.take_partials(0);
        let before = state.get(0, "http://a/1").cloned();
        state.take_dirty();
        for e in &events[..3] {
            assert!(matches!(estimator.apply(e, 0, &mut state, 0), Applied::Stale));
        }
        let Applied::Repeated(again) = estimator.apply(&events[3], 0, &mut state, 0) else {
            panic!("latest replay")
        };
        assert_eq!((again.requests, again.changes), (4, 1));
        assert_eq!(state.get(0, "http://a/1").cloned(), before);
        assert!(state.take_dirty().is_empty(), "nothing to write to the changelog");
        assert!(estimator.take_partials(0).is_empty(), "no share changed");
        assert_eq!(shares.len(), 4, "a share as each period ended, and the last");
    }

    #[test]
    fn change_times_feed_the_refresh_plan() {
        let mut estimator = Estimator::new(Settings::default());
        let mut state = StateStore::default();
        let mut last = None;
        for period in 1..=15 {
            let e = event("http://a/1", period, true, (period > 1).then_some(true));
            last = Some(new_estimate(estimator.apply(&e, 0, &mut state, 0)));
        }
        let plan = last.unwrap().refresh;
        // 14 changes over 14 days observed: 7 a week, every day at 10:00.
        assert!((plan.weekly_change_rate - 7.0).abs() < 1e-9, "{plan:?}");
        assert_eq!((plan.group16, plan.group6), (FrequencyGroup::Weekly(7), FrequencyGroup::Weekly(7)));
        assert_eq!((plan.paper_hour, plan.min_wait_hour), (Some(0), Some(11)));
    }

    #[test]
    fn change_rates_learn_from_the_group_and_its_counts_survive_a_restart() {
        let mut estimator = Estimator::new(Settings::default());
        let mut state = StateStore::default();
        // 30 URLs of one group that change at every daily visit, and one seen twice.
        for page in 0..30 {
            for period in 1..=6 {
                let e = event(&format!("http://a/{page}"), period, true, (period > 1).then_some(true));
                new_estimate(estimator.apply(&e, 1, &mut state, 0));
            }
        }
        estimator.take_partials(0);
        let newcomer = |estimator: &mut Estimator, state: &mut StateStore<EstimatorState>| {
            new_estimate(estimator.apply(&event("http://a/new", 7, true, None), 1, state, 0));
            new_estimate(estimator.apply(&event("http://a/new", 8, true, Some(false)), 1, state, 0))
        };
        let mut fresh = (Estimator::new(Settings::default()), StateStore::default());
        let (alone, grouped) = (newcomer(&mut fresh.0, &mut fresh.1), newcomer(&mut estimator, &mut state));
        let (alone_rate, grouped_rate) =
            (alone.change_rate.expect("a rate"), grouped.change_rate.expect("a rate"));
        // One unchanged visit: not static, and in a fast-changing group, faster than alone.
        assert!(alone_rate > 0.0 && alone_rate.is_finite(), "{alone_rate}");
        assert!(grouped_rate > 2.0 * alone_rate, "{grouped_rate} vs {alone_rate}");
        // Each estimate says how sure it is and which prior it used: the flat one alone,
        // the group's 30 URLs (and the newcomer's first visit, not yet compared) in it.
        for estimate in [&alone, &grouped] {
            let (low, high) =
                (estimate.change_rate_low.expect("low"), estimate.change_rate_high.expect("high"));
            let rate = estimate.change_rate.expect("a rate");
            assert!(low <= rate && rate <= high && low < high, "{low} {rate} {high}");
        }
        assert_eq!((alone.change_rate_prior_urls, grouped.change_rate_prior_urls), (Some(0), Some(30)));
        let (flat_mean, group_mean) =
            (alone.change_rate_prior_mean.unwrap(), grouped.change_rate_prior_mean.unwrap());
        assert!(group_mean > 2.0 * flat_mean, "the group changes fast: {group_mean} vs {flat_mean}");
        let mut restarted = Estimator::new(Settings::default());
        restarted.restored(1, &mut state);
        let counts = |e: &Estimator| {
            e.live.get(&PartitionKey(1, "news.example.co.kr:8080")).map(|live| live.rates.clone())
        };
        assert_eq!(counts(&restarted), counts(&estimator));
        assert_eq!(counts(&estimator).map(|c| c.total()), Some(31));
    }

    #[test]
    fn a_url_that_moves_group_takes_its_rate_evidence_along() {
        let url = "http://news.example.co.kr:8080/a";
        let (mut by_host, mut state) = (Estimator::new(Settings::default()), StateStore::default());
        for period in 1..=3 {
            by_host.apply(&event(url, period, true, (period > 1).then_some(period == 2)), 1, &mut state, 0);
        }
        let by_site = || Estimator::new(Settings { group_by: GroupBy::Site, ..Settings::default() });
        let mut moved = by_site();
        moved.restored(1, &mut state);
        moved.apply(&event(url, 4, true, Some(false)), 1, &mut state, 0);
        let rates =
            |e: &Estimator, group: &str| e.live.get(&PartitionKey(1, group)).map(|live| live.rates.clone());
        assert_eq!(rates(&moved, "news.example.co.kr:8080").map(|r| r.total()), Some(0));
        assert_eq!(rates(&moved, "example.co.kr").map(|r| r.total()), Some(1));
        let mut restarted = by_site();
        restarted.restored(1, &mut state);
        assert_eq!(rates(&moved, "example.co.kr"), rates(&restarted, "example.co.kr"));
        // Its count moves too: the shares other instances read say how many URLs they hold.
        let urls =
            |e: &Estimator, group: &str| e.live.get(&PartitionKey(1, group)).map(|live| live.partial.urls);
        assert_eq!(urls(&moved, "news.example.co.kr:8080"), Some(0));
        assert_eq!(urls(&moved, "example.co.kr"), Some(1));
        assert_eq!(urls(&restarted, "example.co.kr"), Some(1));
    }

    /// The group's date verdicts move with its URLs: rebuilt on restore, and a URL that
    /// moves group takes its verdict along.
    #[test]
    fn date_verdicts_are_restored_and_move_with_their_urls() {
        let dated = |url: &str, period: u64, changed: Option<bool>, hours_before: i64| {
            let at = event("x", period, true, None).fetched_at_ms - hours_before * 3_600_000;
            ChangeEvent { last_modified: format_http_date(at), ..event(url, period, true, changed) }
        };
        let (mut by_host, mut state) = (Estimator::new(Settings::default()), StateStore::default());
        // a/1 confirms its dates (a change dated an hour before the download); a/2's are
        // the time of the response, refuted by an unchanged download.
        for e in [dated("http://a/1", 1, None, 100), dated("http://a/2", 1, None, 0)] {
            by_host.apply(&e, 1, &mut state, 0);
        }
        for e in [dated("http://a/1", 2, Some(true), 1), dated("http://a/2", 2, Some(false), 0)] {
            by_host.apply(&e, 1, &mut state, 0);
        }
        let host = "news.example.co.kr:8080";
        let tally = |e: &Estimator, group: &str| {
            e.live.get(&PartitionKey(1, group)).map(|live| {
                let mut settled = live.dates;
                settled.settle();
                settled
            })
        };
        let mut expected = DateTally::default();
        expected.replace(None, Some(DateVerdict::Truthful));
        expected.replace(None, Some(DateVerdict::False));
        expected.settle();
        assert_eq!(tally(&by_host, host), Some(expected));
        let mut restarted = Estimator::new(Settings::default());
        restarted.restored(1, &mut state);
        assert_eq!(tally(&restarted, host), Some(expected));
        let mut by_site = Estimator::new(Settings { group_by: GroupBy::Site, ..Settings::default() });
        by_site.restored(1, &mut state);
        // Unchanged, its date kept (an hour before the previous download, a day ago).
        by_site.apply(&dated("http://a/1", 3, Some(false), 25), 1, &mut state, 0);
        let mut left = DateTally::default();
        left.replace(None, Some(DateVerdict::False));
        left.settle();
        assert_eq!(tally(&by_site, host), Some(left));
        let mut arrived = DateTally::default();
        arrived.replace(None, Some(DateVerdict::Truthful));
        arrived.settle();
        assert_eq!(tally(&by_site, "example.co.kr"), Some(arrived));
    }

    #[test]
    fn rate_estimates_do_not_depend_on_how_events_were_batched() {
        let events: Vec<ChangeEvent> = (1..=4)
            .flat_map(|period| {
                (0..6).map(move |page| {
                    let changed = (period > 1).then_some((page + period) % 3 == 0);
                    event(&format!("http://a/{page}"), period, true, changed)
                })
            })
            .collect();
        let rates = |file_every: usize| {
            let (mut estimator, mut state) = (Estimator::new(Settings::default()), StateStore::default());
            let mut rates = Vec::new();
            for (index, e) in events.iter().enumerate() {
                rates.push(new_estimate(estimator.apply(e, 0, &mut state, 0)).change_rate);
                if index % file_every == 0 {
                    estimator.take_partials(0);
                }
            }
            rates
        };
        assert_eq!(rates(1), rates(7));
    }

    #[test]
    fn a_restored_partition_rebuilds_its_shares() {
        let mut estimator = Estimator::new(Settings::default());
        let mut state = StateStore::default();
        for period in 1..=3 {
            new_estimate(estimator.apply(&event("http://a/1", period, true, None), 2, &mut state, 0));
        }
        let published = estimator.take_partials(0);
        let mut restarted = Estimator::new(Settings::default());
        restarted.restored(2, &mut state);
        let republished = restarted.take_partials(0);
        assert_eq!(
            published.last().map(|s| (&s.download_rate_fine, s.requests, s.period)),
            republished.last().map(|s| (&s.download_rate_fine, s.requests, s.period))
        );
        restarted.revoked(2);
        assert!(restarted.live.is_empty());
        // A partition the store does not hold stays unheld.
        restarted.restored(3, &mut state);
        assert!(!state.is_loaded(3));
    }

    /// A group's URLs in a partition point at one copy of its name, whether they came by
    /// event, by moving group or by restore (the decoder gives each its own).
    #[test]
    fn a_group_s_urls_share_its_name() {
        let urls = ["http://news.example.co.kr:8080/a", "http://news.example.co.kr:8080/b"];
        let shared = |e: &Estimator, state: &StateStore<EstimatorState>, group: &str| {
            let (key, _) = e.live.get_key_value(&PartitionKey(1, group)).expect("a share");
            urls.iter().all(|url| state.get(1, url).is_some_and(|entry| Arc::ptr_eq(&entry.group, &key.1)))
        };
        let (mut by_host, mut state) = (Estimator::new(Settings::default()), StateStore::default());
        for url in urls {
            by_host.apply(&event(url, 1, true, None), 1, &mut state, 0);
        }
        assert!(shared(&by_host, &state, "news.example.co.kr:8080"));
        let mut by_site = Estimator::new(Settings { group_by: GroupBy::Site, ..Settings::default() });
        by_site.restored(1, &mut state);
        for url in urls {
            by_site.apply(&event(url, 2, true, Some(true)), 1, &mut state, 0);
        }
        assert!(shared(&by_site, &state, "example.co.kr"), "moved");
        let mut decoded = StateStore::default();
        for (partition, url, entry) in state.iter() {
            let bytes = recrawl_schemas::encode(entry).expect("encodes");
            let entry = recrawl_schemas::decode::<EstimatorState>(&bytes).expect("decodes");
            decoded.get_or_insert_with(partition, url, || entry);
        }
        let decoded_apart = urls.map(|url| decoded.get(1, url).map(|entry| Arc::as_ptr(&entry.group)));
        assert_ne!(decoded_apart[0], decoded_apart[1], "decoded, each has its own copy");
        let mut restarted = Estimator::new(Settings { group_by: GroupBy::Site, ..Settings::default() });
        restarted.restored(1, &mut decoded);
        assert!(shared(&restarted, &decoded, "example.co.kr"), "restored");
    }

    #[test]
    fn a_record_whose_bin_is_past_the_histogram_is_refused_before_it_is_restored() {
        let mut estimator = Estimator::new(Settings::default());
        let mut state = StateStore::default();
        new_estimate(estimator.apply(&event("http://a/1", 1, true, None), 2, &mut state, 0));
        let written = state.get(2, "http://a/1").expect("kept").clone();
        assert_eq!(written.validate(), Ok(()));
        // Restored, bin 200 of a 101-bin histogram panicked the estimator as it
        // published the group's share, at every restart.
        for forged in [
            EstimatorState {
                page: PageState { download_bin: Some(200), ..written.page.clone() },
                ..written.clone()
            },
            EstimatorState {
                page: PageState { change_bin: Some(101), ..written.page.clone() },
                ..written.clone()
            },
        ] {
            let error = forged.validate().expect_err("refused").to_string();
            assert!(error.contains("not a fine bin below 101"), "{error}");
        }
    }

    #[test]
    fn groups_by_host_or_site() {
        let e = event("http://a/1", 1, true, None);
        assert_eq!(GroupBy::Host.group_of(&e), "news.example.co.kr:8080");
        assert_eq!(GroupBy::Site.group_of(&e), "example.co.kr");
        use clap::ValueEnum;
        // Schema 1's names for the same choices still parse.
        assert_eq!(GroupBy::from_str("label", false), Ok(GroupBy::Host));
        assert_eq!(GroupBy::from_str("domain", false), Ok(GroupBy::Site));
    }
}

#[cfg(test)]
mod size {
    use recrawl_model::history::PageHistory;

    use super::*;

    /// What a tracked URL costs, for BENCHMARKS.md: its counters (the state without the
    /// host and group strings and the sparse change-hour slots) must stay within 248 bytes
    /// (200 before the `Last-Modified` evidence, 32 B, 232 before the boxed response kept
    /// for a revision, 8 B, and 240 before the boxed claimed changes, 8 B).
    #[test]
    fn a_tracked_url_stays_under_the_budget() {
        let fixed = std::mem::size_of::<EstimatorState>();
        let ring = 2 * usize::from(Settings::default().refresh.window_days);
        let counters = fixed
            - std::mem::size_of::<String>()
            - std::mem::size_of::<Arc<str>>()
            - std::mem::size_of::<recrawl_model::refresh::ChangeHours>()
            + ring;
        eprintln!(
            "EstimatorState {fixed} B (PageHistory {} B) + {ring} B change ring: counters {counters} B; \
             besides, the host and group strings and 16 B per change-hour slot",
            std::mem::size_of::<PageHistory>()
        );
        assert!(counters <= 248, "{counters}");
    }
}

#[cfg(test)]
mod claimed {
    use recrawl_schemas::{AnnouncingDocument, RequestOutcome};

    use super::*;
    use crate::claims::tests::{announcement, share, HOST, HOUR, URL};

    fn download(period: u64, changed: Option<bool>) -> ChangeEvent {
        let fetched_at_ms = i64::try_from(period).unwrap() * HOUR + HOUR / 2;
        ChangeEvent::request(URL, HOST, RequestOutcome { period, downloaded: true, changed, fetched_at_ms })
    }

    fn source_and_rate(applied: Applied) -> (RateSource, Option<f64>) {
        match applied {
            Applied::New(estimate, _) | Applied::Repeated(estimate) => {
                (estimate.change_rate_source, estimate.change_rate)
            }
            other => panic!("expected an estimate, got {other:?}"),
        }
    }

    #[test]
    fn a_trusted_host_s_sitemap_dates_rate_its_url_and_nothing_else_does() {
        let settings = Settings { period_ms: HOUR as u64, ..Settings::default() };
        let mut estimator = Estimator::new(settings);
        let mut state = StateStore::default();
        let sitemap =
            |changed_ms, seen_ms| announcement(AnnouncingDocument::Sitemap, Some(changed_ms), seen_ms);
        let far = i64::MAX;
        // Before its first request the URL keeps nothing.
        assert_eq!(estimator.announce(&sitemap(HOUR, 2 * HOUR), 0, &mut state, far), Announced::Untracked);
        assert_eq!(
            source_and_rate(estimator.apply(&download(1, None), 0, &mut state, 0)).0,
            RateSource::Prior
        );
        // A change every hour, read 10 and 50 minutes after it, for 10 hours: 50 minutes
        // of each hour known quiet.
        for hour in 2..12 {
            for minutes in [10, 50] {
                let claim = sitemap(hour * HOUR, hour * HOUR + minutes * HOUR / 60);
                assert_eq!(estimator.announce(&claim, 0, &mut state, far), Announced::Counted);
            }
        }
        assert!(!state.take_dirty().is_empty(), "a counted claim goes to the changelog");
        // The same read again, an undated entry, a read after the latest time its document
        // can have been: nothing counted, nothing written to the changelog.
        let again = sitemap(11 * HOUR, 11 * HOUR + 50 * HOUR / 60);
        assert_eq!(estimator.announce(&again, 0, &mut state, far), Announced::NotCounted);
        let undated = announcement(AnnouncingDocument::Sitemap, None, 12 * HOUR);
        assert_eq!(estimator.announce(&undated, 0, &mut state, far), Announced::Undated);
        assert_eq!(
            estimator.announce(&sitemap(12 * HOUR, 13 * HOUR), 0, &mut state, 12 * HOUR),
            Announced::Implausible
        );
        assert!(state.take_dirty().is_empty(), "nothing counted, nothing written");
        // A feed's claim is not counted (it lists only the latest changes), but kept to be
        // judged against the next comparison.
        let feed = announcement(AnnouncingDocument::Rss, Some(12 * HOUR), 12 * HOUR + HOUR / 6);
        assert_eq!(estimator.announce(&feed, 0, &mut state, far), Announced::NotCounted);
        assert!(!state.take_dirty().is_empty(), "the claim kept goes to the changelog");
        let claimed = state.get(0, URL).unwrap().claims.as_ref().unwrap().url.claimed;
        assert_eq!(claimed.changes, 10);

        // The host not yet trusted: the comparison rates the URL.
        let (source, compared) =
            source_and_rate(estimator.apply(&download(12, Some(true)), 0, &mut state, 0));
        assert_eq!(source, RateSource::Comparisons);
        estimator.file_trust(&share(HOST, 3, 5, 0));
        let expected = claimed.rate(HOUR as u64).unwrap().rate;
        // A replay of the same request is rated as the claims say now.
        let (source, rate) = source_and_rate(estimator.apply(&download(12, Some(true)), 0, &mut state, 0));
        assert_eq!((source, rate), (RateSource::Claims, Some(expected)));
        let (source, rate) = source_and_rate(estimator.apply(&download(13, Some(true)), 0, &mut state, 0));
        assert_eq!((source, rate), (RateSource::Claims, Some(expected)));
        assert!((0.8..1.6).contains(&expected), "about a change an hour: {expected}");
        assert_ne!(compared, Some(expected));
        // The change 13:30's download found, claimed at 13:00 (a comparison not judged yet
        // would be merged with the next one) ...
        let claim = sitemap(13 * HOUR, 13 * HOUR + 2 * HOUR / 3);
        assert_eq!(estimator.announce(&claim, 0, &mut state, far), Announced::Counted);
        // ... then a change claimed at 13:45 that the next download does not find refutes
        // the URL's claims: its comparisons rate it though the host is trusted ...
        let claim = sitemap(13 * HOUR + 3 * HOUR / 4, 13 * HOUR + 5 * HOUR / 6);
        assert_eq!(estimator.announce(&claim, 0, &mut state, far), Announced::Counted);
        let (source, _) = source_and_rate(estimator.apply(&download(14, Some(false)), 0, &mut state, 0));
        assert_eq!(source, RateSource::Comparisons, "refuted by its own comparison");
        // ... until a later claim proves true.
        let claim = sitemap(14 * HOUR + 3 * HOUR / 4, 14 * HOUR + 5 * HOUR / 6);
        estimator.announce(&claim, 0, &mut state, far);
        let (source, _) = source_and_rate(estimator.apply(&download(15, Some(true)), 0, &mut state, 0));
        assert_eq!(source, RateSource::Claims, "confirmed again");
        // The host found out: back to the comparisons.
        estimator.file_trust(&share(HOST, 3, 5, 4));
        let (source, _) = source_and_rate(estimator.apply(&download(16, Some(false)), 0, &mut state, 0));
        assert_eq!(source, RateSource::Comparisons);
    }
}
