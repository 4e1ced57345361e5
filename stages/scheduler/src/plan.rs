//! One period's picks over an instance's books: a discovery share from the frontier
//! (in-degree or breadth first), the rest refreshes ranked by the policy, within each
//! host's cap. Pure: the stage, the `plan` command, the bench and the simulator call
//! [`choose`].

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::sync::PoisonError;

use recrawl_model::claims::ClaimTrust;
use recrawl_model::day::DAY_MS;
use recrawl_model::freshness::{
    best_freshness_index, best_index_rate, freshness_index_bound, weighted_index_bound_below,
};
use recrawl_model::periodic::{DayTables, PeriodicPage};
use recrawl_model::rate::middle_half;
use recrawl_model::DEFAULT_PERIOD_MS;
use recrawl_schemas::PickReason;

use crate::book::{Book, Page, MAX_IN_LINKS};
use crate::coarse::coarse;
use crate::hosts::{DayState, HostStats, Hosts};
use crate::policy::{
    change_rate, expected_out_of_date, lambda_crawl_kappa, lambda_crawl_rate, paper_score, staleness,
    Discovery, Policy, TopK, DEFAULT_POLICY,
};

/// How a period's picks are chosen.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanSettings {
    pub policy: Policy,
    /// W: weight of the download-time term, in periods.
    pub cost_weight: f64,
    pub period_ms: u64,
    /// Wall time of period 0's start and the local time of day, for the `groups` policy.
    pub epoch_unix_ms: i64,
    pub utc_offset_minutes: i32,
    pub discovery: Discovery,
    /// Share of the picks that goes to the frontier when it has candidates.
    pub discovery_share: f64,
    /// Whether frontier URLs other than seeds may be picked: not once the instance tracks
    /// its cap of URLs.
    pub discovery_open: bool,
    /// `change-aware`: pages whose next request is predicted to download with less than
    /// this probability get no picks; `freshness` and `lambda-crawl` weight their scores
    /// by their own chance, at least a tenth of it, and space them from their last visit:
    /// probe shares that find a site come back.
    pub min_download_probability: f64,
    /// Periods a picked page waits for its estimate before it may be picked again.
    pub pending_periods: u32,
    /// `freshness`: score the pages of hosts with a day profile by the index for a rate
    /// that follows the day ([`recrawl_model::periodic`]).
    pub time_of_day: bool,
}

impl Default for PlanSettings {
    fn default() -> Self {
        Self {
            policy: DEFAULT_POLICY,
            cost_weight: 1.0,
            period_ms: DEFAULT_PERIOD_MS,
            epoch_unix_ms: 0,
            utc_offset_minutes: 0,
            discovery: Discovery::Ifs,
            discovery_share: 0.2,
            discovery_open: true,
            min_download_probability: 0.1,
            pending_periods: 2,
            time_of_day: true,
        }
    }
}

impl PlanSettings {
    /// Whether the pages of hosts with a day profile are scored by the periodic index:
    /// only then does the book need to learn the hosts' days.
    pub fn scores_time_of_day(&self) -> bool {
        self.policy == Policy::Freshness && self.time_of_day
    }

    /// When `period` starts, Unix milliseconds (saturating far in the future).
    pub fn period_start_ms(&self, period: u64) -> i64 {
        recrawl_model::period_start_ms(self.epoch_unix_ms, self.period_ms, period)
    }

    /// Why a record of `period` cannot have come from one of this scheduler's picks yet.
    pub fn period_ahead(&self, period: u64, now_ms: i64) -> Option<String> {
        recrawl_model::period_ahead(self.epoch_unix_ms, self.period_ms, period, now_ms)
    }
}

/// One pick: the page at `slot` of `books[book]`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Choice {
    pub book: usize,
    pub slot: u32,
    pub score: f64,
    pub reason: PickReason,
}

/// What the refresh scores of one period share.
struct Period<'a> {
    clock: u64,
    remaining: f64,
    /// g_i in periods per byte, weighted: the cost of a page is size × this.
    cost_per_byte: Vec<f64>,
    kappa: Option<f64>,
    /// `freshness` with time of day, once a period has set the multiplier.
    day: Option<DayScoring<'a>>,
}

/// An hour in milliseconds.
const HOUR_MS: f64 = 3_600_000.0;

/// What the `freshness` scores of a period's pages on hosts with a day profile share.
struct DayScoring<'a> {
    /// Per host: the profile's amplitude and the hours from its peak to mid-period, when
    /// fetches happen on average; `None` for a host with nothing learned of its day.
    shapes: Vec<Option<(f64, f64)>>,
    hours_per_period: f64,
    /// The last period's cutoff score, ν in score units.
    cutoff: f64,
    tables: RefCell<&'a mut DayTables>,
}

impl<'a> DayScoring<'a> {
    fn new(hosts: &Hosts, clock: u64, settings: &PlanSettings, state: &'a mut DayState) -> Option<Self> {
        if !(state.cutoff > 0.0 && state.cutoff.is_finite()) {
            return None;
        }
        let now_ms = settings.period_start_ms(clock).saturating_add((settings.period_ms / 2) as i64);
        let shapes = hosts
            .stats
            .iter()
            .map(|stats| {
                let (amplitude, peak_ms) = stats.day.shape()?;
                let since_peak_ms = now_ms.saturating_sub(peak_ms).rem_euclid(DAY_MS);
                Some((amplitude, since_peak_ms as f64 / HOUR_MS))
            })
            .collect();
        Some(Self {
            shapes,
            hours_per_period: settings.period_ms as f64 / HOUR_MS,
            cutoff: state.cutoff,
            tables: RefCell::new(&mut state.tables),
        })
    }

    fn has_profile(&self, host: u32) -> bool {
        self.shapes.get(host as usize).is_some_and(Option::is_some)
    }

    /// The page as the periodic index sees it, scored with `weight` at `rate` per period
    /// and `age` periods; `None` for a host without a profile.
    fn page(&self, host: u32, weight: f64, rate: f64, age: f64) -> Option<PeriodicPage> {
        let (amplitude, since_peak) = (*self.shapes.get(host as usize)?)?;
        let hours = self.hours_per_period;
        Some(PeriodicPage {
            rate: rate / hours,
            amplitude,
            age: age * hours,
            since_peak,
            multiplier: self.cutoff / weight * hours,
        })
    }
}

impl Period<'_> {
    /// p_j·g_i in periods, weighted.
    fn cost(&self, page: &Page) -> f64 {
        page.size_bytes() * self.cost_per_byte[page.host as usize]
    }

    /// The paper's s_j(t).
    fn staleness(&self, page: &Page) -> f64 {
        staleness(self.clock, page.last_download(), u64::from(page.discovered))
    }

    /// Periods since the stored copy was fetched, counting the period it was fetched in:
    /// s + 1.
    fn copy_age(&self, page: &Page) -> f64 {
        self.staleness(page) + 1.0
    }
}

/// The picks for period `clock`: at most `quota`, at most `host_caps[h]` of host h.
/// `remaining` is the horizon's T − t.
pub fn choose(
    books: &[&Book],
    hosts: &Hosts,
    clock: u64,
    remaining: f64,
    quota: usize,
    host_caps: &[u32],
    settings: &PlanSettings,
) -> Vec<Choice> {
    let period_ms = settings.period_ms.max(1) as f64;
    let cost_per_byte = hosts
        .stats
        .iter()
        .map(|stats: &HostStats| {
            let ms_per_byte = if stats.ms_per_byte.is_nan() { 0.0 } else { stats.ms_per_byte };
            settings.cost_weight * ms_per_byte / period_ms
        })
        .collect();
    let discovery_quota = (quota as f64 * settings.discovery_share.clamp(0.0, 1.0)).round() as usize;
    let mut day_state =
        settings.scores_time_of_day().then(|| hosts.day.lock().unwrap_or_else(PoisonError::into_inner));
    let day = day_state.as_deref_mut().and_then(|state| DayScoring::new(hosts, clock, settings, state));
    let mut period = Period { clock, remaining, cost_per_byte, kappa: None, day };
    // Seeds, the URLs the crawl was told to start from, are not held to the share: a
    // recrawl has nothing to refresh until it has them. Counted in the frontier's pass.
    let headroom = quota.saturating_add(quota / 4).saturating_add(16);
    let frontier = frontier_candidates(books, host_caps, clock, headroom, settings);
    let discovery_quota = discovery_quota.max(frontier.seeds).min(quota);
    if settings.policy == Policy::LambdaCrawl {
        // Refreshes take what discoveries leave, all of it when the frontier is empty.
        let discoveries = eligible(books, host_caps, clock, settings, true).take(discovery_quota).count();
        period.kappa = lambda_kappa(books, host_caps, &period, quota.saturating_sub(discoveries), settings);
    }
    let mut first = claim_tests(books, hosts, host_caps, clock, quota, settings);
    let tests: HashSet<(usize, u32)> = first.iter().map(|choice| (choice.book, choice.slot)).collect();
    let (reads, mut passed) = document_reads(books, hosts, (host_caps, &tests), clock, quota, settings);
    first.extend(reads);
    passed.extend(tests);
    let shares = Shares { quota, discovery_quota, headroom };
    let choices = pick(books, host_caps, &period, shares, frontier, (&first, &passed), settings);
    drop(period);
    if let Some(state) = day_state.as_deref_mut() {
        // A period that filled its quota shows the score a fetch must reach.
        let last_refresh = choices.iter().rev().find(|choice| choice.reason == PickReason::Refresh);
        // A score of nothing says no more than the budget outran what is worth a fetch;
        // ν stays, so that the day is still scored.
        if let (true, Some(last)) = (choices.len() == quota, last_refresh) {
            if last.score > 0.0 {
                state.cutoff = last.score;
            }
        }
    }
    choices
}

/// Claim tests a host not yet judged gets at most in a period.
pub const CLAIM_TESTS_PER_HOST: usize = 2;
/// Share of a period's quota claim tests may take at most.
pub const CLAIM_TESTS_SHARE: f64 = 0.25;

/// Tracked pages whose change a host not yet judged claims (`docs/algorithms/sitemaps.md`
/// §5): fetching one confirms or refutes the claim, so a host is judged within a few
/// periods rather than whenever its pages happen to be fetched twice. At most
/// [`CLAIM_TESTS_PER_HOST`] a host and [`CLAIM_TESTS_SHARE`] of the quota.
fn claim_tests(
    books: &[&Book],
    hosts: &Hosts,
    host_caps: &[u32],
    clock: u64,
    quota: usize,
    settings: &PlanSettings,
) -> Vec<Choice> {
    let limit = (quota as f64 * CLAIM_TESTS_SHARE) as usize;
    if limit == 0 {
        return Vec::new();
    }
    let mut per_host: HashMap<u32, usize> = HashMap::new();
    let mut tests = Vec::new();
    // The flagged pages are found among the URLs with claims, not by a pass over all.
    let flagged = books.iter().enumerate().flat_map(|(index, book)| {
        book.claim_test_slots().into_iter().map(move |slot| (index as u32, slot, book.page(slot)))
    });
    for (book, slot, page) in flagged {
        if tests.len() >= limit {
            break;
        }
        let unjudged = hosts
            .stats
            .get(page.host as usize)
            .is_some_and(|stats| stats.claims.trust() == ClaimTrust::Unknown);
        if !is_eligible(page, host_caps, clock, settings, false) || !unjudged {
            continue;
        }
        let taken = per_host.entry(page.host).or_default();
        if *taken < CLAIM_TESTS_PER_HOST {
            *taken = taken.saturating_add(1);
            tests.push(Choice { book: book as usize, slot, score: 0.0, reason: PickReason::Refresh });
        }
    }
    tests
}

/// Share of a period's quota document reads may take at most (at least one pick): many
/// small hosts, each with its sitemap and feeds, must not shut out every other fetch.
pub const DOCUMENT_READS_SHARE: f64 = 0.25;

/// The sitemaps and feeds their own rule governs ([`crate::documents`]), which no score
/// picks, and those of them due in period `clock` but the claim tests `tests`, the
/// longest unread first, at most [`DOCUMENT_READS_SHARE`] of the quota (the others stay
/// due). A document that does not
/// download is left to its page's model (a `/sitemap.xml` that robots.txt did not name
/// may not exist).
fn document_reads(
    books: &[&Book],
    hosts: &Hosts,
    (host_caps, tests): (&[u32], &HashSet<(usize, u32)>),
    clock: u64,
    quota: usize,
    settings: &PlanSettings,
) -> (Vec<Choice>, HashSet<(usize, u32)>) {
    let (mut due, mut governed) = (Vec::new(), HashSet::new());
    let tracked: usize = books
        .iter()
        .map(|book| book.len().saturating_sub(book.frontier_len()).saturating_sub(book.gone()))
        .sum();
    let budget_share = quota as f64 / tracked.max(1) as f64;
    for (index, book) in books.iter().enumerate() {
        for (slot, listing) in book.documents() {
            let page = book.page(slot);
            let Some(stats) = hosts.stats.get(page.host as usize) else { continue };
            let trust = stats.claims.trust();
            let tracked = !page.is_frontier() && !page.is_gone() && !page.is_moved();
            if !tracked || !stats.announced.governs(trust) || page.p_download.get() < 0.5 {
                continue;
            }
            governed.insert((index, slot));
            let since = page.last_visit().map(|visit| clock.saturating_sub(visit));
            // A document an index dated may be a claim test too: picked once, as that.
            if stats.announced.due(trust, listing, since, budget_share)
                && is_eligible(page, host_caps, clock, settings, false)
                && !tests.contains(&(index, slot))
            {
                due.push((
                    page.last_visit(),
                    Choice { book: index, slot, score: 0.0, reason: PickReason::Refresh },
                ));
            }
        }
    }
    due.sort_by_key(|(last_visit, choice)| (*last_visit, choice.book, choice.slot));
    let limit = (quota as f64 * DOCUMENT_READS_SHARE).ceil() as usize;
    (due.into_iter().take(limit).map(|(_, choice)| choice).collect(), governed)
}

/// A period's picks, those of them for discoveries, and the candidates each list keeps
/// at first.
#[derive(Debug, Clone, Copy)]
struct Shares {
    quota: usize,
    discovery_quota: usize,
    headroom: usize,
}

/// [`choose`]'s picks for the scores of `period`: first `tests` (the claim tests and the
/// documents due), then the best candidates but those in `passed` (`tests` and the
/// documents not due). `frontier`: the frontier's candidates at `shares.headroom`,
/// already found.
fn pick(
    books: &[&Book],
    host_caps: &[u32],
    period: &Period,
    shares: Shares,
    frontier: FrontierCandidates,
    (tests, passed): (&[Choice], &HashSet<(usize, u32)>),
    settings: &PlanSettings,
) -> Vec<Choice> {
    let Shares { quota, discovery_quota, mut headroom } = shares;
    let clock = period.clock;
    let mut first = Some(frontier);
    loop {
        let FrontierCandidates { choices: frontier, overflowed: frontier_overflowed, .. } = match first.take()
        {
            Some(found) => found,
            None => frontier_candidates(books, host_caps, clock, headroom, settings),
        };
        let (refresh, refresh_overflowed) = refresh_candidates(books, host_caps, period, headroom, settings);
        let mut room = host_caps.to_vec();
        let mut choices = Vec::with_capacity(quota);
        for test in tests.iter().take(quota) {
            let host = books[test.book].page(test.slot).host as usize;
            if let Some(left) = room[host].checked_sub(1) {
                room[host] = left;
                choices.push(*test);
            }
        }
        // Whether the candidates ran out before `limit`.
        let mut take =
            |candidates: &mut std::vec::IntoIter<Choice>, limit: usize, choices: &mut Vec<Choice>| {
                while choices.len() < limit {
                    let Some(choice) = candidates.next() else { return true };
                    if passed.contains(&(choice.book, choice.slot)) {
                        continue;
                    }
                    let host = books[choice.book].page(choice.slot).host as usize;
                    if let Some(left) = room[host].checked_sub(1) {
                        room[host] = left;
                        choices.push(choice);
                    }
                }
                false
            };
        let (mut frontier, mut refresh) = (frontier.into_iter(), refresh.into_iter());
        // The tests come out of the refreshes' share, not the discoveries'.
        let discovery_short =
            take(&mut frontier, choices.len().saturating_add(discovery_quota).min(quota), &mut choices);
        let refresh_short = take(&mut refresh, quota, &mut choices);
        let frontier_short = take(&mut frontier, quota, &mut choices);
        // Host caps can turn away candidates the top k never kept: widen and retry when a
        // list ran out short of its share, even if the other list filled the quota, which
        // takes only the share this one leaves.
        let widen = (refresh_short && refresh_overflowed)
            || ((discovery_short || frontier_short) && frontier_overflowed);
        if !widen {
            return choices;
        }
        headroom = headroom.saturating_mul(4);
    }
}

/// The pages that may be picked in period `clock`: frontier or tracked ones as asked,
/// not awaiting a pick's estimate, on a host with room, with their book and slot.
fn eligible<'a>(
    books: &'a [&'a Book],
    host_caps: &'a [u32],
    clock: u64,
    settings: &'a PlanSettings,
    frontier: bool,
) -> impl Iterator<Item = (u32, u32, &'a Page)> + 'a {
    // A book with no frontier page is not read for one: at 100 M tracked URLs a pass
    // over the pages is most of a period's choice.
    let wanted = move |book: &&&Book| !frontier || book.frontier_len() > 0;
    books.iter().enumerate().filter(move |(_, book)| wanted(book)).flat_map(move |(index, book)| {
        book.pages().iter().enumerate().filter_map(move |(slot, page)| {
            is_eligible(page, host_caps, clock, settings, frontier).then_some((
                index as u32,
                slot as u32,
                page,
            ))
        })
    })
}

/// Whether `page` may be picked in period `clock` ([`eligible`]).
fn is_eligible(page: &Page, host_caps: &[u32], clock: u64, settings: &PlanSettings, frontier: bool) -> bool {
    page.is_frontier() == frontier
        && (!frontier || settings.discovery_open || page.depth == 0)
        && !page.is_gone()
        && !page.is_moved()
        && host_caps[page.host as usize] > 0
        && !page.is_pending(clock, settings.pending_periods)
}

/// The kept candidates as choices, best first, and whether any were turned away.
fn into_choices<K: Ord + Copy>(
    top: TopK<K>,
    reason: PickReason,
    place: impl Fn(K) -> (u32, u32),
) -> (Vec<Choice>, bool) {
    let overflowed = top.overflowed();
    let choices = top
        .into_sorted()
        .into_iter()
        .map(|candidate| {
            let (book, slot) = place(candidate.key);
            Choice { book: book as usize, slot, score: candidate.score, reason }
        })
        .collect();
    (choices, overflowed)
}

/// The best `k` frontier pages to discover, whether any were turned away, and how many
/// of the eligible ones are seeds.
#[derive(Debug)]
struct FrontierCandidates {
    choices: Vec<Choice>,
    overflowed: bool,
    seeds: usize,
}

fn frontier_candidates(
    books: &[&Book],
    host_caps: &[u32],
    clock: u64,
    k: usize,
    settings: &PlanSettings,
) -> FrontierCandidates {
    // Earliest discovered first on a tie, then by partition and slot.
    let mut top = TopK::<(u32, u32, u32)>::new(k);
    let mut seeds = 0usize;
    for (book, slot, page) in eligible(books, host_caps, clock, settings, true) {
        if page.depth == 0 {
            seeds = seeds.saturating_add(1);
        }
        // Seeds first, then what the sites' sitemaps and feeds name, then the most
        // linked-to (an in-degree is at most MAX_IN_LINKS).
        let announced = if page.is_announced() { f64::from(MAX_IN_LINKS) + 1.0 } else { 0.0 };
        let score = match settings.discovery {
            _ if page.depth == 0 => f64::from(u32::MAX),
            Discovery::Ifs => announced + f64::from(page.in_degree),
            Discovery::Bfs => announced,
        };
        top.offer(score, (page.discovered, book, slot));
    }
    let (choices, overflowed) = into_choices(top, PickReason::Discovery, |(_, book, slot)| (book, slot));
    FrontierCandidates { choices, overflowed, seeds }
}

fn refresh_candidates(
    books: &[&Book],
    host_caps: &[u32],
    period: &Period,
    k: usize,
    settings: &PlanSettings,
) -> (Vec<Choice>, bool) {
    let mut top = TopK::<(u32, u32)>::new(k);
    // A page passed over for its bound was turned away as surely as one `top` refused:
    // host caps may need it.
    let mut passed_over = false;
    for (book, slot, page) in eligible(books, host_caps, period.clock, settings, false) {
        match refresh_score_above(page, period, settings, top.floor()) {
            Ok(Some(score)) => top.offer(score, (book, slot)),
            Ok(None) => {}
            Err(BelowFloor) => passed_over = true,
        }
    }
    let (choices, overflowed) = into_choices(top, PickReason::Refresh, |key| key);
    (choices, overflowed || passed_over)
}

/// Whether the page's next request is predicted to download with less than the least
/// probability worth a pick.
fn predicted_to_fail(page: &Page, settings: &PlanSettings) -> bool {
    page.p_download.get() < settings.min_download_probability
}

/// The page's chance of downloading, but at least a tenth of the least worth a pick: a
/// page predicted never to download keeps a probe share of its score, so a wrong
/// forecast is tested again, not kept.
fn probe_share(page: &Page, settings: &PlanSettings) -> f64 {
    page.p_download.get().max(settings.min_download_probability / 10.0)
}

/// Periods since the page was last downloaded or picked; never → since discovery, + 1.
fn since_visit(page: &Page, clock: u64) -> f64 {
    match page.last_visit() {
        Some(visit) => clock.saturating_sub(visit) as f64,
        None => clock.saturating_sub(u64::from(page.discovered)) as f64 + 1.0,
    }
}

/// The policy's score of a tracked page, `None` when the policy does not spend a pick
/// on it this period.
fn refresh_score(page: &Page, period: &Period, settings: &PlanSettings) -> Option<f64> {
    let clock = period.clock;
    let cost = period.cost(page);
    match settings.policy {
        Policy::Paper => Some(paper_score(period.remaining, period.staleness(page), cost)),
        Policy::ChangeAware => {
            if predicted_to_fail(page, settings) {
                return None;
            }
            let p_download = page.p_download.get();
            let rate = change_rate(page.estimated_change_rate(), page.p_change.get());
            let out_of_date = expected_out_of_date(period.copy_age(page), rate);
            Some(paper_score(period.remaining, p_download * out_of_date, cost))
        }
        Policy::Groups => {
            let Some(schedule) = page.schedule else { return Some(since_visit(page, clock)) };
            let Some(visit) = page.last_visit() else { return Some(since_visit(page, clock)) };
            let period_end = settings.period_start_ms(clock.saturating_add(1)).saturating_sub(1);
            let due = schedule.latest_due(
                settings.period_start_ms(visit),
                period_end,
                settings.utc_offset_minutes,
            )?;
            Some(period_end.saturating_sub(due) as f64 / settings.period_ms.max(1) as f64)
        }
        Policy::Uniform => Some(since_visit(page, clock)),
        Policy::NutchAdaptive => {
            let since = since_visit(page, clock);
            let interval = page.nutch_interval().max(f64::MIN_POSITIVE);
            (since >= interval).then_some(since / interval)
        }
        Policy::Freshness => Some(FreshnessTerms::of(page, period, settings).score()),
        Policy::LambdaCrawl => {
            // LambdaCrawl assumes every request downloads; a page predicted not to keeps
            // only its probe share.
            let share = if predicted_to_fail(page, settings) { probe_share(page, settings) } else { 1.0 };
            let since = since_visit(page, clock);
            match period.kappa {
                Some(kappa) => {
                    let rate = change_rate(page.estimated_change_rate(), page.p_change.get());
                    Some(share * lambda_crawl_rate(rate, kappa) * since)
                }
                None => Some(share * since),
            }
        }
    }
}

/// What the `freshness` score of a page is made of: weight × the best index over the
/// rates [`least_rate`, `most_rate`] at `age`; for a live page of a host with a day
/// profile, the index for a periodic rate at the best rate, where it applies.
struct FreshnessTerms {
    weight: f64,
    least_rate: f64,
    most_rate: f64,
    age: f64,
    /// The page for the periodic index, and its correction.
    periodic: Option<(PeriodicPage, f64)>,
    hours_per_period: f64,
}

impl FreshnessTerms {
    fn of(page: &Page, period: &Period, settings: &PlanSettings) -> Self {
        let rate = change_rate(page.freshness_rate(), page.p_change.get());
        if predicted_to_fail(page, settings) {
            // Its copy ages from its last download, so at that age the probe would
            // outbid live pages every period; from its last visit, probes come about
            // as often as a live page of its rate is fetched, times its share.
            let age = since_visit(page, period.clock);
            Self {
                weight: probe_share(page, settings),
                least_rate: rate,
                most_rate: rate,
                age,
                periodic: None,
                hours_per_period: 1.0,
            }
        } else {
            // Optimism over the middle half of the rate's credible interval: a page that
            // looks too fast to follow is fetched again as its copy ages, a slow one a
            // little earlier, and a wrong rate is corrected.
            let (least_rate, most_rate) = middle_half(rate, page.middle_half_low_rate.get());
            let weight = page.p_download.get();
            // A page never stored, or whose change a trusted sitemap announced, is stale
            // whatever its rate: a download keeps it until its next change, the whole of
            // what a copy can be worth (D(λτ)/λ as τ grows).
            let age = if known_stale(page) { f64::INFINITY } else { period.copy_age(page) };
            let (periodic, hours_per_period) = match &period.day {
                Some(day) if age.is_finite() => {
                    let rate = best_index_rate(least_rate, most_rate, age);
                    let periodic = day.page(page.host, weight, rate, age).and_then(|periodic| {
                        Some((periodic, day.tables.borrow_mut().correction(&periodic)?))
                    });
                    (periodic, day.hours_per_period)
                }
                _ => (None, 1.0),
            };
            Self { weight, least_rate, most_rate, age, periodic, hours_per_period }
        }
    }

    fn score(&self) -> f64 {
        match &self.periodic {
            Some((page, correction)) => self.weight * page.index(*correction) / self.hours_per_period,
            None => self.weight * best_freshness_index(self.least_rate, self.most_rate, self.age),
        }
    }

    /// At least [`Self::score`], without its exponentials.
    fn bound(&self) -> f64 {
        match &self.periodic {
            Some((page, correction)) => self.weight * page.bound(*correction) / self.hours_per_period,
            None => self.weight * freshness_index_bound(self.least_rate, self.most_rate, self.age),
        }
    }
}

/// A cheap upper bound of the page's score is below the k-th best so far.
struct BelowFloor;

/// Never stored, or a trusted claim announced its change: stale whatever its rate.
fn known_stale(page: &Page) -> bool {
    page.last_download().is_none() || page.is_change_claimed()
}

/// Whether a stored, live page the Poisson index scores is surely below `floor`, found
/// before its [`FreshnessTerms`] are built: at 100 M URLs most pages end here. `false`
/// for the pages [`FreshnessTerms`] scores otherwise (probes, copies known stale, hosts
/// with a day profile).
fn freshness_surely_below(page: &Page, period: &Period, settings: &PlanSettings, floor: f64) -> bool {
    let by_day = period.day.as_ref().is_some_and(|day| day.has_profile(page.host));
    if by_day || predicted_to_fail(page, settings) || known_stale(page) {
        return false;
    }
    let rate = change_rate(page.freshness_rate(), page.p_change.get());
    let low_end = page.middle_half_low_rate.get();
    weighted_index_bound_below(page.p_download.get(), rate, low_end, period.copy_age(page), floor)
}

/// The page's [`refresh_score`], or [`BelowFloor`] when a cheap upper bound of it is below
/// `floor`, the k-th best so far: most pages cannot beat it, and skip their exponentials.
fn refresh_score_above(
    page: &Page,
    period: &Period,
    settings: &PlanSettings,
    floor: Option<f64>,
) -> Result<Option<f64>, BelowFloor> {
    let below_floor = |bound: f64| floor.is_some_and(|floor| bound < floor);
    match settings.policy {
        Policy::Freshness => {
            if floor.is_some_and(|floor| freshness_surely_below(page, period, settings, floor)) {
                return Err(BelowFloor);
            }
            let terms = FreshnessTerms::of(page, period, settings);
            if below_floor(terms.bound()) {
                return Err(BelowFloor);
            }
            Ok(Some(terms.score()))
        }
        // A copy is out of date for at most its whole age; evaluated as the score is, so
        // rounding cannot put the score above it.
        Policy::ChangeAware
            if below_floor(paper_score(
                period.remaining,
                page.p_download.get() * period.copy_age(page),
                period.cost(page),
            )) =>
        {
            Err(BelowFloor)
        }
        _ => Ok(refresh_score(page, period, settings)),
    }
}

/// κ for this period's candidates and refresh budget. Rates are grouped to
/// [`RATE_MANTISSA_BITS`](crate::coarse::RATE_MANTISSA_BITS) bits of mantissa, so the bisection runs over a few thousand
/// distinct rates however finely the estimates differ (those from dates are continuous);
/// each page is still scored at its own rate.
fn lambda_kappa(
    books: &[&Book],
    host_caps: &[u32],
    period: &Period,
    budget: usize,
    settings: &PlanSettings,
) -> Option<f64> {
    let mut rates: HashMap<u64, u64> = HashMap::new();
    for (_, _, page) in eligible(books, host_caps, period.clock, settings, false) {
        if predicted_to_fail(page, settings) {
            continue;
        }
        let rate = change_rate(page.estimated_change_rate(), page.p_change.get()) as f32;
        let pages = rates.entry(f64::from(coarse(rate)).to_bits()).or_default();
        *pages = pages.saturating_add(1);
    }
    lambda_crawl_kappa(&rates, budget as f64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::book::tests::{estimate, link};
    use crate::book::{BookSettings, Linked};
    use recrawl_common::links::LinkRules;
    use recrawl_model::freshness::{freshness_index, PEAK_INDEX_RATE_TIMES_AGE};
    use recrawl_schemas::FetchOutcome;

    fn settings(policy: Policy) -> PlanSettings {
        PlanSettings { policy, period_ms: 1000, discovery_share: 0.0, ..PlanSettings::default() }
    }

    /// A book of tracked pages: (url, last download period, size, latency ms).
    fn tracked(pages: &[(&str, u64, u64, f64)]) -> (Book, Hosts) {
        let (mut book, mut hosts) = (Book::default(), Hosts::default());
        for &(url, period, size, latency) in pages {
            let mut e = estimate(url, period, true, None);
            e.last_request.size_bytes = size;
            e.last_request.latency_ms = latency;
            book.apply_estimate(&mut hosts, &e, &BookSettings::default()).unwrap();
        }
        (book, hosts)
    }

    fn urls(book: &Book, choices: &[Choice]) -> Vec<String> {
        choices.iter().map(|c| book.url(c.slot)).collect()
    }

    #[test]
    fn equal_sizes_pick_the_stalest() {
        let (book, hosts) = tracked(&[("http://h/a", 5, 100, 10.0), ("http://h/b", 2, 100, 10.0)]);
        let caps = vec![10; hosts.len()];
        let picks = choose(&[&book], &hosts, 8, 10.0, 1, &caps, &settings(Policy::Paper));
        assert_eq!(urls(&book, &picks), ["http://h/b"]);
        // s = 8 − 2 − 1 = 5; cost = 100 B × 0.1 ms/B / 1000 ms.
        assert!((picks[0].score - (50.0 - 0.01)).abs() < 1e-9, "{}", picks[0].score);
    }

    #[test]
    fn freshness_fetches_a_copy_a_trusted_claim_made_stale_before_a_staler_one() {
        let (mut book, hosts) = tracked(&[("http://h/a", 2, 100, 10.0), ("http://h/b", 5, 100, 10.0)]);
        let caps = vec![10; hosts.len()];
        let pick = |book: &Book| {
            urls(book, &choose(&[book], &hosts, 8, 10.0, 1, &caps, &settings(Policy::Freshness)))
        };
        assert_eq!(pick(&book), ["http://h/a"]);
        let b = book.find("http://h/b").unwrap();
        book.take_claim(b, recrawl_model::claims::CopyNews::Stale, 7);
        assert_eq!(pick(&book), ["http://h/b"]);
    }

    #[test]
    fn a_claim_of_a_host_not_yet_judged_is_tested_first_within_its_share() {
        use recrawl_model::claims::{Claim, ClaimTally, Listing};
        let pages: Vec<(String, u64, u64, f64)> =
            (0..10).map(|i| (format!("http://h{}/{i}", i % 2), 2 + i as u64, 100, 10.0)).collect();
        let pages: Vec<(&str, u64, u64, f64)> =
            pages.iter().map(|(u, p, s, l)| (u.as_str(), *p, *s, *l)).collect();
        let (mut book, mut hosts) = tracked(&pages);
        let caps = vec![10; hosts.len()];
        let settings = settings(Policy::Freshness);
        let freshest = book.find("http://h1/9").unwrap();
        // A change claimed well after its download (period 11), beyond the clocks' skew.
        let claim = Claim { changed_ms: 100_000, seen_ms: 200_000 };
        let book_settings = BookSettings { period_ms: 1000, epoch_unix_ms: 0, ..BookSettings::default() };
        book.claim(&mut hosts, freshest, claim, Listing::Every, &book_settings).unwrap();
        assert!(book.page(freshest).is_claim_to_test());
        let picks = choose(&[&book], &hosts, 13, 10.0, 10, &caps, &settings);
        assert_eq!(picks[0].slot, freshest, "the test comes first");
        assert_eq!(picks.iter().filter(|pick| pick.slot == freshest).count(), 1, "and only once");
        // Below four picks a period, a quarter is no test.
        let picks = choose(&[&book], &hosts, 13, 10.0, 3, &caps, &settings);
        assert_ne!(picks[0].slot, freshest);
        // A host judged either way has nothing to test.
        hosts.stats[book.page(freshest).host as usize].claims =
            ClaimTally { refuted: 2, ..ClaimTally::default() };
        let picks = choose(&[&book], &hosts, 13, 10.0, 10, &caps, &settings);
        assert_ne!(picks[0].slot, freshest);
    }

    #[test]
    fn equal_staleness_picks_the_smallest() {
        let (book, hosts) = tracked(&[("http://h/big", 3, 5000, 500.0), ("http://h/small", 3, 100, 10.0)]);
        let caps = vec![10; hosts.len()];
        let picks = choose(&[&book], &hosts, 8, 10.0, 1, &caps, &settings(Policy::Paper));
        assert_eq!(urls(&book, &picks), ["http://h/small"]);
    }

    #[test]
    fn equal_sizes_on_two_servers_pick_the_faster_server() {
        let (book, hosts) = tracked(&[("http://slow/a", 3, 1000, 2000.0), ("http://fast/a", 3, 1000, 10.0)]);
        let caps = vec![10; hosts.len()];
        let picks = choose(&[&book], &hosts, 7, 10.0, 2, &caps, &settings(Policy::Paper));
        assert_eq!(urls(&book, &picks), ["http://fast/a", "http://slow/a"]);
        assert!(picks[0].score > picks[1].score);
    }

    #[test]
    fn never_more_than_the_quota_nor_a_hosts_cap() {
        let pages: Vec<(String, u64)> =
            (0..60).map(|i| (format!("http://h{}/p{i}", i % 3), (i % 7) as u64)).collect();
        let refs: Vec<(&str, u64, u64, f64)> =
            pages.iter().map(|(u, p)| (u.as_str(), *p, 100, 1.0)).collect();
        let (book, hosts) = tracked(&refs);
        // nutch-adaptive and groups leave out pages not yet due, so they may pick fewer.
        let always_score = <Policy as clap::ValueEnum>::value_variants()
            .iter()
            .filter(|policy| !matches!(policy, Policy::NutchAdaptive | Policy::Groups));
        for &policy in always_score {
            for (quota, cap) in [(10, 2), (10, 100), (100, 5), (0, 5)] {
                let caps = vec![cap; hosts.len()];
                let picks = choose(&[&book], &hosts, 9, 10.0, quota, &caps, &settings(policy));
                assert_eq!(picks.len(), quota.min(3 * cap as usize).min(60), "{policy:?} {quota} {cap}");
                let mut per_host = vec![0; hosts.len()];
                for pick in &picks {
                    per_host[book.page(pick.slot).host as usize] += 1;
                }
                assert!(per_host.iter().all(|&n| n <= cap), "{policy:?}: {per_host:?}");
            }
        }
    }

    /// 21 pages of a host capped at one, downloaded in period 1 and first in the book, and
    /// 3 of an open host downloaded in `open_downloaded`; the caps.
    fn capped_then_open(open_downloaded: u64) -> (Book, Hosts, Vec<u32>) {
        let stale: Vec<String> = (0..21).map(|i| format!("http://capped/{i}")).collect();
        let mut pages: Vec<(&str, u64, u64, f64)> =
            stale.iter().map(|url| (url.as_str(), 1, 100, 1.0)).collect();
        pages.extend(
            ["http://open/1", "http://open/2", "http://open/3"].map(|url| (url, open_downloaded, 100, 1.0)),
        );
        let (book, hosts) = tracked(&pages);
        let mut caps = vec![10; hosts.len()];
        caps[hosts.find("capped").unwrap() as usize] = 1;
        (book, hosts, caps)
    }

    #[test]
    fn pages_passed_over_for_their_bound_still_fill_what_a_host_cap_turns_away() {
        // Quota 4 keeps the best 4 + 1 + 16 = 21: the stale pages of a host capped at one,
        // first in the book. The fresher pages of the other host cannot reach their floor,
        // so they are passed over without a score; the cap then turns 20 away and the
        // choice must widen to them.
        let (book, hosts, caps) = capped_then_open(48);
        let capped = hosts.find("capped").unwrap() as usize;
        for policy in [Policy::ChangeAware, Policy::Freshness] {
            let picks = choose(&[&book], &hosts, 50, 10.0, 4, &caps, &settings(policy));
            let hosts_picked: Vec<_> = picks.iter().map(|pick| book.page(pick.slot).host as usize).collect();
            assert_eq!(hosts_picked.len(), 4, "{policy:?}: {:?}", urls(&book, &picks));
            assert_eq!(hosts_picked.iter().filter(|&&host| host == capped).count(), 1, "{policy:?}");
        }
    }

    /// Frontier URLs of `host` linked in `period`.
    /// `count` URLs of `host` found by links (depth 1), or given as seeds (depth 0).
    fn frontier_of(book: &mut Book, hosts: &mut Hosts, host: &str, count: usize, period: u64, depth: u32) {
        for i in 0..count {
            let source = (depth > 0).then(|| format!("http://{host}/"));
            let found = link(&format!("http://{host}/new-{i}"), source.as_deref(), period, depth);
            book.apply_link(hosts, &found, &LinkRules::default(), 100, &BookSettings::default()).unwrap();
        }
    }

    fn link_frontier(book: &mut Book, hosts: &mut Hosts, host: &str, count: usize, period: u64) {
        frontier_of(book, hosts, host, count, period, 1);
    }

    #[test]
    fn seeds_are_fetched_before_refreshes_whatever_the_discovery_share() {
        let tracked_urls: Vec<String> = (0..10).map(|i| format!("http://old/{i}")).collect();
        let (mut book, mut hosts) =
            tracked(&tracked_urls.iter().map(|url| (url.as_str(), 1, 100, 1.0)).collect::<Vec<_>>());
        frontier_of(&mut book, &mut hosts, "seeded", 3, 2, 0);
        frontier_of(&mut book, &mut hosts, "linked", 5, 2, 1);
        let caps = vec![10; hosts.len()];
        for policy in [Policy::Freshness, Policy::LambdaCrawl, Policy::Uniform] {
            let settings = PlanSettings { discovery_share: 0.2, ..settings(policy) };
            let picks = choose(&[&book], &hosts, 20, 10.0, 5, &caps, &settings);
            let seeded = urls(&book, &picks).iter().filter(|url| url.contains("seeded")).count();
            let discoveries = picks.iter().filter(|pick| pick.reason == PickReason::Discovery).count();
            // The three seeds, though a fifth of five picks is one; the linked URLs wait.
            assert_eq!(
                (seeded, discoveries, picks.len()),
                (3, 3, 5),
                "{policy:?}: {:?}",
                urls(&book, &picks)
            );
        }
    }

    #[test]
    fn seeds_and_discoveries_come_from_the_books_with_a_frontier_among_those_without() {
        let tracked_urls: Vec<String> = (0..10).map(|i| format!("http://old/{i}")).collect();
        let tracked_only =
            || tracked(&tracked_urls.iter().map(|url| (url.as_str(), 1, 100, 1.0)).collect::<Vec<_>>());
        let (before, _) = tracked_only();
        let (mut with_frontier, mut hosts) = tracked_only();
        frontier_of(&mut with_frontier, &mut hosts, "seeded", 3, 2, 0);
        frontier_of(&mut with_frontier, &mut hosts, "linked", 5, 2, 1);
        let (after, _) = tracked_only();
        assert_eq!((before.frontier_len(), with_frontier.frontier_len()), (0, 8));
        let caps = vec![10; hosts.len()];
        for policy in [Policy::Freshness, Policy::LambdaCrawl, Policy::Uniform] {
            let settings = PlanSettings { discovery_share: 0.2, ..settings(policy) };
            let picks = choose(&[&before, &with_frontier, &after], &hosts, 20, 10.0, 6, &caps, &settings);
            let discoveries: Vec<&Choice> =
                picks.iter().filter(|pick| pick.reason == PickReason::Discovery).collect();
            // The three seeds, though a fifth of six picks is one, all from the middle book.
            assert_eq!(discoveries.len(), 3, "{policy:?}: {picks:?}");
            assert!(discoveries.iter().all(|pick| pick.book == 1), "{policy:?}: {picks:?}");
            let seeded =
                discoveries.iter().filter(|pick| with_frontier.url(pick.slot).contains("seeded")).count();
            assert_eq!(seeded, 3, "{policy:?}: {picks:?}");
            assert_eq!(picks.len(), 6, "{policy:?}");
        }
    }

    #[test]
    fn refreshes_a_host_cap_turned_away_are_widened_to_not_given_to_the_frontier() {
        // As above, with frontier URLs that could fill the quota: with no discovery share
        // they get only what the refreshes leave, and 4 refreshes can be picked.
        let (mut book, mut hosts, caps) = capped_then_open(40);
        link_frontier(&mut book, &mut hosts, "open", 3, 45);
        for policy in [Policy::Paper, Policy::Uniform, Policy::ChangeAware, Policy::Freshness] {
            let picks = choose(&[&book], &hosts, 50, 10.0, 4, &caps, &settings(policy));
            let refreshes = picks.iter().filter(|pick| pick.reason == PickReason::Refresh).count();
            assert_eq!((picks.len(), refreshes), (4, 4), "{policy:?}: {:?}", urls(&book, &picks));
        }
    }

    #[test]
    fn a_discovery_share_a_host_cap_cut_short_is_widened_to() {
        // Breadth first, the first 21 frontier URLs are a host's capped at one; the share
        // of 2 needs one of the later ones, though refreshes could fill the quota.
        let tracked_urls: Vec<String> = (0..10).map(|i| format!("http://other/{i}")).collect();
        let (mut book, mut hosts) =
            tracked(&tracked_urls.iter().map(|url| (url.as_str(), 1, 100, 1.0)).collect::<Vec<_>>());
        link_frontier(&mut book, &mut hosts, "capped", 21, 1);
        link_frontier(&mut book, &mut hosts, "open", 3, 5);
        let capped = hosts.find("capped").unwrap() as usize;
        let mut caps = vec![10; hosts.len()];
        caps[capped] = 1;
        let settings =
            PlanSettings { discovery: Discovery::Bfs, discovery_share: 0.5, ..settings(Policy::Paper) };
        let picks = choose(&[&book], &hosts, 50, 10.0, 4, &caps, &settings);
        let discoveries = picks.iter().filter(|pick| pick.reason == PickReason::Discovery).count();
        assert_eq!((picks.len(), discoveries), (4, 2), "{:?}", urls(&book, &picks));
    }

    #[test]
    fn a_backed_off_host_gets_nothing_and_pending_picks_are_not_repeated() {
        let (mut book, hosts) = tracked(&[("http://a/1", 1, 100, 1.0), ("http://b/1", 1, 100, 1.0)]);
        let caps = vec![0, 5];
        let picks = choose(&[&book], &hosts, 5, 10.0, 2, &caps, &settings(Policy::Uniform));
        assert_eq!(urls(&book, &picks), ["http://b/1"]);
        book.picked(picks[0].slot, 5);
        let caps = vec![5, 5];
        let picks = choose(&[&book], &hosts, 6, 10.0, 2, &caps, &settings(Policy::Uniform));
        assert_eq!(urls(&book, &picks), ["http://a/1"], "b/1 awaits its estimate");
    }

    /// A pick no estimate answers (robots.txt denied it, the fetcher deferred it) makes
    /// the URL wait twice as long before each next pick; an estimate ends the wait.
    #[test]
    fn a_url_whose_picks_go_unanswered_waits_twice_as_long_each_time() {
        let (mut book, mut hosts) = tracked(&[("http://a/denied", 1, 100, 1.0)]);
        let caps = vec![5; hosts.len()];
        let uniform = settings(Policy::Uniform);
        let pick_periods: Vec<u64> = (2..200)
            .filter(|&period| {
                let picks = choose(&[&book], &hosts, period, 100.0, 1, &caps, &uniform);
                picks.iter().for_each(|choice| book.picked(choice.slot, period));
                !picks.is_empty()
            })
            .collect();
        // Pending 2 periods after the first pick, then 4, 8, 16, 32 after the ones no
        // estimate answered, and at most 64.
        assert_eq!(pick_periods, [2, 5, 10, 19, 36, 69, 134, 199], "{pick_periods:?}");
        let slot = book.find("http://a/denied").expect("tracked");
        assert_eq!(book.page(slot).unanswered_picks(), 5);
        book.apply_estimate(
            &mut hosts,
            &estimate("http://a/denied", 199, true, Some(false)),
            &BookSettings::default(),
        )
        .expect("estimate");
        assert_eq!(book.page(slot).unanswered_picks(), 0, "answered");
        let picks = choose(&[&book], &hosts, 200, 100.0, 1, &caps, &uniform);
        assert_eq!(urls(&book, &picks), ["http://a/denied"], "picked again at once");
        // Without pending periods, nothing waits.
        let no_wait = PlanSettings { pending_periods: 0, ..uniform };
        book.picked(picks[0].slot, 200);
        book.picked(picks[0].slot, 201);
        let picks = choose(&[&book], &hosts, 202, 100.0, 1, &caps, &no_wait);
        assert_eq!(urls(&book, &picks), ["http://a/denied"], "{:?}", book.page(slot).unanswered_picks());
    }

    /// A URL whose request found it moved for good (a permanent redirect, not followed)
    /// is never picked again by any policy, and a link to it does not bring it back: its
    /// new URL, published as a link, is tracked instead. An estimate of another answer
    /// (the site took the redirect back) makes it pickable again.
    #[test]
    fn a_url_that_moved_for_good_is_not_picked_again() {
        let (mut book, mut hosts) = tracked(&[("http://a/old", 1, 10, 0.5), ("http://a/kept", 1, 10, 0.5)]);
        let mut moved = estimate("http://a/old", 3, false, None);
        (moved.last_request.outcome, moved.last_request.http_status) = (FetchOutcome::HttpStatus, Some(301));
        book.apply_estimate(&mut hosts, &moved, &BookSettings::default()).expect("estimate");
        let slot = book.find("http://a/old").expect("tracked");
        assert!(book.page(slot).is_moved());
        let linked = book
            .apply_link(
                &mut hosts,
                &link("http://a/old", Some("http://a/kept"), 4, 1),
                &LinkRules::default(),
                100,
                &BookSettings::default(),
            )
            .expect("link");
        assert_eq!((linked, book.find("http://a/old")), (Linked::Tracked, Some(slot)), "not new again");
        let caps = vec![5; hosts.len()];
        for &policy in Policy::all() {
            for period in 4..40 {
                let picks = choose(&[&book], &hosts, period, 10.0, 2, &caps, &settings(policy));
                assert!(
                    !urls(&book, &picks).contains(&"http://a/old".to_owned()),
                    "{policy:?} picked it in {period}"
                );
            }
        }
        let mut back = estimate("http://a/old", 5, true, Some(true));
        back.last_request.http_status = Some(200);
        book.apply_estimate(&mut hosts, &back, &BookSettings::default()).expect("estimate");
        assert!(!book.page(slot).is_moved());
        let picks = choose(&[&book], &hosts, 40, 10.0, 2, &caps, &settings(Policy::Uniform));
        assert!(urls(&book, &picks).contains(&"http://a/old".to_owned()), "pickable again");
    }

    #[test]
    fn change_aware_prefers_changing_pages_and_skips_failing_ones() {
        let (mut book, mut hosts) = (Book::default(), Hosts::default());
        for (url, rate, p_download) in
            [("http://h/static", 0.001, 1.0), ("http://h/busy", 0.5, 1.0), ("http://h/dead", 2.0, 0.05)]
        {
            let mut e = estimate(url, 1, true, Some(false));
            e.change_rate = Some(rate);
            e.downloads.next = p_download;
            book.apply_estimate(&mut hosts, &e, &BookSettings::default()).unwrap();
        }
        let caps = vec![10; hosts.len()];
        let picks = choose(&[&book], &hosts, 6, 10.0, 3, &caps, &settings(Policy::ChangeAware));
        assert_eq!(urls(&book, &picks), ["http://h/busy", "http://h/static"]);
    }

    #[test]
    fn learned_index_policies_probe_a_page_predicted_never_to_download() {
        let (mut book, mut hosts) = (Book::default(), Hosts::default());
        for (url, p_download) in [("http://h/live", 1.0), ("http://h/condemned", 0.0)] {
            let mut e = estimate(url, 1, true, Some(true));
            // A point rate, no interval: both pages scored at 0.5.
            (e.change_rate, e.change_rate_low, e.change_rate_high) = (Some(0.5), None, None);
            e.downloads.next = p_download;
            book.apply_estimate(&mut hosts, &e, &BookSettings::default()).unwrap();
        }
        let caps = vec![10; hosts.len()];
        for policy in [Policy::LambdaCrawl, Policy::Freshness] {
            let settings = settings(policy);
            let picks = choose(&[&book], &hosts, 6, 10.0, 2, &caps, &settings);
            assert_eq!(
                urls(&book, &picks),
                ["http://h/live", "http://h/condemned"],
                "{policy:?}: picked, after the live page"
            );
            let share = picks[1].score / picks[0].score;
            assert!((share - settings.min_download_probability / 10.0).abs() < 1e-9, "{policy:?}: {share}");
            let first = choose(&[&book], &hosts, 6, 10.0, 1, &caps, &settings);
            assert_eq!(
                urls(&book, &first),
                ["http://h/live"],
                "{policy:?}: the live page first when there is one pick"
            );
        }
    }

    #[test]
    fn lambda_crawl_spends_on_refreshes_the_discovery_share_an_empty_frontier_leaves() {
        let (book, hosts) = tracked(&[("http://a/1", 1, 100, 1.0), ("http://b/1", 3, 100, 1.0)]);
        let caps = vec![10; hosts.len()];
        let scores = |discovery_share| {
            let settings = PlanSettings { discovery_share, ..settings(Policy::LambdaCrawl) };
            let picks = choose(&[&book], &hosts, 6, 10.0, 2, &caps, &settings);
            picks.iter().map(|c| (c.reason, c.score)).collect::<Vec<_>>()
        };
        // κ is solved for the two picks refreshes get, not for the one a discovery would
        // have taken.
        let all_refreshes = scores(0.0);
        assert_eq!(all_refreshes.len(), 2);
        assert_eq!(scores(0.5), all_refreshes);
    }

    #[test]
    fn freshness_scores_a_page_over_the_middle_half_of_its_credible_interval() {
        // Seen changed at each of a few visits, a page's mean rate is its posterior's
        // long tail, and even its central rate may look too fast to follow; the index
        // takes the rate in the middle half of the interval (on the log scale) that values
        // a fetch most, so the page is fetched again and its rate corrected. A slow page
        // is scored at the half's high end.
        let (mut book, mut hosts) = (Book::default(), Hosts::default());
        for (url, mean, low, high) in
            [("http://h/seen-changed", 3.0, 0.05, 2.0), ("http://h/steady", 0.16, 0.155, 0.165)]
        {
            let mut e = estimate(url, 1, true, Some(true));
            (e.change_rate, e.change_rate_low, e.change_rate_high) = (Some(mean), Some(low), Some(high));
            e.downloads.next = 1.0;
            book.apply_estimate(&mut hosts, &e, &BookSettings::default()).unwrap();
        }
        let caps = vec![10; hosts.len()];
        let picks = choose(&[&book], &hosts, 9, 10.0, 2, &caps, &settings(Policy::Freshness));
        assert_eq!(urls(&book, &picks), ["http://h/seen-changed", "http://h/steady"]);
        let age = 8.0; // downloaded in period 1, picked in 9

        // The middle half of [low, high] on the log scale: from low^¾·high^¼ to low^¼·high^¾.
        let middle_half =
            |low: f64, high: f64| (low.powf(0.75) * high.powf(0.25), low.powf(0.25) * high.powf(0.75));
        let centre = (0.05f64 * 2.0).sqrt();
        let (from, to) = middle_half(0.05, 2.0);
        let peak = PEAK_INDEX_RATE_TIMES_AGE / age;
        assert!(from < peak && peak < centre, "the case the rule is for");
        let best = freshness_index(peak, age);
        assert!((picks[0].score / best - 1.0).abs() < 1e-3, "{} vs {best}", picks[0].score);
        assert!(freshness_index(to, age) < best);
        let steady_high_end = middle_half(0.155, 0.165).1;
        assert!(steady_high_end < peak);
        let steady = freshness_index(steady_high_end, age);
        // Within the two-byte rates' rounding, which central²/low compounds.
        assert!((picks[1].score / steady - 1.0).abs() < 5e-3, "{} vs {steady}", picks[1].score);
        assert!(
            freshness_index(centre, age) < freshness_index(0.16, age),
            "at its centre alone the steady page wins"
        );
        assert!(freshness_index(3.0, age) < freshness_index(0.16, age), "at its mean too");
    }

    #[test]
    fn a_page_never_stored_is_worth_its_whole_copy_and_tried_again_after_a_failure() {
        let (mut book, mut hosts) = (Book::default(), Hosts::default());
        // Static-looking pages: one stored long ago, one whose only request failed.
        for (url, downloaded, p_download) in
            [("http://h/stored", true, 1.0), ("http://h/never-stored", false, 0.5)]
        {
            let mut e = estimate(url, 1, downloaded, None);
            (e.change_rate, e.change_rate_low, e.change_rate_high) = (Some(0.001), Some(0.0005), Some(0.002));
            e.downloads.next = p_download;
            book.apply_estimate(&mut hosts, &e, &BookSettings::default()).unwrap();
        }
        let caps = vec![10; hosts.len()];
        let picks = choose(&[&book], &hosts, 40, 10.0, 1, &caps, &settings(Policy::Freshness));
        assert_eq!(urls(&book, &picks), ["http://h/never-stored"]);
        // Half of all a copy is worth: half of 1/λ at the rate the policy looks at.
        assert!(picks[0].score > 0.5 / 0.002 - 1e-6, "{}", picks[0].score);
    }

    #[test]
    fn freshness_spaces_the_probes_of_a_page_long_failing() {
        // A slow page that last downloaded in period 1 and has failed since, last when
        // picked in 40; a live one of the same rate downloaded in 38. At its copy's age (40 periods)
        // the failing page's probe share of the index would outbid the live page every
        // period; from its last visit it waits its turn.
        let (mut book, mut hosts) = (Book::default(), Hosts::default());
        for (url, period, downloaded, p_download) in [
            ("http://h/failing", 1, true, 1.0),
            ("http://h/failing", 40, false, 0.0),
            ("http://h/live", 38, true, 1.0),
        ] {
            let mut e = estimate(url, period, downloaded, Some(false).filter(|_| downloaded));
            (e.change_rate, e.change_rate_low, e.change_rate_high) = (Some(0.001), Some(0.0005), Some(0.002));
            e.downloads.next = p_download;
            book.apply_estimate(&mut hosts, &e, &BookSettings::default()).unwrap();
        }
        let caps = vec![10; hosts.len()];
        let settings = settings(Policy::Freshness);
        book.picked(book.find("http://h/failing").unwrap(), 40);
        let picks = choose(&[&book], &hosts, 41, 10.0, 1, &caps, &settings);
        assert_eq!(urls(&book, &picks), ["http://h/live"]);
        let at_copy_age = settings.min_download_probability / 10.0 * freshness_index(0.001, 40.0);
        assert!(
            at_copy_age > picks[0].score,
            "the case the rule is for: {at_copy_age} vs {}",
            picks[0].score
        );
    }

    #[test]
    fn nutch_picks_only_pages_past_their_interval() {
        // Initial interval 5, shortened to 4 by a change.
        let (mut book, mut hosts) = (Book::default(), Hosts::default());
        book.apply_estimate(
            &mut hosts,
            &estimate("http://h/changed", 10, true, Some(true)),
            &BookSettings::default(),
        )
        .unwrap();
        book.apply_estimate(
            &mut hosts,
            &estimate("http://h/same", 10, true, Some(false)),
            &BookSettings::default(),
        )
        .unwrap();
        let caps = vec![10; hosts.len()];
        let due = |clock| {
            urls(&book, &choose(&[&book], &hosts, clock, 10.0, 5, &caps, &settings(Policy::NutchAdaptive)))
        };
        assert!(due(13).is_empty());
        assert_eq!(due(14), ["http://h/changed"]);
        assert_eq!(due(17), ["http://h/changed", "http://h/same"]);
    }

    #[test]
    fn groups_crawl_a_daily_page_once_its_crawl_hour_passes() {
        // Hour-long periods from 1970-01-01T00:00Z; the plan is G7 at the paper's 00:00.
        let (mut book, mut hosts) = (Book::default(), Hosts::default());
        for (url, period) in [("http://h/morning", 10), ("http://h/evening", 20)] {
            book.apply_estimate(
                &mut hosts,
                &estimate(url, period, true, Some(true)),
                &BookSettings::default(),
            )
            .unwrap();
        }
        let caps = vec![10; hosts.len()];
        let settings = PlanSettings { period_ms: 3_600_000, ..settings(Policy::Groups) };
        let due = |clock| urls(&book, &choose(&[&book], &hosts, clock, 10.0, 5, &caps, &settings));
        assert!(due(23).is_empty(), "not before midnight");
        // Both missed the same crawl instant, so they score the same; the earlier slot
        // wins the tie.
        assert_eq!(due(24), ["http://h/morning", "http://h/evening"]);
        // Two hours late, they are still due (and score higher).
        let late = choose(&[&book], &hosts, 26, 10.0, 5, &caps, &settings);
        assert_eq!(late.len(), 2);
        assert!(late[0].score > 2.0, "{}", late[0].score);
    }

    #[test]
    fn groups_plan_a_page_from_its_first_comparison_and_take_it_in_turn_before() {
        let (mut book, mut hosts) = (Book::default(), Hosts::default());
        let apply = |book: &mut Book, hosts: &mut Hosts, period, changed| {
            book.apply_estimate(
                hosts,
                &estimate("http://h/p", period, true, changed),
                &BookSettings::default(),
            )
            .unwrap();
        };
        apply(&mut book, &mut hosts, 10, None);
        let slot = book.find("http://h/p").unwrap();
        assert_eq!(book.page(slot).schedule, None, "one download shows no change yet");
        let caps = vec![10; hosts.len()];
        let settings = PlanSettings { period_ms: 3_600_000, ..settings(Policy::Groups) };
        let picks = choose(&[&book], &hosts, 13, 10.0, 5, &caps, &settings);
        assert_eq!((urls(&book, &picks), picks[0].score), (vec!["http://h/p".to_owned()], 3.0), "in turn");
        apply(&mut book, &mut hosts, 14, Some(false));
        assert!(book.page(slot).schedule.is_some(), "planned from its first comparison");
        // A later request compared with nothing (a failure, or a download the diff could
        // not compare) keeps the plan.
        apply(&mut book, &mut hosts, 15, None);
        assert!(book.page(slot).schedule.is_some());
    }

    #[test]
    fn in_degree_first_follows_the_algorithm_on_a_small_graph() {
        // Crawled pages a, b, c link to the frontier:
        //   a → x, y;  b → y, z;  c → y, z, w  (discovered in that order: x, y, z, w).
        // IFS: y (3), z (2), then x and w with 1 each, x discovered first. BFS: x, y, z, w.
        let (mut book, mut hosts) = (Book::default(), Hosts::default());
        let edges = [("a", "x"), ("a", "y"), ("b", "y"), ("b", "z"), ("c", "y"), ("c", "z"), ("c", "w")];
        for (period, (source, target)) in edges.iter().enumerate() {
            let l = link(
                &format!("http://g/{target}.html"),
                Some(&format!("http://g/{source}.html")),
                period as u64,
                1,
            );
            book.apply_link(&mut hosts, &l, &LinkRules::default(), 100, &BookSettings::default()).unwrap();
        }
        let caps = vec![10; hosts.len()];
        let order = |discovery| {
            let settings = PlanSettings { discovery, discovery_share: 1.0, ..settings(Policy::Paper) };
            urls(&book, &choose(&[&book], &hosts, 20, 10.0, 4, &caps, &settings))
        };
        assert_eq!(
            order(Discovery::Ifs),
            ["http://g/y.html", "http://g/z.html", "http://g/x.html", "http://g/w.html"]
        );
        assert_eq!(
            order(Discovery::Bfs),
            ["http://g/x.html", "http://g/y.html", "http://g/z.html", "http://g/w.html"]
        );
        // After y is fetched, IFS takes z next (S grows; W's priorities change).
        let chosen = choose(
            &[&book],
            &hosts,
            20,
            10.0,
            1,
            &caps,
            &PlanSettings { discovery_share: 1.0, ..settings(Policy::Paper) },
        );
        book.picked(chosen[0].slot, 20);
        let picks = choose(
            &[&book],
            &hosts,
            21,
            10.0,
            1,
            &caps,
            &PlanSettings { discovery_share: 1.0, ..settings(Policy::Paper) },
        );
        assert_eq!(urls(&book, &picks), ["http://g/z.html"]);
    }

    /// What a site's sitemap names comes after the seeds and before any page only linked
    /// to, however linked, breadth first or most linked first.
    #[test]
    fn announced_urls_rank_after_seeds_and_before_linked_ones() {
        let (mut book, mut hosts) = (Book::default(), Hosts::default());
        let rules = LinkRules::default();
        let mut add = |url: &str, source: Option<&str>, period: u64, depth: u32| {
            book.apply_link(
                &mut hosts,
                &link(url, source, period, depth),
                &rules,
                100,
                &BookSettings::default(),
            )
            .unwrap();
        };
        add("http://g/seed.html", None, 3, 0);
        for source in ["a", "b", "c"] {
            add("http://g/popular.html", Some(&format!("http://g/{source}.html")), 0, 1);
        }
        add("http://g/listed.html", Some("http://g/sitemap.xml"), 2, 2);
        assert!(book.announce("http://g/listed.html"));
        assert!(!book.announce("http://g/unknown.html"));
        let caps = vec![10; hosts.len()];
        for discovery in [Discovery::Ifs, Discovery::Bfs] {
            let settings = PlanSettings { discovery, discovery_share: 1.0, ..settings(Policy::Paper) };
            let order = urls(&book, &choose(&[&book], &hosts, 5, 10.0, 3, &caps, &settings));
            assert_eq!(
                order,
                ["http://g/seed.html", "http://g/listed.html", "http://g/popular.html"],
                "{discovery:?}"
            );
        }
    }

    #[test]
    fn the_discovery_share_is_kept_and_unused_shares_flow_over() {
        let (mut book, mut hosts) =
            tracked(&[("http://h/1", 1, 10, 1.0), ("http://h/2", 1, 10, 1.0), ("http://h/3", 1, 10, 1.0)]);
        for i in 0..3 {
            let l = link(&format!("http://h/n{i}.html"), Some("http://h/1"), 1, 1);
            book.apply_link(&mut hosts, &l, &LinkRules::default(), 100, &BookSettings::default()).unwrap();
        }
        let caps = vec![10; hosts.len()];
        let count = |book: &Book, quota, share| {
            let settings = PlanSettings { discovery_share: share, ..settings(Policy::Paper) };
            let picks = choose(&[book], &hosts, 5, 10.0, quota, &caps, &settings);
            let discoveries = picks.iter().filter(|c| c.reason == PickReason::Discovery).count();
            (picks.len(), discoveries)
        };
        assert_eq!(count(&book, 4, 0.5), (4, 2));
        assert_eq!(count(&book, 6, 0.0), (6, 3), "refreshes run out; the frontier fills the rest");
        assert_eq!(count(&book, 5, 1.0), (5, 3), "the frontier runs out; refreshes fill the rest");
    }

    #[test]
    fn with_time_of_day_a_host_is_fetched_after_its_busy_hours_and_the_cutoff_is_kept() {
        let (mut book, mut hosts) = (Book::default(), Hosts::default());
        for host in ["a", "b"] {
            book.add_tracked(
                &mut hosts,
                &format!("http://{host}/"),
                host,
                Some(20),
                100,
                0.5,
                1.0,
                Some(0.2),
            )
            .unwrap();
        }
        // a changes most at 03:00 UTC, b at 15:00.
        for (stats, peak) in hosts.stats.iter_mut().zip([3, 15]) {
            // Dated changes of slow pages downloaded a day apart.
            for hour in [-2, -1, 0, 0, 1, 2].repeat(10) {
                stats.day.observe((peak + hour) * HOUR_MS as i64, 0, DAY_MS, 0.0);
            }
        }
        assert_eq!(hosts.with_day_profile(), 2);
        let caps = vec![1; hosts.len()];
        let settings = |time_of_day| PlanSettings {
            period_ms: HOUR_MS as u64,
            time_of_day,
            ..settings(Policy::Freshness)
        };
        // Period 30 is 06:00–07:00: a's busy hours are behind it, b's ahead.
        let scores = |time_of_day| {
            hosts.day.lock().unwrap().cutoff = 1.0;
            let picks = choose(&[&book], &hosts, 30, 10.0, 2, &caps, &settings(time_of_day));
            (urls(&book, &picks), picks.iter().map(|c| c.score).collect::<Vec<_>>())
        };
        let (flat_urls, flat) = scores(false);
        assert_eq!(flat[0], flat[1], "{flat_urls:?}");
        let (by_day, day) = scores(true);
        assert_eq!(by_day, ["http://a/", "http://b/"]);
        assert!(day[0] > day[1], "{day:?}");
        // The quota was filled: the last refresh pick's score is the next multiplier.
        assert_eq!(hosts.day.lock().unwrap().cutoff, day[1]);
    }

    #[test]
    fn a_full_quota_ending_on_a_refresh_worth_nothing_keeps_the_cutoff() {
        let (mut book, mut hosts) = (Book::default(), Hosts::default());
        // Never seen to change: its index is 0 at any age.
        book.add_tracked(&mut hosts, "http://a/", "a", Some(20), 100, 0.0, 1.0, None).unwrap();
        hosts.day.lock().unwrap().cutoff = 1.0;
        let settings =
            PlanSettings { period_ms: HOUR_MS as u64, time_of_day: true, ..settings(Policy::Freshness) };
        let picks = choose(&[&book], &hosts, 30, 10.0, 1, &[1], &settings);
        assert_eq!(
            picks.iter().map(|c| (c.reason, c.score)).collect::<Vec<_>>(),
            [(PickReason::Refresh, 0.0)]
        );
        assert_eq!(hosts.day.lock().unwrap().cutoff, 1.0);
    }

    proptest::proptest! {
        #[test]
        fn choices_equal_a_full_sort_of_every_score(
            pages in proptest::collection::vec((0u64..40, 1u32..5000, 0.0f64..1.0, 0.0f64..1.0, proptest::option::of(0.0f64..3.0), proptest::option::of(1.0f64..50.0)), 1..400),
            quota in 0usize..50,
            policy_index in 0usize..<Policy as clap::ValueEnum>::value_variants().len(),
        ) {
            let policy = <Policy as clap::ValueEnum>::value_variants()[policy_index];
            let (mut book, mut hosts) = (Book::default(), Hosts::default());
            for (i, &(last, size, p_change, p_download, rate, spread)) in pages.iter().enumerate() {
                let slot = book.add_tracked(&mut hosts, &format!("http://h{}/{i}", i % 4), &format!("h{}", i % 4), Some(last), size, p_change, p_download, rate).unwrap();
                if let (Some(rate), Some(spread)) = (rate, spread) {
                    book.set_rate_interval(slot, rate / spread, rate * spread);
                }
            }
            for (i, stats) in hosts.stats.iter_mut().enumerate() {
                stats.ms_per_byte = 0.01 * i as f64;
                // Hosts h0 and h1 change most at 03:00 and 15:00 UTC, h2 and h3 evenly.
                if i < 2 {
                    for hour in [1, 2, 3, 3, 4, 5].repeat(10) {
                        stats.day.observe((hour + 12 * i as i64) * HOUR_MS as i64, 0, DAY_MS, 0.0);
                    }
                }
            }
            // `freshness` in hours, so that the day moves over the ages; the others' costs
            // below are for periods of a second.
            let settings = match policy {
                Policy::Freshness => PlanSettings { period_ms: HOUR_MS as u64, ..settings(policy) },
                _ => settings(policy),
            };
            hosts.day.lock().unwrap().cutoff = 0.05;
            let caps = vec![u32::MAX; hosts.len()];
            let refresh = quota - ((quota as f64) * settings.discovery_share).round() as usize;
            let mut all: Vec<(u32, f64)> = {
                let mut day_state = hosts.day.lock().unwrap();
                let day = DayScoring::new(&hosts, 45, &settings, &mut day_state);
                let period = Period {
                    clock: 45,
                    remaining: 10.0,
                    cost_per_byte: hosts.stats.iter().map(|s| s.ms_per_byte / 1000.0).collect(),
                    kappa: (policy == Policy::LambdaCrawl).then(|| lambda_kappa(&[&book], &caps, &Period { clock: 45, remaining: 10.0, cost_per_byte: Vec::new(), kappa: None, day: None }, refresh, &settings)).flatten(),
                    day: (policy == Policy::Freshness).then_some(day).flatten(),
                };
                (0..book.len() as u32)
                    .filter_map(|slot| refresh_score(book.page(slot), &period, &settings).map(|score| (slot, score)))
                    .collect()
            };
            let chosen: Vec<(u32, f64)> = choose(&[&book], &hosts, 45, 10.0, quota, &caps, &settings)
                .iter().map(|c| (c.slot, c.score)).collect();
            all.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
            all.truncate(quota);
            // lambda-crawl's κ is found by bisection in each call, so scores agree only
            // to its tolerance; the choice itself must be the same.
            let slots = |choices: &[(u32, f64)]| choices.iter().map(|c| c.0).collect::<Vec<_>>();
            proptest::prop_assert_eq!(slots(&chosen), slots(&all));
            for (a, b) in chosen.iter().zip(&all) {
                proptest::prop_assert!((a.1 - b.1).abs() <= 1e-9 * b.1.abs().max(1.0), "{a:?} {b:?}");
            }
        }
    }
}
