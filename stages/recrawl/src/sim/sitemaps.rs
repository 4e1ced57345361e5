//! The learned policies reading the simulated sites' sitemaps, as the pipeline does
//! (`docs/algorithms/sitemaps.md`): each poll of a site's sitemap is a request of the
//! period's budget; its `<lastmod>`s are claims judged against the policy's own
//! comparisons ([`recrawl_model::claims`]); a trusted site's claims tell the book which
//! copies are stale and which were current when the sitemap was read.
//!
//! When to poll: a site not yet judged every [`PROBE_EVERY`] periods, so that claims meet
//! comparisons; a trusted site once the changes its polls announce, at their running
//! rate, come to [`CHANGES_WORTH_A_POLL`] since the last poll; never a site whose claims
//! were refuted or whose sitemap dates nothing. A site not yet judged also gets
//! [`VERIFY_PICKS`] fetches after each poll, of pages it claims changed: each is a
//! comparison that confirms or refutes a claim, so a site is judged within a few periods
//! rather than whenever the policy happens to fetch its pages twice.

use recrawl_model::claims::{Claim, ClaimEvidence, ClaimTally, ClaimTrust, Comparison, CopyNews};

/// Periods between polls of a site whose claims are not yet judged.
pub const PROBE_EVERY: u64 = 4;
/// Changes a trusted site's sitemap is expected to announce before it is polled again.
pub const CHANGES_WORTH_A_POLL: f64 = 10.0;
/// Weight of the latest poll in a site's running rate of announced changes.
const RATE_WEIGHT: f64 = 0.3;

#[derive(Debug, Clone, Default)]
struct SiteState {
    tally: ClaimTally,
    last_poll: Option<u64>,
    /// Whether a poll found entries without dates: nothing to learn.
    undated: bool,
    /// Changes announced per period, running; `None` before a trusted poll measured it.
    announced_rate: Option<f64>,
}

/// What the policy knows of the sites' sitemaps and its pages' claims.
#[derive(Debug)]
pub struct SitemapReader {
    sites: Vec<SiteState>,
    evidence: Vec<ClaimEvidence>,
    /// Each page's latest download, periods; `None` before one.
    last_download: Vec<Option<f64>>,
    /// The pages of each host.
    host_pages: Vec<Vec<u32>>,
    pub polls: u64,
}

/// What a poll says of a page of a trusted site.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PageNews {
    pub page: u32,
    pub news: CopyNews,
}

/// What a poll gives the policy: news of a trusted site's copies, or for a site not yet
/// judged, pages whose claimed change a fetch would test.
#[derive(Debug, Default)]
pub struct PollOutcome {
    pub news: Vec<PageNews>,
    pub to_verify: Vec<u32>,
}

/// Pages of a site not yet judged fetched after a poll to test its claims: the ones
/// claimed changed longest ago.
pub const VERIFY_PICKS: usize = 2;

impl SitemapReader {
    /// For `pages` pages, `host_pages` of each host, those hosts `has_sitemap` says
    /// having one.
    pub fn new(pages: usize, host_pages: &[Vec<u32>], has_sitemap: impl Fn(u32) -> bool) -> Self {
        let n = pages;
        Self {
            sites: (0..host_pages.len() as u32)
                .map(|host| SiteState { undated: !has_sitemap(host), ..SiteState::default() })
                .collect(),
            evidence: vec![ClaimEvidence::default(); n],
            last_download: vec![None; n],
            host_pages: host_pages.to_vec(),
            polls: 0,
        }
    }

    /// The sites to poll at the start of `period`.
    pub fn due(&self, period: u64) -> Vec<u32> {
        let due = |site: &SiteState| {
            if site.undated {
                return false;
            }
            let Some(last) = site.last_poll else { return true };
            let since = period.saturating_sub(last);
            match site.tally.trust() {
                ClaimTrust::Distrusted => false,
                ClaimTrust::Unknown => since >= PROBE_EVERY,
                ClaimTrust::Trusted => match site.announced_rate {
                    Some(rate) => since >= 1 && rate * since as f64 >= CHANGES_WORTH_A_POLL,
                    None => since >= 1,
                },
            }
        };
        (0..self.sites.len() as u32).filter(|&host| due(&self.sites[host as usize])).collect()
    }

    /// Polls `host`'s sitemap at `at` (periods; ms from periods by `period_ms`), which
    /// dates each page as `lastmod` says: judges each page's claim, and where the site is
    /// trusted, says what the claims say of the copies.
    pub fn poll(
        &mut self,
        lastmod: impl Fn(u32) -> Option<f64>,
        host: u32,
        period: u64,
        at: f64,
        period_ms: f64,
    ) -> PollOutcome {
        self.polls += 1;
        let ms = |periods: f64| (periods * period_ms) as i64;
        let site = &mut self.sites[host as usize];
        let previous = site.last_poll.replace(period);
        let mut announced = 0_u32;
        let mut news = Vec::new();
        for &page in &self.host_pages[host as usize] {
            let Some(lastmod) = lastmod(page) else {
                site.undated = true;
                continue;
            };
            let claim = Claim { changed_ms: ms(lastmod), seen_ms: ms(at) };
            site.tally.record(self.evidence[page as usize].observe_claim(claim));
            if previous.is_some_and(|last| lastmod > last as f64) {
                announced += 1;
            }
            let copy = claim.news(self.last_download[page as usize].map(ms));
            if copy != CopyNews::Nothing {
                news.push(PageNews { page, news: copy });
            }
        }
        match site.tally.trust() {
            ClaimTrust::Trusted => {}
            ClaimTrust::Distrusted => return PollOutcome::default(),
            ClaimTrust::Unknown => {
                let mut stale: Vec<(i64, u32)> = news
                    .iter()
                    // Only a page downloaded before can be compared.
                    .filter(|item| {
                        item.news == CopyNews::Stale && self.last_download[item.page as usize].is_some()
                    })
                    .filter_map(|item| Some((self.evidence[item.page as usize].claim?.changed_ms, item.page)))
                    .collect();
                stale.sort_unstable();
                return PollOutcome {
                    news: Vec::new(),
                    to_verify: stale.into_iter().take(VERIFY_PICKS).map(|(_, page)| page).collect(),
                };
            }
        }
        if let Some(last) = previous {
            let rate = f64::from(announced) / period.saturating_sub(last).max(1) as f64;
            site.announced_rate =
                Some(site.announced_rate.map_or(rate, |old| old + RATE_WEIGHT * (rate - old)));
        }
        PollOutcome { news, to_verify: Vec::new() }
    }

    /// A download of `page` at `at` (periods), compared with the previous one when
    /// `changed` says.
    pub fn downloaded(&mut self, page: u32, host: u32, at: f64, changed: Option<bool>, period_ms: f64) {
        let previous = self.last_download[page as usize].replace(at);
        if let (Some(from), Some(changed)) = (previous, changed) {
            let comparison =
                Comparison { from_ms: (from * period_ms) as i64, to_ms: (at * period_ms) as i64, changed };
            self.sites[host as usize]
                .tally
                .record(self.evidence[page as usize].observe_comparison(comparison));
        }
    }
}

#[cfg(test)]
mod tests {
    use recrawl_scheduler::policy::Policy;

    use super::*;
    use crate::sim::simulate::{simulate, SimConfig, SimPolicy, SimulatedWeb, World};
    use crate::sim::web::{Truth, Web, WebParams};

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

    fn freshness(web: &Web, sitemaps: bool, periods: u64) -> (f64, u64, u64) {
        let web = Web::generate(WebParams {
            sitemap_share: if sitemaps { 1.0 } else { 0.0 },
            ..web.params().clone()
        });
        let world = SimulatedWeb { truth: Truth::of_web(&web, periods as f64), web: &web };
        let config = SimConfig { periods, budget: 0.05, threads: 1, ..SimConfig::default() };
        let result = &simulate(&world, &[SimPolicy::Scheduler(Policy::Freshness)], &config)[0];
        (result.freshness, result.requests, result.sitemap_requests)
    }

    #[test]
    fn truthful_sitemaps_are_trusted_and_lying_ones_distrusted_and_left_alone() {
        let web = web(0.5);
        let world = SimulatedWeb { truth: Truth::of_web(&web, 40.0), web: &web };
        let host_pages: Vec<Vec<u32>> = (0..60).map(|site| (site * 50..(site + 1) * 50).collect()).collect();
        let mut reader = SitemapReader::new(3000, &host_pages, |host| world.has_sitemap(host));
        // Every page fetched at the middle of every period: comparisons every period.
        for period in 0..40_u64 {
            for host in reader.due(period) {
                let lastmod = |page| world.sitemap_lastmod(page, period as f64);
                reader.poll(lastmod, host, period, period as f64, 3_600_000.0);
            }
            let at = period as f64 + 0.5;
            for page in 0..3000 {
                let changed = world.truth().changes(page).iter().any(|&t| t > at - 1.0 && t <= at);
                let compared = (period > 0).then_some(changed);
                reader.downloaded(page, page / 50, at, compared, 3_600_000.0);
            }
        }
        use crate::sim::web::ServerDates;
        for (host, site) in reader.sites.iter().enumerate() {
            let expected = match web.sites()[host].dates {
                ServerDates::Truthful => ClaimTrust::Trusted,
                _ => ClaimTrust::Distrusted,
            };
            assert_eq!(site.tally.trust(), expected, "site {host}: {:?}", site.tally);
        }
        let lying: Vec<u32> =
            (0..60).filter(|&host| web.sites()[host as usize].dates != ServerDates::Truthful).collect();
        assert!(!lying.is_empty());
        assert!(
            reader.due(40).iter().all(|host| !lying.contains(host)),
            "a distrusted site is polled no more"
        );
    }

    #[test]
    fn truthful_sitemaps_make_the_crawl_fresher_and_lying_ones_cost_little() {
        let periods = 60;
        let truthful = web(1.0);
        let (without, _, _) = freshness(&truthful, false, periods);
        let (with, requests, polls) = freshness(&truthful, true, periods);
        assert!(with > without * 1.03, "truthful sitemaps: {with} with, {without} without");
        assert!(polls > 0 && requests + polls == 150 * periods, "{requests} + {polls}");
        let lying = web(0.0);
        let (without, _, _) = freshness(&lying, false, periods);
        let (with, requests, polls) = freshness(&lying, true, periods);
        assert!(with > without * 0.99, "lying sitemaps: {with} with, {without} without");
        assert!(polls * 50 < requests, "{polls} polls of lying sitemaps");
    }
}
