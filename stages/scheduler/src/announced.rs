//! What the sites' own documents say, as the scheduler takes it: announced pages into
//! the frontier, their dated claims to the book (`docs/algorithms/sitemaps.md` §4), the
//! sitemaps and feeds named by robots.txt, indexes and pages marked as documents, and what
//! their entries announce counted towards when they are read again (§5,
//! [`crate::documents`]).

use recrawl_model::claims::{Claim, CopyNews, Listing};
use recrawl_model::latest_read_ms;
use recrawl_schemas::{AnnouncingDocument, DiscoveredLinks, PageAnnouncement};

use crate::book::{BookFull, ClaimOutcome};
use crate::Scheduler;

impl Scheduler {
    /// A page a site announced enters the frontier as a link from the sitemap or feed
    /// that named it; a sitemap or feed named by robots.txt, an index or a page is held to
    /// the link rules for documents.
    /// Takes an announced page into the frontier and its dated claim, if any, to the book;
    /// `now_ms` bounds when the claim can have been made.
    pub(crate) fn apply_announcement(
        &mut self,
        announcement: &PageAnnouncement,
        partition: i32,
        now_ms: i64,
    ) -> Result<(), BookFull> {
        let link = DiscoveredLinks {
            page: announcement.page.clone(),
            source: Some(announcement.source.clone()),
            occurrences: 1,
            period: announcement.period,
            depth: announcement.depth,
        };
        let document = matches!(
            announcement.document,
            AnnouncingDocument::RobotsTxt | AnnouncingDocument::SitemapIndex | AnnouncingDocument::Page
        );
        self.metrics.announcements.with_label_values(&[announcement.document.as_str()]).inc();
        self.apply_link_as(&link, partition, document)?;
        let Some(book) = self.books.get_mut(&partition) else { return Ok(()) };
        book.announce(&announcement.page.url);
        if document {
            // What it names is read again by its own rule (`documents`).
            let listing = match announcement.document {
                AnnouncingDocument::Page => Listing::Latest,
                _ => Listing::Every,
            };
            book.mark_document(&announcement.page.url, listing);
        }
        let slot = book.find(&announcement.page.url);
        // A document is read within its period, and not after now: a record dated later
        // would keep a copy current into the future; its claim is not judged.
        let plan = &self.plan;
        let latest_ms = latest_read_ms(plan.epoch_unix_ms, plan.period_ms, announcement.period, now_ms);
        let plausible = announcement.fetched_at_ms <= latest_ms;
        let claim = announcement
            .claimed_modified_ms
            .map(|changed_ms| Claim { changed_ms, seen_ms: announcement.fetched_at_ms });
        // What a page's entries announce says when its site's documents are worth a read.
        if let Some(slot) = slot.filter(|_| plausible && !document) {
            book.count_announced(&mut self.hosts, slot, claim, &self.book_settings);
        }
        let Some(claim) = claim else { return Ok(()) };
        let listing = match announcement.document {
            AnnouncingDocument::Sitemap => Listing::Every,
            _ => Listing::Latest,
        };
        let outcome = slot
            .filter(|_| plausible)
            .and_then(|slot| book.claim(&mut self.hosts, slot, claim, listing, &self.book_settings));
        let result = match outcome {
            None if !plausible => "implausible",
            None => "untracked",
            Some(ClaimOutcome { taken: false, .. }) => "judged",
            Some(ClaimOutcome { news: CopyNews::Stale, .. }) => "stale",
            Some(_) => "current",
        };
        self.metrics.claims.with_label_values(&[result]).inc();
        Ok(())
    }

    /// A document of `host` is picked in `period`: what its host's reads announced since
    /// the last is folded into the rate they are read again by
    /// ([`Announced::read`](documents::Announced::read)).
    pub(crate) fn read_document(&mut self, host: u32, period: u64) {
        let Some(stats) = self.hosts.stats.get_mut(host as usize) else { return };
        let trust = stats.claims.trust();
        let by = if stats.announced.governs(trust) { "rule" } else { "page" };
        self.metrics.document_reads.with_label_values(&[by]).inc();
        // The instance sees its partitions' entries of the host: about that share of them.
        let owned = self.assignment.partitions.len().max(1) as f64;
        let scale = f64::from(self.assignment.total.max(1)) / owned;
        stats.announced.read(period, trust, scale);
    }
}

#[cfg(test)]
mod tests {
    use recrawl_model::claims::{ClaimTrust, Judgement};
    use recrawl_schemas::{PageRef, UtcTime};

    use crate::book::tests::{estimate, link};
    use crate::book::BookSettings;
    use crate::documents::PROBE_EVERY;
    use crate::tests::scheduler;

    use super::*;

    /// Hour-long periods: a date within the clocks' skew of the read proves nothing.
    const PERIOD_MS: i64 = 3_600_000;
    const PAGES: u32 = 40;
    const SITEMAP: &str = "http://s/sitemap.xml";

    fn page(index: u32) -> String {
        format!("http://s/{index}.html")
    }

    fn announcement(
        url: &str,
        document: AnnouncingDocument,
        period: u64,
        claimed_ms: Option<i64>,
    ) -> PageAnnouncement {
        let source = if document == AnnouncingDocument::RobotsTxt { "http://s/robots.txt" } else { SITEMAP };
        let fetched_at_ms = period as i64 * PERIOD_MS + PERIOD_MS / 2;
        PageAnnouncement {
            page: PageRef::of_url(url).unwrap(),
            source: PageRef::of_url(source).unwrap(),
            document,
            period,
            fetched_at: UtcTime::from_ms(fetched_at_ms),
            fetched_at_ms,
            claimed_modified: claimed_ms.map(UtcTime::from_ms),
            claimed_modified_ms: claimed_ms,
            change_frequency: None,
            priority: None,
            depth: 1,
        }
    }

    /// A scheduler tracking a site of `PAGES` pages and a sitemap robots.txt named, all
    /// downloaded in period 1, the sitemap changed each time.
    fn site() -> Scheduler {
        let mut scheduler = scheduler();
        (scheduler.plan.epoch_unix_ms, scheduler.plan.period_ms) = (0, PERIOD_MS as u64);
        scheduler.book_settings =
            BookSettings { period_ms: PERIOD_MS as u64, epoch_unix_ms: 0, ..BookSettings::default() };
        for url in (0..PAGES).map(page).chain([SITEMAP.to_owned()]) {
            scheduler.apply_link(&link(&url, None, 0, 0), 0).unwrap();
            scheduler.apply_estimate(&estimate(&url, 1, true, Some(true)), 0).unwrap();
        }
        scheduler
            .apply_announcement(&announcement(SITEMAP, AnnouncingDocument::RobotsTxt, 1, None), 0, i64::MAX)
            .unwrap();
        scheduler
    }

    /// Runs periods `from..to`, the sitemap's entries dated by `dated(page, period)` at
    /// each read: the periods it was read in.
    fn run(
        scheduler: &mut Scheduler,
        periods: std::ops::Range<u64>,
        dated: impl Fn(u32, u64) -> i64,
        changed: Option<bool>,
    ) -> Vec<u64> {
        let mut reads = Vec::new();
        for period in periods {
            for pick in scheduler.picks(period) {
                let sitemap = pick.url == SITEMAP;
                let comparison = if sitemap { Some(true) } else { changed };
                scheduler.apply_estimate(&estimate(&pick.url, period, true, comparison), 0).unwrap();
                if sitemap {
                    reads.push(period);
                    for index in 0..PAGES {
                        let entry = announcement(
                            &page(index),
                            AnnouncingDocument::Sitemap,
                            period,
                            Some(dated(index, period)),
                        );
                        scheduler.apply_announcement(&entry, 0, i64::MAX).unwrap();
                    }
                }
            }
        }
        reads
    }

    fn intervals(reads: &[u64]) -> Vec<u64> {
        reads.windows(2).map(|pair| pair[1] - pair[0]).collect()
    }

    #[test]
    fn a_sitemap_of_a_host_not_yet_judged_is_read_every_few_periods() {
        let mut scheduler = site();
        let book = &scheduler.books[&0];
        assert_eq!(book.document(book.find(SITEMAP).unwrap()), Some(Listing::Every));
        // Every page unchanged since a date long past: agreements, which never earn trust.
        let reads = run(&mut scheduler, 2..40, |_, _| 1, Some(false));
        assert_eq!(scheduler.hosts.stats[0].claims.trust(), ClaimTrust::Unknown);
        assert!(reads.len() >= 8, "{reads:?} {:?}", scheduler.hosts.stats[0]);
        assert!(
            intervals(&reads).iter().all(|&gap| gap == PROBE_EVERY),
            "{reads:?} {:?}",
            scheduler.hosts.stats[0]
        );
        let by_rule = scheduler.metrics.document_reads.with_label_values(&["rule"]).get();
        assert_eq!(by_rule, reads.len() as u64, "the rule governs before the first dates too");
    }

    #[test]
    fn a_trusted_host_s_sitemap_is_read_as_often_as_its_announced_changes_are_worth() {
        let mut scheduler = site();
        let host = scheduler.hosts.find("s").unwrap() as usize;
        for _ in 0..3 {
            scheduler.hosts.stats[host].claims.record(Judgement::Confirmed);
        }
        // A change every other period, page by page in turn, before the period's read: the
        // entry of a page dates its latest.
        let latest_change = |index: u32, period: u64| {
            let turn = u64::from(index) * 2;
            let cycle = u64::from(PAGES) * 2;
            let last = period;
            let latest = if last >= turn { last - (last - turn) % cycle } else { 0 };
            latest as i64 * PERIOD_MS + PERIOD_MS / 10
        };
        let reads = run(&mut scheduler, 2..120, latest_change, None);
        assert_eq!(scheduler.hosts.stats[host].claims.trust(), ClaimTrust::Trusted);
        let rate = scheduler.hosts.stats[host].announced.rate().unwrap();
        assert!((0.35..0.65).contains(&rate), "{rate} announced changes a period: {reads:?}");
        // R = 4 picks of 41 pages: a read is worth 0.3 × 41 / 4 = 3.1 changes, 7 periods
        // at one every other period; not every period, as the sitemap's own rate would say.
        // Its first trusted window may hold no change: that is no reason to wait the
        // longest (reads at 2, 3, 4, then 36 when it counted as a rate of none).
        assert!(intervals(&reads).iter().all(|&gap| gap <= 9), "{reads:?}");
        let late = &intervals(&reads)[intervals(&reads).len() / 2..];
        assert!(late.iter().all(|&gap| (5..=9).contains(&gap)), "{reads:?}");
    }
    #[test]
    fn a_sitemap_an_index_dated_is_picked_once_when_it_is_also_a_claim_test() {
        let mut scheduler = site();
        // An index dates a change of the sitemap after its download: a claim to test.
        let dated =
            announcement(SITEMAP, AnnouncingDocument::SitemapIndex, 2, Some(2 * PERIOD_MS + PERIOD_MS / 10));
        scheduler.apply_announcement(&dated, 0, i64::MAX).unwrap();
        let book = &scheduler.books[&0];
        assert!(book.page(book.find(SITEMAP).unwrap()).is_claim_to_test());
        let picks: Vec<String> = scheduler.picks(1 + PROBE_EVERY).into_iter().map(|pick| pick.url).collect();
        assert_eq!(picks.iter().filter(|url| *url == SITEMAP).count(), 1, "{picks:?}");
    }

    #[test]
    fn document_reads_take_at_most_their_share_of_a_period_the_longest_unread_first() {
        let mut scheduler = scheduler();
        (scheduler.plan.epoch_unix_ms, scheduler.plan.period_ms) = (0, PERIOD_MS as u64);
        let sitemaps: Vec<String> = (0..12).map(|host| format!("http://h{host}/sitemap.xml")).collect();
        for (host, sitemap) in sitemaps.iter().enumerate() {
            for url in [sitemap.clone(), format!("http://h{host}/0.html")] {
                scheduler.apply_link(&link(&url, None, 0, 0), 0).unwrap();
                scheduler.apply_estimate(&estimate(&url, 1, true, Some(true)), 0).unwrap();
            }
            let named = PageAnnouncement {
                source: PageRef::of_url(&format!("http://h{host}/robots.txt")).unwrap(),
                ..announcement(sitemap, AnnouncingDocument::RobotsTxt, 1, None)
            };
            scheduler.apply_announcement(&named, 0, i64::MAX).unwrap();
        }
        let mut read = Vec::new();
        for period in 1 + PROBE_EVERY..1 + PROBE_EVERY + 12 {
            let picks = scheduler.picks(period);
            let documents: Vec<String> = picks
                .iter()
                .filter(|pick| sitemaps.contains(&pick.url))
                .map(|pick| pick.url.clone())
                .collect();
            // 4 picks a period: a quarter is one.
            assert_eq!(documents.len(), 1, "period {period}: {documents:?}");
            for pick in &picks {
                scheduler.apply_estimate(&estimate(&pick.url, period, true, Some(true)), 0).unwrap();
            }
            read.extend(documents);
        }
        read.sort_unstable();
        read.dedup();
        assert_eq!(read.len(), sitemaps.len(), "each read in turn: {read:?}");
    }
}
