//! The learned policies reading the simulated sites' sitemaps and feeds, as the pipeline
//! does (`docs/algorithms/sitemaps.md`): each read of a site's sitemap (or, without one,
//! its feed) is a request of the period's budget; its dates go to the scheduler's book as
//! the stage's announcements do ([`Book::claim`]): judged against the policy's own
//! comparisons, and once the site is trusted, telling the book which copies are stale and
//! which were current when the document was read. A feed lists only the pages changed
//! latest, so it says nothing of the others. When to read a site's document again is the
//! stage's rule ([`Announced::due`]), fed as the stage feeds it: its entries counted
//! ([`Book::count_announced`]), and each read folding what the reads before announced
//! ([`Announced::read`]). The pages a site not yet judged claims changed are the plan's
//! claim tests, as in the stage.

use recrawl_model::claims::{Claim, ClaimTrust, Listing};
use recrawl_scheduler::book::{Book, BookSettings};
use recrawl_scheduler::documents::Announced;
use recrawl_scheduler::hosts::Hosts;

/// When the policy reads each site's sitemap; what they announced lives with the book's
/// hosts, the claims themselves in the book.
#[derive(Debug)]
pub struct SitemapReader {
    /// Each site's host in the book.
    book_hosts: Vec<u32>,
    /// Whether the site has a sitemap or a feed.
    has_document: Vec<bool>,
    /// The period each site's document was last read, and what it lists.
    last_read: Vec<Option<(u64, Listing)>>,
    /// R, the share of the pages fetched a period.
    budget: f64,
    pub polls: u64,
}

impl SitemapReader {
    /// For sites whose hosts in the book are `book_hosts`, those `announces` says having
    /// a sitemap or a feed; `budget` the share of the pages fetched a period.
    pub fn new(book_hosts: Vec<u32>, announces: impl Fn(u32) -> bool, budget: f64) -> Self {
        Self {
            has_document: (0..book_hosts.len() as u32).map(announces).collect(),
            last_read: vec![None; book_hosts.len()],
            book_hosts,
            budget,
            polls: 0,
        }
    }

    /// The trust the book's hosts hold in `site`'s claims, and what its documents announced.
    fn host(&self, hosts: &Hosts, site: u32) -> (ClaimTrust, Announced) {
        hosts
            .stats
            .get(self.book_hosts[site as usize] as usize)
            .map_or((ClaimTrust::Unknown, Announced::default()), |stats| {
                (stats.claims.trust(), stats.announced)
            })
    }

    /// The sites to read at the start of `period`.
    pub fn due(&self, hosts: &Hosts, period: u64) -> Vec<u32> {
        let due = |site: u32| {
            if !self.has_document[site as usize] {
                return false;
            }
            let (trust, announced) = self.host(hosts, site);
            let last = self.last_read[site as usize];
            let listing = last.map_or(Listing::Every, |(_, listing)| listing);
            let since = last.map(|(read, _)| period.saturating_sub(read));
            announced.due(trust, listing, since, self.budget)
        };
        (0..self.has_document.len() as u32).filter(|&site| due(site)).collect()
    }

    /// Reads `site`'s sitemap or feed at `at` (periods; ms by `settings.period_ms`),
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
        self.last_read[site as usize] = Some((period, listing));
        let host = self.book_hosts[site as usize] as usize;
        if let Some(stats) = hosts.stats.get_mut(host) {
            let trust = stats.claims.trust();
            stats.announced.read(period, trust, 1.0);
        }
        for &(page, lastmod) in entries {
            let claim = lastmod.map(|lastmod| Claim { changed_ms: ms(lastmod), seen_ms: ms(at) });
            book.count_announced(hosts, page, claim, settings);
            if let Some(claim) = claim {
                book.claim(hosts, page, claim, listing, settings);
            }
        }
    }
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
        assert!(feeds > without * 1.02, "truthful feeds: {feeds} with, {without} without, {polls} polls");
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
