//! The learned policies reading the simulated sites' sitemaps and feeds, as the pipeline
//! does (`docs/algorithms/sitemaps.md`): each poll of a site's sitemap (or, without one,
//! its feed) is a request of the period's budget; its dates go to the scheduler's book as
//! the stage's announcements do ([`Book::claim`]): judged against the policy's own
//! comparisons, and once the site is trusted, telling the book which copies are stale and
//! which were current when the document was read. A feed lists only the pages changed
//! latest, so it says nothing of the others.
//!
//! When to poll: a site not yet judged every [`PROBE_EVERY`] periods, so that claims meet
//! comparisons; a trusted site once the changes its polls announce, at their running
//! rate, times the budget's share R, come to [`POLL_WORTH`] since the last poll (6
//! changes at R = 0.05; [`FEED_POLL_WORTH`], 10, for a feed): the more of them a period
//! can refresh, the sooner they are worth knowing; never a site whose claims
//! were refuted or whose document dates nothing. The pages a site not yet judged claims
//! changed are the plan's claim tests, as in the stage.

use recrawl_model::claims::{Claim, ClaimTrust, Listing};
use recrawl_model::modified::CLOCK_SKEW_MS;
use recrawl_scheduler::book::{Book, BookSettings};
use recrawl_scheduler::hosts::Hosts;

/// Periods between polls of a site whose claims are not yet judged.
pub const PROBE_EVERY: u64 = 4;
/// The changes a trusted site's sitemap is expected to announce since its last poll,
/// times the budget's share R, that are worth polling it again (tuned at R = 0.02, 0.05
/// and 0.2: docs/algorithms/sitemaps.md §5). A sitemap's read also counts towards the
/// rate of every page it lists, so it is worth more than a feed's.
pub const POLL_WORTH: f64 = 0.3;
/// [`POLL_WORTH`] for a site with only a feed.
pub const FEED_POLL_WORTH: f64 = 0.5;
/// Weight of the latest poll in a site's running rate of announced changes.
const RATE_WEIGHT: f64 = 0.3;

#[derive(Debug, Clone, Default)]
struct SiteState {
    last_poll: Option<u64>,
    /// Whether it has no sitemap or feed, or a poll found entries without dates, or (before
    /// the site is judged) two polls in a row dated every entry at the read, which no
    /// comparison can confirm: nothing to learn.
    nothing_to_learn: bool,
    /// Polls in a row, before the site is judged, that dated every entry at the read.
    dated_at_the_read: u8,
    /// Changes announced per period, running; `None` before a trusted poll measured it.
    announced_rate: Option<f64>,
    /// What its document says of the pages it leaves out, once polled.
    listing: Option<Listing>,
}

/// When the policy polls each site's sitemap; the claims themselves live in the book.
#[derive(Debug)]
pub struct SitemapReader {
    sites: Vec<SiteState>,
    /// Each site's host in the book.
    book_hosts: Vec<u32>,
    /// 1 / R: [`POLL_WORTH`] times it is the changes worth a poll at this budget.
    per_budget: f64,
    pub polls: u64,
}

impl SitemapReader {
    /// For sites whose hosts in the book are `book_hosts`, those `announces` says having
    /// a sitemap or a feed; `budget` the share of the pages fetched a period.
    pub fn new(book_hosts: Vec<u32>, announces: impl Fn(u32) -> bool, budget: f64) -> Self {
        Self {
            per_budget: 1.0 / budget.max(f64::MIN_POSITIVE),
            sites: (0..book_hosts.len() as u32)
                .map(|site| SiteState { nothing_to_learn: !announces(site), ..SiteState::default() })
                .collect(),
            book_hosts,
            polls: 0,
        }
    }

    fn trust(&self, hosts: &Hosts, site: u32) -> ClaimTrust {
        host_trust(hosts, self.book_hosts[site as usize])
    }

    /// The sites to poll at the start of `period`.
    pub fn due(&self, hosts: &Hosts, period: u64) -> Vec<u32> {
        let due = |site: u32| {
            let state = &self.sites[site as usize];
            if state.nothing_to_learn {
                return false;
            }
            let Some(last) = state.last_poll else { return true };
            let since = period.saturating_sub(last);
            match self.trust(hosts, site) {
                ClaimTrust::Distrusted => false,
                ClaimTrust::Unknown => since >= PROBE_EVERY,
                ClaimTrust::Trusted => {
                    let worth =
                        if state.listing == Some(Listing::Every) { POLL_WORTH } else { FEED_POLL_WORTH };
                    match state.announced_rate {
                        Some(rate) => since >= 1 && rate * since as f64 >= worth * self.per_budget,
                        None => since >= 1,
                    }
                }
            }
        };
        (0..self.sites.len() as u32).filter(|&site| due(site)).collect()
    }

    /// Polls `site`'s sitemap or feed at `at` (periods; ms by `settings.period_ms`),
    /// whose `entries` date pages (book slots), into the book; `listing` says whether the
    /// document lists every page.
    #[allow(clippy::too_many_arguments)]
    pub fn poll(
        &mut self,
        book: &mut Book,
        hosts: &mut Hosts,
        settings: &BookSettings,
        entries: &[(u32, Option<f64>)],
        listing: Listing,
        site: u32,
        period: u64,
        at: f64,
    ) {
        self.polls += 1;
        let ms = |periods: f64| (periods * settings.period_ms as f64) as i64;
        let state = &mut self.sites[site as usize];
        let previous = state.last_poll.replace(period);
        state.listing = Some(listing);
        let (mut announced, mut dated, mut all_at_the_read) = (0_u32, false, true);
        let host = self.book_hosts[site as usize];
        let judged_before = host_trust(hosts, host) != ClaimTrust::Unknown;
        for &(page, lastmod) in entries {
            let Some(lastmod) = lastmod else {
                state.nothing_to_learn = true;
                continue;
            };
            if previous.is_some_and(|last| lastmod > last as f64) {
                announced += 1;
            }
            let claim = Claim { changed_ms: ms(lastmod), seen_ms: ms(at) };
            dated = true;
            all_at_the_read &= claim.changed_ms >= claim.seen_ms.saturating_sub(CLOCK_SKEW_MS);
            book.claim(hosts, page, claim, listing, settings);
        }
        // A feed of the pages changed latest, each dated at the read, is rarely refuted by
        // a comparison (they did change) and never confirmed: polled to be judged, it would
        // be polled for ever. Twice in a row, so that a truthful feed whose items all
        // changed within the clocks' skew of one read is not mistaken for one.
        if dated && all_at_the_read && !judged_before {
            state.dated_at_the_read = state.dated_at_the_read.saturating_add(1);
            state.nothing_to_learn |= state.dated_at_the_read >= 2;
        } else if dated {
            state.dated_at_the_read = 0;
        }
        if let (ClaimTrust::Trusted, Some(last)) = (host_trust(hosts, host), previous) {
            let rate = f64::from(announced) / period.saturating_sub(last).max(1) as f64;
            state.announced_rate =
                Some(state.announced_rate.map_or(rate, |old| old + RATE_WEIGHT * (rate - old)));
        }
    }
}

/// The trust `hosts` hold in the book host `host`'s claims.
fn host_trust(hosts: &Hosts, host: u32) -> ClaimTrust {
    hosts.stats.get(host as usize).map_or(ClaimTrust::Unknown, |stats| stats.claims.trust())
}

#[cfg(test)]
mod tests {
    use recrawl_scheduler::policy::Policy;

    use crate::sim::simulate::{simulate, SimConfig, SimPolicy, SimulatedWeb};
    use crate::sim::web::{feed_items, Truth, Web, WebParams, FEED_ITEMS};

    /// Every site with a sitemap, a share `truthful` of them dating changes and the rest
    /// sending the time of the request.
    fn web(truthful: f64) -> Web {
        Web::generate(WebParams {
            sites: 60,
            pages_per_site: 50,
            truthful_dates_share: truthful,
            response_dates_share: 1.0 - truthful,
            sitemap_share: 1.0,
            ..WebParams::default()
        })
    }

    /// The default's freshness on `web` with every site's sitemap or none, every site's
    /// feed or none; its requests and polls.
    fn freshness(web: &Web, sitemaps: bool, feeds: bool, periods: u64) -> (f64, u64, u64) {
        let share = |yes: bool| if yes { 1.0 } else { 0.0 };
        let web = Web::generate(WebParams {
            sitemap_share: share(sitemaps),
            feed_share: share(feeds),
            ..web.params().clone()
        });
        let world = SimulatedWeb { truth: Truth::of_web(&web, periods as f64), web: &web };
        let config = SimConfig { periods, budget: 0.05, threads: 1, ..SimConfig::default() };
        let result = &simulate(&world, &[SimPolicy::Scheduler(Policy::Freshness)], &config)[0];
        (result.freshness, result.requests, result.sitemap_requests)
    }

    #[test]
    fn truthful_sitemaps_make_the_crawl_fresher_and_lying_ones_cost_little() {
        let periods = 60;
        let truthful = web(1.0);
        let (without, _, _) = freshness(&truthful, false, false, periods);
        let (with, requests, polls) = freshness(&truthful, true, false, periods);
        assert!(with > without * 1.03, "truthful sitemaps: {with} with, {without} without");
        assert!(polls > 0 && requests + polls == 150 * periods, "{requests} + {polls}");
        let lying = web(0.0);
        let (without, _, _) = freshness(&lying, false, false, periods);
        let (with, requests, polls) = freshness(&lying, true, false, periods);
        assert!(with > without * 0.99, "lying sitemaps: {with} with, {without} without");
        assert!(polls * 20 < requests, "{polls} polls of lying sitemaps");
    }

    #[test]
    fn truthful_feeds_make_the_crawl_fresher_than_none_and_lying_ones_cost_little() {
        let periods = 60;
        let truthful = web(1.0);
        let (without, _, _) = freshness(&truthful, false, false, periods);
        let (feeds, requests, polls) = freshness(&truthful, false, true, periods);
        let (sitemaps, _, _) = freshness(&truthful, true, true, periods);
        assert!(polls > 0 && requests + polls == 150 * periods, "{requests} + {polls}");
        assert!(feeds > without * 1.02, "truthful feeds: {feeds} with, {without} without");
        assert!(sitemaps > feeds, "sitemaps {sitemaps}, feeds {feeds}");
        // Feeds dating their items at the read: the items did change, so a comparison
        // rarely refutes them, and none can confirm them. Left alone after two polls.
        let lying = web(0.0);
        let (without, _, _) = freshness(&lying, false, false, periods);
        let (with, requests, polls) = freshness(&lying, false, true, periods);
        assert!(with > without * 0.995, "lying feeds: {with} with, {without} without");
        assert!(polls * 50 < requests, "{polls} polls of feeds dated at the read");
    }

    #[test]
    fn a_feed_lists_the_latest_changed_pages_newest_first() {
        // Pages 0..60 changed at page % 30 (every third never): 40 changed, 20 listed.
        let latest = (0..60_u32).map(|page| (page, (page % 3 != 0).then_some(f64::from(page % 30))));
        let items = feed_items(latest);
        assert_eq!(items.len(), FEED_ITEMS);
        assert!(items.iter().all(|&(page, _)| page % 3 != 0), "an unchanged page is not an item");
        // Newest first, ties by page: 29 and 59 changed at 29, then 28 and 58, …
        let expected: Vec<(u32, f64)> = [29, 28, 26, 25, 23, 22, 20, 19, 17, 16]
            .iter()
            .flat_map(|&at| [(at, f64::from(at)), (at + 30, f64::from(at))])
            .collect();
        assert_eq!(items, expected);
    }
}
