//! What the scheduler knows about each URL of a partition, laid out for tens of millions
//! of URLs: the URL bytes once in an arena (each scheme and authority once, in `urls`), a
//! hash table of slot numbers over them, one fixed-size [`Page`] per slot, and the
//! frontier's in-links as fingerprints in one chained list. Hosts are interned once per instance in [`Hosts`].
//!
//! A slot's number is its discovery order in the partition, which breadth-first
//! discovery and the tie-breaks use. Pure: no Kafka; the stage, the `plan` command and the
//! simulator share it.

use std::collections::HashMap;

use hashbrown::HashTable;
use recrawl_common::http_date_ms;
use recrawl_model::claims::Listing;
use recrawl_model::day::DayProfile;
use recrawl_model::modified::dates_the_change;
use recrawl_model::{period_start_ms, DEFAULT_PERIOD_MS};
use recrawl_schemas::{host_of, moved_for_good, DiscoveredLinks, LastRequest, PageEstimate};
use xxhash_rust::xxh3::xxh3_64;

mod claims;
mod documents;
mod page;
mod record;
mod shares;
mod urls;

use crate::coarse::{CoarseF32, Probability};
use crate::groups::{CrawlSchedule, GroupClasses, HourRule};
use crate::hosts::Hosts;
use crate::policy::nutch_interval;
pub use claims::ClaimOutcome;
pub use claims::UrlClaims;
pub use documents::MAX_DOCUMENTS_PER_HOST;
pub use page::Page;
use page::{ANNOUNCED, CHANGE_CLAIMED, CLAIM_TO_TEST, MOVED};
use recrawl_common::links::{LinkRules, Rejection};
use urls::{authority_prefix, url_hash, Urls};

/// "No period": a page never estimated, downloaded or picked.
pub const NONE: u32 = u32::MAX;
pub use record::{SchedulerState, MAX_IN_LINKS};
use shares::HostShare;

/// A period as stored: periods past u32 (136 years of one-second periods) saturate.
pub fn period32(period: u64) -> u32 {
    u32::try_from(period).unwrap_or(NONE - 1)
}

fn known(period: u32) -> Option<u64> {
    (period != NONE).then_some(u64::from(period))
}

/// How estimates update the tables.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BookSettings {
    /// Weight of the newest latency sample in g_i.
    pub response_time_smoothing: f64,
    /// The longest back-off of a host answering 429/503, periods.
    pub max_backoff_periods: u64,
    pub nutch_initial_interval: f64,
    pub nutch_min_interval: f64,
    pub nutch_max_interval: f64,
    /// Which of the refresh plan's hours the `groups` policy crawls at.
    pub hour_rule: HourRule,
    /// Whether the `groups` policy crawls by the 6 deployed groups or the 16.
    pub classes: GroupClasses,
    /// The period length and period 0's wall time, as the plan's: when a page's previous
    /// download was, for its dates.
    pub period_ms: u64,
    pub epoch_unix_ms: i64,
    /// Whether downloads teach the hosts' day profiles (as the plan's
    /// [`PlanSettings::scores_time_of_day`](crate::plan::PlanSettings::scores_time_of_day)):
    /// a comparison costs a few sines and cosines.
    pub learns_day: bool,
}

impl Default for BookSettings {
    fn default() -> Self {
        Self {
            response_time_smoothing: 0.2,
            max_backoff_periods: 64,
            nutch_initial_interval: 5.0,
            nutch_min_interval: 1.0,
            nutch_max_interval: 1000.0,
            hour_rule: HourRule::Paper,
            classes: GroupClasses::Six,
            period_ms: DEFAULT_PERIOD_MS,
            epoch_unix_ms: 0,
            learns_day: true,
        }
    }
}

/// The part of an estimate the book keeps about a tracked page.
#[derive(Debug, Clone, Copy)]
pub struct Learned<'a> {
    /// The period of the request the estimate answers.
    pub period: u64,
    pub request: &'a LastRequest,
    /// Probabilities of a change at the next comparison and a download at the next request.
    pub p_change: f64,
    pub p_download: f64,
    /// Poisson change rate per period: the posterior mean, and the ends of its 80 %
    /// credible interval.
    pub change_rate: Option<f64>,
    pub change_rate_low: Option<f64>,
    pub change_rate_high: Option<f64>,
    pub schedule: Option<CrawlSchedule>,
    /// The request's `Last-Modified`, Unix ms.
    pub last_modified_ms: Option<i64>,
}

/// What an estimate did to the book.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    /// The first estimate of the URL (it leaves the frontier or was unknown).
    New,
    Updated,
    /// The estimate of the period applied last, with another change rate: the estimator
    /// revised it (the verdict on its group's server turned).
    Revised,
    /// An estimate of a period already applied: nothing changed.
    Replayed,
}

/// What a link did to the frontier.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Linked {
    /// A new frontier URL.
    Discovered,
    /// One more distinct page links to a frontier URL.
    InDegree,
    /// The linking page was already counted (a refetch, or a replay).
    Duplicate,
    /// The URL is already tracked: in-degrees only rank the frontier.
    Tracked,
    /// The URL's in-degree is at [`MAX_IN_LINKS`].
    Saturated,
    Rejected(Rejection),
}

#[derive(Debug, Clone, Copy)]
struct InLink {
    fingerprint: u32,
    next: u32,
}

/// One partition's URLs.
#[derive(Debug, Default)]
pub struct Book {
    urls: Urls,
    /// Slots by their URL's hash ([`urls::url_hash`]).
    index: HashTable<u32>,
    pages: Vec<Page>,
    in_links: Vec<InLink>,
    /// Chain entries of URLs that left the frontier, reclaimed by compaction.
    dead_in_links: usize,
    frontier: usize,
    dirty: Vec<u32>,
    /// The stored copies' validators for conditional requests, only for the pages whose
    /// server sent any, so the fixed-size [`Page`] stays small.
    validators: HashMap<u32, Validators>,
    /// Bytes of the validators' text, kept as they change: the gauges read it after every
    /// batch, and summing a partition's validators then would cost a pass over them.
    validator_text: usize,
    /// What sitemaps and feeds claimed of tracked pages, only for those a dated claim
    /// named (`claims`).
    claims: HashMap<u32, UrlClaims>,
    /// Pages flagged [`CLAIM_TO_TEST`].
    claim_tests: usize,
    /// This partition's shares of its hosts' day profiles and claim tallies, by host
    /// number: what moves with the partition (the trust a sitemap earned survives a
    /// restart), and what its revocation takes back from the hosts'. Only the hosts
    /// the partition learned of: host numbers are the instance's, and most hosts have
    /// URLs in few partitions.
    host_shares: HashMap<u32, HostShare>,
    /// Slots dropped from the frontier, reclaimed by [`Book::compact`].
    gone: usize,
    /// Slots dropped since the last [`Book::take_removed`]: their tombstones.
    removed: Vec<u32>,
    /// Hosts whose judged claims left the partition with their last tracked URL, since the
    /// last [`Book::take_dropped_claims`].
    dropped_claims: Vec<u32>,
    /// The sitemaps and feeds among the URLs, and how many each host has
    /// (`book::documents`).
    documents: HashMap<u32, Listing>,
    host_documents: HashMap<u32, u8>,
}

/// A page's `ETag` and `Last-Modified`, sent back on its next pick.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Validators {
    pub etag: Option<Box<str>>,
    pub last_modified: Option<Box<str>>,
}

impl Validators {
    fn is_empty(&self) -> bool {
        self.etag.is_none() && self.last_modified.is_none()
    }

    fn heap_bytes(&self) -> usize {
        self.etag.iter().chain(&self.last_modified).map(|text| text.len()).sum()
    }
}

/// Bytes a [`Book`] uses, by structure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BookMemory {
    pub url_text: usize,
    /// Each slot's URL end and authority number, and each authority's entry.
    pub url_slots: usize,
    pub index: usize,
    pub pages: usize,
    pub in_links: usize,
    pub validators: usize,
    pub claims: usize,
    /// The sitemaps and feeds, and their count per host.
    pub documents: usize,
    /// The partition's shares of its hosts' day profiles and claim tallies.
    pub host_shares: usize,
}

impl BookMemory {
    pub fn total(&self) -> usize {
        [
            self.url_text,
            self.url_slots,
            self.index,
            self.pages,
            self.in_links,
            self.validators,
            self.claims,
            self.documents,
            self.host_shares,
        ]
        .iter()
        .fold(0usize, |sum, bytes| sum.saturating_add(*bytes))
    }
}

/// A partition's URL bytes past 4 GiB.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("a partition's URLs exceed 4 GiB; use more partitions")]
pub struct BookFull;

/// 32 bits of a linking page's key (`url_key`, hex xxh3) or of its URL.
fn fingerprint(source: Option<&str>) -> u32 {
    match source {
        None => 0,
        Some(key) => u64::from_str_radix(key, 16).unwrap_or_else(|_| xxh3_64(key.as_bytes())) as u32,
    }
}

impl Book {
    pub fn len(&self) -> usize {
        self.pages.len()
    }

    pub fn is_empty(&self) -> bool {
        self.pages.is_empty()
    }

    /// URLs linked to but not yet fetched.
    pub fn frontier_len(&self) -> usize {
        self.frontier
    }

    pub fn pages(&self) -> &[Page] {
        &self.pages
    }

    pub fn page(&self, slot: u32) -> &Page {
        &self.pages[slot as usize]
    }

    pub fn url(&self, slot: u32) -> String {
        self.urls.url(slot)
    }

    pub fn find(&self, url: &str) -> Option<u32> {
        self.index.find(url_hash(url), |&slot| self.urls.holds(slot, url)).copied()
    }

    /// Bytes in use per structure, for the memory figures (vectors also keep up to as
    /// much again in growth reserve, which the OS maps only once touched).
    pub fn memory(&self) -> BookMemory {
        // A validators entry: a slot and two boxed strings, plus a control byte.
        const VALIDATORS_ENTRY: usize = 5 + std::mem::size_of::<Validators>();
        const CLAIMS_ENTRY: usize = 5 + std::mem::size_of::<UrlClaims>();
        const HOST_SHARE_ENTRY: usize = 5 + std::mem::size_of::<HostShare>();
        BookMemory {
            url_text: self.urls.text_bytes(),
            url_slots: self.urls.table_bytes(),
            // A slot and a control byte per bucket.
            index: self.index.capacity().saturating_mul(5),
            pages: std::mem::size_of_val(self.pages.as_slice()),
            in_links: std::mem::size_of_val(self.in_links.as_slice()),
            // The entries plus the text.
            validators: self
                .validators
                .capacity()
                .saturating_mul(VALIDATORS_ENTRY)
                .saturating_add(self.validator_text),
            // A slot, the entry and a control byte.
            claims: self.claims.capacity().saturating_mul(CLAIMS_ENTRY),
            // A slot and a listing, a host and a count, each with a control byte.
            documents: (self.documents.capacity().saturating_mul(7))
                .saturating_add(self.host_documents.capacity().saturating_mul(6)),
            // A host number, the share and a control byte.
            host_shares: self.host_shares.capacity().saturating_mul(HOST_SHARE_ENTRY),
        }
    }

    /// The validators of the stored copy of `slot`, for its conditional request.
    pub fn validators(&self, slot: u32) -> Option<&Validators> {
        self.validators.get(&slot)
    }

    /// Keeps what a request said about the stored copy's validators: a new download
    /// replaces them, a 304 refreshes the ones it repeats, anything else leaves them.
    fn update_validators(&mut self, slot: u32, request: &LastRequest) {
        if !request.downloaded {
            return;
        }
        let boxed = |value: &Option<String>| value.as_deref().map(Box::from);
        let not_modified = request.http_status == Some(304);
        let kept = self.take_validators(slot).unwrap_or_default();
        let updated = if not_modified {
            Validators {
                etag: boxed(&request.etag).or(kept.etag),
                last_modified: boxed(&request.last_modified).or(kept.last_modified),
            }
        } else {
            Validators { etag: boxed(&request.etag), last_modified: boxed(&request.last_modified) }
        };
        self.keep_validators(slot, updated);
    }

    /// Keeps `validators` for `slot` unless empty (none were there).
    fn keep_validators(&mut self, slot: u32, validators: Validators) {
        if !validators.is_empty() {
            self.validator_text = self.validator_text.saturating_add(validators.heap_bytes());
            self.validators.insert(slot, validators);
        }
    }

    fn take_validators(&mut self, slot: u32) -> Option<Validators> {
        let taken = self.validators.remove(&slot)?;
        self.validator_text = self.validator_text.saturating_sub(taken.heap_bytes());
        Some(taken)
    }

    /// Room for `urls` more URLs of `url_bytes` bytes past their authorities in all, so a
    /// restore grows nothing.
    fn reserve(&mut self, urls: usize, url_bytes: usize) {
        self.urls.reserve(urls, url_bytes);
        self.pages.reserve(urls);
        let held = &self.urls;
        self.index.reserve(urls, |&slot| held.hash(slot));
    }

    /// Appends a URL the book does not hold.
    fn insert(&mut self, url: &str, page: Page) -> Result<u32, BookFull> {
        let slot = self.pages.len() as u32;
        let hash = self.urls.push(url)?;
        self.pages.push(page);
        if page.is_frontier() {
            self.frontier = self.frontier.saturating_add(1);
        }
        let held = &self.urls;
        self.index.insert_unique(hash, slot, |&slot| held.hash(slot));
        Ok(slot)
    }

    fn new_page(host: u32, discovered: u64, depth: u32, settings: &BookSettings) -> Page {
        Page {
            host,
            discovered: period32(discovered),
            last_estimate: NONE,
            last_download: NONE,
            last_pick: NONE,
            size: CoarseF32::default(),
            latency_ms: CoarseF32::default(),
            p_change: Probability::new(0.5),
            p_download: Probability::new(1.0),
            change_rate: CoarseF32::default(),
            central_change_rate: CoarseF32::default(),
            middle_half_low_rate: CoarseF32::default(),
            interval: CoarseF32::new(Some(settings.nutch_initial_interval)),
            in_degree: 0,
            in_links: NONE,
            depth: u16::try_from(depth).unwrap_or(u16::MAX),
            flags: 0,
            schedule: None,
        }
    }

    fn mark_dirty(&mut self, slot: u32) {
        let page = &mut self.pages[slot as usize];
        if !page.is_dirty() {
            page.set_dirty(true);
            self.dirty.push(slot);
        }
    }

    /// Applies an estimate. One of the period applied last revises the change rate alone
    /// (the estimator revises a request's rate; a replay then changes nothing); one of an
    /// earlier period changes nothing.
    pub fn apply_estimate(
        &mut self,
        hosts: &mut Hosts,
        estimate: &PageEstimate,
        settings: &BookSettings,
    ) -> Result<Applied, BookFull> {
        let period = period32(estimate.period);
        let slot = match self.find(&estimate.page.url) {
            Some(slot) => slot,
            None => {
                let host = hosts.intern(&estimate.page.host);
                hosts.stats[host as usize].count_url();
                self.insert(&estimate.page.url, Self::new_page(host, estimate.period, 0, settings))?
            }
        };
        let page = &mut self.pages[slot as usize];
        if !page.is_frontier() && period <= page.last_estimate {
            // Only the rate: the request was counted when its first estimate came.
            let revised = period == page.last_estimate
                && self.revise_rate(
                    slot,
                    estimate.change_rate,
                    estimate.change_rate_low.zip(estimate.change_rate_high),
                    hosts,
                    settings,
                );
            return Ok(if revised { Applied::Revised } else { Applied::Replayed });
        }
        let applied = if page.is_frontier() { Applied::New } else { Applied::Updated };
        self.learn(
            hosts,
            slot,
            &Learned {
                period: estimate.period,
                request: &estimate.last_request,
                p_change: estimate.changes_forecast.next,
                p_download: estimate.downloads.next,
                change_rate: estimate.change_rate,
                change_rate_low: estimate.change_rate_low,
                change_rate_high: estimate.change_rate_high,
                schedule: Some(CrawlSchedule::from_plan(
                    &estimate.refresh,
                    settings.hour_rule,
                    settings.classes,
                )),
                last_modified_ms: estimate.last_request.last_modified.as_deref().and_then(http_date_ms),
            },
            settings,
        );
        Ok(applied)
    }

    /// Folds what a request and the estimator's forecast say into the page at `slot`,
    /// which has not seen `learned.period` yet; a frontier page becomes tracked. The
    /// stage gets here from an estimate; the simulator, which runs the estimator's
    /// functions in process, directly.
    pub fn learn(&mut self, hosts: &mut Hosts, slot: u32, learned: &Learned<'_>, settings: &BookSettings) {
        let request = learned.request;
        let page = &mut self.pages[slot as usize];
        let newly_tracked = page.is_frontier();
        if newly_tracked {
            self.frontier = self.frontier.saturating_sub(1);
            self.dead_in_links = self.dead_in_links.saturating_add(page.in_degree as usize);
            page.in_links = NONE;
        }
        page.last_estimate = period32(learned.period);
        page.set_unanswered_picks(0);
        page.set_moved(moved_for_good(request.outcome, request.http_status));
        if page.is_moved() {
            // Its host's document slot goes to one still served (`book::documents`).
            self.drop_document(slot);
        }
        let page = &mut self.pages[slot as usize];
        let previous_download = page.last_download();
        if request.downloaded {
            page.last_download = period32(request.period);
            page.size = CoarseF32::new(Some(request.size_bytes as f64));
            page.latency_ms = CoarseF32::new(Some(request.latency_ms));
        }
        page.p_change = Probability::new(learned.p_change);
        page.p_download = Probability::new(learned.p_download);
        page.change_rate = CoarseF32::new(learned.change_rate);
        page.keep_rate_interval(learned.change_rate_low.zip(learned.change_rate_high));
        if let Some(changed) = request.changed {
            page.interval = CoarseF32::new(Some(nutch_interval(
                page.nutch_interval(),
                changed,
                settings.nutch_min_interval,
                settings.nutch_max_interval,
            )));
        }
        // A plan made before a change could be seen would put the page in the slowest
        // group, weeks away; until its first compared download it keeps none (`groups`
        // then takes it in round robin).
        if request.changed.is_some() || page.schedule.is_some() {
            page.schedule = learned.schedule;
        }
        let host = page.host;
        if newly_tracked {
            self.track(host);
        }
        // A comparison, and a change its date places in the day, tell when the host's
        // pages change.
        if let (true, Some(changed), Some(previous)) =
            (settings.learns_day, request.changed, previous_download)
        {
            let previous_ms = period_start_ms(settings.epoch_unix_ms, settings.period_ms, previous);
            let rate_per_ms = learned.change_rate.unwrap_or(0.0) / settings.period_ms.max(1) as f64;
            let mut learned_day = DayProfile::default();
            learned_day.observe_comparison(changed, previous_ms, request.fetched_at_ms, rate_per_ms);
            if let (true, Some(dated_at)) = (changed, learned.last_modified_ms) {
                if dates_the_change(dated_at, previous_ms, request.fetched_at_ms) {
                    learned_day.observe(dated_at, previous_ms, request.fetched_at_ms, rate_per_ms);
                }
            }
            self.host_day_mut(host).merge(&learned_day);
            hosts.stats[host as usize].day.merge(&learned_day);
        }
        self.prefer_claimed_rate(slot, hosts, settings);
        self.update_validators(slot, request);
        self.judge_download(hosts, slot, request);
        hosts.observe(host, request, settings.response_time_smoothing, settings.max_backoff_periods);
        self.mark_dirty(slot);
        self.compact_in_links();
    }

    /// Sets the change rate and its 80 % credible interval of the tracked URL at `slot` as
    /// a revised estimate gives them, unless its trusted host's claims give them
    /// ([`UrlClaims::claimed`]); whether they moved.
    pub fn revise_rate(
        &mut self,
        slot: u32,
        rate: Option<f64>,
        interval: Option<(f64, f64)>,
        hosts: &Hosts,
        settings: &BookSettings,
    ) -> bool {
        let Some(page) = self.pages.get(slot as usize) else { return false };
        let before = (page.change_rate, page.central_change_rate, page.middle_half_low_rate);
        let page = &mut self.pages[slot as usize];
        page.change_rate = CoarseF32::new(rate);
        page.keep_rate_interval(interval);
        self.prefer_claimed_rate(slot, hosts, settings);
        let page = &self.pages[slot as usize];
        let moved = before != (page.change_rate, page.central_change_rate, page.middle_half_low_rate);
        if moved {
            self.mark_dirty(slot);
        }
        moved
    }

    /// Forgets which pages changed since the last [`take_dirty`](Self::take_dirty), for
    /// a caller that keeps no changelog (the simulator).
    pub fn clear_dirty(&mut self) {
        for slot in std::mem::take(&mut self.dirty) {
            self.pages[slot as usize].set_dirty(false);
        }
    }

    /// Adds a tracked URL from known figures rather than an estimate: the `plan`
    /// command's input, the benches and the simulator. `last_download` None: known but
    /// never stored (a crawl that starts empty).
    #[allow(clippy::too_many_arguments)]
    pub fn add_tracked(
        &mut self,
        hosts: &mut Hosts,
        url: &str,
        host: &str,
        last_download: Option<u64>,
        size: u32,
        p_change: f64,
        p_download: f64,
        change_rate: Option<f64>,
    ) -> Result<u32, BookFull> {
        let host = hosts.intern(host);
        hosts.stats[host as usize].count_url();
        let mut page = Self::new_page(host, 0, 0, &BookSettings::default());
        page.last_estimate = last_download.map_or(NONE, period32);
        page.last_download = last_download.map_or(NONE, period32);
        page.size = CoarseF32::new(Some(f64::from(size)));
        page.p_change = Probability::new(p_change);
        page.p_download = Probability::new(p_download);
        page.change_rate = CoarseF32::new(change_rate);
        self.insert(url, page)
    }

    /// Sets a tracked URL's 80 % credible interval of its change rate, as an estimate would
    /// (the benches and tests).
    pub fn set_rate_interval(&mut self, slot: u32, low: f64, high: f64) {
        if let Some(page) = self.pages.get_mut(slot as usize) {
            page.keep_rate_interval(Some((low, high)));
        }
    }

    /// Counts a link into the frontier. Seeds (no source) skip the link rules.
    pub fn apply_link(
        &mut self,
        hosts: &mut Hosts,
        link: &DiscoveredLinks,
        rules: &LinkRules,
        site_cap: u32,
        settings: &BookSettings,
    ) -> Result<Linked, BookFull> {
        let source = fingerprint(link.source.as_ref().map(|source| source.key.as_str()));
        let slot = match self.find(&link.page.url) {
            Some(slot) => slot,
            None => {
                if link.source.is_some() {
                    if let Err(rejection) = rules.check(&link.page.url, link.depth) {
                        return Ok(Linked::Rejected(rejection));
                    }
                }
                let host = hosts.intern(&link.page.host);
                if hosts.stats[host as usize].urls >= site_cap {
                    return Ok(Linked::Rejected(Rejection::SiteCap));
                }
                hosts.stats[host as usize].count_url();
                let mut page = Self::new_page(host, link.period, link.depth, settings);
                page.in_degree = 1;
                page.in_links = self.push_in_link(source, NONE);
                let slot = self.insert(&link.page.url, page)?;
                self.mark_dirty(slot);
                return Ok(Linked::Discovered);
            }
        };
        let page = self.pages[slot as usize];
        if !page.is_frontier() {
            return Ok(Linked::Tracked);
        }
        let mut cursor = page.in_links;
        while cursor != NONE {
            let entry = self.in_links[cursor as usize];
            if entry.fingerprint == source {
                return Ok(Linked::Duplicate);
            }
            cursor = entry.next;
        }
        if u32::from(page.in_degree) >= MAX_IN_LINKS {
            return Ok(Linked::Saturated);
        }
        let head = self.push_in_link(source, page.in_links);
        let page = &mut self.pages[slot as usize];
        page.in_links = head;
        page.in_degree = page.in_degree.saturating_add(1);
        page.depth = page.depth.min(u16::try_from(link.depth).unwrap_or(u16::MAX));
        self.mark_dirty(slot);
        Ok(Linked::InDegree)
    }

    /// Marks a frontier URL as named by a sitemap or feed of its site; whether it is one.
    pub fn announce(&mut self, url: &str) -> bool {
        let Some(slot) = self.find(url) else { return false };
        let page = self.pages[slot as usize];
        if !page.is_frontier() || page.is_gone() {
            return false;
        }
        if !page.is_announced() {
            self.pages[slot as usize].flags |= ANNOUNCED;
            self.mark_dirty(slot);
        }
        true
    }

    fn push_in_link(&mut self, fingerprint: u32, next: u32) -> u32 {
        let index = self.in_links.len() as u32;
        self.in_links.push(InLink { fingerprint, next });
        index
    }

    fn in_link_fingerprints(&self, page: &Page) -> Vec<u32> {
        let mut fingerprints = Vec::with_capacity(page.in_degree as usize);
        let mut cursor = page.in_links;
        while cursor != NONE {
            let entry = self.in_links[cursor as usize];
            fingerprints.push(entry.fingerprint);
            cursor = entry.next;
        }
        fingerprints.reverse();
        fingerprints
    }

    /// Rebuilds the in-link chains once most entries belong to URLs that left the
    /// frontier, so the list stays proportional to the frontier.
    fn compact_in_links(&mut self) {
        if self.dead_in_links < 1024 || self.dead_in_links.saturating_mul(2) < self.in_links.len() {
            return;
        }
        let old = std::mem::take(&mut self.in_links);
        for slot in 0..self.pages.len() {
            let mut cursor = self.pages[slot].in_links;
            let mut chain = Vec::new();
            while cursor != NONE {
                chain.push(old[cursor as usize].fingerprint);
                cursor = old[cursor as usize].next;
            }
            let mut head = NONE;
            for &fingerprint in chain.iter().rev() {
                head = self.push_in_link(fingerprint, head);
            }
            self.pages[slot].in_links = head;
        }
        self.dead_in_links = 0;
    }

    /// Records that `slot` was picked in `period`.
    pub fn picked(&mut self, slot: u32, period: u64) {
        let page = &mut self.pages[slot as usize];
        if page.is_awaiting_estimate() {
            page.set_unanswered_picks(page.unanswered_picks().saturating_add(1));
        }
        page.last_pick = period32(period);
        self.mark_dirty(slot);
    }

    /// The changelog records of the URLs changed since the last call.
    pub fn take_dirty(&mut self) -> Vec<(String, SchedulerState)> {
        let dirty = std::mem::take(&mut self.dirty);
        dirty
            .into_iter()
            .filter_map(|slot| {
                self.pages[slot as usize].set_dirty(false);
                // A dropped page's tombstone is in `removed`.
                (!self.pages[slot as usize].is_gone()).then(|| (self.url(slot), self.record(slot)))
            })
            .collect()
    }

    pub fn record(&self, slot: u32) -> SchedulerState {
        let page = &self.pages[slot as usize];
        let optional = |period: u32| (period != NONE).then_some(period);
        SchedulerState {
            slot,
            discovered: page.discovered,
            depth: page.depth,
            last_estimate: optional(page.last_estimate),
            last_download: optional(page.last_download),
            last_pick: optional(page.last_pick),
            size: page.size_bytes().min(f64::from(u32::MAX)) as u32,
            latency_ms: page.latency_ms.get().map_or(0.0, |latency| latency as f32),
            p_change: page.p_change.get() as f32,
            p_download: page.p_download.get() as f32,
            change_rate: page.change_rate.get().map(|rate| rate as f32),
            interval: page.nutch_interval() as f32,
            schedule: page.schedule,
            in_links: self.in_link_fingerprints(page),
            etag: self.validators(slot).and_then(|v| v.etag.as_deref().map(str::to_owned)),
            last_modified: self.validators(slot).and_then(|v| v.last_modified.as_deref().map(str::to_owned)),
            central_change_rate: page.central_change_rate.get().map(|rate| rate as f32),
            middle_half_low_rate: page.middle_half_low_rate.get().map(|rate| rate as f32),
            // A frontier URL's record carries none: each observation is written with the
            // tracked URL that made it, so the latest share always rides on one of those.
            host_day: self
                .host_shares
                .get(&page.host)
                .map(|share| share.day)
                .filter(|day| !page.is_frontier() && day.observations() > 0.0),
            announced: (page.is_frontier() && page.is_announced()).then_some(true),
            moved: page.is_moved().then_some(true),
            // Claims are judged of tracked URLs only, and each judgement that counts marks
            // its URL dirty, so the latest share rides on one of them.
            host_claims: self
                .host_shares
                .get(&page.host)
                .map(|share| share.claims)
                .filter(|tally| !page.is_frontier() && tally.total() > 0),
            change_claimed: page.is_change_claimed().then_some(true),
            claims: self.claims.get(&slot).copied().map(Box::new),
            document: self.documents.get(&slot).copied(),
        }
    }

    /// Rebuilds a partition from its changelog records, in discovery order. Records
    /// whose URL has no host are skipped and counted.
    pub fn restore(
        records: impl IntoIterator<Item = (String, SchedulerState)>,
        hosts: &mut Hosts,
        settings: &BookSettings,
    ) -> Result<(Book, usize), BookFull> {
        let mut records: Vec<(String, SchedulerState)> = records.into_iter().collect();
        records.sort_unstable_by_key(|(_, state)| state.slot);
        let mut book = Book::default();
        book.reserve(
            records.len(),
            records.iter().fold(0usize, |bytes, (url, _)| {
                bytes.saturating_add(url.len().saturating_sub(authority_prefix(url).len()))
            }),
        );
        // A partition's URLs share few hosts: each scheme and authority is parsed once.
        let mut host_of_prefix: HashMap<String, u32> = HashMap::new();
        let mut skipped = 0usize;
        for (url, state) in records {
            let prefix = authority_prefix(&url);
            let host = match host_of_prefix.get(prefix) {
                Some(&host) => host,
                None => {
                    let Ok(host_name) = host_of(&url) else {
                        skipped = skipped.saturating_add(1);
                        continue;
                    };
                    let host = hosts.intern(&host_name);
                    host_of_prefix.insert(prefix.to_owned(), host);
                    host
                }
            };
            hosts.stats[host as usize].count_url();
            let mut head = NONE;
            if state.last_estimate.is_none() {
                for &fingerprint in &state.in_links {
                    head = book.push_in_link(fingerprint, head);
                }
            }
            let page = Page {
                host,
                discovered: state.discovered,
                last_estimate: state.last_estimate.unwrap_or(NONE),
                last_download: state.last_download.unwrap_or(NONE),
                last_pick: state.last_pick.unwrap_or(NONE),
                size: CoarseF32::new(Some(f64::from(state.size))),
                latency_ms: CoarseF32::new(Some(f64::from(state.latency_ms))),
                p_change: Probability::new(f64::from(state.p_change)),
                p_download: Probability::new(f64::from(state.p_download)),
                change_rate: CoarseF32::new(state.change_rate.map(f64::from)),
                central_change_rate: CoarseF32::new(state.central_change_rate.map(f64::from)),
                middle_half_low_rate: CoarseF32::new(state.middle_half_low_rate.map(f64::from)),
                interval: CoarseF32::new(Some(f64::from(state.interval))),
                // Records hold at most MAX_IN_LINKS.
                in_degree: if state.last_estimate.is_none() {
                    u16::try_from(state.in_links.len()).unwrap_or(u16::MAX)
                } else {
                    0
                },
                in_links: head,
                depth: state.depth,
                flags: if state.announced == Some(true) { ANNOUNCED } else { 0 }
                    | if state.moved == Some(true) { MOVED } else { 0 }
                    | if state.change_claimed == Some(true) && state.last_estimate.is_some() {
                        CHANGE_CLAIMED
                    } else {
                        0
                    },
                schedule: state.schedule,
            };
            let slot = book.insert(&url, page)?;
            if !page.is_frontier() {
                book.track(host);
            }
            let validators = Validators {
                etag: state.etag.map(String::into_boxed_str),
                last_modified: state.last_modified.map(String::into_boxed_str),
            };
            book.keep_validators(slot, validators);
            if let Some(claims) = state.claims.filter(|_| state.last_estimate.is_some()) {
                book.claims.insert(slot, *claims);
            }
            // A record written before a move let its document go may hold both.
            if let Some(listing) = state.document.filter(|_| state.moved != Some(true)) {
                book.keep_document(slot, listing);
            }
            if let Some(latency_ms) =
                page.latency_ms.get().filter(|_| page.last_download != NONE && page.size_bytes() > 0.0)
            {
                // Seeds g_i with the pages' latest samples until new estimates arrive.
                let sample = latency_ms / page.size_bytes();
                let stats = &mut hosts.stats[host as usize];
                stats.add_sample(sample, settings.response_time_smoothing);
                stats.add_latency(latency_ms, settings.response_time_smoothing);
            }
            if let Some(day) = state.host_day.filter(DayProfile::is_sound) {
                let kept = book.host_day_mut(host);
                if day.observations() > kept.observations() {
                    *kept = day;
                }
            }
            if let Some(tally) = state.host_claims {
                let kept = book.host_claims_mut(host);
                if tally.total() > kept.total() {
                    *kept = tally;
                }
            }
        }
        for (&host, share) in &book.host_shares {
            let stats = &mut hosts.stats[host as usize];
            stats.day.merge(&share.day);
            stats.claims.add(&share.claims);
            stats.trust_unpublished |= share.claims.total() > 0;
        }
        book.flag_restored_claim_tests(hosts);
        Ok((book, skipped))
    }
}

/// Dropping frontier URLs (the frontier's caps, `crate::frontier_caps`) and reclaiming
/// their slots.
impl Book {
    /// Slots of dropped URLs not yet reclaimed.
    pub fn gone(&self) -> usize {
        self.gone
    }

    /// Drops the URL at `slot`, in the frontier or tracked: out of the index (a link may
    /// bring it back as new), its host's count, its in-links and validators let go, a
    /// tombstone queued. Whether there was a URL to drop.
    pub fn forget(&mut self, hosts: &mut Hosts, slot: u32) -> bool {
        let Some(page) = self.pages.get(slot as usize).copied() else { return false };
        if page.is_gone() {
            return false;
        }
        self.take_validators(slot);
        self.clear_claim_flags(slot);
        self.claims.remove(&slot);
        self.drop_document(slot);
        let hash = self.urls.hash(slot);
        if let Ok(entry) = self.index.find_entry(hash, |&found| found == slot) {
            entry.remove();
        }
        let stats = &mut hosts.stats[page.host as usize];
        stats.urls = stats.urls.saturating_sub(1);
        if !page.is_frontier() {
            self.untrack(hosts, page.host);
        }
        let page = &mut self.pages[slot as usize];
        if page.is_frontier() {
            self.dead_in_links = self.dead_in_links.saturating_add(page.in_degree as usize);
            self.frontier = self.frontier.saturating_sub(1);
        }
        (page.in_links, page.in_degree, page.discovered) = (NONE, 0, NONE);
        self.gone = self.gone.saturating_add(1);
        self.removed.push(slot);
        true
    }

    /// The URLs dropped since the last call, for their tombstones.
    pub fn take_removed(&mut self) -> Vec<String> {
        let removed = std::mem::take(&mut self.removed);
        removed.into_iter().map(|slot| self.url(slot)).collect()
    }

    /// Rebuilds the book without its dropped slots once they are an eighth of it, so a
    /// frontier URL stays within 200 bytes with its share of them; the others keep their
    /// discovery order. Call it after [`take_dirty`](Self::take_dirty) and
    /// [`take_removed`](Self::take_removed). Slots are renumbered, but records are not
    /// written again for it (a pruned trap would rewrite the partition every eighth): a
    /// record keeps its slot until the URL's next change, so a restore orders compacted
    /// URLs by discovery only roughly, which only breadth-first discovery's ties see.
    /// Whether it compacted.
    pub fn compact(&mut self) -> bool {
        if self.gone < 1024 || self.gone.saturating_mul(8) < self.pages.len() {
            return false;
        }
        let old = std::mem::take(self);
        let mut renumbered = HashMap::with_capacity(old.validators.len());
        for (slot, page) in old.pages.iter().enumerate().filter(|(_, page)| !page.is_gone()) {
            let slot = slot as u32;
            let mut head = NONE;
            for &fingerprint in &old.in_link_fingerprints(page) {
                head = self.push_in_link(fingerprint, head);
            }
            let mut page = Page { in_links: head, ..*page };
            page.set_dirty(false);
            // Within 4 GiB: the URLs were all held before.
            let Ok(new_slot) = self.insert(&old.url(slot), page) else { continue };
            self.claim_tests = self.claim_tests.saturating_add(usize::from(page.is_claim_to_test()));
            if let Some(validators) = old.validators.get(&slot) {
                renumbered.insert(new_slot, validators.clone());
            }
            if let Some(&claims) = old.claims.get(&slot) {
                self.claims.insert(new_slot, claims);
            }
            if let Some(&listing) = old.documents.get(&slot) {
                self.documents.insert(new_slot, listing);
            }
        }
        self.host_documents = old.host_documents;
        self.validators = renumbered;
        self.validator_text = old.validator_text;
        self.host_shares = old.host_shares;
        self.dropped_claims = old.dropped_claims;
        true
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use recrawl_schemas::{
        ChangeRateSource, FetchOutcome, Forecast, ForecastModel, ForecastPrior, FrequencyGroup, LastRequest,
        PageRef, RefreshPlan, UtcTime,
    };

    pub(crate) fn estimate(url: &str, period: u64, downloaded: bool, changed: Option<bool>) -> PageEstimate {
        let forecast = |next: f64| Forecast {
            yes: 0,
            no: 0,
            probabilities: vec![1.0 - next, next],
            next,
            prior: ForecastPrior::Uniform,
        };
        PageEstimate {
            page: PageRef::of_url(url).unwrap(),
            group: "g".into(),
            period,
            last_request: LastRequest {
                period,
                downloaded,
                outcome: if downloaded { FetchOutcome::Downloaded } else { FetchOutcome::HttpStatus },
                changed,
                size_bytes: 1000,
                size_change_bytes: None,
                latency_ms: 50.0,
                fetched_at: UtcTime::from_ms(0),
                fetched_at_ms: 0,
                http_status: Some(if downloaded { 200 } else { 500 }),
                crawl_delay_ms: None,
                etag: downloaded.then(|| format!("\"{period}\"")),
                last_modified: None,
            },
            crawls: period + 1,
            first_request_period: 0,
            requests: 1,
            successes: u64::from(downloaded),
            failures: u64::from(!downloaded),
            comparisons: 0,
            changes: 0,
            request_rate: None,
            download_rate: None,
            download_recall: None,
            modification_rate: None,
            change_recall: None,
            download_eligible: false,
            change_eligible: false,
            model: ForecastModel::Paper,
            downloads: forecast(0.9),
            changes_forecast: forecast(0.3),
            change_rate: Some(0.25),
            change_rate_low: Some(0.1),
            change_rate_high: Some(0.5),
            change_rate_prior_mean: Some(0.2),
            change_rate_prior_urls: Some(3),
            change_rate_source: if changed.is_some() {
                ChangeRateSource::Comparisons
            } else {
                ChangeRateSource::Prior
            },
            refresh: RefreshPlan {
                weekly_change_rate: 7.0,
                group16: FrequencyGroup::Weekly(7),
                group6: FrequencyGroup::Weekly(7),
                crawls_per_week: 7.0,
                paper_hour: Some(0),
                weekdays: (0..7).collect(),
                min_wait_hour: Some(3),
                min_wait_slot: Some(3),
            },
        }
    }

    pub(crate) fn link(url: &str, source: Option<&str>, period: u64, depth: u32) -> DiscoveredLinks {
        DiscoveredLinks {
            page: PageRef::of_url(url).unwrap(),
            source: source.map(|source| PageRef::of_url(source).unwrap()),
            occurrences: 1,
            period,
            depth,
        }
    }

    #[test]
    fn a_partition_keeps_shares_only_of_the_hosts_it_learned_of_and_counts_them() {
        let mut book = Book::default();
        let before = book.memory();
        book.host_day_mut(999_999);
        book.host_claims_mut(999_999);
        book.host_claims_mut(7);
        assert_eq!(book.host_shares.len(), 2, "host numbers below the highest take nothing");
        let after = book.memory();
        let entry = 5 + std::mem::size_of::<HostShare>();
        let grown = after.host_shares - before.host_shares;
        assert!(grown >= 2 * entry && grown < 16 * entry, "{grown} bytes for two shares");
        assert_eq!(after.total() - before.total(), grown);
    }

    #[test]
    fn a_page_fits_the_memory_budget() {
        assert!(std::mem::size_of::<Page>() <= 48, "{}", std::mem::size_of::<Page>());
    }

    #[test]
    fn each_linking_page_counts_once_and_in_degrees_stop_at_tracked_urls() {
        let (mut book, mut hosts, rules, settings) =
            (Book::default(), Hosts::default(), LinkRules::default(), BookSettings::default());
        let add = |book: &mut Book, hosts: &mut Hosts, url: &str, source: &str| {
            book.apply_link(hosts, &link(url, Some(source), 1, 1), &rules, 100, &settings).unwrap()
        };
        assert_eq!(add(&mut book, &mut hosts, "http://h/x.html", "http://h/a"), Linked::Discovered);
        assert_eq!(add(&mut book, &mut hosts, "http://h/x.html", "http://h/b"), Linked::InDegree);
        assert_eq!(add(&mut book, &mut hosts, "http://h/x.html", "http://h/a"), Linked::Duplicate);
        assert_eq!(
            add(&mut book, &mut hosts, "http://h/pic.png", "http://h/a"),
            Linked::Rejected(Rejection::Extension)
        );
        let slot = book.find("http://h/x.html").unwrap();
        assert_eq!(book.page(slot).in_degree, 2);
        assert_eq!(book.frontier_len(), 1);
        assert_eq!(book.record(slot).in_links.len(), 2);
        book.apply_estimate(&mut hosts, &estimate("http://h/x.html", 2, true, None), &settings).unwrap();
        assert_eq!(book.frontier_len(), 0);
        assert_eq!(add(&mut book, &mut hosts, "http://h/x.html", "http://h/c"), Linked::Tracked);
    }

    #[test]
    fn the_site_cap_bounds_a_hosts_urls() {
        let (mut book, mut hosts, rules, settings) =
            (Book::default(), Hosts::default(), LinkRules::default(), BookSettings::default());
        let outcomes: Vec<Linked> = (0..4)
            .map(|i| {
                let page = link(&format!("http://h/{i}.html"), Some("http://h/"), 1, 1);
                book.apply_link(&mut hosts, &page, &rules, 3, &settings).unwrap()
            })
            .collect();
        assert_eq!(outcomes[2], Linked::Discovered);
        assert_eq!(outcomes[3], Linked::Rejected(Rejection::SiteCap));
    }

    #[test]
    fn replayed_estimates_change_nothing() {
        let (mut book, mut hosts, settings) = (Book::default(), Hosts::default(), BookSettings::default());
        let first = estimate("http://h/a", 4, true, Some(true));
        assert_eq!(book.apply_estimate(&mut hosts, &first, &settings), Ok(Applied::New));
        let before = book.record(0);
        assert_eq!(book.take_dirty().len(), 1);
        assert_eq!(book.apply_estimate(&mut hosts, &first, &settings), Ok(Applied::Replayed));
        let older = estimate("http://h/a", 3, false, None);
        assert_eq!(book.apply_estimate(&mut hosts, &older, &settings), Ok(Applied::Replayed));
        assert_eq!(book.record(0), before);
        assert!(book.take_dirty().is_empty());
        assert_eq!(before.last_download, Some(4));
        assert_eq!(before.interval, 4.0, "a change shortens Nutch's interval by 20 %");
    }

    #[test]
    fn a_revised_estimate_moves_only_the_rate_and_counts_no_request() {
        let (mut book, mut hosts, settings) = (Book::default(), Hosts::default(), BookSettings::default());
        let first = PageEstimate {
            change_rate: Some(0.05),
            change_rate_low: Some(0.01),
            change_rate_high: Some(0.2),
            ..estimate("http://h/a", 4, true, Some(false))
        };
        assert_eq!(book.apply_estimate(&mut hosts, &first, &settings), Ok(Applied::New));
        book.take_dirty();
        let (before, host_before) = (book.record(0), hosts.stats[0]);
        let revised = PageEstimate {
            change_rate: Some(0.0002),
            change_rate_low: Some(0.0001),
            change_rate_high: Some(0.0005),
            ..first.clone()
        };
        assert_eq!(book.apply_estimate(&mut hosts, &revised, &settings), Ok(Applied::Revised));
        let after = book.record(0);
        // Kept in two bytes, within 0.2 %.
        assert!(after.change_rate.is_some_and(|rate| (rate / 0.0002 - 1.0).abs() < 0.002), "{after:?}");
        assert!(after.central_change_rate.is_some_and(|rate| rate < 0.001), "{after:?}");
        assert_eq!(
            SchedulerState {
                change_rate: before.change_rate,
                central_change_rate: before.central_change_rate,
                middle_half_low_rate: before.middle_half_low_rate,
                ..after
            },
            before,
            "only the rate moved"
        );
        assert_eq!(hosts.stats[0], host_before, "the request is not counted again");
        assert_eq!(book.take_dirty().len(), 1, "the revision reaches the changelog");
        // Sent again, it changes nothing.
        assert_eq!(book.apply_estimate(&mut hosts, &revised, &settings), Ok(Applied::Replayed));
        assert!(book.take_dirty().is_empty());
    }

    #[test]
    fn throttled_hosts_back_off_doubling_up_to_the_cap() {
        let (mut book, mut hosts) = (Book::default(), Hosts::default());
        let settings = BookSettings { max_backoff_periods: 8, ..BookSettings::default() };
        let mut until = Vec::new();
        for period in 1..=5 {
            let mut throttled = estimate("http://h/a", period, false, None);
            throttled.last_request.http_status = Some(429);
            book.apply_estimate(&mut hosts, &throttled, &settings).unwrap();
            until.push(hosts.stats[0].backoff_until - period - 1);
        }
        assert_eq!(until, [2, 4, 8, 8, 8]);
        book.apply_estimate(&mut hosts, &estimate("http://h/a", 6, true, None), &settings).unwrap();
        assert_eq!(hosts.stats[0].backoff_level, 0);
    }

    #[test]
    fn validators_follow_downloads_and_304s() {
        let (mut book, mut hosts, settings) = (Book::default(), Hosts::default(), BookSettings::default());
        let mut apply = |period: u64, status: u16, etag: Option<&str>, last_modified: Option<&str>| {
            let mut update = estimate("http://h/a", period, status < 400, None);
            update.last_request.http_status = Some(status);
            update.last_request.etag = etag.map(str::to_owned);
            update.last_request.last_modified = last_modified.map(str::to_owned);
            book.apply_estimate(&mut hosts, &update, &settings).unwrap();
            let text: usize = book.validators.values().map(Validators::heap_bytes).sum();
            assert_eq!(book.validator_text, text, "the running count of their bytes");
            book.validators(0).map(|v| {
                (v.etag.as_deref().map(str::to_owned), v.last_modified.as_deref().map(str::to_owned))
            })
        };
        let both = |etag: &str, modified: &str| Some((Some(etag.to_owned()), Some(modified.to_owned())));
        assert_eq!(apply(1, 200, Some("\"a\""), Some("Mon")), both("\"a\"", "Mon"));
        assert_eq!(
            apply(2, 304, Some("\"b\""), None),
            both("\"b\"", "Mon"),
            "a 304 keeps what it does not repeat"
        );
        assert_eq!(apply(3, 500, None, None), both("\"b\"", "Mon"), "a failure leaves them");
        assert_eq!(apply(4, 200, None, None), None, "a new copy without validators clears them");
    }

    #[test]
    fn a_change_dated_between_downloads_teaches_the_host_s_day_and_other_dates_do_not() {
        const HOUR_MS: i64 = 3_600_000;
        let settings =
            BookSettings { period_ms: HOUR_MS as u64, epoch_unix_ms: 0, ..BookSettings::default() };
        let (mut book, mut hosts) = (Book::default(), Hosts::default());
        let mut apply = |period: u64, changed: Option<bool>, date: &str| {
            let mut e = estimate("http://h/p.html", period, true, changed);
            e.last_request.fetched_at_ms = period as i64 * HOUR_MS + HOUR_MS / 2;
            e.last_request.last_modified = Some(date.to_owned());
            book.apply_estimate(&mut hosts, &e, &settings).unwrap();
            hosts.stats[0].day.changes()
        };
        assert_eq!(apply(1, None, "Thu, 01 Jan 1970 00:30:00 GMT"), 0.0, "no download before it");
        assert_eq!(apply(10, Some(true), "Thu, 01 Jan 1970 05:00:00 GMT"), 1.0);
        assert_eq!(apply(20, Some(true), "Thu, 01 Jan 1970 20:30:00 GMT"), 1.0, "the time of the response");
        assert_eq!(
            apply(30, Some(true), "Thu, 01 Jan 1970 15:00:00 GMT"),
            1.0,
            "before the previous download"
        );
        assert_eq!(apply(40, Some(false), "Thu, 01 Jan 1970 35:00:00 GMT"), 1.0, "not a date; unchanged");
        assert_eq!(apply(50, Some(true), "Fri, 02 Jan 1970 23:00:00 GMT"), 2.0);
    }

    #[test]
    fn a_book_that_does_not_learn_days_leaves_the_host_s_profile_flat() {
        const HOUR_MS: i64 = 3_600_000;
        let settings = BookSettings {
            period_ms: HOUR_MS as u64,
            epoch_unix_ms: 0,
            learns_day: false,
            ..BookSettings::default()
        };
        let (mut book, mut hosts) = (Book::default(), Hosts::default());
        for (period, date) in [(10, "Thu, 01 Jan 1970 05:00:00 GMT"), (40, "Fri, 02 Jan 1970 14:00:00 GMT")] {
            let mut e = estimate("http://h/p.html", period, true, Some(true));
            e.last_request.fetched_at_ms = period as i64 * HOUR_MS + HOUR_MS / 2;
            e.last_request.last_modified = Some(date.to_owned());
            book.apply_estimate(&mut hosts, &e, &settings).unwrap();
        }
        assert_eq!(hosts.stats[0].day.changes(), 0.0);
        assert_eq!(hosts.stats[0].day.shape(), None);
    }

    /// A host's day learned by two partitions moves with them: another instance restores
    /// each partition's share from its latest records, and a revocation takes the share
    /// back.
    #[test]
    fn a_host_s_day_moves_with_its_partitions() {
        const HOUR_MS: i64 = 3_600_000;
        let settings =
            BookSettings { period_ms: HOUR_MS as u64, epoch_unix_ms: 0, ..BookSettings::default() };
        let (mut books, mut hosts) = ([Book::default(), Book::default()], Hosts::default());
        let mut changelogs: [HashMap<String, SchedulerState>; 2] = Default::default();
        for (round, periods) in [[1, 30], [60, 90]].into_iter().enumerate() {
            for page in 0..6 {
                // The first round reaches every page; the second only some, whose records
                // then carry the later share.
                if round == 1 && page % 3 == 0 {
                    continue;
                }
                let partition = page % 2;
                let url = format!("http://h/p{page}.html");
                for period in periods {
                    let mut e = estimate(&url, period + page as u64, true, Some(period % 60 != 0));
                    e.last_request.fetched_at_ms = (period as i64 + page as i64) * HOUR_MS + HOUR_MS / 2;
                    e.last_request.last_modified =
                        Some(format!("Thu, 01 Jan 1970 {:02}:00:00 GMT", page + 1));
                    books[partition].apply_estimate(&mut hosts, &e, &settings).unwrap();
                }
            }
            for (book, changelog) in books.iter_mut().zip(&mut changelogs) {
                changelog.extend(book.take_dirty());
            }
        }
        let learned = hosts.stats[0].day;
        let shares = [books[0].host_shares[&0].day, books[1].host_shares[&0].day];
        assert!(shares.iter().all(|share| share.observations() > 0.0));
        assert_eq!(shares[0].observations() + shares[1].observations(), learned.observations());

        // A record no build writes: its share is ignored, however many it claims.
        let mut forged = serde_json::to_value(learned).unwrap();
        forged["comparisons"] = serde_json::json!(1e9);
        forged["information"][0] = serde_json::json!(-1.0);
        let mut forged_changelog = changelogs[1].clone();
        if let Some(record) = forged_changelog.get_mut("http://h/p3.html") {
            record.host_day = Some(serde_json::from_value(forged).unwrap());
        }
        let close = |a: &DayProfile, b: &DayProfile| {
            let ((ax, ay), (bx, by)) = (a.harmonic(), b.harmonic());
            a.observations() == b.observations() && (ax - bx).abs() < 1e-12 && (ay - by).abs() < 1e-12
        };

        let mut elsewhere = Hosts::default();
        let (first, _) = Book::restore(changelogs[0].clone(), &mut elsewhere, &settings).unwrap();
        assert!(close(&elsewhere.stats[0].day, &shares[0]));
        let (second, _) = Book::restore(forged_changelog, &mut elsewhere, &settings).unwrap();
        assert!(close(&elsewhere.stats[0].day, &learned));
        assert_eq!(first.record(0), books[0].record(0));
        assert_eq!(
            second.record(0),
            Book::restore(changelogs[1].clone(), &mut Hosts::default(), &settings).unwrap().0.record(0)
        );

        books[0].release(&mut hosts);
        assert!(close(&hosts.stats[0].day, &shares[1]));
    }

    #[test]
    fn a_restored_book_equals_the_original() {
        let (mut book, mut hosts, rules, settings) =
            (Book::default(), Hosts::default(), LinkRules::default(), BookSettings::default());
        for i in 0..50 {
            let url = format!("http://h{}/p{i}.html", i % 3);
            book.apply_link(&mut hosts, &link(&url, Some("http://s/"), 1, 2), &rules, 100, &settings)
                .unwrap();
            book.apply_link(&mut hosts, &link(&url, Some("http://t/"), 1, 1), &rules, 100, &settings)
                .unwrap();
            if i % 2 == 0 {
                book.apply_estimate(&mut hosts, &estimate(&url, 3, i % 4 == 0, Some(true)), &settings)
                    .unwrap();
            }
        }
        book.picked(7, 5);
        let records: HashMap<String, SchedulerState> = book.take_dirty().into_iter().collect();
        assert_eq!(records.len(), 50);
        let mut restored_hosts = Hosts::default();
        let (restored, skipped) = Book::restore(records, &mut restored_hosts, &settings).unwrap();
        assert_eq!(skipped, 0);
        assert_eq!(restored.len(), book.len());
        assert_eq!(restored.frontier_len(), 25);
        for slot in 0..book.len() as u32 {
            assert_eq!(restored.url(slot), book.url(slot));
            assert_eq!(restored.record(slot), book.record(slot));
        }
        assert_eq!(restored_hosts.stats[0].urls, hosts.stats[0].urls);
    }

    #[test]
    fn a_restore_reads_each_url_s_host_from_its_own_authority() {
        assert_eq!(authority_prefix("http://h0/p?q"), "http://h0");
        assert_eq!(authority_prefix("https://h0:8080"), "https://h0:8080");
        assert_eq!(authority_prefix("http://h0?q=/x"), "http://h0?q=");
        let (mut book, mut hosts, rules, settings) =
            (Book::default(), Hosts::default(), LinkRules::default(), BookSettings::default());
        let urls = ["http://h0/a", "http://h0:8080/b", "http://h0/c", "https://h0/d", "http://[::1]:81/e"];
        for url in urls {
            book.apply_link(&mut hosts, &link(url, None, 1, 0), &rules, 100, &settings).unwrap();
        }
        let mut records: HashMap<String, SchedulerState> = book.take_dirty().into_iter().collect();
        // A forged key with credentials, after its host without them was read.
        let mut forged = records["http://h0/a"].clone();
        forged.slot = u32::MAX;
        records.insert("http://user@h0/f".to_owned(), forged);
        let mut restored_hosts = Hosts::default();
        let (restored, skipped) = Book::restore(records, &mut restored_hosts, &settings).unwrap();
        assert_eq!(skipped, 1, "the URL with credentials is skipped");
        assert_eq!(restored.len(), urls.len());
        for slot in 0..restored.len() as u32 {
            let url = restored.url(slot);
            assert_eq!(restored_hosts.name(restored.page(slot).host), host_of(&url).unwrap(), "{url}");
        }
        assert_eq!(restored_hosts.stats[restored_hosts.find("h0").unwrap() as usize].urls, 3);
    }

    #[test]
    fn an_interval_past_two_bytes_restores_as_never_due_and_writes_back_so() {
        let (mut book, mut hosts) = (Book::default(), Hosts::default());
        book.add_tracked(&mut hosts, "http://h/a", "h", Some(3), 100, 0.5, 1.0, Some(0.1)).unwrap();
        for (interval, due) in [(f32::INFINITY, false), (f32::MAX, false), (7.0, true)] {
            let record = SchedulerState { interval, ..book.record(0) };
            let records = HashMap::from([("http://h/a".to_owned(), record)]);
            let (restored, _) =
                Book::restore(records, &mut Hosts::default(), &BookSettings::default()).unwrap();
            let page = restored.page(0);
            // nutch-adaptive picks a page once the periods since its visit reach this.
            assert_eq!(page.nutch_interval() <= 1e6, due, "{interval}");
            if interval.is_infinite() {
                assert_eq!(restored.record(0).interval, f32::INFINITY);
            }
        }
    }
}
